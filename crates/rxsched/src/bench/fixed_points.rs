//! Made-up points for a real bench's result, fixed by a seed: every series
//! its check file names, with every metric its checks, axes and table read,
//! spread so that across seeds each check both passes and fails. A metric
//! no bench measures has no made-up values: a check naming one is caught
//! here, since the files name no metric list a loader could hold it to.

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

/// The x values of result `id`'s series, over `metric`.
fn xs(id: &str, metric: &str, d: &mut Draw) -> Vec<f64> {
    match (id, metric) {
        // One point per series: the median trial at the generator's top
        // rate, or at a tenth of polling's MLFRR.
        ("real-lab", _) => vec![d.within(2e6, 4e6)],
        ("real-latency", _) => vec![d.within(1e4, 1e5)],
        (_, metric) => match metric {
            "step" => vec![0.0, 1.0, 2.0],
            "onoff_processes" => vec![0.0, 1.0, 2.0, 4.0, 6.0, 8.0],
            "pair" => (1..=5).map(f64::from).collect(),
            "minutes" => (1..=12).map(|i| f64::from(i) * 0.05).collect(),
            _ => {
                let top = d.within(1.5e6, 4e6);
                vec![50e3, 200e3, 400e3, 800e3, 1.5e6, top]
            }
        },
    }
}

/// How a series' delivered rate bends: up to `cap` it follows x, beyond it
/// it stays near the cap, or (`livelock`) falls away.
/// Where x is not an offered rate (a load step, a number of processes),
/// the rate stays near the cap or falls as x grows.
struct Shape {
    cap: f64,
    livelock: bool,
    x_is_rate: bool,
}

impl Shape {
    fn draw(x_is_rate: bool, d: &mut Draw) -> Shape {
        Shape {
            cap: d.within(1e5, 4e6),
            livelock: d.unit() < 0.4,
            x_is_rate,
        }
    }

    fn delivered(&self, x: f64, d: &mut Draw) -> f64 {
        let r = d.within(0.9, 1.0);
        if !self.x_is_rate {
            let fall = if self.livelock { 1.0 + x } else { 1.0 };
            self.cap * r / fall
        } else if x <= self.cap {
            x * r
        } else if self.livelock {
            self.cap * r * (self.cap / x).powi(3)
        } else {
            self.cap * r
        }
    }
}

