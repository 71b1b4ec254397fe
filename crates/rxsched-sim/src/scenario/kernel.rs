//! `[kernel]`: the receive architecture and its mechanisms' parameters,
//! with the defaults the original authors used.

use rxsched_core::Quota;
use serde::{Deserialize, Serialize};

/// Which receive architecture the kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum KernelKind {
    /// M1: the interrupt-driven 4.2BSD path with `ipintrq`.
    #[default]
    Bsd,
    /// The modified (polling) kernel configured to act as unmodified: the
    /// M1 path through the new driver structure.
    Emulated,
    /// M2: interrupt-initiated polling, with M3/M4 as options.
    Polling,
    /// Linux 2.6: hard interrupts, the NET_RX softirq, optional NAPI (M7)
    /// and transmit-reclaim modes (M8).
    Linux,
    /// M9: Signaled Receiver Processing (a receiving host).
    Srp,
    /// M10: Lazy Receiver Processing (a receiving host).
    Lrp,
    /// A Windows NT 4.0 multiprocessor (Hansen & Jul 1997): an interrupt
    /// service routine and a deferred procedure call on the interrupted
    /// CPU, threads scheduled across CPUs by priority, a polling thread, and
    /// the two-level switch between them (M11); see `[smp]`.
    Nt,
    /// The XDP lab's DUT on today's Linux: threaded NAPI, AF_XDP sockets and
    /// rxsched's own router, on one CPU beside a compute process; see `[lab]`.
    Lab,
}

/// The six driver variants of Spanos et al. 2008, as presets of
/// `kernel.napi` and `kernel.tx_reclaim`.
pub const VARIANTS: &[(&str, bool, &str)] = &[
    ("ORIGINAL", false, "per-packet"),
    ("TX-128", false, "every-128"),
    ("TX-OFF", false, "before-send"),
    ("NAPI", true, "per-packet"),
    ("NAPI-TX-128", true, "every-128"),
    ("NAPI-TX-OFF", true, "before-send"),
];

/// Where IP input runs in the interrupt-driven kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IpLayer {
    /// A software interrupt, above every thread (4.2BSD).
    Softirq,
    /// A kernel thread, below interrupts (Digital UNIX).
    #[default]
    Thread,
}

/// M3 options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeedbackCfg {
    /// Whether queue-state feedback is on.
    pub enabled: bool,
    /// Inhibit input when the queue is this full (percent of its size).
    pub high_pct: f64,
    /// Resume input when it drains to this level (percent).
    pub low_pct: f64,
    /// Monitor form: inhibit when fewer than this many slots are free and
    /// resume only by timeout (0: use the watermarks).
    pub min_free: u32,
    /// Resume anyway after this long, in case the consumer hangs.
    pub timeout_us: f64,
    /// Take the watermarks and the timeout from the objective
    /// (`kernel.slo`) and the stage's cost per frame instead of
    /// `high_pct`, `low_pct` and `timeout_us`
    /// ([`rxsched_core::Slo::feedback_marks`]).
    pub from_slo: bool,
}

impl Default for FeedbackCfg {
    fn default() -> Self {
        // Mogul & Ramakrishnan 1996 §6.6.1: 75% / 25% of a 32-entry queue, one tick.
        FeedbackCfg {
            enabled: false,
            high_pct: 75.0,
            low_pct: 25.0,
            min_free: 0,
            timeout_us: 1000.0,
            from_slo: false,
        }
    }
}

/// M4 options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CycleLimitCfg {
    /// Whether the CPU-cycle limit is on.
    pub enabled: bool,
    /// Share of each period input handling may use, in percent.
    pub percent: f64,
    /// The period, in microseconds.
    pub period_us: f64,
}

impl Default for CycleLimitCfg {
    fn default() -> Self {
        // Mogul & Ramakrishnan 1996 §7: a 10 ms period.
        CycleLimitCfg {
            enabled: false,
            percent: 50.0,
            period_us: 10_000.0,
        }
    }
}

