//! `rxsched route`: the router's flags and their checks.

use super::{faulted, interfaces_exist, json, positive, timeout_ms, RunArgs};
use clap::Args;
use rxsched::error::{Error, Result};
use rxsched_linux::router::{Mode, Protect, Route, RouterConfig};
use rxsched_linux::rules::Rules;
use rxsched_linux::screen::ScreenConfig;
use rxsched_linux::sys::slice::{MAX_NS, MIN_NS};

/// `rxsched route`
#[derive(Args)]
pub struct RouteArgs {
    /// The runtime's flags.
    #[command(flatten)]
    pub run: RunArgs,
    /// The interfaces to forward between.
    #[arg(long, value_delimiter = ',', default_value = "d0,d1")]
    pub ports: Vec<String>,
    /// `PREFIX/LEN=IFACE@NEXTHOP_MAC`, repeatable: routes by hand, which
    /// override the kernel's (by default every next hop comes from the
    /// kernel's routing and neighbour tables, as kernel forwarding's does).
    #[arg(long = "route")]
    pub routes: Vec<String>,
    /// `interrupt` (M1 baseline), `polling` (M2) or `two-level` (M11:
    /// interrupts until the receive work stays over a threshold, then
    /// polling until it runs out of work).
    #[arg(long, default_value = "polling")]
    pub mode: String,
    /// Two-level: the overload detector, `cpu` (the receive threads' share
    /// of the CPU), `queue` (frames waiting on the rings) or `rate`
    /// (wake-ups per second).
    #[arg(long, default_value = "cpu")]
    pub two_level_detector: String,
    /// Two-level: the detector's threshold (default: 0.5 of the CPU, 64
    /// frames, or 20,000 wake-ups per second).
    #[arg(long)]
    pub two_level_threshold: Option<f64>,
    /// Two-level: how long overload must last before polling, in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub two_level_hold: f64,
    /// Two-level: the window load is judged over, in ms.
    #[arg(long, default_value_t = 100.0)]
    pub two_level_window_ms: f64,
    /// Two-level: how long polling must find nothing before interrupts
    /// return, in ms (0: at once, as the paper).
    #[arg(long, default_value_t = 0.0)]
    pub two_level_grace_ms: f64,
    /// Two-level: return to interrupts once a window's polling work (the
    /// forwarding thread and the receive threads) is under this share of
    /// one CPU, rather than when a sample brings nothing (e.g. 0.25).
    #[arg(long)]
    pub two_level_return_below: Option<f64>,
    /// Polling, M3: `HIGH,LOW` fractions of the watched queue (the
    /// screening queue with `--screen`, else the output queue) at which
    /// input stops and resumes, e.g. `0.75,0.25`.
    #[arg(long)]
    pub feedback: Option<String>,
    /// Polling, M3: an inhibit ends after this long at most, in ms (in
    /// case the consumer hangs).
    #[arg(long, default_value_t = 1.0)]
    pub feedback_timeout_ms: f64,
    /// Pass every forwarded frame through a screening process that applies
    /// this rule file (see `rxsched capture --filter` for the language);
    /// frames it accepts it sends on, frames it denies are counted by rule.
    /// With `--forward-in xdp` the devices' program applies the rules
    /// itself (up to 64), before any copy, and there is no process.
    #[arg(long, value_name = "RULES")]
    pub screen: Option<String>,
    /// The screening queue's length, in frames (the paper's screend had 32:
    /// under load the stage and the router then take turns every few dozen
    /// frames; at low load a frame passes at once whatever the length).
    #[arg(long, default_value_t = 1024)]
    pub screen_queue: u32,
    /// Polling: run time-shared like any process (and the receive threads
    /// too while it waits), not above every process.
    #[arg(long)]
    pub time_shared: bool,
    /// With --time-shared: the slice the polling thread and its receive
    /// threads ask the scheduler for, in µs (EEVDF, Linux 6.12 and later;
    /// 100 to 100,000). A woken thread with a shorter slice than the
    /// running process's preempts it at once instead of waiting up to the
    /// end of that process's slice (a few ms by default), while the ring
    /// fills: a CPU group's weight buys the router a share, the slice its
    /// wake-up latency. With --slo and no --slice-us, the slice is the
    /// objective's latency (so one round of the loop runs whole).
    #[arg(long, value_name = "US")]
    pub slice_us: Option<u64>,
    /// Where frames are forwarded: `user` (an AF_XDP or packet socket,
    /// the polling thread forwarding) or `xdp` (the devices' program
    /// forwards them, as xdp-fwd does, and the thread keeps the policy:
    /// when and how much the receive work runs, and the cycle limit; xdp
    /// backend, next hops from the kernel, no --feedback).
    #[arg(long, default_value = "user", value_parser = ["user", "xdp"])]
    pub forward_in: String,
    /// One polling thread per CPU listed (`1-3`, `1,3`; a CPU listed twice
    /// gets two), the ports' receive queues dealt out to them in turn,
    /// each thread with its own quota, feedback and cycle limit (polling,
    /// xdp backend, forwarding in user space; instead of --cpu).
    #[arg(long)]
    pub cpus: Option<String>,
    /// With --cpus, M4 for the whole router: this percentage of one CPU,
    /// split evenly over the threads.
    #[arg(long)]
    pub cycle_limit_total: Option<f64>,
    /// Polling: every port's receive queue N is protected (steer ARP,
    /// ICMP and routing protocols there with the NIC's flow rules,
    /// `ethtool -N IF ... action N`): served first, and an ordinary
    /// queue's batch stops for it, but it never takes more frames than the
    /// traffic it makes wait. Needs a device with more than N queues.
    #[arg(long, value_name = "N")]
    pub protect_queue: Option<u32>,
    /// Polling: protected traffic that arrives on a shared queue. The XDP
    /// program steers the frames for the router that these rules protect
    /// (the language of --screen: a frame whose first matching rule
    /// accepts it) into a protected socket of the queue's own, served first
    /// and capped as the protected queue is. `default`: ICMP and ICMPv6, OSPF
    /// (IP protocol 89) and BGP (TCP port 179), IPv4 and IPv6. ARP, multicast and frames for
    /// the host itself go to its stack in any case. With --protect-queue,
    /// the default unless given.
    #[arg(long, value_name = "RULES|default")]
    pub protect_rules: Option<String>,
    /// Frames per callback on each protected queue or socket.
    #[arg(long, default_value_t = 4)]
    pub protect_quota: u32,
    /// Polling: an objective instead of --quota and --cycle-limit,
    /// `latency=200us,cpu=50%`: the added latency to keep under at low load
    /// and the CPU share to keep under when overloaded; the quota and the
    /// cycle limit follow from the costs the router measures as it runs,
    /// and with --screen (and no --feedback) M3's watermarks on the
    /// screening queue from what the screening process spends a frame.
    /// With --mode two-level it also sets the switch: polling once the
    /// receive work has been over the share for 40 ms (judged every 10 ms),
    /// the share capped there by M4, and interrupts again once the polling
    /// work falls under a mark set from the measured costs. With
    /// --time-shared the thread's slice is the latency (see --slice-us).
    #[arg(long, value_name = "OBJECTIVE", conflicts_with_all = ["quota", "cycle_limit"])]
    pub slo: Option<String>,
    /// Serve the router's counters in Prometheus' format at
    /// http://ADDR/metrics (e.g. 127.0.0.1:9464; port 0 picks one, and the
    /// router says which), refreshed four times a second.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// Parses `route`'s arguments.
pub fn router_config(a: &RouteArgs) -> Result<RouterConfig> {
    let run = a.run.config()?;
    let mode = match a.mode.as_str() {
        "interrupt" => Mode::Interrupt,
        "polling" => Mode::Polling,
        "two-level" => Mode::TwoLevel,
        m => {
            return Err(Error::Input(format!(
                "--mode: {m:?} is none of interrupt, polling, two-level"
            )))
        }
    };
    let mut run = run;
    let hand_limit = run.cycle_limit.is_some();
    if let Some(spec) = &a.slo {
        let slo = rxsched_core::Slo::parse(spec).map_err(|e| Error::flag("slo", e.0))?;
        if mode == Mode::Interrupt || a.cpus.is_some() {
            return Err(Error::Input(
                "--slo sets one polling thread's quota and cycle limit (and with --mode two-level the switch's marks): --mode polling or two-level, without --cpus".into(),
            ));
        }
        if mode == Mode::TwoLevel
            && (a.two_level_threshold.is_some()
                || a.two_level_return_below.is_some()
                || a.two_level_detector != "cpu")
        {
            return Err(Error::Input(
                "--slo with --mode two-level sets the switch's detector (the receive work's share of the CPU), threshold and return mark itself: drop --two-level-detector, --two-level-threshold and --two-level-return-below".into(),
            ));
        }
        // M4 charges all the router's CPU; the objective steers it.
        run.cycle_limit = Some(slo.cpu);
        run.slo = Some(slo);
    }
    let routes = routes(a)?;
    let feedback = a.feedback.as_deref().map(feedback).transpose()?;
    timeout_ms("feedback-timeout-ms", a.feedback_timeout_ms)?;
    let screen = a
        .screen
        .as_ref()
        .map(|p| screen(p, a.screen_queue))
        .transpose()?;
    let two_level = two_level_config(a)?;
    let slice_ns = match a.slice_us {
        Some(_) if !a.time_shared || mode != Mode::Polling || a.cpus.is_some() => {
            return Err(Error::Input(
                "--slice-us is the slice of a time-shared polling thread: --mode polling --time-shared, without --cpus".into(),
            ))
        }
        Some(us) if !(MIN_NS..=MAX_NS).contains(&us.saturating_mul(1000)) => {
            return Err(Error::flag(
                "slice-us",
                format!("{us} µs is outside the slices the kernel keeps (100 to 100,000 µs)"),
            ))
        }
        Some(us) => Some(us * 1000),
        None if a.time_shared && mode == Mode::Polling => run.slo.map(|s| slo_slice_ns(&s)),
        None => None,
    };
    if mode != Mode::Polling && (feedback.is_some() || hand_limit) {
        return Err(Error::Input(
            "--feedback and --cycle-limit belong to --mode polling".into(),
        ));
    }
    let cpus = match &a.cpus {
        Some(l) if run.cpu.is_some() => {
            return Err(Error::Input(format!(
                "--cpus {l} and --cpu: give one or the other"
            )))
        }
        Some(l) => cpu_list(l)?,
        None => Vec::new(),
    };
    let cycle_limit_total = match a.cycle_limit_total {
        Some(_) if cpus.is_empty() => {
            return Err(Error::Input(
                "--cycle-limit-total caps the threads of --cpus together: give --cpus".into(),
            ))
        }
        Some(p) if !(p > 0.0 && p <= 100.0) => {
            return Err(Error::flag(
                "cycle-limit-total",
                format!("{p} is not a percentage in (0, 100]"),
            ))
        }
        p => p.map(|p| p / 100.0),
    };
    let protect = if a.protect_queue.is_none() && a.protect_rules.is_none() {
        None
    } else if mode == Mode::Interrupt || a.forward_in == "xdp" || !cpus.is_empty() {
        let flag = if a.protect_queue.is_some() {
            "--protect-queue"
        } else {
            "--protect-rules"
        };
        return Err(Error::Input(format!(
            "{flag} is for the polling thread that forwards in user space \
             (--mode polling or two-level, no --forward-in xdp, no --cpus)"
        )));
    } else if a.protect_quota == 0 {
        return Err(Error::flag("protect-quota", "must be at least 1 frame"));
    } else {
        let rules = match a.protect_rules.as_deref() {
            None | Some("default") => rxsched_linux::backend::Steer::default_rules(),
            Some(path) => Rules::load(path).map_err(|e| Error::Input(e.to_string()))?,
        };
        let xdp = run.backend == rxsched_linux::router::Backend::Xdp;
        if !xdp && a.protect_rules.is_some() {
            return Err(Error::flag(
                "protect-rules",
                "steers frames into AF_XDP sockets: it needs --backend xdp",
            ));
        }
        Some(Protect {
            queue: a.protect_queue,
            rules: xdp.then_some(rules),
            quota: rxsched_core::Quota::Limited(a.protect_quota),
        })
    };
    Ok(RouterConfig {
        run,
        ports: a.ports.clone(),
        routes,
        mode,
        feedback,
        feedback_timeout_ns: (a.feedback_timeout_ms * 1e6) as u64,
        screen,
        time_shared: a.time_shared,
        slice_ns,
        two_level,
        // 4.2BSD's ipintrq limit.
        input_queue: 50,
        out_queue: 256,
        in_xdp: a.forward_in == "xdp",
        cpus,
        cycle_limit_total,
        protect,
        metrics: None,
    })
}

/// `--cpus LIST`: CPUs and ranges, comma-separated (`1-3,5`), each online.
fn cpu_list(s: &str) -> Result<Vec<usize>> {
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let bad = |why: String| Error::Input(format!("--cpus {s:?}: {why}"));
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = match (a.trim().parse(), b.trim().parse()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => return Err(bad(format!("{part:?} is not a CPU or a range A-B"))),
        };
        if b >= online {
            return Err(bad(format!(
                "CPU {b} is not online (this host has {online})"
            )));
        }
        v.extend(a..=b);
    }
    if v.len() > 64 {
        return Err(bad("at most 64 threads".into()));
    }
    Ok(v)
}

