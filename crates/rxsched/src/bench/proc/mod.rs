//! The processes of a trial, described as data, and the one place their
//! command lines are written. A bench says what runs (`Gen::new(rate,
//! secs)`, a [`Route`] in polling mode); [`Proc::argv`] renders it,
//! [`start`] starts it in its namespace of the lab (ours through this very
//! executable, a peer such as tcpdump pinned to the DUT CPU), and
//! [`Running::finish`] reads the report it prints last as the struct the
//! command prints it from.
//!
//! Where each runs follows the lab (REAL.md): the generator and the sink on
//! the generator CPU, everything on the DUT on the DUT CPU.

mod argv;
mod running;

pub use running::{run, start, Running};

use rxsched_linux::lab::{Role, D0};
use rxsched_linux::router::Mode;
use rxsched_linux::wire::Mac;

/// `rxsched gen`: the generator, from g0.
#[derive(Debug, Clone, PartialEq)]
pub struct Gen {
    /// Frames per second asked for (1e9: as fast as it goes).
    pub rate: f64,
    /// Seconds to send.
    pub secs: f64,
    /// Destination UDP port (default 9001).
    pub dport: Option<u16>,
    /// Destination address (default: the sink's).
    pub dst_ip: Option<[u8; 4]>,
    /// Next hop's MAC (default: the DUT's `d0`, the lab's router).
    pub dst_mac: Option<Mac>,
    /// A second stream mixed in: its UDP port and rate.
    pub mix: Option<(u16, f64)>,
    /// Sent through the generator's stack (`--engine packet`), so that
    /// transmit steering picks its queue ([`Lab::steer_gen_stack`]),
    /// rather than by the XDP engine on the queue of its CPU.
    ///
    /// [`Lab::steer_gen_stack`]: rxsched_linux::lab::Lab::steer_gen_stack
    pub by_stack: bool,
}

/// A MAC no lab host owns. The monitor's and the server's benches address
/// their frames to it: the DUT's kernel drops each at once as another
/// host's, so what they measure is the program that takes the frames, not
/// the kernel's forwarding of them as well.
pub const NOBODY_MAC: Mac = Mac([0x02, 0x72, 0x78, 0, 0, 0xf2]);

impl Gen {
    /// Sends at `rate` for `secs` to the defaults.
    pub fn new(rate: f64, secs: f64) -> Gen {
        Gen {
            rate,
            secs,
            dport: None,
            dst_ip: None,
            dst_mac: None,
            mix: None,
            by_stack: false,
        }
    }

    /// The same, sent through the generator's stack (see [`Gen::by_stack`]).
    pub fn through_stack(self) -> Gen {
        Gen {
            by_stack: true,
            ..self
        }
    }

    /// The same, with a second stream to `port` at `rate` mixed in.
    pub fn mixed(self, port: u16, rate: f64) -> Gen {
        Gen {
            mix: Some((port, rate)),
            ..self
        }
    }

    /// The same, addressed to `mac`.
    pub fn to_mac(self, mac: Mac) -> Gen {
        Gen {
            dst_mac: Some(mac),
            ..self
        }
    }

    /// The same, to UDP port `port`.
    pub fn to_port(self, port: u16) -> Gen {
        Gen {
            dport: Some(port),
            ..self
        }
    }

    /// The same, to the DUT kernel itself (its d0 address and MAC).
    pub fn to_dut_kernel(self) -> Gen {
        Gen {
            dst_ip: Some(D0.ip),
            ..self
        }
        .to_mac(D0.mac)
    }
}

/// Where a sink counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkAt {
    /// s0, behind the DUT: what was forwarded (the default hook, tc).
    Lab,
    /// d0 itself, in XDP on the DUT CPU, timing one probe in
    /// `latency_every`: the lab's own capacity, nothing forwarding.
    Dut {
        /// Probes per latency sample (a power of two).
        latency_every: u64,
    },
}

/// `rxsched sink`: counts the generator's probes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sink {
    /// Seconds at most.
    pub secs: f64,
    /// Stops this long after the last frame.
    pub idle: f64,
    /// Where.
    pub at: SinkAt,
}

impl Sink {
    /// Counts at s0 for at most `secs`, stopping `idle` seconds after the last frame.
    pub fn new(secs: f64, idle: f64) -> Sink {
        Sink {
            secs,
            idle,
            at: SinkAt::Lab,
        }
    }
}

/// M4's CPU-cycle limit, as route and capture take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleLimit {
    /// The share of each period input may use, in percent.
    pub percent: u32,
    /// What one wake-up costs the task it interrupts, charged by M4 (ns),
    /// measured once per bench so every run charges the same.
    pub wake_cost_ns: u64,
}

/// `rxsched route` on the DUT, on AF_XDP.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// How it receives.
    pub mode: Mode,
    /// Seconds at most (a bench stops it earlier).
    pub secs: f64,
    /// A time-shared process rather than one at a real-time priority.
    pub time_shared: bool,
    /// Time-shared: the slice its threads ask for, in µs (`--slice-us`).
    pub slice_us: Option<u64>,
    /// M4, if on.
    pub cycle_limit: Option<CycleLimit>,
    /// A screening process with this rule file.
    pub screen: Option<String>,
    /// Queue-state feedback on the screening queue, `HIGH,LOW`.
    pub feedback: Option<&'static str>,
    /// The screening queue's length, if not the router's default.
    pub screen_queue: Option<u32>,
    /// Forwarding in the device's XDP program (`--forward-in xdp`).
    pub in_xdp: bool,
    /// An objective instead of the quota and M4 (`--slo`), and the
    /// wake-up cost measured for the bench.
    pub slo: Option<(&'static str, u64)>,
    /// Every port's receive queue of this number protected (`--protect-queue`).
    pub protect_queue: Option<u32>,
    /// Protected frames on shared queues steered by these rules
    /// (`--protect-rules`: a file, or `default`).
    pub protect_rules: Option<&'static str>,
}

