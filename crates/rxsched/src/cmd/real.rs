//! The Linux dataplane commands: `lab`, `gen`, `sink`, `route`, `spin`.

use clap::{Args, Subcommand, ValueEnum};
use rxsched::error::{Error, Result};
use rxsched_core::Quota;
use rxsched_linux::lab::{self, D0, D1, G0, S0};
use rxsched_linux::router::{Backend, Mode, Route, RouterConfig};
use rxsched_linux::rules::Rules;
use rxsched_linux::screen::ScreenConfig;
use rxsched_linux::stage::StageFds;
use rxsched_linux::traffic::{Engine, GenConfig, SinkConfig};
use rxsched_linux::wire::Mac;

/// `rxsched lab ...`
#[derive(Subcommand)]
pub enum LabCmd {
    /// Build the three namespaces and their links (clears leftovers first).
    Up,
    /// Remove everything the lab made; harmless if nothing is there.
    Down,
    /// Show what exists, where receive work is steered, and per-CPU NET_RX counts.
    Status,
}

/// How frames are sent or received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// XDP programs: a live-frames generator, an XDP counter at the sink.
    Xdp,
    /// AF_PACKET: `sendmmsg` and a TPACKET_V3 ring (interfaces without XDP).
    Packet,
}

impl From<EngineArg> for Engine {
    fn from(e: EngineArg) -> Engine {
        match e {
            EngineArg::Xdp => Engine::Xdp,
            EngineArg::Packet => Engine::Packet,
        }
    }
}

/// `rxsched gen`
#[derive(Args)]
pub struct GenArgs {
    /// How to send.
    #[arg(long, value_enum, default_value = "xdp")]
    pub engine: EngineArg,
    /// Interface to send on.
    #[arg(long, default_value = "g0")]
    pub iface: String,
    /// Next hop's MAC (default: the lab's user-space router on the d0 link).
    #[arg(long)]
    pub dst_mac: Option<String>,
    /// Source address (default: the lab generator's).
    #[arg(long)]
    pub src_ip: Option<std::net::Ipv4Addr>,
    /// Destination address (default: the lab sink's).
    #[arg(long)]
    pub dst_ip: Option<std::net::Ipv4Addr>,
    /// Destination UDP port (the source port is 9000).
    #[arg(long, default_value_t = 9001)]
    pub dport: u16,
    /// Frames per second.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Frame size in bytes, without CRC: 62 (the probe's headers and stamp) to 1514 (a 1500-byte MTU).
    #[arg(long, default_value_t = 62)]
    pub size: usize,
    /// Stop after this many frames (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// Where the XDP engine's sink counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HookArg {
    /// At tc ingress: cheapest for frames that arrive as socket buffers.
    Tc,
    /// In XDP: cheapest for frames that arrive as XDP frames.
    Xdp,
}

/// `rxsched sink`
#[derive(Args)]
pub struct SinkArgs {
    /// How to receive.
    #[arg(long, value_enum, default_value = "xdp")]
    pub engine: EngineArg,
    /// Where the xdp engine counts.
    #[arg(long, value_enum, default_value = "tc")]
    pub hook: HookArg,
    /// Interface to receive on.
    #[arg(long, default_value = "s0")]
    pub iface: String,
    /// Stop after this many seconds at most.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop this long after the last frame.
    #[arg(long, default_value_t = 1.0)]
    pub idle: f64,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Time one probe in this many (a power of two) for the latency
    /// histogram: reading the clock is the xdp sink's dearest step, and a
    /// sample keeps it above 3 Mpps on one core. Counts stay exact.
    #[arg(long, default_value_t = 1, value_parser = power_of_two)]
    pub latency_every: u64,
}

/// A power of two from 1 to 65536.
fn power_of_two(s: &str) -> std::result::Result<u64, String> {
    let v: u64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_power_of_two() && v <= 65_536 {
        Ok(v)
    } else {
        Err(format!("{v} is not a power of two from 1 to 65536"))
    }
}

/// How the router reaches the devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// AF_XDP sockets fed by an XDP program, receive work in threaded NAPI.
    Xdp,
    /// AF_PACKET rings and sendmmsg (devices without XDP).
    Packet,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Backend {
        match b {
            BackendArg::Xdp => Backend::Xdp,
            BackendArg::Packet => Backend::Packet,
        }
    }
}

