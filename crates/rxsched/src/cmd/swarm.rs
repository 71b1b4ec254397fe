//! `rxsched swarm`: many random valid scenarios, each checked.

use super::bar;
use rxsched::error::{Error, Result};
use rxsched::shard::{Manifest, Shard, Study, SwarmPart};
use rxsched::swarm::{self, Config};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Runs the swarm (with `shard`, that shard's cases, kept for `rxsched
/// merge`) and prints what it covered and found.
pub fn run(
    runs: u64,
    seed: u64,
    jobs: Option<usize>,
    timeout: f64,
    out: &Path,
    keep: bool,
    shard: Option<Shard>,
) -> Result<ExitCode> {
    if runs == 0 {
        return Err(Error::flag("runs", "must be at least 1"));
    }
    if !(timeout.is_finite() && (0.1..=86_400.0).contains(&timeout)) {
        return Err(Error::flag("timeout", "must be from 0.1 to 86400 seconds"));
    }
    if keep {
        for i in (0..runs.min(1000)).filter(|i| shard.is_none_or(|s| s.picks(*i))) {
            swarm::write_case(out, &rxsched_sim::swarm::case(seed.wrapping_add(i)))?;
        }
    }
    let cfg = Config {
        seed,
        runs,
        jobs,
        timeout: Duration::from_secs_f64(timeout),
        out: out.to_path_buf(),
        shard,
    };
    let b = bar(runs, "cases");
    let s = swarm::run(&cfg, &|| b.inc(1))?;
    b.finish_and_clear();
    let part = SwarmPart {
        runs: s.runs,
        failures: s
            .failures
            .iter()
            .map(|f| {
                let name = f.file.file_name().map(|n| n.to_string_lossy().into_owned());
                (f.seed, f.what.clone(), name.unwrap_or_default())
            })
            .collect(),
        packets: s.packets,
        events: s.events,
        redraws: s.redraws,
        covers: s.covers,
        wall_s: s.wall.as_secs_f64(),
    };
    if let Some(shard) = shard {
        let mut m = Manifest::new(shard, Study::Swarm { runs, seed });
        m.swarm = Some(part.clone());
        let path = m.write(out)?;
        rxsched::out::line(&format!(
            "shard {}/{}: {} of {runs} cases -> {}; join the shards with `rxsched merge DIR... --out DIR`",
            shard.k,
            shard.n,
            part.runs,
            path.display()
        ))?;
    }
    rxsched::out::print(&text(&part, seed, out))?;
    Ok(super::verdict(part.failures.is_empty()))
}

/// What a swarm (or the shards of one, merged) covered and found; failing
/// cases' files are in `out`.
pub fn text(s: &SwarmPart, seed: u64, out: &Path) -> String {
    let secs = s.wall_s;
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
    for (seed, what, file) in &s.failures {
        text.push_str(&format!(
            "FAIL seed {seed}: {what}\n  reproduce: rxsched sim {}   (or: rxsched swarm --runs 1 --seed {seed})\n",
            out.join(file).display(),
        ));
    }
    text
}
