//! One trial of the real dataplane in the lab: a forwarder on the DUT, the
//! compute process beside it on the DUT CPU, the XDP sink and generator,
//! and every counter read before and after.

use crate::result::Point;
use rxsched_linux::lab::{self, Lab, Role, D0, D1, DUT_CPU, GEN_CPU, S0};
use rxsched_sim::metrics::Latency;
use rxsched_sim::Metrics;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Something went wrong running a process of the benchmark.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

/// A check file that does not load (a build with a malformed one: its own
/// test fails first).
impl From<rxsched_sim::InputError> for BenchError {
    fn from(e: rxsched_sim::InputError) -> Self {
        BenchError(e.to_string())
    }
}

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
        }
    }

    /// The command that forwards for `secs`, if it is a process of ours;
    /// M4 charges `wake_cost_ns` per wake-up; `extra` goes on the end of a
    /// `route` command.
    fn command(self, secs: f64, wake_cost_ns: u64, extra: &[String]) -> Option<Vec<String>> {
        let d = secs.to_string();
        let wake = wake_cost_ns.to_string();
        let cpu = DUT_CPU.to_string();
        let route = |extra_mode: &[&str]| {
            let mut v = strings(&["route", "--backend", "xdp", "--cpu", &cpu, "--duration", &d]);
            v.extend(strings(extra_mode));
            v.extend(extra.iter().cloned());
            Some(v)
        };
        match self {
            Forwarder::Kernel => None,
            Forwarder::XdpFwd => Some(strings(&["xdp-fwd", "--ports", D0.iface, "--duration", &d])),
            Forwarder::Interrupt => route(&["--mode", "interrupt"]),
            Forwarder::Polling => route(&["--mode", "polling"]),
            Forwarder::PollingLimit50 => route(&[
                "--mode",
                "polling",
                "--cycle-limit",
                "50",
                "--wake-cost-ns",
                &wake,
            ]),
        }
    }

    /// The kernel forwards (or looks routes up) for these.
    fn kernel_forwarding(self) -> bool {
        matches!(self, Forwarder::Kernel | Forwarder::XdpFwd)
    }

    /// Where the generator addresses frames: the DUT kernel's own MAC, or
    /// the user-space router's (which the kernel would drop at once).
    fn dst_mac(self) -> String {
        if self.kernel_forwarding() {
            D0.mac.to_string()
        } else {
            lab::ROUTER_MAC.to_string()
        }
    }
}

pub(super) fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

/// Starts `rxsched ARGS` in a role's namespace.
pub fn spawn(lab: &Lab, role: Role, args: &[String]) -> Result<Child, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError(format!("cannot find own executable: {e}")))?;
    Command::new("ip")
        .args(["netns", "exec", &lab.ns(role)])
        .arg(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError(format!("ip netns exec {}: {e}", lab.ns(role))))
}

