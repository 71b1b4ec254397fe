//! One forwarding trial in the lab: a forwarder on the DUT, the compute
//! process beside it on the DUT CPU, the sink and the generator, and the
//! DUT's counters read before and after; then the point they make.

use super::counters::{dut_drops, Counters};
use super::error::BenchError;
use super::proc::{run, start, CycleLimit, Gen, Proc, Route, Sink};
use crate::result::Point;
use rxsched_linux::lab::{Lab, DUT_CPU};
use rxsched_linux::loadgen::{GenReport, SinkReport};
use rxsched_linux::router::{Mode, RouterReport};
use rxsched_linux::spin::SpinReport;
use rxsched_linux::xdpfwd::XdpFwdReport;
use rxsched_sim::metrics::Latency;
use rxsched_sim::Metrics;

/// What forwards on the DUT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarder {
    /// Linux's own `ip_forward`, its receive work in d0's NAPI thread.
    Kernel,
    /// `rxsched xdp-fwd`: forwarding in XDP, the fastest this lab can do.
    XdpFwd,
    /// `rxsched route --mode interrupt`: the M1 baseline on AF_XDP.
    Interrupt,
    /// `rxsched route --mode polling`: M2 on AF_XDP.
    Polling,
    /// The same with `--cycle-limit 50` (M4).
    PollingLimit50,
    /// `rxsched route --mode polling --forward-in xdp`: the device's
    /// program forwards, the polling thread keeps the policy.
    PollingInXdp,
    /// The same with `--cycle-limit 50`.
    PollingInXdpLimit50,
    /// `rxsched route --mode polling --slo latency=500us,cpu=50%`: the
    /// quota and the cycle limit set by an objective.
    PollingSlo,
}

/// The objective of [`Forwarder::PollingSlo`].
pub const SLO: &str = "latency=500us,cpu=50%";

/// A screening process behind our router: its rules and the feedback on
/// its queue, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Screen {
    /// The rule file.
    pub rules: String,
    /// `--feedback HIGH,LOW`.
    pub feedback: Option<&'static str>,
    /// `--screen-queue N` (default: the router's own).
    pub queue: Option<u32>,
}

impl Forwarder {
    /// The series label in the result files.
    pub fn label(self) -> &'static str {
        match self {
            Forwarder::Kernel => "kernel",
            Forwarder::XdpFwd => "xdp-fwd",
            Forwarder::Interrupt => "interrupt",
            Forwarder::Polling => "polling",
            Forwarder::PollingLimit50 => "polling-cycle-limit-50",
            Forwarder::PollingInXdp => "polling-in-xdp",
            Forwarder::PollingInXdpLimit50 => "polling-in-xdp-cycle-limit-50",
            Forwarder::PollingSlo => "polling-slo",
        }
    }

    /// The process that forwards for `secs`, if it is one of ours; M4
    /// charges `wake_cost_ns` per wake-up; `screen` goes behind our router.
    pub fn proc(self, secs: f64, wake_cost_ns: u64, screen: Option<&Screen>) -> Option<Proc> {
        let route = |mode, cycle_limit| {
            Some(Proc::Route(Route {
                cycle_limit,
                screen: screen.map(|s| s.rules.clone()),
                feedback: screen.and_then(|s| s.feedback),
                screen_queue: screen.and_then(|s| s.queue),
                ..Route::new(mode, secs)
            }))
        };
        let limit50 = Some(CycleLimit {
            percent: 50,
            wake_cost_ns,
        });
        // Forwarding in XDP screens in the program: no queue, no feedback.
        let in_xdp = |cycle_limit| {
            Some(Proc::Route(Route {
                cycle_limit,
                in_xdp: true,
                screen: screen.map(|s| s.rules.clone()),
                ..Route::new(Mode::Polling, secs)
            }))
        };
        match self {
            Forwarder::Kernel => None,
            Forwarder::XdpFwd => Some(Proc::XdpFwd { secs }),
            Forwarder::Interrupt => route(Mode::Interrupt, None),
            Forwarder::Polling => route(Mode::Polling, None),
            Forwarder::PollingLimit50 => route(Mode::Polling, limit50),
            Forwarder::PollingInXdp => in_xdp(None),
            Forwarder::PollingInXdpLimit50 => in_xdp(limit50),
            Forwarder::PollingSlo => Some(Proc::Route(Route {
                slo: Some((SLO, wake_cost_ns)),
                ..Route::new(Mode::Polling, secs)
            })),
        }
    }

    /// The kernel forwards for these (in its stack, or in XDP): no
    /// router of ours, whose sockets would split d0's drops.
    fn kernel_forwarding(self) -> bool {
        matches!(self, Forwarder::Kernel | Forwarder::XdpFwd)
    }
}