/// M5 options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerCfg {
    /// Whether the circuit breaker is on.
    pub enabled: bool,
    /// Packets a port's receive handler processes before its breaker trips
    /// (counted across interrupts, from the last trip; each port has its own).
    pub batch: u32,
    /// How long interrupts stay off, in microseconds.
    pub off_us: f64,
}

impl Default for BreakerCfg {
    fn default() -> Self {
        // Mogul & Ramakrishnan 1996 §8: 250 packets, then 1 ms off.
        BreakerCfg {
            enabled: false,
            batch: 250,
            off_us: 1000.0,
        }
    }
}

/// Protected traffic (`[kernel.protect]`): the device steers the frames
/// of protected sources (`[[traffic]] protected = true`) onto a receive
/// ring of their own, as a NIC's flow rules steer a router's control
/// plane (`ethtool -N ... action Q`). The polling kernel serves that ring
/// first, with a quota of its own and a cap; a kernel that does not know
/// of it takes it as one more ring.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProtectCfg {
    /// Whether the device has the protected ring.
    pub enabled: bool,
    /// Its receive descriptors.
    pub ring: u32,
    /// Frames per polling callback on it.
    pub quota: Quota,
}

impl Default for ProtectCfg {
    fn default() -> Self {
        ProtectCfg {
            enabled: false,
            // A control plane's frames are few and small; 32 descriptors
            // hold a 100/s stream through 300 ms of inhibited input.
            ring: 32,
            quota: Quota::Limited(4),
        }
    }
}

/// `[kernel]`: the mechanisms and their parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelCfg {
    /// The receive architecture.
    pub kind: KernelKind,
    /// Where IP input runs in the interrupt-driven kernels.
    pub ip_layer: IpLayer,
    /// Packets per polling callback.
    pub quota: Quota,
    /// `ipintrq` limit.
    pub ipintrq_limit: u32,
    /// Interface output queue limit.
    pub output_queue_limit: u32,
    /// screend's input queue size.
    pub screen_queue_limit: u32,
    /// The packet-filter (capture) queue's size.
    pub filter_queue_limit: u32,
    /// Socket receive buffer, in packets.
    pub socket_packets: u32,
    /// Socket receive buffer, in bytes.
    pub socket_bytes: u32,
    /// M3.
    pub feedback: FeedbackCfg,
    /// M4.
    pub cycle_limit: CycleLimitCfg,
    /// M5.
    pub breaker: BreakerCfg,
    /// A protected receive ring.
    pub protect: ProtectCfg,
    /// Polling: one objective instead of the quota and the cycle limit,
    /// as `route --slo` takes it (`"latency=2ms,cpu=50%"`); it sets both
    /// from the profile's costs and keeps them right as it measures. On an
    /// `nt` host with the two-level switch, it sets the switch's detector,
    /// threshold, hold, window and return mark instead (`smp.*`'s).
    pub slo: Option<String>,
    /// Polling: M12, Calaveras's weighted round robin (Mogul & Ramakrishnan
    /// 1997 §9.1): after each round of polling the processes have the CPU
    /// for up to this many µs, until they block, before the next round
    /// (the quota is each driver's weight; 0: off).
    pub gp_quantum_us: f64,
    /// Polling: whether M3 and M4 inhibits stop a callback at the next
    /// packet (`packet`) or only when it returns (`callback`).
    pub inhibit_check: rxsched_core::InhibitCheck,
    /// Linux: a driver variant preset (`ORIGINAL`, `TX-128`, `TX-OFF`,
    /// `NAPI`, `NAPI-TX-128`, `NAPI-TX-OFF`); sets `napi` and `tx_reclaim`.
    pub variant: Option<String>,
    /// Linux: receive through NAPI (M7).
    pub napi: Option<bool>,
    /// Linux: `per-packet`, `every-N` or `before-send` (M8).
    pub tx_reclaim: Option<String>,
    /// Linux NAPI: packets per device per poll turn.
    pub napi_weight: u32,
    /// Linux NAPI: packets per softirq run.
    pub napi_budget: u32,
    /// Linux NAPI: time per softirq run, in µs.
    pub napi_budget_us: f64,
    /// Linux without NAPI: the per-CPU backlog (`netdev_max_backlog`):
    /// `netif_rx` takes a frame while at most this many wait.
    pub backlog_limit: u32,
    /// Linux without NAPI: `netif_rx`'s throttle, as in Linux 2.6.9 (the
    /// kernel of Spanos et al.): once the backlog overflows, every frame
    /// is dropped until the backlog has emptied. `false`: only the frames
    /// that find it full are dropped, as in later kernels.
    pub backlog_throttle: bool,
    /// Linux: receive queues per port (RSS), each with a ring of the
    /// profile's `rx_ring` descriptors, an interrupt vector and a NAPI
    /// instance of its own; a source's frame goes to one at random, as a
    /// hash over many flows spreads them, and the TCP connection's frames
    /// all to one (a flow keeps its queue). Transmit completions interrupt
    /// queue 0's vector.
    pub rx_queues: u32,
    /// Linux: receive interrupt coalescing (`ethtool -C rx-usecs`): the
    /// device holds a receive interrupt until this long after the first
    /// frame it holds it for (0: no delay).
    pub rx_usecs: f64,
    /// Linux: receive interrupt coalescing (`ethtool -C rx-frames`): or
    /// until this many frames have arrived (0 or 1: the first frame).
    pub rx_frames: u32,
    /// The measuring kernel's instrumentation, in ns: time added to each
    /// return from the device interrupt handler in the interrupt-driven
    /// kernels (`bsd`, `emulated`). Mogul & Ramakrishnan's figure 7-6 kernel
    /// instruments `lnintr()`, about 1.5 µs a call or return (§7.3); 0 is
    /// an uninstrumented kernel.
    pub intr_return_probe_ns: u64,
}

