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

mod running;

pub use running::{run, start, Running};

use rxsched_linux::lab::{Role, D0, DUT_CPU, GEN_CPU};
use rxsched_linux::router::Mode;
use rxsched_linux::wire::Mac;
use std::fmt::Display;

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

/// A command line being written: `--flag value` pairs in order.
struct Argv(Vec<String>);

impl Argv {
    fn new(words: &[&str]) -> Argv {
        Argv(words.iter().map(|w| w.to_string()).collect())
    }

    fn flag(&mut self, name: &str, v: impl Display) -> &mut Argv {
        self.0.push(name.to_string());
        self.0.push(v.to_string());
        self
    }

    fn opt(&mut self, name: &str, v: Option<impl Display>) -> &mut Argv {
        if let Some(v) = v {
            self.flag(name, v);
        }
        self
    }

    fn switch(&mut self, name: &str, on: bool) -> &mut Argv {
        if on {
            self.0.push(name.to_string());
        }
        self
    }

    fn words(&mut self, words: &[&str]) -> &mut Argv {
        self.0.extend(words.iter().map(|w| w.to_string()));
        self
    }

    fn cycle_limit(&mut self, l: Option<CycleLimit>) -> &mut Argv {
        self.opt("--cycle-limit", l.map(|l| l.percent))
            .opt("--wake-cost-ns", l.map(|l| l.wake_cost_ns))
    }
}