/// `--route`s: none, and the kernel's tables give every next hop.
fn routes(a: &RouteArgs) -> Result<Vec<Route>> {
    a.routes
        .iter()
        .map(|r| Route::parse(r, &a.ports).map_err(|e| Error::Input(format!("--route {r:?}: {e}"))))
        .collect()
}

/// `--feedback HIGH,LOW`.
pub(super) fn feedback(s: &str) -> Result<(f64, f64)> {
    let v: Vec<f64> = s.split(',').filter_map(|x| x.trim().parse().ok()).collect();
    match v[..] {
        [hi, lo] if 0.0 < lo && lo < hi && hi <= 1.0 => Ok((hi, lo)),
        _ => Err(Error::Input(format!(
            "--feedback: {s:?} is not HIGH,LOW with 0 < LOW < HIGH <= 1"
        ))),
    }
}

/// `--screen RULES` with `--screen-queue`.
fn screen(path: &str, queue: u32) -> Result<ScreenConfig> {
    if !(1..=1 << 20).contains(&queue) {
        return Err(Error::flag(
            "screen-queue",
            "must be from 1 to 1048576 frames",
        ));
    }
    let rules = Rules::load(path).map_err(|e| Error::Input(e.to_string()))?;
    Ok(ScreenConfig {
        rules_path: path.to_string(),
        rules,
        queue,
        exe: std::env::current_exe()
            .map_err(|e| Error::Run(format!("cannot find own executable: {e}")))?,
    })
}

