//! The JSON reports the real commands print last, as the benches read them.
//! Each kind is read in one place, its [`Report::read`], and holds the
//! fields the benches use under rxsched-linux's names and types
//! (`traffic::GenReport`, `router::RouterReport`, ...). The commands'
//! reports do not deserialize yet, so a key is read by name and a missing
//! one reads as 0; once they do, each `read` becomes a
//! `serde_json::from_value` into rxsched-linux's own struct, here and
//! nowhere else.

use serde_json::Value;
use std::collections::BTreeMap;

/// A report a command prints as its last line of output.
pub trait Report: Sized {
    /// The report of this kind in a command's JSON.
    fn read(v: &Value) -> Self;
}

/// A number, 0 if the key is missing.
fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A count, 0 if the key is missing.
fn count(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Counts by name (drop points, inhibit causes); empty if missing.
fn counts(v: &Value, k: &str) -> BTreeMap<String, u64> {
    v.get(k)
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// `rxsched gen`: what the generator really did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenReport {
    /// Frames the kernel took.
    pub sent: u64,
    /// From the first to the last send, in seconds.
    pub duration_s: f64,
    /// The rate achieved: the offered rate a bench uses.
    pub achieved_pps: f64,
    /// Times the generator fell behind.
    pub waits: u64,
}

impl Report for GenReport {
    fn read(v: &Value) -> Self {
        GenReport {
            sent: count(v, "sent"),
            duration_s: num(v, "duration_s"),
            achieved_pps: num(v, "achieved_pps"),
            waits: count(v, "waits"),
        }
    }
}

/// Latency percentiles in µs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyUs {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// `rxsched sink`: what arrived.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SinkReport {
    /// Probe frames received.
    pub received: u64,
    /// Probes missing up to the highest sequence number seen.
    pub lost: u64,
    /// Probes that came after a higher-numbered one.
    pub reordered: u64,
    /// One-way latency.
    pub latency_us: LatencyUs,
    /// Probes the latency comes from.
    pub latency_samples: u64,
}

impl Report for SinkReport {
    fn read(v: &Value) -> Self {
        let l = &v["latency_us"];
        SinkReport {
            received: count(v, "received"),
            lost: count(v, "lost"),
            reordered: count(v, "reordered"),
            latency_us: LatencyUs {
                p50: num(l, "p50"),
                p90: num(l, "p90"),
                p99: num(l, "p99"),
                max: num(l, "max"),
            },
            latency_samples: count(v, "latency_samples"),
        }
    }
}

/// `rxsched spin` and `rxsched onoff`: how much CPU the process got.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpinReport {
    /// Wall time it ran, in seconds.
    pub duration_s: f64,
    /// Its share of the CPU it is pinned to.
    pub cpu_share: f64,
    /// Loop iterations completed (progress).
    pub iterations: u64,
    /// Time the hypervisor took from the CPU meanwhile.
    pub steal_s: f64,
    /// Iterations per second of the time the CPU was there to be had.
    pub progress_rate: f64,
}

impl Report for SpinReport {
    fn read(v: &Value) -> Self {
        SpinReport {
            duration_s: num(v, "duration_s"),
            cpu_share: num(v, "cpu_share"),
            iterations: count(v, "iterations"),
            steal_s: num(v, "steal_s"),
            progress_rate: num(v, "progress_rate"),
        }
    }
}

/// The two-level switch's part of a router's report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TwoLevelReport {
    /// Switches either way.
    pub switches: u64,
}

/// `rxsched route`: what the router did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterReport {
    /// Seconds it ran.
    pub duration_s: f64,
    /// Frames taken off the rings.
    pub rx: u64,
    /// Frames handed to the output interfaces.
    pub forwarded: u64,
    /// Drops by point and refusals by reason.
    pub drops: BTreeMap<String, u64>,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<String, u64>,
    /// Interrupt/poll mode switches.
    pub mode_switches: u64,
    /// Frames still inside the router when it stopped.
    pub in_flight: u64,
    /// CPU time the router's threads used, in seconds.
    pub cpu_s: f64,
    /// With M4: the cost charged per wake-up, in ns.
    pub wake_cost_ns: Option<u64>,
    /// Two-level: its switches.
    pub two_level: Option<TwoLevelReport>,
}

