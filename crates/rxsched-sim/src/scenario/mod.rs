//! Scenario files: what to simulate. A scenario names a machine profile
//! and sets the kernel's mechanisms, the traffic, the user processes and
//! the run. Every key has a default; an unknown key is an error.
//!
//! How a file is read and overridden is in [`load`]; the ranges every value
//! must lie in are in [`validate`]. Files may carry other top-level tables
//! (a figure's construction) that a caller takes out before deserializing.

mod load;
mod validate;

pub use load::{parse_set, set_path, Loaded};

use rxsched_core::{Nanos, Quota};
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
    /// Packets in one interrupt before it trips.
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
    /// Linux without NAPI: the per-CPU backlog (`netdev_max_backlog`).
    pub backlog_limit: u32,
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
            variant: None,
            napi: None,
            tx_reclaim: None,
            // Spanos et al. 2008: NAPI weight 32; Linux's budget of 300 packets or 2 ms.
            napi_weight: 32,
            napi_budget: 300,
            napi_budget_us: 2000.0,
            // Linux 2.6.9: netdev_max_backlog = 300.
            backlog_limit: 300,
            inhibit_check: rxsched_core::InhibitCheck::Packet,
        }
    }
}

/// The arrival process of a traffic source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TrafficKind {
    /// Evenly spaced packets.
    #[default]
    Constant,
    /// Exponential gaps.
    Poisson,
    /// Bursts of `burst` packets `spacing_us` apart, bursts `1/rate` apart.
    Burst,
    /// Evenly spaced on average, each gap drawn uniformly within
    /// `jitter` of the mean (a generator that is not precisely paced).
    Jittered,
    /// Bursts of a geometric number of packets (mean `burst`) `spacing_us`
    /// apart; the quiet time after a burst is exponential with mean
    /// `burst / rate_pps`, so the mean rate is a little under `rate_pps`
    /// (the offered rate is measured, not assumed).
    Bursty,
}

/// `[[traffic]]`: a source of packets arriving on the input interface.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrafficCfg {
    /// The arrival process.
    pub kind: TrafficKind,
    /// Packets per second (bursts per second for `burst`); 0 sends nothing.
    pub rate_pps: f64,
    /// Frame size in bytes, Ethernet header and CRC included.
    pub frame_bytes: u32,
    /// Packets per burst (the mean, for `bursty`).
    pub burst: u32,
    /// For `jittered`: how far a gap may stray from the mean, as a fraction
    /// of it (0 to 1).
    pub jitter: f64,
    /// Gap between packets in a burst, in µs (0: back to back at line rate).
    pub spacing_us: f64,
    /// Stop after this many packets (0: no limit).
    pub count: u64,
    /// When the first packet starts, in µs.
    pub start_us: f64,
    /// The interface it arrives on (0 or 1); a router forwards to the other.
    pub port: u8,
}

impl Default for TrafficCfg {
    fn default() -> Self {
        TrafficCfg {
            kind: TrafficKind::Constant,
            rate_pps: 1000.0,
            frame_bytes: 64,
            burst: 1,
            jitter: 0.0,
            spacing_us: 0.0,
            count: 0,
            start_us: 0.0,
            port: 0,
        }
    }
}

/// What a user process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum ProcessKind {
    /// A user-level filter every forwarded packet passes through.
    Screend,
    /// An application reading every packet from a UDP socket.
    Reader,
    /// A compute-bound process whose progress is measured.
    Compute,
    /// A packet-capture monitor (tcpdump) reading the packet-filter queue.
    Tcpdump,
    /// Runs for `on_ms` of CPU, sleeps for `off_ms`, and again (Brustoloni
    /// et al. 2000 §6's `onoff`: 11 ms on, 5 ms off).
    Onoff,
    /// Under `kernel.kind = "srp"`: the system process that runs the IP
    /// forwarding stage, fed by the early demultiplexer (a gateway).
    Forwarder,
}

/// Where the capture process writes what it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CaptureOutput {
    /// `/dev/null`: the per-packet work of reading and formatting only.
    #[default]
    Null,
    /// A disk file: each packet's header is also written out.
    File,
}

impl ProcessKind {
    /// The name used for the process when it has none of its own.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// What SIGUIQ does to an SRP receiver (Brustoloni et al. 2000 §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SigDisposition {
    /// The kernel's default action: protocol work on its next run.
    #[default]
    Default,
    /// A handler that does the protocol work at once.
    Catch,
    /// A handler that leaves the work to the next receive call.
    CatchDefer,
    /// Blocked: the signal waits; receive calls still do the work.
    Block,
    /// Ignored: protocol work only inside receive calls.
    Ignore,
}