/// What the DUT CPU gives when nothing forwards.
#[derive(Debug, Clone, Copy)]
pub struct Dut {
    /// The compute process's progress rate: its full share.
    pub idle: f64,
    /// The cost of one wake-up of the receive work to the task it
    /// interrupts (M4 charges it; see `rxsched_linux::wakecost`).
    pub wake_cost_ns: u64,
}

/// Measures the idle DUT: the compute process alone for `secs`, then the
/// wake-up cost (the median of three measurements, from a thread of this
/// process pinned to the DUT CPU, so that every polling router with M4 in
/// the run charges the same).
pub fn measure_dut(lab: &Lab, secs: f64) -> Result<Dut, BenchError> {
    let r: SpinReport = run(lab, Proc::Spin { secs })?;
    let wake = std::thread::spawn(|| {
        (0..3)
            .map(|_| rxsched_linux::wakecost::measure(DUT_CPU))
            .collect::<Result<Vec<u64>, _>>()
    })
    .join()
    .map_err(|_| BenchError("the wake-up cost measurement panicked".into()))?;
    let mut wake = wake?;
    wake.sort_unstable();
    Ok(Dut {
        idle: r.progress_rate,
        wake_cost_ns: wake[1],
    })
}

/// What one forwarding trial saw: the reports, and the counters around it.
#[derive(Debug, Clone)]
struct Observed {
    gen: GenReport,
    sink: SinkReport,
    spin: SpinReport,
    /// Our router's report, if `route` forwarded.
    router: Option<RouterReport>,
    /// A process of ours forwarded (`route` or `xdp-fwd`).
    ours: bool,
    before: Counters,
    after: Counters,
}

/// One point: `fwd` forwarding (behind it `screen`, if any) while the
/// generator offers `rate` for `secs`, with the compute process on the DUT
/// CPU, compared with `dut`.
pub fn run_trial(
    lab: &Lab,
    fwd: Forwarder,
    screen: Option<&Screen>,
    rate: f64,
    secs: f64,
    dut: &Dut,
) -> Result<Point, BenchError> {
    trial(lab, fwd, screen, rate, secs, dut, false)
}

/// [`run_trial`] with our forwarder stopped (SIGSTOP) once it has
/// attached: what the device's receive work costs when the socket it
/// redirects to is never read (its ring full, every frame refused there).
pub fn run_trial_paused(
    lab: &Lab,
    fwd: Forwarder,
    rate: f64,
    secs: f64,
    dut: &Dut,
) -> Result<Point, BenchError> {
    trial(lab, fwd, None, rate, secs, dut, true)
}

fn trial(
    lab: &Lab,
    fwd: Forwarder,
    screen: Option<&Screen>,
    rate: f64,
    secs: f64,
    dut: &Dut,
    paused: bool,
) -> Result<Point, BenchError> {
    lab.reset_dut_receive()?;
    let router = match fwd.proc(secs + 6.0, dut.wake_cost_ns, screen) {
        Some(p) => Some(start(lab, p)?),
        None => None,
    };
    let sink = start(lab, Sink::new(secs + 5.0, 0.5))?;
    if let (true, Some(r)) = (paused, &router) {
        r.pause();
    }
    let before = Counters::read(lab, router.as_ref())?;
    let spin = start(lab, Proc::Spin { secs })?;
    let gen = run(lab, Gen::new(rate, secs))?;
    let spin = spin.finish()?;
    let sink = sink.finish()?;
    let after = Counters::read(lab, router.as_ref())?;
    let ours = router.is_some();
    let router = match router {
        Some(r) if fwd == Forwarder::XdpFwd => {
            r.stop();
            r.finish::<XdpFwdReport>().map(|_| None)?
        }
        Some(r) => {
            r.resume();
            r.stop();
            Some(r.finish::<RouterReport>()?)
        }
        None => None,
    };
    let o = Observed {
        gen,
        sink,
        spin,
        router,
        ours,
        before,
        after,
    };
    Ok(point(&o, fwd, rate, dut.idle))
}

