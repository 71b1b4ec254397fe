//! The metrics record of one run (CONTRACT.md).

use rxsched_core::{DropPoint, InhibitCause, Nanos};
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
    /// Packets/s the host took off the wire (not dropped at a full
    /// receive ring) over the measured interval.
    pub received_pps: f64,
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
    /// The first step starts and ends of the run, as a kernel trace.
    pub trace: Vec<TraceEvent>,
}

/// One traced step boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEvent {
    /// When, from the start of the run.
    pub t: Nanos,
    /// The step's name.
    pub step: &'static str,
    /// The packet it carries, by arrival order.
    pub packet: Option<u32>,
    /// Its end rather than its start.
    pub end: bool,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            ipin_latency: histogram(),
            latency: histogram(),
            to_device_ns: Vec::new(),
            trace: Vec::new(),
        }
    }
}

/// The record's top-level numbers.
pub const FIELDS: &[&str] = &[
    "offered_pps",
    "delivered_pps",
    "received_pps",
    "arrived",
    "received",
    "delivered",
    "in_flight",
    "mode_switches",
    "first_delivery_us",
    "events",
    "wall_ms",
];

/// Numbers a kernel adds to the record (`extra`).
pub const KERNEL_EXTRAS: &[&str] = &[
    "cold_reclaims",
    // The linux kernel: ISR entries (shared or not), and per frame sent;
    // the bsd kernel: receive handler invocations per frame taken in.
    "isr_entries",
    "isr_entries_per_frame",
    "rx_interrupts_per_frame",
    "tx_interrupts_per_frame",
    "frames_per_tx_interrupt",
    "misaccounted_share",
    "context_switches_per_packet",
    "srp_signals",
    "srp_wakeups",
    "srp_deliveries",
    // An SRP server (a reader with `request_kb`): per transaction, and
    // the share of the bytes it touched that missed the cache.
    "transaction_ms",
    "compute_ms",
    "cache_miss_share",
    "tcp_mbps",
    "utilization",
    "rtt_us",
    "round_trips",
    "tcp_retransmits",
    "tcp_timeouts",
    // Protected sources (`[[traffic]] protected`), over the whole run.
    "protected_sent",
    "protected_delivered",
    "protected_lost",
    "protected_latency_p50_us",
    "protected_latency_p99_us",
    "protected_latency_max_us",
    // The nt host (crate::smp): shares of all its CPUs unless named per CPU.
    "cpus",
    "user_share",
    "dpc_share_of_one_cpu",
    "interrupt_cpu_free_share",
    "polling_share",
    "polling_now",
    "two_level_switches",
    "lock_wait_ns",
    "lock_blocked_ns",
    "lock_contention",
    "reader_cpu",
];

/// The keys of a group of the record (`drops`, `cpu`, ...), given the
/// names of the scenario's processes.
fn group_keys(group: &str, processes: &[String]) -> Option<Vec<String>> {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Some(match group {
        "drops" => DropPoint::ALL
            .iter()
            .map(|p| p.name().to_string())
            .collect(),
        "cpu" => {
            let mut v = names(&[
                "idle",
                "interrupt",
                "softirq",
                "poll",
                "kernel_thread",
                "isr",
                "dpc",
                "locking",
            ]);
            v.extend(processes.iter().map(|p| format!("user:{p}")));
            v
        }
        "interrupts" => names(&["rx", "tx"]),
        "latency_us" => names(&["p50", "p90", "p99", "max"]),
        "inhibits" => InhibitCause::ALL
            .iter()
            .map(|c| c.name().to_string())
            .collect(),
        _ => return None,
    })
}

/// Checks that `name` names a number a run's record has: a top-level field,
/// `group.key` (`drops.ipintrq`, `cpu.user:compute`), a kernel's extra, or
/// one of `extras` (numbers the caller adds, such as a throughput search's).
/// The error lists what exists.
pub fn check_metric(name: &str, processes: &[String], extras: &[&str]) -> Result<(), String> {
    if FIELDS.contains(&name) || KERNEL_EXTRAS.contains(&name) || extras.contains(&name) {
        return Ok(());
    }
    if let Some((group, key)) = name.split_once('.') {
        // One CPU of an nt host: `cpu0.idle`, `cpu1.user:consumer#0`.
        let one_cpu = group.len() > 3
            && group.starts_with("cpu")
            && group[3..].bytes().all(|b| b.is_ascii_digit());
        let group = if one_cpu { "cpu" } else { group };
        // A reader's threads under nt: `user:consumer#1`.
        let key = match key.split_once('#') {
            Some((k, n)) if group == "cpu" && n.bytes().all(|b| b.is_ascii_digit()) => k,
            _ => key,
        };
        if let Some(keys) = group_keys(group, processes) {
            if keys.iter().any(|k| k == key) {
                return Ok(());
            }
            return Err(format!(
                "unknown metric `{name}`: `{group}` has {}",
                keys.join(", ")
            ));
        }
    }
    let mut all: Vec<String> = FIELDS.iter().map(|s| s.to_string()).collect();
    all.extend(KERNEL_EXTRAS.iter().chain(extras).map(|s| s.to_string()));
    all.push("drops.<point>, cpu.<context>, interrupts.rx|tx, latency_us.p50|p90|p99|max, inhibits.<cause>".into());
    Err(format!(
        "unknown metric `{name}`; metrics are {}",
        all.join(", ")
    ))
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
    fn metric_names_are_checked() {
        let procs = vec!["compute".to_string()];
        assert!(check_metric("delivered_pps", &procs, &[]).is_ok());
        assert!(check_metric("drops.ipintrq", &procs, &[]).is_ok());
        assert!(check_metric("cpu.user:compute", &procs, &[]).is_ok());
        assert!(check_metric("cpu.user:screend", &procs, &[]).is_err());
        assert!(check_metric("throughput_pps_per_port", &procs, &[]).is_err());
        assert!(check_metric(
            "throughput_pps_per_port",
            &procs,
            &["throughput_pps_per_port"]
        )
        .is_ok());
        let e = check_metric("no.such.metric", &procs, &[]).unwrap_err();
        assert!(e.contains("unknown metric"), "{e}");
    }
}
