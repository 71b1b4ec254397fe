//! `rxsched sim`: one run of one scenario, and its metrics record.

use super::parse_sets;
use rxsched::error::{Error, Result};
use rxsched::experiments::ExperimentFile;
use rxsched_sim::Metrics;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// Runs `path` once with `sets` applied and prints the record.
pub fn run(path: &Path, sets: &[String], json: bool) -> Result<ExitCode> {
    let f = ExperimentFile::read(path)?;
    let s = f.loaded.with(&parse_sets(sets)?)?;
    let t0 = Instant::now();
    let (mut m, _) = rxsched_sim::run(&s, f.loaded.dir.as_deref())?;
    m.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    if json {
        let text = serde_json::to_string_pretty(&m).map_err(|e| Error::Run(e.to_string()))?;
        rxsched::out::line(&text)?;
    } else {
        rxsched::out::print(&text(&m))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn list<'a>(items: impl Iterator<Item = String> + 'a) -> String {
    let v: Vec<String> = items.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The record for people to read.
fn text(m: &Metrics) -> String {
    let mut s = format!(
        "offered     {:>10.0} pkts/s   delivered {:>10.0} pkts/s\n",
        m.offered_pps, m.delivered_pps
    );
    s += &format!(
        "arrived     {:>10}          delivered {:>10}   in flight {}\n",
        m.arrived, m.delivered, m.in_flight
    );
    s += &format!(
        "drops       {}\n",
        list(m.drops.iter().map(|(k, v)| format!("{k} {v}")))
    );
    s += &format!(
        "cpu         {}\n",
        list(
            m.cpu
                .iter()
                .filter(|(_, v)| **v > 0.0)
                .map(|(k, v)| format!("{k} {:.1}%", v * 100.0))
        )
    );
    s += &format!(
        "interrupts  rx {}  tx {}\n",
        m.interrupts.rx, m.interrupts.tx
    );
    let l = &m.latency_us;
    s += &format!(
        "latency     p50 {:.0} µs  p90 {:.0}  p99 {:.0}  max {:.0}\n",
        l.p50, l.p90, l.p99, l.max
    );
    s += &format!(
        "inhibits    {}   mode switches {}\n",
        list(m.inhibits.iter().map(|(k, v)| format!("{k} {v}"))),
        m.mode_switches
    );
    s + &format!("events      {} in {:.1} ms\n", m.events, m.wall_ms)
}
