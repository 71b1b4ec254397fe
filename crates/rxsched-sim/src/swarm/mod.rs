//! Swarm testing: random *valid* scenarios, each run twice and checked.
//!
//! A case is drawn from one seed. The generator spreads its choices over
//! every kernel kind, process kind, traffic kind and mechanism switch, with
//! bounded virtual time and rates, and writes the case as a scenario file,
//! so that a failure is reproduced by `rxsched sim` on the file or by
//! drawing the same seed again. The case is read through the same loader
//! and validation as a user's file; a case the validator refuses is drawn
//! again from a derived seed (and counted), since only valid input must run.
//!
//! [`check`] runs a case and demands what every run owes: it finishes
//! (the caller bounds the wall time), it conserves packets, its CPU
//! accounting covers the measured interval exactly, and a second run from
//! the same seed gives the same record, byte for byte.
//!
//! The draws are in `uni` (a case for the uniprocessor host) and `nt`
//! (for the NT multiprocessor), from the pieces both use in `parts`.

mod nt;
mod parts;
mod uni;

pub use parts::{MAX_DURATION_MS, TRAFFIC};

use crate::error::SimError;
use crate::metrics::Metrics;
use crate::scenario::Loaded;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use toml::Table;

/// Kernel kinds, process kinds, traffic kinds and switches, as the labels
/// a case's coverage is told in.
pub const KERNELS: &[&str] = &["bsd", "emulated", "polling", "linux", "srp", "lrp", "nt"];
/// Process kinds.
pub const PROCESSES: &[&str] = &[
    "screend",
    "reader",
    "compute",
    "tcpdump",
    "onoff",
    "forwarder",
];

/// One drawn case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The seed it was drawn from.
    pub seed: u64,
    /// Draws the validator refused before this one.
    pub redraws: u32,
    /// The scenario file's text.
    pub toml: String,
    /// The loaded, validated scenario.
    pub loaded: Loaded,
    /// What it exercises: `kernel:srp`, `process:reader`, `traffic:burst`,
    /// `switch:feedback`, ...
    pub covers: BTreeSet<String>,
}

/// What a passing case simulated.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// Packets that arrived (each run once; the replay is not counted).
    pub packets: u64,
    /// Events the model handled.
    pub events: u64,
}

/// Draws the case for `seed`: the first draw the validator accepts.
pub fn case(seed: u64) -> Case {
    let mut redraws = 0;
    loop {
        let sub = seed.wrapping_add(u64::from(redraws).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (tree, covers) = draw(sub);
        let toml = format!(
            "# rxsched swarm case, seed {seed}{}\n{}",
            if redraws > 0 {
                format!(" (draw {})", redraws + 1)
            } else {
                String::new()
            },
            toml::to_string(&tree).expect("a drawn tree serializes")
        );
        match Loaded::parse(&format!("swarm-{seed}.toml"), toml.clone(), None) {
            Ok(loaded) => {
                return Case {
                    seed,
                    redraws,
                    toml,
                    loaded,
                    covers,
                }
            }
            Err(_) if redraws < 1000 => redraws += 1,
            Err(e) => panic!("the swarm generator drew 1000 invalid cases in a row: {e}"),
        }
    }
}

/// Runs a case twice and checks the record. `Err` says what went wrong.
pub fn check(case: &Case) -> Result<Outcome, String> {
    let s = &case.loaded.scenario;
    let once = || -> Result<(Metrics, String), String> {
        let (m, _) = crate::run(s, None).map_err(|e| match e {
            SimError::Input(e) => format!("a valid scenario was refused: {e}"),
            e => e.to_string(),
        })?;
        let json = serde_json::to_string(&m).map_err(|e| e.to_string())?;
        Ok((m, json))
    };
    let (m, first) = once()?;
    let dropped: u64 = m.drops.values().sum();
    if m.arrived != m.delivered + dropped + m.in_flight {
        return Err(format!(
            "conservation: arrived {} != delivered {} + dropped {} + in flight {}",
            m.arrived, m.delivered, dropped, m.in_flight
        ));
    }
    if m.drops.keys().any(|k| k.is_empty()) {
        return Err("a drop without a named drop point".into());
    }
    let cpu: f64 = m.cpu.values().sum();
    if (cpu - 1.0).abs() > 1e-9 || m.cpu.values().any(|v| !(0.0..=1.0 + 1e-12).contains(v)) {
        return Err(format!(
            "CPU accounting: shares add up to {cpu}, not 1: {:?}",
            m.cpu
        ));
    }
    let (_, second) = once()?;
    if first != second {
        return Err("replay: the same seed gave a different record".into());
    }
    Ok(Outcome {
        packets: m.arrived,
        events: m.events,
    })
}

/// Draws one scenario tree and what it covers.
fn draw(seed: u64) -> (Table, BTreeSet<String>) {
    let r = &mut ChaCha8Rng::seed_from_u64(seed);
    let mut covers = BTreeSet::new();
    let kind = *KERNELS.choose(r).expect("kernels");
    covers.insert(format!("kernel:{kind}"));
    let mut tree = if kind == "nt" {
        nt::draw(r, &mut covers)
    } else {
        uni::draw(r, kind, &mut covers)
    };
    within_line_rate(&mut tree);
    (tree, covers)
}

/// Lowers a source's rate to the line rate of its frames on the drawn
/// profile's (or `[link]`'s) wire, which a scenario may not exceed: an
/// overload draw stays an overload at the most the wire carries.
fn within_line_rate(tree: &mut Table) {
    let Some(Ok(mut wire)) = tree
        .get("profile")
        .and_then(|p| p.as_str())
        .map(|p| crate::Profile::load(p, None).map(|p| p.wire))
    else {
        return;
    };
    if let Some(bps) = tree
        .get("link")
        .and_then(|l| l.get("bit_rate_bps"))
        .and_then(|b| b.as_float())
    {
        wire.bit_rate_bps = bps;
    }
    let Some(sources) = tree.get_mut("traffic").and_then(|t| t.as_array_mut()) else {
        return;
    };
    for t in sources.iter_mut().filter_map(|t| t.as_table_mut()) {
        if t.get("kind").and_then(|k| k.as_str()) == Some("burst") {
            continue;
        }
        let bytes = t
            .get("frame_bytes")
            .and_then(|b| b.as_integer())
            .unwrap_or(64);
        let line = wire.line_rate_pps(bytes as u32).floor();
        if let Some(rate) = t.get("rate_pps").and_then(|r| r.as_float()) {
            if rate > line {
                t.insert("rate_pps".into(), toml::Value::Float(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_valid_and_repeatable() {
        for seed in 0..200 {
            let a = case(seed);
            let b = case(seed);
            assert_eq!(a.toml, b.toml, "seed {seed}");
            assert!(a.redraws < 50, "seed {seed}: {} redraws", a.redraws);
        }
    }
}