/// A value of `metric` at x (where x is an offered rate) on a series of `shape`.
fn value(metric: &str, x: f64, shape: &Shape, d: &mut Draw) -> f64 {
    match metric {
        "delivered_pps" => shape.delivered(x, d),
        // A transfer's rate bends as a forwarding rate does.
        "tcp_mbps" => shape.delivered(x, d) / 1e3,
        "offered_pps" => d.within(2e6, 4e6),
        "cpu.user:compute" | "compute_progress" => d.within(0.3, 1.0),
        // A consumer the flood leaves alone keeps nearly everything.
        "kept" if shape.livelock => d.within(0.8, 1.0),
        "kept" => d.within(0.99, 1.0),
        "router_cpu_share" => d.within(0.0, 0.02),
        "latency_us.p50" | "latency_us.p99" | "latency_p50_us" => d.within(10.0, 100.0),
        "p99_lowest" | "p99_highest" | "dut_steal_share" => d.within(0.0, 1.0),
        "delivered_lowest" | "delivered_highest" | "latency_samples" => d.within(1e6, 4e6),
        // A router that leaks grows with the minutes.
        "rss_kib" if shape.livelock => 10_000.0 * (1.0 + x) * d.within(0.97, 1.03),
        "rss_kib" => 10_000.0 * d.within(0.97, 1.03),
        "offered_over_forwarded" => d.within(2.0, 5.0),
        "unattributed_share" => d.within(0.0, 0.002),
        "router_unaccounted" | "leftover_processes" | "leftover_xdp_programs" | "lab_problems" => {
            d.rarely(1.0)
        }
        "two_level_switches" => d.within(1.0, 3.5).floor(),
        // A protected stream loses nothing, mostly; its round trips spread
        // past twice the unloaded one's now and then.
        "protected_lost" => d.rarely(3.0),
        "protected_sent" => 2000.0,
        "protected_latency_p50_us" => d.within(60.0, 140.0),
        "protected_latency_p99_us" => d.within(100.0, 250.0),
        // A keepalive TCP connection: no retransmission, mostly; its
        // round-trip estimate a little above ping's.
        "tcp_retransmits" => d.rarely(2.0),
        // The keepalive connects, mostly.
        "tcp_connected" => 1.0 - d.rarely(1.0),
        "tcp_rtt_max_us" | "tcp_exchange_p99_us" => d.within(100.0, 400.0),
        // The hypervisor stopped the DUT's CPU in every trial: rarely.
        "dut_stalls" => d.rarely(1.0),
        // Protected over unprotected forwarding, pair by pair.
        "paired_ratio" => d.within(0.85, 1.1),
        // Frames the DUT's kernel forwarded around our router: none, mostly.
        "dut_kernel_forwarded" => d.rarely(400.0),
        // A receive thread's CPU per datagram falls as its batches grow.
        "napi_ns_per_datagram" => d.within(200.0, 4000.0),
        // ... and differs by who drops it, and by the machine's state.
        "napi_ns_per_frame" => d.within(300.0, 1200.0),
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

/// Metrics of a whole run rather than of a point.
const ONCE: &[&str] = &[
    "offered_over_forwarded",
    "router_unaccounted",
    "unattributed_share",
    "leftover_processes",
    "leftover_xdp_programs",
    "lab_problems",
    "two_level_switches",
];

/// The series of `file` with points made from `seed`.
pub fn series(file: &BenchFile, seed: u64) -> Vec<Series> {
    let b = &file.bench;
    let mut metrics = vec![b.y.metric.clone()];
    metrics.extend(file.check.iter().filter_map(|c| c.metric.clone()));
    metrics.extend(file.check.iter().filter_map(|c| c.unless.clone()));
    metrics.extend(b.table.iter().cloned());
    metrics.retain(|m| *m != b.x.metric);
    metrics.sort();
    metrics.dedup();
    let mut d = Draw(seed);
    b.series
        .iter()
        .map(|label| {
            let mut s = Series::new(label);
            let shape = Shape::draw(b.x.metric == "offered_pps", &mut d);
            // What a soak reads once, at its end, every point carries.
            let once: Vec<(&String, f64)> = metrics
                .iter()
                .filter(|m| ONCE.contains(&m.as_str()))
                .map(|m| (m, value(m, 0.0, &shape, &mut d)))
                .collect();
            for x in xs(&b.id, &b.x.metric, &mut d) {
                let mut p = Point::default();
                set(&mut p, &b.x.metric, x);
                for m in &metrics {
                    let v = match once.iter().find(|o| o.0 == m) {
                        Some(o) => o.1,
                        None => value(m, x, &shape, &mut d),
                    };
                    set(&mut p, m, v);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::BENCHES;

    /// Every check of every real bench's file passes on some points a
    /// bench could measure and fails on others: none is vacuous, none
    /// impossible, none reads a metric no bench measures.
    #[test]
    fn every_real_check_can_pass_and_fail() {
        for (id, _) in BENCHES {
            let mut file = BenchFile::load(id).unwrap();
            if *id == "real-soak" {
                super::super::soak::settle_at(&mut file, 0.2);
            }
            let mut seen = vec![(0, 0); file.check.len()];
            for seed in 0..200 {
                let r = super::super::result(&file, series(&file, seed));
                for (n, v) in seen.iter_mut().zip(&r.checks) {
                    if v.pass {
                        n.0 += 1;
                    } else {
                        n.1 += 1;
                    }
                }
            }
            for (c, (pass, fail)) in file.check.iter().zip(seen) {
                assert!(
                    pass > 0 && fail > 0,
                    "{id}: {:?} passed {pass}, failed {fail}",
                    c.name
                );
            }
        }
    }
}