impl Report for RouterReport {
    fn read(v: &Value) -> Self {
        RouterReport {
            duration_s: num(v, "duration_s"),
            rx: count(v, "rx"),
            forwarded: count(v, "forwarded"),
            drops: counts(v, "drops"),
            inhibits: counts(v, "inhibits"),
            mode_switches: count(v, "mode_switches"),
            in_flight: count(v, "in_flight"),
            cpu_s: num(v, "cpu_s"),
            wake_cost_ns: v.get("wake_cost_ns").and_then(Value::as_u64),
            two_level: v.get("two_level").map(|t| TwoLevelReport {
                switches: count(t, "switches"),
            }),
        }
    }
}

/// `rxsched xdp-fwd`: nothing a bench reads but that it reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct XdpFwdReport {}

impl Report for XdpFwdReport {
    fn read(_: &Value) -> Self {
        XdpFwdReport {}
    }
}

/// `rxsched capture`: what the monitor wrote and dropped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaptureReport {
    /// Frames written to the file.
    pub written: u64,
    /// Drops by point.
    pub drops: BTreeMap<String, u64>,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<String, u64>,
}

impl Report for CaptureReport {
    fn read(v: &Value) -> Self {
        CaptureReport {
            written: count(v, "written"),
            drops: counts(v, "drops"),
            inhibits: counts(v, "inhibits"),
        }
    }
}

/// What one of `serve`'s consumers got.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumerReport {
    /// Datagrams it took intact.
    pub received: u64,
}

/// `rxsched serve`: each consumer's share.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServeReport {
    /// The consumers, in the order of `--consumer`.
    pub consumers: Vec<ConsumerReport>,
}

impl Report for ServeReport {
    fn read(v: &Value) -> Self {
        let consumers = v.get("consumers").and_then(Value::as_array);
        ServeReport {
            consumers: consumers
                .into_iter()
                .flatten()
                .map(|c| ConsumerReport {
                    received: count(c, "received"),
                })
                .collect(),
        }
    }
}

impl ServeReport {
    /// Datagrams consumer `i` took, 0 if it did not report.
    pub fn received(&self, i: usize) -> u64 {
        self.consumers.get(i).map_or(0, |c| c.received)
    }
}

/// `rxsched udp-recv`: what one kernel socket delivered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpRecvReport {
    /// Datagrams read.
    pub received: u64,
}

impl Report for UdpRecvReport {
    fn read(v: &Value) -> Self {
        UdpRecvReport {
            received: count(v, "received"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reports as the commands print them (rxsched-linux's structs,
    /// serialized) read back whole; a key they lack reads as 0.
    #[test]
    fn reads_the_commands_reports() {
        let r = RouterReport::read(&json!({
            "mode": "polling", "duration_s": 2.0, "rx": 10, "forwarded": 7,
            "drops": {"nic_rx_ring": 2, "ipintrq": 0}, "inhibits": {"queue_feedback": 1},
            "mode_switches": 3, "in_flight": 1, "cpu_s": 0.5, "wake_cost_ns": 900,
            "two_level": {"switches": 2, "polling_s": 1.0, "service": "polling"}
        }));
        assert_eq!(
            (r.rx, r.forwarded, r.in_flight, r.mode_switches),
            (10, 7, 1, 3)
        );
        assert_eq!(r.drops["nic_rx_ring"], 2);
        assert_eq!(r.drops["ipintrq"], 0);
        assert_eq!(r.inhibits["queue_feedback"], 1);
        assert_eq!(
            (r.wake_cost_ns, r.two_level.map(|t| t.switches)),
            (Some(900), Some(2))
        );
        let xdp = RouterReport::read(&json!({"duration_s": 2.0, "forwarded": 5}));
        assert_eq!(
            (xdp.wake_cost_ns, xdp.two_level, xdp.mode_switches),
            (None, None, 0)
        );
        assert!(xdp.drops.is_empty() && xdp.inhibits.is_empty());
        let s = SinkReport::read(&json!({
            "received": 9, "lost": 1, "reordered": 2, "latency_samples": 9,
            "latency_us": {"p50": 10.0, "p90": 20.0, "p99": 30.0, "max": 40.0}
        }));
        assert_eq!(
            (s.received, s.lost, s.reordered, s.latency_us.p99),
            (9, 1, 2, 30.0)
        );
        let g = GenReport::read(
            &json!({"sent": 100, "duration_s": 1.0, "achieved_pps": 100.0, "waits": 4}),
        );
        assert_eq!((g.sent, g.achieved_pps, g.waits), (100, 100.0, 4));
        let srv = ServeReport::read(&json!({"consumers": [{"received": 5}, {"received": 6}]}));
        assert_eq!(
            (srv.received(0), srv.received(1), srv.received(2)),
            (5, 6, 0)
        );
        assert_eq!(ServeReport::read(&json!({})).received(0), 0);
    }
}