/// `[[process]]`: a user process.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessCfg {
    /// What it does.
    pub kind: ProcessKind,
    /// Its name in `cpu.user:<name>` (default: the kind).
    #[serde(default)]
    pub name: Option<String>,
    /// Scheduling priority: lower runs first (screend, readers and tcpdump 0, compute 1).
    #[serde(default)]
    pub priority: Option<u32>,
    /// tcpdump only: where captured packets go.
    #[serde(default)]
    pub output: Option<CaptureOutput>,
    /// A reader under `kernel.kind = "srp"`: what SIGUIQ does to it.
    #[serde(default)]
    pub disposition: Option<SigDisposition>,
    /// Under `run.scheduler = "proportional"`: a CPU reservation, the
    /// share (0 to 1) it gets whenever it is runnable.
    #[serde(default)]
    pub reservation: Option<f64>,
    /// `onoff`: CPU time it runs before it sleeps, in ms.
    #[serde(default)]
    pub on_ms: Option<f64>,
    /// `onoff`: how long it sleeps, in ms.
    #[serde(default)]
    pub off_ms: Option<f64>,
    /// How many such processes (0 to 64; default 1). More than one are
    /// named `<name>-1`, `<name>-2`, ...; a figure can vary the count.
    #[serde(default)]
    pub count: Option<u32>,
    /// Under `nt`: a reader's threads, which share its socket (default 1).
    #[serde(default)]
    pub threads: Option<u32>,
    /// Under `nt`: per datagram, the reader's threads hold a lock they
    /// share for this long, in µs, after the receive call.
    #[serde(default)]
    pub lock_us: Option<f64>,
    /// Under `nt`: per datagram, the reader's own work outside the lock, in µs.
    #[serde(default)]
    pub work_us: Option<f64>,
    /// Under `nt`: the real-time priority class (above every normal thread;
    /// a DPC still interrupts it).
    #[serde(default)]
    pub realtime: Option<bool>,
    /// Under `nt`: NT's thread priority, 1 to 31, higher first (normal 8,
    /// real-time 24); overrides `realtime`.
    #[serde(default)]
    pub nt_priority: Option<u32>,
    /// Under `nt`: the CPUs its threads may run on (default: every CPU).
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
    /// Under `nt`: the CPU its (first) thread starts on (default: drawn
    /// from the run's seed).
    #[serde(default)]
    pub cpu: Option<u32>,
}

impl ProcessCfg {
    /// Its name in `cpu.user:<name>`: its own, else its kind's.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.kind.name().to_string())
    }

    /// An `onoff` process's CPU time per run and its sleep, in ns.
    pub fn onoff_ns(&self) -> (Nanos, Nanos) {
        // Brustoloni et al. 2000 §6: onoff runs 11 ms, then sleeps 5 ms.
        let ms = |v: Option<f64>, default: f64| (v.unwrap_or(default) * 1e6) as Nanos;
        (ms(self.on_ms, 11.0), ms(self.off_ms, 5.0))
    }
}

/// How user processes share the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// Fixed priorities, round robin within one with a time quantum.
    #[default]
    Priority,
    /// Proportional share with reservations (`rxsched_core::PropShare`),
    /// deciding at every step boundary, as Eclipse/BSD's scheduler gives
    /// SRP's gateway stages their reservations.
    Proportional,
}

/// How an `nt` host services its network adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SmpService {
    /// Interrupts: the ISR queues a DPC on the interrupted CPU, which does
    /// the receive work.
    #[default]
    Interrupt,
    /// Interrupt-initiated polling: the DPC only wakes a polling thread,
    /// which does the receive work until the adapter is empty, then
    /// re-enables its interrupts and waits.
    Polling,
    /// M11: interrupts while the detector sees no overload, the polling
    /// thread once it has seen overload for longer than the hold time,
    /// interrupts again when the polling thread runs out of work.
    TwoLevel,
}

/// The two-level switch's overload detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SmpDetector {
    /// The DPC's share of one CPU (H&J's choice).
    #[default]
    Cpu,
    /// The mean length of the adapter's receive queue.
    Queue,
    /// Interrupts per second.
    Rate,
}

/// `[smp]`: the multiprocessor an `nt` kernel runs on and how it services
/// its adapter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmpCfg {
    /// CPUs (1 to 64).
    pub cpus: u32,
    /// The CPU the adapter interrupts (its ISR and DPC run there).
    pub interrupt_cpu: u32,
    /// How the adapter is serviced.
    pub service: SmpService,
    /// Two-level: what counts as overload.
    pub detector: SmpDetector,
    /// Two-level: the detector's threshold (a share of one CPU, packets
    /// queued, or interrupts per second).
    pub threshold: f64,
    /// Two-level: how long overload must last before polling, in ms.
    pub hold_ms: f64,
    /// Two-level: the window the detector judges over, in ms.
    pub window_ms: f64,
    /// Two-level: how long the polling thread must find nothing before
    /// interrupts return, in ms (0: at the first empty poll, H&J's rule).
    pub idle_grace_ms: f64,
    /// Two-level: return to interrupts once a window's polling work is
    /// under this share of one CPU, instead of at the first empty poll
    /// (ours; unset: the paper's rule).
    pub return_below: Option<f64>,
    /// Datagrams the polling thread takes before it lets the scheduler look
    /// at its CPU (it is preemptible between them in any case).
    pub poll_quota: u32,
    /// The polling thread runs in the real-time class (default: the class
    /// of the consumer).
    pub poll_realtime: Option<bool>,
}