impl Route {
    /// A router in `mode` for at most `secs`, nothing else asked of it.
    pub fn new(mode: Mode, secs: f64) -> Route {
        Route {
            mode,
            secs,
            time_shared: false,
            slice_us: None,
            cycle_limit: None,
            screen: None,
            feedback: None,
            screen_queue: None,
            in_xdp: false,
            slo: None,
            protect_queue: None,
            protect_rules: None,
        }
    }
}

/// How the monitor treats its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureForm {
    /// Queue-state feedback, as it comes.
    Feedback,
    /// No feedback.
    NoFeedback,
    /// The paper's form: a 32-frame queue, inhibit when fewer than 8 are
    /// free, resume only by the 1 ms timeout.
    Paper,
}

/// `rxsched capture` on d0.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    /// The pcap written (`/dev/null` for none).
    pub out: String,
    /// Seconds at most.
    pub secs: f64,
    /// Its queue's treatment.
    pub form: CaptureForm,
    /// M4, if on.
    pub cycle_limit: Option<CycleLimit>,
    /// Taking the frames (`--take`) instead of copying them.
    pub take: bool,
}

/// A peer that is not ours, capturing on d0 to a file.
#[derive(Debug, Clone, PartialEq)]
pub enum Peer {
    /// `tcpdump -w`.
    Tcpdump {
        /// The file written.
        out: String,
    },
    /// `tshark -w`.
    Tshark {
        /// The file written.
        out: String,
    },
    /// `xdpdump -w` (xdp-tools), with its own XDP program on d0.
    Xdpdump {
        /// The file written.
        out: String,
    },
    /// `netsniff-ng --out`.
    Netsniff {
        /// The file written.
        out: String,
    },
}

/// One process of a trial.
#[derive(Debug, Clone, PartialEq)]
pub enum Proc {
    /// The generator.
    Gen(Gen),
    /// The sink.
    Sink(Sink),
    /// Our router.
    Route(Route),
    /// Forwarding in XDP, on d0, for `secs`.
    XdpFwd {
        /// Seconds at most.
        secs: f64,
    },
    /// Our monitor.
    Capture(Capture),
    /// SRP's server on d0: `(port, name)` per consumer, for `secs`.
    Serve {
        /// The consumers.
        consumers: Vec<(u16, &'static str)>,
        /// LRP's discipline rather than SRP's.
        lrp: bool,
        /// Seconds at most.
        secs: f64,
    },
    /// Early discard for full UDP sockets on d0, for `secs`.
    Guard {
        /// At tc ingress rather than in XDP.
        tc: bool,
        /// Seconds at most.
        secs: f64,
    },
    /// A kernel UDP socket's reader, on `port`, for `secs`.
    UdpRecv {
        /// The port.
        port: u16,
        /// Seconds at most.
        secs: f64,
    },
    /// The compute process whose progress is measured, for `secs`.
    Spin {
        /// Seconds.
        secs: f64,
    },
    /// A process that computes and sleeps in turn, for `secs`.
    Onoff {
        /// Seconds.
        secs: f64,
    },
    /// A capturer that is not ours.
    Peer(Peer),
}

macro_rules! into_proc {
    ($($t:ident),*) => {
        $(impl From<$t> for Proc {
            fn from(p: $t) -> Proc {
                Proc::$t(p)
            }
        })*
    };
}
into_proc!(Gen, Sink, Route, Capture, Peer);

impl Proc {
    /// The command's name (the subcommand, or the peer's program).
    pub fn name(&self) -> &'static str {
        match self {
            Proc::Gen(_) => "gen",
            Proc::Sink(_) => "sink",
            Proc::Route(_) => "route",
            Proc::XdpFwd { .. } => "xdp-fwd",
            Proc::Capture(_) => "capture",
            Proc::Serve { .. } => "serve",
            Proc::UdpRecv { .. } => "udp-recv",
            Proc::Guard { .. } => "guard",
            Proc::Spin { .. } => "spin",
            Proc::Onoff { .. } => "onoff",
            Proc::Peer(Peer::Tcpdump { .. }) => "tcpdump",
            Proc::Peer(Peer::Tshark { .. }) => "tshark",
            Proc::Peer(Peer::Xdpdump { .. }) => "xdpdump",
            Proc::Peer(Peer::Netsniff { .. }) => "netsniff-ng",
        }
    }

    /// Whether it says when it is listening
    /// (`rxsched_linux::runtime::listening`): ours that take frames do.
    pub fn announces(&self) -> bool {
        !matches!(
            self,
            Proc::Gen(_) | Proc::Spin { .. } | Proc::Onoff { .. } | Proc::Peer(_)
        )
    }

    /// The namespace it runs in.
    pub fn role(&self) -> Role {
        match self {
            Proc::Gen(_) => Role::Gen,
            Proc::Sink(Sink {
                at: SinkAt::Lab, ..
            }) => Role::Sink,
            _ => Role::Dut,
        }
    }
}
