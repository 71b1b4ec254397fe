//! `[[process]]`: the user processes (and, under `nt`, their threads),
//! and how they share the CPU.

use rxsched_core::Nanos;
use serde::{Deserialize, Serialize};

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

/// What a server computes over each request (Brustoloni et al. 2000 §6,
/// table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ComputeKind {
    /// Five averages of the request's data: one pass over it.
    Averages,
    /// The data as two sets of four vectors: the 16 inner products of one
    /// vector of each.
    Products,
    /// The n-th largest number, by partition: a pass, then one over the
    /// half that holds it, and so on.
    Select,
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
    /// A reader of the host's TCP connection under `srp` as a server: it
    /// reads requests of this many KB, computes over each, and replies.
    #[serde(default)]
    pub request_kb: Option<f64>,
    /// A server: what it computes over each request.
    #[serde(default)]
    pub compute: Option<ComputeKind>,
    /// A server: its computation's own work per byte it touches (a cache
    /// hit), in ns; a miss adds the profile's `cache_miss_per_byte`.
    #[serde(default)]
    pub compute_ns_per_byte: Option<f64>,
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
    /// Under `nt`: a reader's threads, which share its socket (default 1;
    /// 0: one per CPU).
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