impl Default for SmpCfg {
    fn default() -> Self {
        // Hansen & Jul 1997 §5.1: more than 50% of one CPU for more than 2 s.
        SmpCfg {
            cpus: 2,
            interrupt_cpu: 0,
            service: SmpService::Interrupt,
            detector: SmpDetector::Cpu,
            threshold: 0.5,
            hold_ms: 2000.0,
            window_ms: 100.0,
            idle_grace_ms: 0.0,
            return_below: None,
            poll_quota: 16,
            poll_realtime: None,
        }
    }
}

/// `[run]`: how long, and which seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunCfg {
    /// Measured interval, in ms.
    pub duration_ms: f64,
    /// Warm-up before measuring, in ms.
    pub warmup_ms: f64,
    /// The seed of the run's one RNG.
    pub seed: u64,
    /// User scheduling quantum, in ms.
    pub quantum_ms: f64,
    /// How user processes share the CPU.
    pub scheduler: Scheduler,
}

impl Default for RunCfg {
    fn default() -> Self {
        RunCfg {
            duration_ms: 1000.0,
            warmup_ms: 100.0,
            seed: 1,
            quantum_ms: 10.0,
            scheduler: Scheduler::Priority,
        }
    }
}

/// `[tcp]`: a TCP connection through the host, from a sender behind port 0
/// to a receiver behind port 1 (the host forwards it).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TcpCfg {
    /// Payload bytes per segment.
    pub mss: u32,
    /// The receiver's window, in bytes.
    pub window_bytes: u32,
    /// The sender's CPU per segment sent, in µs.
    pub sender_segment_us: f64,
    /// The sender's CPU per ACK taken, in µs.
    pub sender_ack_us: f64,
    /// The receiver's CPU per segment, its ACK included, in µs.
    pub receiver_segment_us: f64,
    /// The sender's smallest retransmission timeout, in ms.
    pub rto_min_ms: f64,
    /// Bytes to send (0: as many as the run allows).
    pub bytes: u64,
    /// Who receives: an `endpoint` behind port 1 (the host forwards), or
    /// the `host` itself (a reader reads the connection).
    pub receiver: TcpReceiver,
    /// The sender's link into the host is half duplex (a hub): its
    /// segments and the host's ACKs share the wire.
    pub half_duplex: bool,
}

/// Who receives the TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TcpReceiver {
    /// An endpoint behind port 1: the host forwards the connection.
    #[default]
    Endpoint,
    /// The host: its reader reads the connection.
    Host,
}

impl Default for TcpCfg {
    fn default() -> Self {
        TcpCfg {
            mss: 1460,
            // Brustoloni et al. 2000 §6: 64 KB windows.
            window_bytes: 65536,
            sender_segment_us: 20.0,
            sender_ack_us: 5.0,
            receiver_segment_us: 20.0,
            rto_min_ms: 200.0,
            bytes: 0,
            receiver: TcpReceiver::Endpoint,
            half_duplex: false,
        }
    }
}

/// `[echo]`: a UDP ping-pong client behind port 0 that the host's reader
/// answers: it sends a datagram, and the next once the reply is back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EchoCfg {
    /// Frame size in bytes, Ethernet header and CRC included.
    pub frame_bytes: u32,
    /// The client's own work per round trip (taking the reply, sending the
    /// next), in µs.
    pub client_us: f64,
}

impl Default for EchoCfg {
    fn default() -> Self {
        EchoCfg {
            frame_bytes: 64,
            client_us: 50.0,
        }
    }
}

/// The model part of a scenario file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The machine profile: a built-in name or a path.
    pub profile: String,
    /// Mechanisms.
    #[serde(default)]
    pub kernel: KernelCfg,
    /// Traffic sources.
    #[serde(default)]
    pub traffic: Vec<TrafficCfg>,
    /// User processes.
    #[serde(default)]
    pub process: Vec<ProcessCfg>,
    /// A TCP connection the host forwards.
    #[serde(default)]
    pub tcp: Option<TcpCfg>,
    /// A ping-pong client the host's reader answers.
    #[serde(default)]
    pub echo: Option<EchoCfg>,
    /// Under `kernel.kind = "nt"`: the multiprocessor.
    #[serde(default)]
    pub smp: Option<SmpCfg>,
    /// Run length and seed.
    #[serde(default)]
    pub run: RunCfg,
}

impl Scenario {
    /// The names processes are accounted under (`cpu.user:<name>`).
    pub fn process_names(&self) -> Vec<String> {
        self.expanded()
            .process
            .iter()
            .map(ProcessCfg::label)
            .collect()
    }

    /// The scenario with every `count` spelled out as that many processes.
    pub fn expanded(&self) -> Scenario {
        let mut s = self.clone();
        s.process = self
            .process
            .iter()
            .flat_map(|q| {
                let n = q.count.unwrap_or(1);
                (1..=n).map(move |i| {
                    let mut p = q.clone();
                    p.count = None;
                    if n > 1 {
                        let base = q.name.clone().unwrap_or_else(|| q.kind.name().to_string());
                        p.name = Some(format!("{base}-{i}"));
                    }
                    p
                })
            })
            .collect();
        s
    }
}
