//! `rxsched swarm`: many random valid scenarios, each checked.

use super::bar;
use rxsched::error::{Error, Result};
use rxsched::swarm::{self, Config};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Runs the swarm and prints what it covered and found.
pub fn run(
    runs: u64,
    seed: u64,
    jobs: Option<usize>,
    timeout: f64,
    out: &Path,
    keep: bool,
) -> Result<ExitCode> {
    if runs == 0 {
        return Err(Error::flag("runs", "must be at least 1"));
    }
    if !(timeout.is_finite() && (0.1..=86_400.0).contains(&timeout)) {
        return Err(Error::flag("timeout", "must be from 0.1 to 86400 seconds"));
    }
    if keep {
        for i in 0..runs.min(1000) {
            swarm::write_case(out, &rxsched_sim::swarm::case(seed.wrapping_add(i)))?;
        }
    }
    let cfg = Config {
        seed,
        runs,
        jobs,
        timeout: Duration::from_secs_f64(timeout),
        out: out.to_path_buf(),
    };
    let b = bar(runs, "cases");
    let s = swarm::run(&cfg, &|| b.inc(1))?;
    b.finish_and_clear();
    let secs = s.wall.as_secs_f64();
    let mut text = format!(
        "swarm: {} cases from seed {seed}, {} failed, in {secs:.1} s\n\
         simulated: {} packets, {} events (each case run twice; counted once), {:.0} packets/s of wall time\n\
         redrawn: {} draws the validator refused\n\
         covered:\n",
        s.runs,
        s.failures.len(),
        s.packets,
        s.events,
        s.packets as f64 / secs.max(1e-9),
        s.redraws,
    );
    for (k, n) in &s.covers {
        text.push_str(&format!("  {k:<34} {n}\n"));
    }
    for f in &s.failures {
        text.push_str(&format!(
            "FAIL seed {}: {}\n  reproduce: rxsched sim {}   (or: rxsched swarm --runs 1 --seed {})\n",
            f.seed,
            f.what,
            f.file.display(),
            f.seed
        ));
    }
    rxsched::out::print(&text)?;
    Ok(super::verdict(s.failures.is_empty()))
}