/// The two-level switch's settings from `route`'s flags.
fn two_level_config(a: &RouteArgs) -> Result<rxsched_linux::router::TwoLevelCfg> {
    use rxsched_core::Detector;
    let t = a.two_level_threshold;
    let detector = match a.two_level_detector.as_str() {
        "cpu" => Detector::CpuFraction(t.unwrap_or(0.5)),
        "queue" => Detector::QueueLength(t.unwrap_or(64.0)),
        "rate" => Detector::InterruptRate(t.unwrap_or(20_000.0)),
        d => {
            return Err(Error::flag(
                "two-level-detector",
                format!("{d:?} is none of cpu, queue, rate"),
            ))
        }
    };
    if let Some(v) = t {
        let ok = v.is_finite() && v > 0.0 && (a.two_level_detector != "cpu" || v < 1.0);
        if !ok {
            return Err(Error::flag(
                "two-level-threshold",
                "must be positive (a fraction below 1 for cpu)",
            ));
        }
    }
    positive("two-level-hold", a.two_level_hold)?;
    timeout_ms("two-level-window-ms", a.two_level_window_ms)?;
    if !(a.two_level_grace_ms.is_finite() && (0.0..=10_000.0).contains(&a.two_level_grace_ms)) {
        return Err(Error::flag("two-level-grace-ms", "must be 0 to 10,000 ms"));
    }
    if let Some(f) = a.two_level_return_below {
        if !(f.is_finite() && f > 0.0 && f <= 1.0) {
            return Err(Error::flag(
                "two-level-return-below",
                "a share of one CPU, above 0 and at most 1",
            ));
        }
    }
    let mut cfg = rxsched_linux::router::TwoLevelCfg {
        return_below: a.two_level_return_below,
        detector,
        hold_ns: (a.two_level_hold * 1e9) as u64,
        window_ns: (a.two_level_window_ms * 1e6) as u64,
        idle_grace_ns: (a.two_level_grace_ms * 1e6) as u64,
        slo: None,
    };
    // An objective sets the switch (`rxsched_core::Slo::switch_marks`):
    // polling once the receive work has been over its share for longer
    // than one of its windows; the return mark follows from the costs the
    // router measures. Judged over its whole window (four M4 periods), not
    // one period: M4 charges the real router in arrears, so a period after
    // one that ran over can be spent idle under a flood, and judged alone
    // it would send servicing back to interrupts.
    if let (Some(spec), "two-level") = (&a.slo, a.mode.as_str()) {
        let slo = rxsched_core::Slo::parse(spec).map_err(|e| Error::flag("slo", e.0))?;
        cfg.detector = Detector::CpuFraction(slo.cpu);
        cfg.hold_ns = rxsched_core::slo::WINDOW_NS;
        cfg.window_ns = rxsched_core::slo::WINDOW_NS;
        cfg.slo = Some(slo);
    }
    Ok(cfg)
}

