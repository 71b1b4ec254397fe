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
    /// Percentiles of a histogram of nanoseconds, in µs: the sample of
    /// rank `round((n - 1) p)`, counting from 0.
    pub fn of(h: &Histogram) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let ranks = [0.5, 0.9, 0.99, 1.0].map(|p| ((h.len() - 1) as f64 * p).round() as u64);
        let v = at_ranks(h, ranks).map(|ns| ns as f64 / 1000.0);
        Latency {
            p50: v[0],
            p90: v[1],
            p99: v[2],
            max: v[3],
        }
    }
}

/// A latency histogram in nanoseconds: three significant digits, any
/// range, constant memory per decade of range.
pub type Histogram = hdrhistogram::Histogram<u64>;

/// The values of the samples of the given ascending ranks (from 0), to the
/// histogram's precision (the middle of a sample's bucket), in one pass.
pub fn at_ranks<const N: usize>(h: &Histogram, ranks: [u64; N]) -> [u64; N] {
    let mut out = [h.median_equivalent(h.max()); N];
    let mut i = 0;
    let mut seen = 0;
    for v in h.iter_recorded() {
        seen += v.count_since_last_iteration();
        while i < N && ranks[i] < seen {
            out[i] = h.median_equivalent(v.value_iterated_to());
            i += 1;
        }
        if i == N {
            break;
        }
    }
    out
}

/// An empty latency histogram.
pub fn histogram() -> Histogram {
    Histogram::new(3).expect("3 significant digits is a valid precision")
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

/// Latency samples some figures need beyond percentiles; not part of the
/// record. Histograms, so that memory does not grow with simulated time.
#[derive(Debug, Clone)]
pub struct Samples {
    /// Arrival to the start of IP input, in ns, for packets arriving in the measured interval.
    pub ipin_latency: Histogram,
    /// Arrival to delivery, in ns, for deliveries in the measured interval.
    pub latency: Histogram,
    /// For the first packets of the run, the time from the first arrival until
    /// each started onto the output wire, in ns, in packet order.
    pub to_device_ns: Vec<u64>,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            ipin_latency: histogram(),
            latency: histogram(),
            to_device_ns: Vec::new(),
        }
    }
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
        let mut h = histogram();
        for i in 1..=100 {
            h.record(i * 1000).unwrap();
        }
        let l = Latency::of(&h);
        assert!((l.max - 100.0).abs() <= 0.1);
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
