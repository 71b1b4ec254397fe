//! The metrics record of one run (CONTRACT.md).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Percentiles of a latency sample, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// Percentiles of `ns` (sorted in place), in µs.
    pub fn of(ns: &mut [u64]) -> Latency {
        if ns.is_empty() {
            return Latency::default();
        }
        ns.sort_unstable();
        let q = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
        Latency {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: q(1.0),
        }
    }
}

/// Interrupts taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interrupts {
    /// Receive interrupts.
    pub rx: u64,
    /// Transmit-complete interrupts.
    pub tx: u64,
}

/// One run's results: every field CONTRACT.md names, plus a few extras.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Packets/s arriving at the interface over the measured interval.
    pub offered_pps: f64,
    /// Packets/s reaching their final consumer over the measured interval.
    pub delivered_pps: f64,
    /// Packets that arrived, over the whole run.
    pub arrived: u64,
    /// Packets the host took off the wire (arrived less NIC ring drops).
    pub received: u64,
    /// Packets delivered, over the whole run.
    pub delivered: u64,
    /// Packets still inside the host at the end.
    pub in_flight: u64,
    /// Drops by drop point, over the whole run.
    pub drops: BTreeMap<String, u64>,
    /// Share of CPU time by context over the measured interval; sums to 1.
    pub cpu: BTreeMap<String, f64>,
    /// Interrupts taken over the whole run.
    pub interrupts: Interrupts,
    /// Arrival to delivery, for packets delivered in the measured interval.
    pub latency_us: Latency,
    /// Interrupt/poll mode switches.
    pub mode_switches: u64,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<String, u64>,
    /// From the first packet's arrival to its delivery, in µs (-1: never delivered).
    pub first_delivery_us: f64,
    /// The varied parameter's value, when the run is a sweep point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    /// Simulator events processed.
    pub events: u64,
    /// Wall time, in ms; the one field that differs between identical runs.
    pub wall_ms: f64,
    /// Figure-specific numbers (e.g. an RFC 2544 search's throughput).
    #[serde(flatten)]
    pub extra: BTreeMap<String, f64>,
}

/// Per-packet samples some figures need; not part of the record.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Arrival to the start of IP input, in ns, per packet in the measured interval.
    pub ipin_latency_ns: Vec<u64>,
    /// Arrival to delivery, in ns.
    pub latency_ns: Vec<u64>,
    /// For the first packets of the run, the time from the first arrival until
    /// each started onto the output wire, in ns, in packet order.
    pub to_device_ns: Vec<u64>,
}

impl Metrics {
    /// Looks up a metric by name: a top-level number, or `group.key`
    /// (`cpu.user:compute`, `drops.ipintrq`, `latency_us.p99`).
    pub fn get(&self, name: &str) -> Option<f64> {
        let v = serde_json::to_value(self).ok()?;
        let mut cur = &v;
        for (i, part) in name.splitn(2, '.').enumerate() {
            cur = match cur.get(part) {
                Some(c) => c,
                // A missing drop or CPU key means zero.
                None if i == 1 => return Some(0.0),
                None => return None,
            };
        }
        cur.as_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let l = Latency::of(&mut v);
        assert_eq!(l.max, 100.0);
        assert!((l.p50 - 50.0).abs() <= 1.0);
        assert!((l.p99 - 99.0).abs() <= 1.0);
    }

    #[test]
    fn metric_lookup() {
        let mut m = Metrics {
            delivered_pps: 3.0,
            ..Default::default()
        };
        m.cpu.insert("user:compute".into(), 0.5);
        assert_eq!(m.get("delivered_pps"), Some(3.0));
        assert_eq!(m.get("cpu.user:compute"), Some(0.5));
        assert_eq!(m.get("drops.ipintrq"), Some(0.0));
        assert_eq!(m.get("nonsense"), None);
    }
}
