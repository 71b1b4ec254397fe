//! The one place the trial processes' command lines are written
//! ([`Proc::argv`]), and the tests that hold them against the commands'
//! flags.

use super::{CaptureForm, CycleLimit, Peer, Proc, SinkAt};
use rxsched_linux::lab::{D0, DUT_CPU, GEN_CPU};
use std::fmt::Display;

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
                .opt("--mix", g.mix.map(|(p, r)| format!("{p}:{r}")))
                .words(if g.by_stack {
                    &["--engine", "packet"]
                } else {
                    &[]
                }),
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
                .opt("--slice-us", r.slice_us)
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
            // With no XDP program on d0, xdpdump would fall back to a
            // packet socket (libpcap): it loads its own, and captures at
            // its entry.
            Proc::Peer(Peer::Xdpdump { out }) => a
                .flag("-i", D0.iface)
                .words(&["--load-xdp-program"])
                .flag("-w", out),
            // -A: the lab's namespace cannot tune the host's socket
            // memory; -Q: leave IRQ affinities alone; -S: its default ring
            // on a veth is sized for the link's speed and takes 5 s to set
            // up on the DUT CPU.
            Proc::Peer(Peer::Netsniff { out }) => a
                .flag("--in", D0.iface)
                .flag("--out", out)
                .words(&["--silent", "-A", "-Q"])
                .flag("-S", "64MiB"),
        };
        a.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

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
                time_shared: true,
                slice_us: Some(100),
                ..Route::new(Mode::Polling, 9.0)
            }),
            "route --mode polling --backend xdp --time-shared --slice-us 100 --cpu 1 --duration 9"
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
        assert_eq!(
            argv(Peer::Xdpdump {
                out: "/dev/null".into()
            }),
            "xdpdump -i d0 --load-xdp-program -w /dev/null"
        );
        assert_eq!(
            argv(Peer::Netsniff {
                out: "/o/n.pcap".into()
            }),
            "netsniff-ng --in d0 --out /o/n.pcap --silent -A -Q -S 64MiB"
        );
    }
}