/// `rxsched route`
pub fn route(a: RouteArgs) -> Result<()> {
    let mut cfg = router_config(&a)?;
    interfaces_exist("ports", &cfg.ports)?;
    let exporter = match a.metrics {
        None => None,
        Some(_) if !polling_router(&cfg) => {
            return Err(Error::flag(
                "metrics",
                "the counters are served by the router's polling threads: not with --mode interrupt on --backend packet",
            ))
        }
        addr => super::metrics("route", addr)?,
    };
    cfg.metrics = exporter.as_ref().map(|e| e.publisher());
    let r = rxsched_linux::router::run(&cfg)?;
    // The exporter serves the polling thread's last page until the report
    // is out: once the traffic has stopped it holds the report's counters.
    drop(exporter);
    json(&r)?;
    faulted(r.fault)
}

/// Whether `cfg`'s router forwards in a polling thread of the kind that
/// publishes metrics (every mode but the packet backend's interrupt mode,
/// which has its own receive thread).
fn polling_router(cfg: &RouterConfig) -> bool {
    cfg.mode != Mode::Interrupt || cfg.run.backend == rxsched_linux::router::Backend::Xdp
}

/// The slice a time-shared polling thread asks for under `--slo` (when
/// `--slice-us` does not say): its latency target, within the slices the
/// kernel keeps. The quota is chosen so that a wake-up and one round of
/// the loop fit in the target, so a slice of the target lets a whole round
/// run before the scheduler may hand the CPU to an equal, and no longer;
/// and a woken thread whose slice is shorter than the running process's
/// (1.4 ms by default here) preempts it at once rather than waiting for
/// that slice to end while its ring fills.
pub(crate) fn slo_slice_ns(slo: &rxsched_core::Slo) -> u64 {
    slo.latency_ns.clamp(MIN_NS, MAX_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_objectives_slice_is_its_latency_within_the_kernels_range() {
        let slice = |us: u64| slo_slice_ns(&rxsched_core::Slo::new(us * 1000, 0.5).unwrap());
        assert_eq!(slice(200), 200_000);
        assert_eq!(slice(40), MIN_NS, "below the kernel's shortest");
        assert_eq!(slice(2_000_000), MAX_NS, "above its longest");
    }
}