/// Waits for a process and reads the JSON report it printed last.
pub fn finish(child: Child, what: &str) -> Result<Value, BenchError> {
    let out = child
        .wait_with_output()
        .map_err(|e| BenchError(format!("{what}: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("")).map_err(|_| {
        BenchError(format!(
            "{what} gave no report (exit {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    })
}

/// Asks a process of ours to stop (SIGTERM, by its pid).
pub fn stop(child: &Child) {
    // SAFETY: signalling a child process this benchmark started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

/// A number from a report.
pub fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Counters of the DUT and the sink link, read together.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counters {
    /// CPU time of the forwarder's main thread (our router's polling or
    /// forwarding thread), if it is ours.
    router_ns: u64,
    /// d0's `rx_dropped`: its veth ring (and, with AF_XDP, the socket's).
    d0_dropped: u64,
    /// d1's `tx_dropped`: frames the sink's ring refused.
    d1_dropped: u64,
    /// CPU time of the DUT's receive threads.
    napi_ns: u64,
}

pub(super) fn counters(lab: &Lab, router: Option<&Child>) -> Result<Counters, BenchError> {
    // `ip netns exec` execs the command: the child's pid is the router's.
    let router_ns = router
        .and_then(|c| rxsched_linux::napi::cpu_ns(c.id() as i32).ok())
        .unwrap_or(0);
    lab.in_netns(Role::Dut, || {
        let mut napi_ns = 0;
        for i in [D0.iface, D1.iface] {
            for t in rxsched_linux::napi::thread_ids(i)? {
                napi_ns += rxsched_linux::napi::cpu_ns(t)?;
            }
        }
        Ok(Counters {
            router_ns,
            d0_dropped: rxsched_linux::sys::iface_counter(D0.iface, "rx_dropped")?,
            d1_dropped: rxsched_linux::sys::iface_counter(D1.iface, "tx_dropped")?,
            napi_ns,
        })
    })
    .map_err(|e| BenchError(e.to_string()))
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
    let c = spawn(lab, Role::Dut, &spin_args(secs))?;
    let r = finish(c, "spin")?;
    let wake = std::thread::spawn(|| {
        (0..3)
            .map(|_| rxsched_linux::wakecost::measure(DUT_CPU))
            .collect::<Result<Vec<u64>, _>>()
    })
    .join()
    .map_err(|_| BenchError("the wake-up cost measurement panicked".into()))?;
    let mut wake = wake.map_err(|e| BenchError(e.to_string()))?;
    wake.sort_unstable();
    Ok(Dut {
        idle: f(&r, "progress_rate"),
        wake_cost_ns: wake[1],
    })
}

fn spin_args(secs: f64) -> Vec<String> {
    strings(&[
        "spin",
        "--cpu",
        &DUT_CPU.to_string(),
        "--duration",
        &secs.to_string(),
    ])
}

/// One point: `fwd` forwarding while the generator offers `rate` for
/// `secs`, with the compute process on the DUT CPU, compared with `dut`.
pub fn run(
    lab: &Lab,
    fwd: Forwarder,
    rate: f64,
    secs: f64,
    dut: &Dut,
) -> Result<Point, BenchError> {
    run_with(lab, fwd, &[], rate, secs, dut)
}

/// [`run`], with `extra` arguments for our router (`--screen RULES`, ...).
pub fn run_with(
    lab: &Lab,
    fwd: Forwarder,
    extra: &[String],
    rate: f64,
    secs: f64,
    dut: &Dut,
) -> Result<Point, BenchError> {
    let idle = dut.idle;
    let io = |e: lab::LabError| BenchError(e.to_string());
    lab.reset_dut_receive().map_err(io)?;
    lab.set_kernel_forwarding(fwd.kernel_forwarding())
        .map_err(io)?;
    let router = match fwd.command(secs + 6.0, dut.wake_cost_ns, extra) {
        Some(args) => Some(spawn(lab, Role::Dut, &args)?),
        None => None,
    };
    let gen_cpu = GEN_CPU.to_string();
    let sink_args = [
        "sink",
        "--cpu",
        &gen_cpu,
        "--duration",
        &(secs + 5.0).to_string(),
        "--idle",
        "0.5",
    ];
    let sink = spawn(lab, Role::Sink, &strings(&sink_args))?;
    // Let the sink and the forwarder attach their programs.
    std::thread::sleep(Duration::from_millis(500));
    let c0 = counters(lab, router.as_ref())?;
    let s0_drops0 = lab_counter(lab, Role::Sink, S0.iface, "rx_dropped");
    let spin = spawn(lab, Role::Dut, &spin_args(secs))?;
    let gen_args = [
        "gen",
        "--cpu",
        &gen_cpu,
        "--rate",
        &rate.to_string(),
        "--duration",
        &secs.to_string(),
        "--dst-mac",
        &fwd.dst_mac(),
    ];
    let g = finish(spawn(lab, Role::Gen, &strings(&gen_args))?, "gen")?;
    let sp = finish(spin, "spin")?;
    let sk = finish(sink, "sink")?;
    let c1 = counters(lab, router.as_ref())?;
    let s0_drops = lab_counter(lab, Role::Sink, S0.iface, "rx_dropped").saturating_sub(s0_drops0);
    let rt = match router {
        Some(c) => {
            stop(&c);
            Some(finish(c, fwd.label())?)
        }
        None => None,
    };
    let mut m = metrics(&g, &sk, rt.as_ref());
    dut_drops(&mut m, &c0, &c1, s0_drops, !fwd.kernel_forwarding());
    // Progress per second the hypervisor left the DUT CPU, against the
    // same on an idle DUT; the raw figure (per wall second) is kept too.
    let compute = (f(&sp, "progress_rate") / idle).clamp(0.0, 1.0);
    m.cpu.insert("user:compute".to_string(), compute);
    let raw = f(&sp, "iterations") / f(&sp, "duration_s").max(1e-9) / idle;
    m.extra
        .insert("compute_progress_wall".into(), raw.clamp(0.0, 1.0));
    m.extra.insert(
        "dut_steal_share".into(),
        f(&sp, "steal_s") / f(&sp, "duration_s").max(1e-9),
    );
    m.extra
        .insert("compute_cpu_time_share".into(), f(&sp, "cpu_share"));
    let dur = f(&g, "duration_s").max(1e-9);
    let share = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / 1e9 / dur;
    m.extra
        .insert("napi_cpu_share".into(), share(c0.napi_ns, c1.napi_ns));
    if rt.is_some() {
        m.cpu
            .insert("router".to_string(), share(c0.router_ns, c1.router_ns));
    }
    m.extra.insert("requested_pps".into(), rate);
    Ok(Point::of(&m))
}

pub(super) fn lab_counter(lab: &Lab, role: Role, iface: &str, name: &str) -> u64 {
    lab.in_netns(role, || rxsched_linux::sys::iface_counter(iface, name))
        .unwrap_or(0)
}

/// The record of a point from the generator's, sink's and router's reports.
pub(super) fn metrics(g: &Value, sk: &Value, rt: Option<&Value>) -> Metrics {
    let sent = f(g, "sent") as u64;
    let delivered = (f(sk, "received") as u64).min(sent);
    let dur = f(g, "duration_s").max(1e-9);
    let l = &sk["latency_us"];
    let mut m = Metrics {
        offered_pps: f(g, "achieved_pps"),
        delivered_pps: delivered as f64 / dur,
        arrived: sent,
        received: sent,
        delivered,
        latency_us: Latency {
            p50: f(l, "p50"),
            p90: f(l, "p90"),
            p99: f(l, "p99"),
            max: f(l, "max"),
        },
        ..Metrics::default()
    };
    m.extra.insert("sink_reordered".into(), f(sk, "reordered"));
    m.extra.insert("gen_waits".into(), f(g, "waits"));
    if let Some(r) = rt {
        m.mode_switches = f(r, "mode_switches") as u64;
        if let Some(w) = r.get("wake_cost_ns").and_then(Value::as_f64) {
            m.extra.insert("wake_cost_ns".into(), w);
        }
        if let Some(o) = r.get("inhibits").and_then(Value::as_object) {
            m.inhibits = o
                .iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect();
        }
        if let Some(o) = r.get("drops").and_then(Value::as_object) {
            for (k, v) in o {
                let n = v.as_u64().unwrap_or(0);
                if n > 0 {
                    m.drops.insert(k.clone(), n);
                }
            }
        }
    }
    m
}

/// Drops the kernel counted, where no router of ours did, and what no
/// counter claims (so that `arrived = delivered + drops`).
/// `ours`: a router of ours forwarded, and has split `d0`'s drops itself.
pub(super) fn dut_drops(m: &mut Metrics, c0: &Counters, c1: &Counters, s0_drops: u64, ours: bool) {
    let mut add = |k: &str, n: u64| {
        if n > 0 {
            *m.drops.entry(k.to_string()).or_insert(0) += n;
        }
    };
    if !ours {
        // With our router, d0's drops are already split into ring and socket.
        add("nic_rx_ring", c1.d0_dropped.saturating_sub(c0.d0_dropped));
    }
    add(
        "output_link",
        c1.d1_dropped.saturating_sub(c0.d1_dropped) + s0_drops,
    );
    let named: u64 = m.drops.values().sum();
    let rest = m.arrived.saturating_sub(m.delivered).saturating_sub(named);
    if rest > 0 {
        m.drops.insert("unattributed".into(), rest);
    }
    let over = (m.delivered + m.drops.values().sum::<u64>()).saturating_sub(m.arrived);
    if over > 0 {
        // Counters that overlap (frames counted at two points, or still
        // queued when a counter was read) are trimmed from the largest.
        if let Some((_, v)) = m.drops.iter_mut().max_by_key(|(_, v)| **v) {
            *v -= over.min(*v);
        }
    }
    m.drops.retain(|_, v| *v > 0);
}

/// The polling router's CPU use, its receive threads' included, with no traffic.
pub fn idle_cpu(lab: &Lab, secs: f64) -> Result<f64, BenchError> {
    lab.reset_dut_receive()
        .map_err(|e| BenchError(e.to_string()))?;
    let c0 = counters(lab, None)?;
    let r = finish(
        spawn(
            lab,
            Role::Dut,
            &Forwarder::Polling.command(secs, 0, &[]).expect("a router"),
        )?,
        "route",
    )?;
    let c1 = counters(lab, None)?;
    let napi = (c1.napi_ns.saturating_sub(c0.napi_ns)) as f64 / 1e9;
    Ok((f(&r, "cpu_s") + napi) / f(&r, "duration_s").max(1e-9))
}

/// One measurement of the lab itself: the generator as fast as it goes
/// from `g0`, the sink counting on `d0` in XDP (on the DUT CPU, alone),
/// timing one probe in `latency_every`. Nothing forwards.
pub fn lab_capacity(lab: &Lab, latency_every: u64, secs: f64) -> Result<Point, BenchError> {
    let sink_args = strings(&[
        "sink",
        "--iface",
        D0.iface,
        "--hook",
        "xdp",
        "--cpu",
        &DUT_CPU.to_string(),
        "--latency-every",
        &latency_every.to_string(),
        "--duration",
        &(secs + 5.0).to_string(),
        "--idle",
        "0.5",
    ]);
    let sink = spawn(lab, Role::Dut, &sink_args)?;
    std::thread::sleep(Duration::from_millis(500));
    let gen_args = strings(&[
        "gen",
        "--cpu",
        &GEN_CPU.to_string(),
        "--rate",
        "1e9",
        "--duration",
        &secs.to_string(),
        "--dst-mac",
        &D0.mac.to_string(),
    ]);
    let g = finish(spawn(lab, Role::Gen, &gen_args)?, "gen")?;
    let sk = finish(sink, "sink")?;
    let dur = f(&g, "duration_s").max(1e-9);
    let mut p = Point::xy(
        "offered_pps",
        f(&g, "achieved_pps"),
        "delivered_pps",
        f(&sk, "received") / dur,
    );
    p.set("latency_samples", f(&sk, "latency_samples"));
    p.set("sink_lost", f(&sk, "lost"));
    Ok(p)
}
