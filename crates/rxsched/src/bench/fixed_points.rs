//! Made-up points for a real bench's result, fixed by a seed: every series
//! its check file names, with every metric its checks, axes and table read,
//! spread so that across seeds each check both passes and fails. What the
//! checks make of them is compared with the verdicts recorded before the
//! checks moved out of Rust (`verdicts.json`).

use crate::experiments::BenchFile;
use crate::result::{Point, Series};
use serde_json::{Map, Value};

/// A small deterministic generator (SplitMix64): the same seed, the same points.
struct Draw(u64);

impl Draw {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn within(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// 0 most of the time, else `n`: counters that should stay at zero.
    fn rarely(&mut self, n: f64) -> f64 {
        if self.unit() < 0.75 {
            0.0
        } else {
            n
        }
    }
}

/// The x values of a sweep over `metric`.
fn xs(metric: &str, d: &mut Draw) -> Vec<f64> {
    match metric {
        "step" => vec![0.0, 1.0, 2.0],
        "onoff_processes" => vec![0.0, 1.0, 2.0, 4.0, 6.0, 8.0],
        "minutes" => (1..=12).map(|i| f64::from(i) * 0.05).collect(),
        _ => {
            let top = d.within(1.5e6, 4e6);
            vec![50e3, 200e3, 400e3, 800e3, 1.5e6, top]
        }
    }
}

/// A value of `metric` at x (where x is an offered rate).
fn value(metric: &str, x: f64, d: &mut Draw) -> f64 {
    match metric {
        "delivered_pps" => x * d.within(0.05, 1.0),
        "offered_pps" => d.within(2e6, 4e6),
        "cpu.user:compute" | "compute_progress" => d.within(0.3, 1.0),
        "kept" => d.within(0.85, 1.0),
        "router_cpu_share" => d.within(0.0, 0.02),
        "latency_us.p50" | "latency_us.p99" | "latency_p50_us" => d.within(10.0, 100.0),
        "p99_lowest" | "p99_highest" | "dut_steal_share" => d.within(0.0, 1.0),
        "delivered_lowest" | "delivered_highest" | "latency_samples" => d.within(1e6, 4e6),
        "rss_kib" => d.within(9_000.0, 11_000.0),
        "offered_over_forwarded" => d.within(2.0, 5.0),
        "unattributed_share" => d.within(0.0, 0.002),
        "router_unaccounted" | "leftover_processes" | "leftover_xdp_programs" | "lab_problems" => {
            d.rarely(1.0)
        }
        "two_level_switches" => d.within(1.0, 3.5).floor(),
        other => panic!("no made-up values for metric {other}"),
    }
}

/// Sets `metric` in a point, nested for `group.key`.
fn set(p: &mut Point, metric: &str, v: f64) {
    match metric.split_once('.') {
        Some((group, key)) => {
            let g =
                p.0.entry(group.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
            g.as_object_mut()
                .expect("a group")
                .insert(key.to_string(), Value::from(v));
        }
        None => p.set(metric, v),
    }
}

/// The series of `file` with points made from `seed`.
pub fn series(file: &BenchFile, seed: u64) -> Vec<Series> {
    let b = &file.bench;
    let mut metrics = vec![b.y.metric.clone()];
    metrics.extend(file.check.iter().filter_map(|c| c.metric.clone()));
    metrics.extend(b.table.iter().cloned());
    metrics.retain(|m| *m != b.x.metric);
    metrics.sort();
    metrics.dedup();
    let mut d = Draw(seed);
    b.series
        .iter()
        .map(|label| {
            let mut s = Series::new(label);
            for x in xs(&b.x.metric, &mut d) {
                let mut p = Point::default();
                set(&mut p, &b.x.metric, x);
                for m in &metrics {
                    set(&mut p, m, value(m, x, &mut d));
                }
                // What the MLFRR is computed from: some points lose nothing.
                let arrived = x.max(1.0) * 10.0;
                p.set("arrived", arrived);
                let lost = if d.unit() < 0.5 {
                    0.0
                } else {
                    (arrived * d.within(0.0, 0.3)).round()
                };
                set(&mut p, "drops.nic_rx_ring", lost);
                s.points.push(p);
            }
            s
        })
        .collect()
}