/// `--quota`: a positive count or `unlimited`.
fn quota(q: &str) -> Result<Quota> {
    Quota::parse(q).ok_or_else(|| {
        Error::flag(
            "quota",
            format!("{q:?} is not a positive count or unlimited"),
        )
    })
}

/// `--cycle-limit`: a percentage, as the share M4 takes.
fn cycle_limit(p: Option<f64>) -> Result<Option<f64>> {
    match p {
        Some(p) if !(p > 0.0 && p <= 100.0) => Err(Error::flag(
            "cycle-limit",
            format!("{p} is not a percentage in (0, 100]"),
        )),
        p => Ok(p.map(|p| p / 100.0)),
    }
}

/// `rxsched route`
#[derive(Args)]
pub struct RouteArgs {
    /// How to reach the devices.
    #[arg(long, value_enum, default_value = "xdp")]
    pub backend: BackendArg,
    /// The interfaces to forward between.
    #[arg(long, value_delimiter = ',', default_value = "d0,d1")]
    pub ports: Vec<String>,
    /// `PREFIX/LEN=IFACE@NEXTHOP_MAC`, repeatable (default: the lab's two networks).
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
    /// Polling: packets per callback, or `unlimited`.
    #[arg(long, default_value = "32")]
    pub quota: String,
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
    #[arg(long, value_name = "RULES")]
    pub screen: Option<String>,
    /// The screening queue's length, in frames.
    #[arg(long, default_value_t = 32)]
    pub screen_queue: u32,
    /// Polling: run time-shared like any process (and the receive threads
    /// too while it waits), not above every process.
    #[arg(long)]
    pub time_shared: bool,

    /// Polling, M4: percentage of each 10 ms that input may use.
    #[arg(long)]
    pub cycle_limit: Option<f64>,
    /// Polling, M4: what one wake-up of the router costs the task it
    /// interrupts, beyond CPU time, in ns (default: measured at start).
    #[arg(long)]
    pub wake_cost_ns: Option<u64>,
    /// Pin every thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Print live counters this often, in seconds (0: only on SIGUSR1).
    #[arg(long, default_value_t = 0.0)]
    pub stats_every: f64,
}

fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    rxsched::out::line(&serde_json::to_string(v).map_err(|e| Error::Run(e.to_string()))?)
}

/// Runs a lab command.
pub fn lab_cmd(c: LabCmd) -> Result<()> {
    match c {
        LabCmd::Up => {
            let l = lab::Lab::standard();
            l.up()?;
            eprintln!(
                "lab up: {}, {}, {}; generator on CPU {}, DUT receive work on CPU {}",
                l.ns(lab::Role::Gen),
                l.ns(lab::Role::Dut),
                l.ns(lab::Role::Sink),
                lab::GEN_CPU,
                lab::DUT_CPU
            );
        }
        LabCmd::Down => {
            lab::Lab::standard().down()?;
            eprintln!("lab down");
        }
        LabCmd::Status => rxsched::out::print(&lab::Lab::standard().status())?,
    }
    Ok(())
}

fn positive(name: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "--{name}: must be a positive number of seconds (at most a day), got {v}"
        )))
    }
}

/// `rxsched gen`
pub fn gen(a: GenArgs) -> Result<()> {
    positive("duration", a.duration)?;
    if !(a.rate.is_finite() && a.rate > 0.0) {
        return Err(Error::Input(format!(
            "--rate: must be a positive rate, got {}",
            a.rate
        )));
    }
    if !(62..=1514).contains(&a.size) {
        return Err(Error::Input(format!(
            "--size: must be 62 to 1514 bytes, got {}",
            a.size
        )));
    }
    let dst_mac = match &a.dst_mac {
        Some(m) => Mac::parse(m)
            .ok_or_else(|| Error::Input(format!("--dst-mac: {m:?} is not a MAC address")))?,
        None => lab::ROUTER_MAC,
    };
    let cfg = GenConfig {
        iface: a.iface,
        src_mac: None,
        dst_mac,
        src_ip: a.src_ip.map_or(G0.ip, |i| i.octets()),
        dst_ip: a.dst_ip.map_or(S0.ip, |i| i.octets()),
        dst_port: a.dport,
        rate_pps: a.rate,
        frame_bytes: a.size,
        count: a.count,
        duration_s: a.duration,
        cpu: a.cpu,
        engine: a.engine.into(),
    };
    json(&rxsched_linux::traffic::generate(&cfg)?)
}