fn ip4(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

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

    /// Its command line, without the executable (for ours) or the pinning
    /// (for a peer).
    pub fn argv(&self) -> Vec<String> {
        let (gen_cpu, dut_cpu) = (GEN_CPU, DUT_CPU);
        let mut a = Argv::new(&[self.name()]);
        match self {
            Proc::Gen(g) => a
                .flag("--cpu", gen_cpu)
                .flag("--rate", g.rate)
                .flag("--duration", g.secs)
                .opt("--dport", g.dport)
                .opt("--dst-ip", g.dst_ip.map(ip4))
                .opt("--dst-mac", g.dst_mac)
                .opt("--mix", g.mix.map(|(p, r)| format!("{p}:{r}"))),
            Proc::Sink(s) => match s.at {
                SinkAt::Lab => a.flag("--cpu", gen_cpu),
                SinkAt::Dut { latency_every } => a
                    .flag("--iface", D0.iface)
                    .flag("--hook", "xdp")
                    .flag("--cpu", dut_cpu)
                    .flag("--latency-every", latency_every),
            }
            .flag("--duration", s.secs)
            .flag("--idle", s.idle),
            Proc::Route(r) => a
                .flag("--mode", r.mode.name())
                .flag("--backend", "xdp")
                .switch("--time-shared", r.time_shared)
                .flag("--cpu", dut_cpu)
                .flag("--duration", r.secs)
                .cycle_limit(r.cycle_limit)
                .opt("--slo", r.slo.map(|s| s.0))
                .opt("--wake-cost-ns", r.slo.map(|s| s.1))
                .opt("--screen", r.screen.as_ref())
                .opt("--screen-queue", r.screen_queue)
                .opt("--feedback", r.feedback)
                .opt("--protect-queue", r.protect_queue)
                .opt("--protect-rules", r.protect_rules)
                .words(if r.in_xdp {
                    &["--forward-in", "xdp"]
                } else {
                    &[]
                }),
            Proc::XdpFwd { secs } => a.flag("--ports", D0.iface).flag("--duration", secs),
            Proc::Capture(c) => a
                .flag("-i", D0.iface)
                .flag("-w", &c.out)
                .flag("--cpu", dut_cpu)
                .flag("--duration", c.secs)
                .switch("--no-feedback", c.form == CaptureForm::NoFeedback)
                .switch("--take", c.take)
                .words(match c.form {
                    CaptureForm::Paper => {
                        &["--queue", "32", "--min-free", "8", "--resume-at", "timeout"]
                    }
                    _ => &[],
                })
                .cycle_limit(c.cycle_limit),
            Proc::Serve {
                consumers,
                lrp,
                secs,
            } => {
                a.flag("-i", D0.iface);
                for (port, name) in consumers {
                    a.flag("--consumer", format!("{port}:{name}"));
                }
                if *lrp {
                    a.words(&["--lrp"]);
                }
                a.flag("--cpu", dut_cpu).flag("--duration", secs)
            }
            Proc::Guard { tc, secs } => a
                .flag("-i", D0.iface)
                .flag("--hook", if *tc { "tc" } else { "xdp" })
                .flag("--interval", 0)
                .flag("--duration", secs),
            Proc::UdpRecv { port, secs } => a
                .flag("--port", port)
                .flag("--cpu", dut_cpu)
                .flag("--duration", secs),
            Proc::Spin { secs } | Proc::Onoff { secs } => {
                a.flag("--cpu", dut_cpu).flag("--duration", secs)
            }
            Proc::Peer(Peer::Tcpdump { out }) => {
                a.flag("-i", D0.iface).words(&["-n"]).flag("-w", out)
            }
            Proc::Peer(Peer::Tshark { out }) => {
                a.flag("-i", D0.iface).words(&["-n", "-q"]).flag("-w", out)
            }
        };
        a.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(p: impl Into<Proc>) -> String {
        p.into().argv().join(" ")
    }

    /// The command lines the benches run, as the commands' flags read them.
    #[test]
    fn renders_each_process_once() {
        assert_eq!(
            argv(Gen::new(2e5, 3.0).to_mac(NOBODY_MAC)),
            "gen --cpu 0 --rate 200000 --duration 3 --dst-mac 02:72:78:00:00:f2"
        );
        assert_eq!(
            argv(
                Gen::new(1e9, 2.5)
                    .to_port(7001)
                    .mixed(7002, 2e4)
                    .to_dut_kernel()
            ),
            "gen --cpu 0 --rate 1000000000 --duration 2.5 --dport 7001 --dst-ip 198.18.0.2 --dst-mac 02:72:78:00:00:02 --mix 7002:20000"
        );
        assert_eq!(
            argv(Sink::new(7.0, 0.5)),
            "sink --cpu 0 --duration 7 --idle 0.5"
        );
        let lab = Sink {
            at: SinkAt::Dut { latency_every: 8 },
            ..Sink::new(6.0, 0.5)
        };
        assert_eq!(
            argv(lab.clone()),
            "sink --iface d0 --hook xdp --cpu 1 --latency-every 8 --duration 6 --idle 0.5"
        );
        assert_eq!(Proc::from(lab).role(), Role::Dut);
        assert_eq!(Proc::from(Sink::new(1.0, 1.0)).role(), Role::Sink);
        let limit = Some(CycleLimit {
            percent: 50,
            wake_cost_ns: 1200,
        });
        assert_eq!(
            argv(Route {
                cycle_limit: limit,
                ..Route::new(Mode::Polling, 8.0)
            }),
            "route --mode polling --backend xdp --cpu 1 --duration 8 --cycle-limit 50 --wake-cost-ns 1200"
        );
        assert_eq!(
            argv(Route {
                screen: Some("/r/screen.rules".into()),
                feedback: Some("0.75,0.25"),
                ..Route::new(Mode::Interrupt, 8.0)
            }),
            "route --mode interrupt --backend xdp --cpu 1 --duration 8 --screen /r/screen.rules --feedback 0.75,0.25"
        );
        assert_eq!(
            argv(Route {
                time_shared: true,
                ..Route::new(Mode::TwoLevel, 9.0)
            }),
            "route --mode two-level --backend xdp --time-shared --cpu 1 --duration 9"
        );
        assert_eq!(
            argv(Route {
                protect_queue: Some(1),
                ..Route::new(Mode::Polling, 9.0)
            }),
            "route --mode polling --backend xdp --cpu 1 --duration 9 --protect-queue 1"
        );
        let capture = |form, cycle_limit| Capture {
            out: "/dev/null".into(),
            secs: 10.0,
            form,
            cycle_limit,
            take: false,
        };
        assert_eq!(
            argv(capture(CaptureForm::NoFeedback, None)),
            "capture -i d0 -w /dev/null --cpu 1 --duration 10 --no-feedback"
        );
        assert_eq!(
            argv(Capture {
                take: true,
                ..capture(CaptureForm::Feedback, None)
            }),
            "capture -i d0 -w /dev/null --cpu 1 --duration 10 --take"
        );
        assert_eq!(
            argv(capture(CaptureForm::Paper, None)),
            "capture -i d0 -w /dev/null --cpu 1 --duration 10 --queue 32 --min-free 8 --resume-at timeout"
        );
        assert_eq!(
            argv(capture(CaptureForm::Feedback, limit)),
            "capture -i d0 -w /dev/null --cpu 1 --duration 10 --cycle-limit 50 --wake-cost-ns 1200"
        );
        assert_eq!(
            argv(Proc::Serve {
                consumers: vec![(7001, "flooded"), (7002, "modest")],
                lrp: true,
                secs: 10.0
            }),
            "serve -i d0 --consumer 7001:flooded --consumer 7002:modest --lrp --cpu 1 --duration 10"
        );
        assert_eq!(
            argv(Proc::UdpRecv {
                port: 7002,
                secs: 4.0
            }),
            "udp-recv --port 7002 --cpu 1 --duration 4"
        );
        assert_eq!(
            argv(Proc::Guard {
                tc: true,
                secs: 5.0
            }),
            "guard -i d0 --hook tc --interval 0 --duration 5"
        );
        assert_eq!(argv(Proc::Spin { secs: 1.0 }), "spin --cpu 1 --duration 1");
        assert_eq!(
            argv(Proc::Onoff { secs: 4.0 }),
            "onoff --cpu 1 --duration 4"
        );
        assert_eq!(
            argv(Proc::XdpFwd { secs: 9.0 }),
            "xdp-fwd --ports d0 --duration 9"
        );
        assert_eq!(
            argv(Peer::Tcpdump {
                out: "/o/t.pcap".into()
            }),
            "tcpdump -i d0 -n -w /o/t.pcap"
        );
        assert_eq!(
            argv(Peer::Tshark {
                out: "/dev/null".into()
            }),
            "tshark -i d0 -n -q -w /dev/null"
        );
    }
}
