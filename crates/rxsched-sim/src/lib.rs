//! A deterministic discrete-event model of a host's receive path.
//!
//! Virtual time in nanoseconds, an event queue ordered by time and then by
//! a sequence number, one seeded RNG per run: the same scenario and seed
//! give the same metrics, byte for byte (but for `wall_ms`).
//!
//! Two hosts run on one [`engine`]: [`host`], one CPU under the kernels of
//! the uniprocessor papers, and [`smp`], a Windows NT multiprocessor
//! (`kernel.kind = "nt"`). [`build`] picks the one a scenario asks for.

pub mod engine;
pub mod error;
pub mod host;
pub mod lab;
pub mod metrics;
pub mod profile;
pub mod scenario;
pub mod smp;
pub mod swarm;

pub use engine::Model;
pub use error::{InputError, SimError};
pub use metrics::{Metrics, Samples};
pub use profile::Profile;
pub use scenario::{Loaded, Scenario};

/// What an error about a scenario says for its file before the scenario
/// file's name and line are known ([`Loaded`] puts them in).
pub const IN_SCENARIO: &str = "scenario";

/// The profile a scenario runs on: loaded, its free parameters set, its
/// line rate the scenario's `[link]` if it has one; refused when the
/// scenario's kernel needs costs it lacks or a source offers more than the
/// line rate carries. `base` is the directory a profile path is relative to.
pub fn profile_of(s: &Scenario, base: Option<&std::path::Path>) -> Result<Profile, InputError> {
    let mut profile = Profile::load(&s.profile, base)?;
    if !s.profile_param.is_empty() {
        profile = profile.with_params(&s.profile_param)?;
    }
    profile.check_kernel(s.kernel.kind, &s.profile)?;
    profile.check_costs(s)?;
    if let Some(l) = &s.link {
        profile.wire.bit_rate_bps = l.bit_rate_bps;
    }
    for (i, t) in s.traffic.iter().enumerate() {
        let line = profile.wire.line_rate_pps(t.frame_bytes);
        if t.kind != scenario::TrafficKind::Burst && t.rate_pps > line * (1.0 + 1e-9) {
            return Err(InputError {
                file: IN_SCENARIO.into(),
                line: None,
                key: Some(format!("traffic.{i}.rate_pps")),
                msg: format!(
                    "{} pkts/s is above the line rate: {}-byte frames at {} bit/s carry at most {line:.1} pkts/s",
                    t.rate_pps, t.frame_bytes, profile.wire.bit_rate_bps
                ),
            });
        }
    }
    Ok(profile)
}

/// Builds the host a scenario describes, on its profile's costs. `base`
/// is the directory a profile path is relative to.
pub fn build(s: &Scenario, base: Option<&std::path::Path>) -> Result<Box<dyn Model>, SimError> {
    let profile = profile_of(s, base)?;
    let s = s.expanded();
    Ok(match s.kernel.kind {
        scenario::KernelKind::Nt => Box::new(smp::Smp::new(&s, profile)),
        scenario::KernelKind::Lab => Box::new(lab::Lab::new(&s, &profile)),
        _ => Box::new(host::Host::new(&s, profile)),
    })
}

/// Runs one scenario. `base` is the directory a profile path is relative to.
/// The model reads no clock: the record's `wall_ms` is 0 for the caller to fill in.
pub fn run(s: &Scenario, base: Option<&std::path::Path>) -> Result<(Metrics, Samples), SimError> {
    build(s, base)?.run()
}
