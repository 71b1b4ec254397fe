//! Scenario files: what to simulate. A scenario names a machine profile
//! and sets the kernel's mechanisms, the traffic, the user processes and
//! the run. Every key has a default; an unknown key is an error.
//!
//! The tables have modules of their own: `kernel`, `process` and `smp`
//! (this module holds the traffic, the run, the TCP connection, the echo
//! client and the scenario itself). How a file is read and overridden is
//! in `load`; the ranges every value must lie in are in `validate`. Files
//! may carry other top-level tables (a figure's construction) that a
//! caller takes out before deserializing.

mod kernel;
mod lab;
mod load;
mod process;
mod smp;
mod validate;

pub use kernel::{
    BreakerCfg, CycleLimitCfg, FeedbackCfg, IpLayer, KernelCfg, KernelKind, VARIANTS,
};
pub use lab::{LabCfg, LabForwarder, LabScreen};
pub use load::{overlaps, parse_set, set_path, Loaded};
pub use process::{CaptureOutput, ComputeKind, ProcessCfg, ProcessKind, Scheduler, SigDisposition};
pub use smp::{SmpCfg, SmpDetector, SmpService};

use serde::{Deserialize, Serialize};

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
    /// Within 0.01% of the line rate, every kind but `burst` sends back to
    /// back: a sender its link limits.
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
    /// Traffic that keeps the network alive (ARP, ICMP, routing protocols,
    /// frames for the host): counted apart (`protected_*` in the record),
    /// and steered to a ring of its own when `kernel.protect.enabled`.
    pub protected: bool,
    /// The flows its frames belong to, as a device's receive-side hash
    /// sees them (`kernel.rx_queues`): 0, many (each frame to a queue at
    /// random); N, each frame one of N flows at random, a flow keeping to
    /// one queue (1: a single flow's flood lands on one queue).
    pub flows: u32,
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
            protected: false,
            flows: 0,
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
    /// On a half-duplex link: the medium time, in µs, an ACK costs beyond
    /// its own frame when it meets the sender's stream (an ACK ready while
    /// a segment is on the wire or about to be: the two stations go for
    /// the idle medium together, collide and back off), so a hub carries
    /// less than its bit rate while ACKs flow and all of it while none do.
    pub ack_contention_us: f64,
    /// With `receiver = "host"`: the window the host advertises is what
    /// its reader has not read yet (the socket buffer's room), and reading
    /// sends window updates, as TCP's flow control does; without it the
    /// window counts only what is unacknowledged.
    pub flow_control: bool,
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
            ack_contention_us: 0.0,
            flow_control: false,
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
    /// Under `kernel.kind = "lab"`: the lab's forwarder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabCfg>,
    /// The link the host is attached to, where it is not its testbed's:
    /// the profile's framing at another line rate (a host's costs are the
    /// profile's; the network it meets is the scenario's).
    #[serde(default)]
    pub link: Option<LinkCfg>,
    /// `[profile_param]`: the profile's free parameters (its `[calibrate]`
    /// section) at other values than its own, by name; each sets the costs
    /// it governs. For a host as it ran under a measurement that slowed
    /// it, e.g. a kernel timeline traced with every traced step inflated
    /// (`trace_scale = 1.0`) on a wire that tracing did not slow.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub profile_param: std::collections::BTreeMap<String, f64>,
    /// Run length and seed.
    #[serde(default)]
    pub run: RunCfg,
}

/// `[link]`: a line rate other than the testbed's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCfg {
    /// Line rate in bits per second (the profile's framing and cells kept).
    pub bit_rate_bps: f64,
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
