//! A deterministic discrete-event model of a host's receive path.
//!
//! Virtual time in nanoseconds, an event queue ordered by time and then by
//! a sequence number, one seeded RNG per run: the same scenario and seed
//! give the same metrics, byte for byte (but for `wall_ms`).

pub mod error;
pub mod host;
pub mod metrics;
pub mod profile;
pub mod scenario;
pub mod smp;
pub mod swarm;

pub use error::{InputError, SimError};
pub use metrics::{Metrics, Samples};
pub use profile::Profile;
pub use scenario::{Loaded, Scenario};

/// Runs one scenario. `base` is the directory a profile path is relative to.
/// The model reads no clock: the record's `wall_ms` is 0 for the caller to fill in.
pub fn run(s: &Scenario, base: Option<&std::path::Path>) -> Result<(Metrics, Samples), SimError> {
    let profile = Profile::load(&s.profile, base)?;
    if s.kernel.kind == scenario::KernelKind::Linux && profile.linux.is_none() {
        return Err(SimError::Input(InputError {
            file: "scenario".into(),
            line: None,
            key: Some("kernel.kind".into()),
            msg: format!(
                "\"linux\" needs a profile with [linux] costs; profile {:?} has none (try \"mpc8250-linux\")",
                s.profile
            ),
        }));
    }
    if s.kernel.kind == scenario::KernelKind::Nt {
        if profile.nt.is_none() {
            return Err(SimError::Input(InputError {
                file: "scenario".into(),
                line: None,
                key: Some("kernel.kind".into()),
                msg: format!(
                    "\"nt\" needs a profile with [nt] costs; profile {:?} has none (try \"dual-p133-nt4\")",
                    s.profile
                ),
            }));
        }
        return smp::run(s, profile);
    }
    host::Host::new(&s.expanded(), profile).run()
}
