//! RFC 2544 throughput search: the highest rate at which a trial of fixed
//! length loses nothing, found by binary search.

use crate::experiments::SearchCfg;
use rxsched_sim::{Metrics, Samples, Scenario, SimError};

/// RFC 2544 throughput: the highest rate, per source, at which a trial of
/// fixed length loses nothing, by binary search between zero and the line
/// rate. Returns the last loss-free trial's record, with the throughput
/// (`throughput_pps_per_port`, `throughput_mbps_per_port`, the per-packet
/// time `t_per_packet_us` over all ports, `line_limited` and `trials`) added.
pub fn rfc2544(
    base: &Scenario,
    search: &SearchCfg,
    dir: Option<&std::path::Path>,
) -> Result<(Metrics, Samples), SimError> {
    let profile = rxsched_sim::Profile::load(&base.profile, dir)?;
    let bytes = base.traffic.first().map_or(64, |t| t.frame_bytes);
    let line = profile.wire.line_rate_pps(bytes);
    let mut s = base.clone();
    s.run.duration_ms = search.trial_ms;
    let mut trial = |rate: f64| -> Result<(Metrics, Samples), SimError> {
        for t in &mut s.traffic {
            t.rate_pps = rate;
        }
        rxsched_sim::run(&s, dir)
    };
    let lossless = |m: &Metrics| m.drops.values().sum::<u64>() == 0;
    let mut trials = 1;
    let first = trial(line)?;
    let (rate, (mut m, samples)) = if lossless(&first.0) {
        (line, first)
    } else {
        let (mut lo, mut hi) = (0.0, line);
        let mut best = None;
        while hi - lo > search.resolution * line {
            let mid = (lo + hi) / 2.0;
            // Below a double's precision the interval stops shrinking.
            if mid <= lo || mid >= hi {
                break;
            }
            let r = trial(mid)?;
            trials += 1;
            if lossless(&r.0) {
                lo = mid;
                best = Some(r);
            } else {
                hi = mid;
            }
        }
        match best {
            Some(b) => (lo, b),
            None => (0.0, trial(0.0)?),
        }
    };
    let ports = base
        .traffic
        .iter()
        .map(|t| t.port)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        .max(1);
    let wire_bits =
        (bytes.max(profile.wire.min_frame_bytes) + profile.wire.framing_bytes) as f64 * 8.0;
    m.extra.insert("throughput_pps_per_port".into(), rate);
    m.extra
        .insert("throughput_mbps_per_port".into(), rate * wire_bits / 1e6);
    m.extra.insert("line_rate_pct".into(), 100.0 * rate / line);
    m.extra
        .insert("line_limited".into(), if rate >= line { 1.0 } else { 0.0 });
    if rate > 0.0 {
        m.extra
            .insert("t_per_packet_us".into(), 1e6 / (rate * ports as f64));
    }
    m.extra.insert("trials".into(), trials as f64);
    Ok((m, samples))
}