impl KernelCfg {
    /// The Linux receive and reclaim modes, from the preset or the explicit keys.
    pub fn linux_modes(&self) -> (bool, rxsched_core::TxReclaim) {
        let (mut napi, mut reclaim) = (false, "per-packet".to_string());
        if let Some(v) = &self.variant {
            if let Some((_, n, r)) = VARIANTS.iter().find(|(name, _, _)| name == v) {
                napi = *n;
                reclaim = r.to_string();
            }
        }
        if let Some(n) = self.napi {
            napi = n;
        }
        if let Some(r) = &self.tx_reclaim {
            reclaim = r.clone();
        }
        let reclaim =
            rxsched_core::TxReclaim::parse(&reclaim).unwrap_or(rxsched_core::TxReclaim::PerPacket);
        (napi, reclaim)
    }
}

impl Default for KernelCfg {
    fn default() -> Self {
        KernelCfg {
            kind: KernelKind::Bsd,
            ip_layer: IpLayer::Thread,
            quota: Quota::Limited(10),
            // 4.2BSD: IFQ_MAXLEN 50 for ipintrq and interface output queues.
            ipintrq_limit: 50,
            output_queue_limit: 50,
            screen_queue_limit: 32,
            // Mogul & Ramakrishnan 1997 §8.2: the packet-filter queue holds 32.
            filter_queue_limit: 32,
            // Mogul & Ramakrishnan 1996 §4.2: a delivery queue of 10 packets and 4 KB.
            socket_packets: 10,
            socket_bytes: 4096,
            feedback: FeedbackCfg::default(),
            cycle_limit: CycleLimitCfg::default(),
            breaker: BreakerCfg::default(),
            protect: ProtectCfg::default(),
            slo: None,
            variant: None,
            napi: None,
            tx_reclaim: None,
            // Spanos et al. 2008: NAPI weight 32; Linux's budget of 300 packets or 2 ms.
            napi_weight: 32,
            napi_budget: 300,
            napi_budget_us: 2000.0,
            // Linux 2.6.9: netdev_max_backlog = 300.
            backlog_limit: 300,
            backlog_throttle: true,
            rx_queues: 1,
            // An interrupt per frame, as the papers' drivers raise them.
            rx_usecs: 0.0,
            rx_frames: 0,
            intr_return_probe_ns: 0,
            gp_quantum_us: 0.0,
            inhibit_check: rxsched_core::InhibitCheck::Packet,
        }
    }
}