/// The DUT CPU beside the compute process's progress and the threads'
/// time: the compute process's time that made no progress (`lost`: what
/// the wake-ups of the threads cost it in switches and caches), and the
/// rest (`idle`: nobody's, or the hypervisor's). Under a cycle limit at
/// 25,000 pkts/s the compute process had 0.62 of the CPU's time and made
/// 0.50 of its idle progress: 0.12 lost, none idle.
pub fn remainder(progress: f64, time_share: f64, threads: f64) -> [(&'static str, f64); 2] {
    let free = (1.0 - progress - threads).max(0.0);
    let lost = (time_share - progress).clamp(0.0, free);
    [("lost", lost), ("idle", free - lost)]
}

/// The point of a forwarding trial; `idle` is the compute process's
/// progress rate on an idle DUT.
fn point(o: &Observed, fwd: Forwarder, rate: f64, idle: f64) -> Point {
    let mut m = metrics(&o.gen, &o.sink, o.router.as_ref());
    dut_drops(&mut m, &o.before, &o.after, !fwd.kernel_forwarding());
    // Progress per second the hypervisor left the DUT CPU, against the
    // same on an idle DUT; the raw figure (per wall second) is kept too.
    let sp = &o.spin;
    let compute = (sp.progress_rate / idle).clamp(0.0, 1.0);
    m.cpu.insert("user:compute".to_string(), compute);
    let raw = sp.iterations as f64 / sp.duration_s.max(1e-9) / idle;
    m.extra
        .insert("compute_progress_wall".into(), raw.clamp(0.0, 1.0));
    m.extra.insert(
        "dut_steal_share".into(),
        sp.steal_s / sp.duration_s.max(1e-9),
    );
    m.extra
        .insert("compute_cpu_time_share".into(), sp.cpu_share);
    let dur = o.gen.duration_s.max(1e-9);
    let share = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / 1e9 / dur;
    let (c0, c1) = (&o.before, &o.after);
    m.extra
        .insert("napi_cpu_share".into(), share(c0.napi_ns, c1.napi_ns));
    m.extra.insert(
        "napi_runs_per_s".into(),
        c1.napi_runs.saturating_sub(c0.napi_runs) as f64 / dur,
    );
    if o.ours {
        m.cpu
            .insert("router".to_string(), share(c0.router_ns, c1.router_ns));
        m.extra.insert(
            "router_runs_per_s".into(),
            c1.router_runs.saturating_sub(c0.router_runs) as f64 / dur,
        );
    }
    if c1.screen_ns > 0 {
        m.cpu
            .insert("screen".to_string(), share(c0.screen_ns, c1.screen_ns));
        m.extra.insert(
            "screen_runs_per_s".into(),
            c1.screen_runs.saturating_sub(c0.screen_runs) as f64 / dur,
        );
    }
    m.cpu
        .insert("napi".to_string(), share(c0.napi_ns, c1.napi_ns));
    let threads: f64 = m.cpu.values().sum::<f64>() - compute;
    for (k, v) in remainder(compute, sp.cpu_share, threads) {
        m.cpu.insert(k.to_string(), v);
    }
    m.extra.insert("requested_pps".into(), rate);
    Point::of(&m)
}

/// The record of a point from the generator's, sink's and router's reports.
pub fn metrics(g: &GenReport, sk: &SinkReport, rt: Option<&RouterReport>) -> Metrics {
    let sent = g.sent;
    let delivered = sk.received.min(sent);
    let dur = g.duration_s.max(1e-9);
    let l = &sk.latency_us;
    let mut m = Metrics {
        offered_pps: g.achieved_pps,
        delivered_pps: delivered as f64 / dur,
        arrived: sent,
        received: sent,
        delivered,
        latency_us: Latency {
            p50: l.p50,
            p90: l.p90,
            p99: l.p99,
            max: l.max,
        },
        ..Metrics::default()
    };
    m.extra.insert("sink_reordered".into(), sk.reordered as f64);
    m.extra.insert("gen_waits".into(), g.waits as f64);
    if let Some(r) = rt {
        m.mode_switches = r.mode_switches;
        if let Some(w) = r.wake_cost_ns {
            m.extra.insert("wake_cost_ns".into(), w as f64);
        }
        m.inhibits = r
            .inhibits
            .iter()
            .map(|(c, &n)| (c.name().to_string(), n))
            .collect();
        for (p, &n) in &r.drops {
            if n > 0 {
                m.drops.insert(p.name().to_string(), n);
            }
        }
    }
    m
}

/// The polling router's CPU use, its receive threads' included, with no traffic.
pub fn idle_cpu(lab: &Lab, secs: f64) -> Result<f64, BenchError> {
    lab.reset_dut_receive()?;
    let c0 = Counters::read(lab, None)?;
    let router = Forwarder::Polling.proc(secs, 0, None).expect("a router");
    let r: RouterReport = run(lab, router)?;
    let c1 = Counters::read(lab, None)?;
    let napi = (c1.napi_ns.saturating_sub(c0.napi_ns)) as f64 / 1e9;
    Ok((r.cpu_s + napi) / r.duration_s.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::remainder;

    /// The compute process's time beyond its progress is lost, what nobody
    /// had is idle, and the shares never sum past the whole CPU.
    #[test]
    fn the_remainder_splits_lost_progress_from_idle_time() {
        let [(_, lost), (_, idle)] = remainder(0.50, 0.62, 0.39);
        assert!(
            (lost - 0.11).abs() < 1e-9 && idle.abs() < 1e-9,
            "{lost} {idle}"
        );
        let [(_, lost), (_, idle)] = remainder(0.30, 0.30, 0.20);
        assert!(
            lost.abs() < 1e-9 && (idle - 0.5).abs() < 1e-9,
            "{lost} {idle}"
        );
        // Measurement slop (time shares over 1): lost is what is left.
        let [(_, lost), (_, idle)] = remainder(0.50, 0.70, 0.45);
        assert!(
            (lost - 0.05).abs() < 1e-9 && idle.abs() < 1e-9,
            "{lost} {idle}"
        );
    }

    use super::*;
    use rxsched_linux::loadgen::LatencyUs;
    use serde_json::json;

    /// A report as its command prints it.
    fn report<R: serde::de::DeserializeOwned>(v: serde_json::Value) -> R {
        serde_json::from_value(v).unwrap()
    }

    fn router(drops: serde_json::Value, inhibits: serde_json::Value) -> RouterReport {
        report(json!({
            "mode": "polling", "duration_s": 2.0, "rx": 900, "forwarded": 900,
            "drops": drops, "inhibits": inhibits, "mode_switches": 4,
            "in_flight": 0, "cpu_s": 0.3, "wake_cost_ns": 900
        }))
    }

    fn observed(router: Option<RouterReport>, ours: bool) -> Observed {
        let sink = SinkReport {
            received: 900,
            latency_us: LatencyUs {
                p99: 40.0,
                ..LatencyUs::default()
            },
            ..SinkReport::default()
        };
        let mut r = Observed {
            gen: report(json!({
                "engine": "xdp", "sent": 1000, "duration_s": 2.0,
                "requested_pps": 600.0, "achieved_pps": 500.0, "waits": 3
            })),
            sink,
            spin: report(json!({
                "duration_s": 2.0, "cpu_s": 1.2, "cpu_share": 0.6,
                "iterations": 1200, "steal_s": 0.1, "progress_rate": 700.0
            })),
            router,
            ours,
            before: Counters::default(),
            after: Counters::default(),
        };
        r.before.d0_dropped = 10;
        r.after.d0_dropped = 60;
        r.after.d1_dropped = 5;
        r.before.s0_dropped = 1;
        r.after.s0_dropped = 3;
        r.after.napi_ns = 400_000_000;
        r.after.router_ns = 200_000_000;
        r
    }

    /// The kernel forwarding: d0's drops are the ring's, the rest of what
    /// did not arrive is unattributed, and every frame is accounted for.
    #[test]
    fn a_kernel_point_accounts_for_every_frame() {
        let p = point(&observed(None, false), Forwarder::Kernel, 600.0, 1000.0);
        let get = |k: &str| p.get(k).unwrap();
        assert_eq!(get("drops.nic_rx_ring"), 50.0);
        assert_eq!(get("drops.output_link"), 7.0);
        assert_eq!(get("drops.unattributed"), 43.0);
        assert_eq!(get("arrived"), get("delivered") + p.drops());
        assert_eq!((get("offered_pps"), get("delivered_pps")), (500.0, 450.0));
        assert_eq!(get("cpu.user:compute"), 0.7);
        assert_eq!(get("dut_steal_share"), 0.05);
        assert_eq!(get("napi_cpu_share"), 0.2);
        assert_eq!(get("requested_pps"), 600.0);
        assert_eq!(get("latency_us.p99"), 40.0);
        assert!(p.0["cpu"].get("router").is_none(), "{:?}", p.0["cpu"]);
    }

    /// Our router splits d0's drops itself; its CPU share is recorded.
    #[test]
    fn a_router_point_takes_the_routers_drops() {
        let rt = router(
            json!({"nic_rx_ring": 80, "ipintrq": 0}),
            json!({"cycle_limit": 2}),
        );
        let p = point(
            &observed(Some(rt), true),
            Forwarder::PollingLimit50,
            600.0,
            1000.0,
        );
        let get = |k: &str| p.get(k).unwrap();
        assert_eq!(get("drops.nic_rx_ring"), 80.0);
        assert_eq!(get("drops.output_link"), 7.0);
        assert_eq!(get("drops.unattributed"), 13.0);
        assert!(p.0["drops"].get("ipintrq").is_none());
        assert_eq!((get("mode_switches"), get("wake_cost_ns")), (4.0, 900.0));
        assert_eq!(get("inhibits.cycle_limit"), 2.0);
        assert_eq!(get("cpu.router"), 0.1);
    }

    /// xdp-fwd is ours to start but the kernel's drops are the ring's.
    #[test]
    fn an_xdp_fwd_point_has_the_kernels_drops_and_its_cpu() {
        let p = point(&observed(None, true), Forwarder::XdpFwd, 600.0, 1000.0);
        assert_eq!(p.get("drops.nic_rx_ring"), Some(50.0));
        assert_eq!(p.get("cpu.router"), Some(0.1));
        assert_eq!(p.get("mode_switches"), Some(0.0));
    }
}