/// `rxsched sink`
pub fn sink(a: SinkArgs) -> Result<()> {
    positive("duration", a.duration)?;
    positive("idle", a.idle)?;
    rxsched_linux::sys::signals::install();
    json(&rxsched_linux::traffic::sink(&SinkConfig {
        iface: a.iface,
        duration_s: a.duration,
        idle_s: a.idle,
        cpu: a.cpu,
        engine: a.engine.into(),
        tc_hook: a.hook == HookArg::Tc,
        latency_every: a.latency_every,
    })?)
}

/// The lab's routes, for `route` without `--route`.
pub fn lab_routes(ports: &[String]) -> Vec<Route> {
    [
        format!("198.19.0.0/24={}@{}", D1.iface, lab::SINK_TAP_MAC),
        format!("198.18.0.0/24={}@{}", D0.iface, G0.mac),
    ]
    .iter()
    .filter_map(|r| Route::parse(r, ports).ok())
    .collect()
}

/// Parses `route`'s arguments.
pub fn router_config(a: &RouteArgs) -> Result<RouterConfig> {
    positive("duration", a.duration)?;
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
    let quota = quota(&a.quota)?;
    let routes = if a.routes.is_empty() {
        lab_routes(&a.ports)
    } else {
        a.routes
            .iter()
            .map(|r| {
                Route::parse(r, &a.ports).map_err(|e| Error::Input(format!("--route {r:?}: {e}")))
            })
            .collect::<std::result::Result<_, _>>()?
    };
    if routes.is_empty() {
        return Err(Error::Input(format!(
            "no routes: the lab's routes use d0 and d1, which are not among --ports {}; give --route PREFIX/LEN=IFACE@MAC",
            a.ports.join(",")
        )));
    }
    let feedback = match &a.feedback {
        None => None,
        Some(s) => {
            let v: Vec<f64> = s.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            match v[..] {
                [hi, lo] if 0.0 < lo && lo < hi && hi <= 1.0 => Some((hi, lo)),
                _ => {
                    return Err(Error::Input(format!(
                        "--feedback: {s:?} is not HIGH,LOW with 0 < LOW < HIGH <= 1"
                    )))
                }
            }
        }
    };
    let cycle_limit = cycle_limit(a.cycle_limit)?;
    timeout_ms("feedback-timeout-ms", a.feedback_timeout_ms)?;
    let screen = match &a.screen {
        None => None,
        Some(path) => {
            if !(1..=1 << 20).contains(&a.screen_queue) {
                return Err(Error::flag(
                    "screen-queue",
                    "must be from 1 to 1048576 frames",
                ));
            }
            let rules = Rules::load(path).map_err(|e| Error::Input(e.to_string()))?;
            Some(ScreenConfig {
                rules_path: path.clone(),
                rules,
                queue: a.screen_queue,
                exe: std::env::current_exe()
                    .map_err(|e| Error::Run(format!("cannot find own executable: {e}")))?,
            })
        }
    };
    let two_level = two_level_config(a)?;
    stats_every(a.stats_every)?;
    if mode != Mode::Polling && (feedback.is_some() || a.cycle_limit.is_some()) {
        return Err(Error::Input(
            "--feedback and --cycle-limit belong to --mode polling".into(),
        ));
    }
    Ok(RouterConfig {
        backend: a.backend.into(),
        ports: a.ports.clone(),
        routes,
        mode,
        quota,
        feedback,
        feedback_timeout_ns: (a.feedback_timeout_ms * 1e6) as u64,
        screen,
        time_shared: a.time_shared,
        two_level,
        cycle_limit,
        wake_cost_ns: a.wake_cost_ns,
        cpu: a.cpu,
        duration_s: a.duration,
        stats_every_s: a.stats_every.max(0.0),
        // 4.2BSD's ipintrq limit.
        input_queue: 50,
        out_queue: 256,
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
    Ok(rxsched_linux::router::TwoLevelCfg {
        return_below: a.two_level_return_below,
        detector,
        hold_ns: (a.two_level_hold * 1e9) as u64,
        window_ns: (a.two_level_window_ms * 1e6) as u64,
        idle_grace_ns: (a.two_level_grace_ms * 1e6) as u64,
    })
}

/// `--stats-every`: 0 (only on SIGUSR1), or a period of at least 10 ms.
fn stats_every(s: f64) -> Result<()> {
    if s.is_finite() && (s == 0.0 || (0.01..=86_400.0).contains(&s)) {
        Ok(())
    } else {
        Err(Error::flag(
            "stats-every",
            format!("{s} is neither 0 nor a period of 0.01 s to a day"),
        ))
    }
}

/// Every interface named exists here (in this network namespace).
fn interfaces_exist(flag: &str, names: &[String]) -> Result<()> {
    for n in names {
        rxsched_linux::sys::ifindex(n)
            .map_err(|_| Error::flag(flag, format!("{n}: no such interface here")))?;
    }
    Ok(())
}

/// An inhibit's timeout flag: a positive time of at most 10 s.
fn timeout_ms(flag: &str, ms: f64) -> Result<()> {
    if ms.is_finite() && ms > 0.0 && ms <= 10_000.0 {
        Ok(())
    } else {
        Err(Error::flag(flag, "must be a positive time of at most 10 s"))
    }
}

/// `rxsched serve`
#[derive(Args)]
pub struct ServeArgs {
    /// The interface to receive on.
    #[arg(short = 'i', long = "interface")]
    pub iface: String,
    /// A consumer: `PORT` or `PORT:NAME`, its UDP destination port;
    /// repeatable (at least one).
    #[arg(long = "consumer", required = true)]
    pub consumers: Vec<String>,
    /// Each consumer's unprocessed input queue, in frames.
    #[arg(long, default_value_t = 256)]
    pub uiq: u32,
    /// How to reach the device.
    #[arg(long, value_enum, default_value = "xdp")]
    pub backend: BackendArg,
    /// Frames per polling callback, or `unlimited`.
    #[arg(long, default_value = "32")]
    pub quota: String,
    /// M4: percentage of each 10 ms that the demultiplexer may use.
    #[arg(long)]
    pub cycle_limit: Option<f64>,
    /// M4: what one wake-up costs, beyond CPU time, in ns (default: measured).
    #[arg(long)]
    pub wake_cost_ns: Option<u64>,
    /// Pin the polling thread and every consumer to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Print live counters this often, in seconds (0: only on SIGUSR1).
    #[arg(long, default_value_t = 0.0)]
    pub stats_every: f64,
}

/// `rxsched serve`
pub fn serve(a: ServeArgs) -> Result<()> {
    positive("duration", a.duration)?;
    stats_every(a.stats_every)?;
    if !(1..=1 << 20).contains(&a.uiq) {
        return Err(Error::flag("uiq", "must be from 1 to 1048576 frames"));
    }
    let mut consumers = Vec::new();
    for c in &a.consumers {
        let (port, name) = match c.split_once(':') {
            Some((p, n)) => (p, n.to_string()),
            None => (c.as_str(), format!("port-{c}")),
        };
        let port: u16 = port.parse().ok().filter(|p| *p > 0).ok_or_else(|| {
            Error::flag(
                "consumer",
                format!("{c:?}: {port:?} is not a UDP port 1-65535"),
            )
        })?;
        if consumers
            .iter()
            .any(|x: &rxsched_linux::serve::ConsumerCfg| x.port == port)
        {
            return Err(Error::flag(
                "consumer",
                format!("port {port} is given twice"),
            ));
        }
        consumers.push(rxsched_linux::serve::ConsumerCfg { port, name });
    }
    let cfg = rxsched_linux::serve::ServeConfig {
        backend: a.backend.into(),
        iface: a.iface,
        consumers,
        uiq: a.uiq,
        quota: quota(&a.quota)?,
        cycle_limit: cycle_limit(a.cycle_limit)?,
        wake_cost_ns: a.wake_cost_ns,
        cpu: a.cpu,
        duration_s: a.duration,
        stats_every_s: a.stats_every,
        exe: std::env::current_exe()
            .map_err(|e| Error::Run(format!("cannot find own executable: {e}")))?,
    };
    let r = rxsched_linux::serve::run(&cfg)?;
    json(&r)?;
    faulted(r.fault)
}

/// `rxsched onoff`
pub fn onoff(cpu: Option<usize>, on_ms: f64, off_ms: f64, duration: f64) -> Result<()> {
    positive("duration", duration)?;
    for (flag, v) in [("on-ms", on_ms), ("off-ms", off_ms)] {
        if !(v.is_finite() && v > 0.0 && v <= 10_000.0) {
            return Err(Error::flag(flag, "must be a positive time of at most 10 s"));
        }
    }
    rxsched_linux::sys::signals::install();
    json(&rxsched_linux::spin::onoff(cpu, on_ms, off_ms, duration)?)
}

/// `rxsched udp-recv`
pub fn udp_recv(port: u16, rcvbuf: u32, cpu: Option<usize>, duration: f64) -> Result<()> {
    positive("duration", duration)?;
    json(&rxsched_linux::udprecv::run(port, rcvbuf, cpu, duration)?)
}

/// `rxsched consume` (started by `serve`)
pub fn consume(stage: &str, cpu: Option<usize>) -> Result<()> {
    let fds = StageFds::parse(stage)
        .ok_or_else(|| Error::flag("stage", format!("{stage:?} is not REGION,IN,OUT")))?;
    rxsched_linux::serve::consumer_main(fds, cpu).map_err(Error::Run)
}

/// `rxsched screend` (started by `route --screen`)
#[derive(Args)]
pub struct ScreendArgs {
    /// The queue's descriptors, `REGION,TO_CONSUMER,TO_PRODUCER`.
    #[arg(long)]
    pub stage: String,
    /// The rule file.
    #[arg(long)]
    pub rules: String,
    /// The router's ports, in its order.
    #[arg(long, value_delimiter = ',')]
    pub ports: Vec<String>,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// `rxsched screend`
pub fn screend(a: ScreendArgs) -> Result<()> {
    let fds = StageFds::parse(&a.stage)
        .ok_or_else(|| Error::flag("stage", format!("{:?} is not REGION,IN,OUT", a.stage)))?;
    rxsched_linux::screen::process_main(fds, &a.rules, &a.ports, a.cpu).map_err(Error::Run)
}

/// `rxsched route`
pub fn route(a: RouteArgs) -> Result<()> {
    let cfg = router_config(&a)?;
    interfaces_exist("ports", &cfg.ports)?;
    let r = rxsched_linux::router::run(&cfg)?;
    json(&r)?;
    faulted(r.fault)
}

/// After the report: a run that ended early on a fault fails (exit 1).
fn faulted(fault: Option<String>) -> Result<()> {
    match fault {
        Some(f) => Err(Error::Run(f)),
        None => Ok(()),
    }
}

/// `rxsched capture`
#[derive(Args)]
pub struct CaptureArgs {
    /// The interface to watch.
    #[arg(short = 'i', long = "interface")]
    pub iface: String,
    /// The pcap file to write (`/dev/null` to discard).
    #[arg(short = 'w', long = "write")]
    pub out: std::path::PathBuf,
    /// Stop after this many seconds (or at SIGINT/SIGTERM; the file is
    /// complete either way).
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Bytes kept of each frame, like tcpdump's `-s`.
    #[arg(short = 's', long, default_value_t = 262_144)]
    pub snaplen: u32,
    /// A rule file (the `route --screen` language): frames it denies are
    /// not captured, and are counted by rule.
    #[arg(long)]
    pub filter: Option<String>,
    /// How to reach the device.
    #[arg(long, value_enum, default_value = "xdp")]
    pub backend: BackendArg,
    /// Frames per polling callback, or `unlimited`.
    #[arg(long, default_value = "32")]
    pub quota: String,
    /// The packet-filter queue's length, in frames. The paper's monitor
    /// had 32 (with `--resume-at timeout`); here a writer empties 32
    /// slots in microseconds, and a longer queue lets each wake-up of it
    /// write more.
    #[arg(long, default_value_t = 1024)]
    pub queue: usize,
    /// M3: inhibit input while fewer than this many queue slots are free.
    #[arg(long, default_value_t = 8)]
    pub min_free: u32,
    /// M3: input resumes when the writer has drained the queue to this
    /// many frames (default: a quarter of the queue), or `timeout`: only
    /// the timeout ends an inhibit, as in the paper's monitor.
    #[arg(long)]
    pub resume_at: Option<String>,
    /// M3: an inhibit ends after this long at the latest, in ms.
    #[arg(long, default_value_t = 1.0)]
    pub timeout_ms: f64,
    /// Turn queue-state feedback off: the queue overflows instead.
    #[arg(long)]
    pub no_feedback: bool,
    /// M4: percentage of each 10 ms that input may use.
    #[arg(long)]
    pub cycle_limit: Option<f64>,
    /// M4: what one wake-up costs the task it interrupts, beyond CPU time,
    /// in ns (default: measured at start).
    #[arg(long)]
    pub wake_cost_ns: Option<u64>,
    /// Pin both threads to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Print live counters this often, in seconds (0: only on SIGUSR1).
    #[arg(long, default_value_t = 0.0)]
    pub stats_every: f64,
}

/// The monitor's configuration from its flags.
pub fn capture_config(a: &CaptureArgs) -> Result<rxsched_linux::capture::CaptureConfig> {
    positive("duration", a.duration)?;
    let quota = quota(&a.quota)?;
    if !(1..=1 << 20).contains(&a.queue) {
        return Err(Error::flag("queue", "must be from 1 to 1048576 frames"));
    }
    if a.min_free as usize >= a.queue {
        return Err(Error::flag(
            "min-free",
            format!("must be below the queue length {}", a.queue),
        ));
    }
    timeout_ms("timeout-ms", a.timeout_ms)?;
    let inhibit_at = a.queue - a.min_free as usize;
    let resume_at = match a.resume_at.as_deref() {
        None => Some((a.queue / 4).min(inhibit_at) as u32),
        Some("timeout") => None,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if n < inhibit_at => Some(n as u32),
            _ => {
                return Err(Error::flag(
                    "resume-at",
                    format!(
                        "{n:?} is neither `timeout` nor a count of frames below the inhibit level {inhibit_at}"
                    ),
                ))
            }
        },
    };
    if a.snaplen == 0 {
        return Err(Error::flag("snaplen", "must be at least 1"));
    }
    let cycle_limit = cycle_limit(a.cycle_limit)?;
    stats_every(a.stats_every)?;
    let filter = match &a.filter {
        None => None,
        Some(f) => Some(Rules::load(f).map_err(|e| Error::Input(e.to_string()))?),
    };
    Ok(rxsched_linux::capture::CaptureConfig {
        backend: a.backend.into(),
        iface: a.iface.clone(),
        out: a.out.clone(),
        snaplen: a.snaplen,
        filter,
        quota,
        queue: a.queue,
        min_free: (!a.no_feedback).then_some(a.min_free),
        resume_at,
        timeout_ns: (a.timeout_ms * 1e6) as u64,
        cycle_limit,
        wake_cost_ns: a.wake_cost_ns,
        cpu: a.cpu,
        duration_s: a.duration,
        stats_every_s: a.stats_every,
    })
}

/// `rxsched capture`
pub fn capture(a: CaptureArgs) -> Result<()> {
    let cfg = capture_config(&a)?;
    interfaces_exist("interface", std::slice::from_ref(&cfg.iface))?;
    let r = rxsched_linux::capture::run(&cfg)?;
    json(&r)?;
    faulted(r.fault)
}

/// `rxsched xdp-fwd`
pub fn xdp_fwd(ports: &[String], duration: f64) -> Result<()> {
    positive("duration", duration)?;
    json(&rxsched_linux::xdpfwd::run(ports, duration)?)
}

/// `rxsched spin`
pub fn spin(cpu: Option<usize>, duration: f64) -> Result<()> {
    positive("duration", duration)?;
    rxsched_linux::sys::signals::install();
    json(&rxsched_linux::spin::spin(cpu, duration)?)
}
