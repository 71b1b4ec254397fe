//! `rxsched route`: IPv4 forwarding between interfaces, with the receive
//! scheduling of either the interrupt-driven baseline (M1, [`interrupt`])
//! or the polling facility from `rxsched-core` (M2 with M3 and M4,
//! [`polling`], on the runtime's polling thread), or the two-level switch
//! between them ([`two_level`], M11). All are generic over the packet
//! backends, the clock and the way a thread waits, so that the same loops
//! run on AF_XDP and AF_PACKET sockets and, in tests, in memory with a fake
//! clock.

pub mod forward;
pub mod interrupt;
pub mod live;
pub mod polling;
pub mod report;
mod stage_cost;
pub mod threads;
pub mod two_level;

pub use crate::runtime::{Backend, Port};
pub use forward::{forward_in_place, forward_one, Egress, Onward, OutQueue, Refused, Route};
pub use live::{live_line, Stats};
pub use report::{
    Counters, DeviceRefusals, Devices, ProtectedReport, QueueTaken, RouterReport, ScreenAt,
    ScreenReport, SloChange, SloReport, TwoLevelReport, REASONS,
};

use crate::backend::packet::EpollWait;
use crate::links::LinkWatch;
use crate::rules::Rules;
use crate::runtime::{Feed, RunConfig, Servicing};
use crate::screen::{ScreenConfig, Screend};
use crate::stage::StageQueue;
use crate::sys::{self, SysError, SysResult};
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The queue a protected socket on a shared queue stands for in the
/// gate's order of receive work: none (it has no receive thread of its
/// own; its queue's serves it).
const STEERED_SIDE: u32 = u32::MAX;

/// Receive scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// M1: a SCHED_FIFO receive thread fills a bounded input queue that a
    /// normal-priority forwarding thread on the same CPU drains.
    Interrupt,
    /// M2: one thread driven by the polling facility.
    Polling,
    /// M11: interrupt-driven servicing until the receive work stays over
    /// a threshold for longer than a hold time, then polling, and back to
    /// interrupts when polling runs out of work (XDP backend).
    TwoLevel,
}

impl Mode {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Interrupt => "interrupt",
            Mode::Polling => "polling",
            Mode::TwoLevel => "two-level",
        }
    }
}

/// A router's configuration.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// What every command on real devices is configured with: backend,
    /// quota, M4, CPU, duration, live counters.
    pub run: RunConfig,
    /// The interfaces (ports).
    pub ports: Vec<String>,
    /// The routing table.
    pub routes: Vec<Route>,
    /// Receive scheduling.
    pub mode: Mode,
    /// Polling, M3: inhibit input while the watched queue (the screening
    /// queue with `screen`, else an output queue) is this full, as a
    /// fraction of its length; resume at the second; `None`: off.
    pub feedback: Option<(f64, f64)>,
    /// Polling, M3: an inhibit ends after this long at most, in ns
    /// (Mogul & Ramakrishnan 1996 §6.6.1: one clock tick, about 1 ms).
    pub feedback_timeout_ns: u64,
    /// Forwarded frames pass a screening process first (`--screen`).
    pub screen: Option<ScreenConfig>,
    /// Two-level: what counts as overload, the hold time and the window it
    /// is judged over.
    pub two_level: TwoLevelCfg,
    /// Polling: the thread runs time-shared (SCHED_OTHER) like any process,
    /// and the receive threads too while it waits, instead of above every
    /// process: forwarding as a system process under a share (SRP's
    /// gateway stage), rather than a kernel thread.
    pub time_shared: bool,
    /// Time-shared: the slice the polling thread and the receive threads
    /// ask for, in ns (`route --slice-us`; `None`: the kernel's default).
    pub slice_ns: Option<u64>,
    /// Interrupt mode: the input queue's limit (4.2BSD `ipintrq`: 50).
    pub input_queue: usize,
    /// Frames waiting to be sent per port, at most.
    pub out_queue: usize,
    /// Forward in the devices' XDP program, the thread keeping the policy
    /// ([`crate::backend::in_xdp`]); else in user space.
    pub in_xdp: bool,
    /// One polling thread per CPU listed (a CPU may be listed twice), the
    /// receive queues dealt out to them ([`threads`]); empty: one thread.
    pub cpus: Vec<usize>,
    /// With `cpus`: M4 for the whole router, a share of one CPU split
    /// evenly over the threads.
    pub cycle_limit_total: Option<f64>,
    /// Polling: protected traffic, served first and capped
    /// ([`rxsched_core::PollingFacility::register_protected`]).
    pub protect: Option<Protect>,
    /// `--metrics`: where the polling thread publishes its counters.
    pub metrics: Option<crate::metrics::Publisher>,
}

/// A polling router's protected traffic.
#[derive(Debug, Clone)]
pub struct Protect {
    /// Every port's receive queue of this number is protected (the
    /// operator steers the control plane's frames there with the NIC's
    /// flow rules).
    pub queue: Option<u32>,
    /// On every other queue the program steers the frames these rules
    /// protect into a protected socket of the queue's own
    /// ([`crate::backend::Steer`]); `None`: no steering.
    pub rules: Option<crate::rules::Rules>,
    /// Frames per callback on each protected side.
    pub quota: rxsched_core::Quota,
}

/// The two-level switch's settings (Hansen & Jul 1997 §5.1: more than 50%
/// of one CPU in the receive work for more than 2 s).
#[derive(Debug, Clone, Copy)]
pub struct TwoLevelCfg {
    /// The overload detector and its threshold: the receive threads' share
    /// of the CPU, the frames waiting on the rings, or wake-ups per second.
    pub detector: rxsched_core::Detector,
    /// How long overload must last before polling takes over, in ns.
    pub hold_ns: u64,
    /// The window load is judged over, in ns.
    pub window_ns: u64,
    /// How long polling must find nothing before interrupts return, in ns.
    pub idle_grace_ns: u64,
    /// Return to interrupts when a window's polling work (the forwarding
    /// thread's and the receive threads' CPU time) is under this share of
    /// one CPU, instead of when a sample brings nothing (ours).
    pub return_below: Option<f64>,
    /// An objective that set the threshold and the hold, and sets the
    /// return mark from the frame's cost as the router measures it
    /// ([`rxsched_core::Slo::switch_marks`]); its CPU share is M4's in the
    /// polling phase.
    pub slo: Option<rxsched_core::Slo>,
}

impl Default for TwoLevelCfg {
    fn default() -> Self {
        TwoLevelCfg {
            detector: rxsched_core::Detector::CpuFraction(0.5),
            hold_ns: 2_000_000_000,
            window_ns: 100_000_000,
            idle_grace_ns: 0,
            return_below: None,
            slo: None,
        }
    }
}

/// The router's end of the screening stage: the queue it fills, and the
/// rules the stage applies (for the names of the denial counters).
#[derive(Clone)]
pub struct ScreenEnd {
    /// The screening queue.
    pub queue: Arc<StageQueue>,
    /// The stage's rules.
    pub rules: Rules,
    /// The screening process, once started (an objective's M3 marks read
    /// its CPU time).
    pub pid: Option<u32>,
}

impl ScreenEnd {
    /// A screening queue of `cfg.queue` frames for `cfg.rules`.
    pub fn new(cfg: &ScreenConfig) -> SysResult<ScreenEnd> {
        let q = StageQueue::create(
            "rxsched-screen",
            cfg.queue,
            crate::screen::counters_for(&cfg.rules),
        )?;
        Ok(ScreenEnd {
            queue: Arc::new(q),
            rules: cfg.rules.clone(),
            pid: None,
        })
    }
}

/// Runs the router until the duration is over, a stop signal arrives or
/// a port disappears.
pub fn run(cfg: &RouterConfig) -> SysResult<RouterReport> {
    if cfg.ports.is_empty() {
        return Err(SysError {
            what: "router".into(),
            syscall: "configure",
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no interfaces"),
        });
    }
    let cfg = &RouterConfig {
        run: cfg.run.launch()?,
        ..cfg.clone()
    };
    // The screening process starts before this thread takes a real-time
    // priority, and runs as an ordinary process beside it. Forwarding in
    // XDP screens there instead, with no process and no queue.
    let screen = match &cfg.screen {
        Some(_) if cfg.in_xdp => None,
        Some(s) => {
            let mut end = ScreenEnd::new(s)?;
            let proc = Screend::spawn(s, &end.queue, &cfg.ports, cfg.run.cpu)?;
            end.pid = Some(proc.pid());
            Some((end, proc))
        }
        None => None,
    };
    let mut r = forward(cfg, screen.as_ref().map(|(e, _)| e.clone()))?;
    if let Some((end, proc)) = screen {
        let pid = proc.pid();
        let code = proc.stop(&end.queue, std::time::Duration::from_secs(2))?;
        r.add_screen(&end, pid, code);
    }
    if let (true, Some(s)) = (cfg.in_xdp, &cfg.screen) {
        r.add_xdp_screen(&s.rules);
    }
    Ok(r)
}

/// The router's mode and backend, as its line on starting says them.
fn how(cfg: &RouterConfig) -> String {
    let xdp = if cfg.in_xdp {
        ", forwarding in XDP"
    } else {
        ""
    };
    let shared = match servicing(cfg) {
        Servicing::TimeShared { slice_ns: Some(ns) } => {
            format!(", time-shared, slice {} µs", ns / 1000)
        }
        Servicing::TimeShared { slice_ns: None } => ", time-shared".into(),
        _ => String::new(),
    };
    format!(
        "{}, {}{xdp}{shared}",
        cfg.mode.name(),
        cfg.run.backend.sockets()
    )
}

/// Who does the receive work in each mode: polling owns it (time-shared
/// or above every process); the baseline, and two-level until it switches,
/// leave it at device priority.
fn servicing(cfg: &RouterConfig) -> Servicing {
    match cfg.mode {
        Mode::Polling if cfg.time_shared => Servicing::TimeShared {
            slice_ns: cfg.slice_ns,
        },
        Mode::Polling => Servicing::Polling,
        Mode::Interrupt | Mode::TwoLevel => Servicing::Interrupt,
    }
}

/// Forwards between the opened devices. Polling: the thread owns the
/// receive work, and input inhibits close the gate. Interrupt (the M1
/// baseline): where the receive work runs in threads (threaded NAPI), they
/// run at device priority and fill the sockets' rings, and one
/// normal-priority thread drains them whenever it gets the CPU, like
/// 4.2BSD's IP layer draining `ipintrq` (it forwards and sends in batches
/// of `--quota`, as IP output starts the device as it goes); under overload
/// the receive work starves it and frames die at the sockets' rings after
/// that work was spent. Elsewhere a receive thread of the router's own at
/// device priority stands in for the interrupt handler ([`interrupt`]).
/// M3 and M4 do not apply to the baseline.
fn forward(cfg: &RouterConfig, screen: Option<ScreenEnd>) -> SysResult<RouterReport> {
    let devices = Devices::read(&cfg.ports)?;
    let mut r = forward_from(cfg, screen, &devices)?;
    r.reconcile(&devices)?;
    Ok(r)
}

/// [`forward`], the output devices' counters read at the start
/// (`devices`, for the live line).
fn forward_from(
    cfg: &RouterConfig,
    screen: Option<ScreenEnd>,
    devices: &Devices,
) -> SysResult<RouterReport> {
    // Routes given by hand leave routing to user space; the host's own
    // addresses still go to its stack.
    if cfg.in_xdp && (!cfg.routes.is_empty() || cfg.feedback.is_some()) {
        return Err(SysError {
            what: "router".into(),
            syscall: "configure",
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "forwarding in XDP takes next hops from the kernel, and has no queue for \
                 --feedback (its --screen rules run in the program)",
            ),
        });
    }
    let feed = Feed::Route {
        in_xdp: cfg.in_xdp,
        screen: cfg
            .screen
            .as_ref()
            .filter(|_| cfg.in_xdp)
            .map(|s| s.rules.clone()),
        steer: cfg.protect.as_ref().and_then(|p| {
            Some(crate::backend::Steer {
                rules: p.rules.clone()?,
                except: p.queue,
            })
        }),
        kernel_hops: cfg.routes.is_empty(),
        local: if cfg.routes.is_empty() {
            Vec::new()
        } else {
            sys::ipv4_addrs()?
        },
    };
    let opened = cfg
        .run
        .backend
        .open(&cfg.ports, servicing(cfg), &feed, cfg.run.rx_ring)?;
    let links = LinkWatch::new("route", &cfg.ports, sys::mono_ns())?;
    let wait = EpollWait::new()?;
    if !opened.threaded {
        match cfg.mode {
            Mode::Polling => {}
            Mode::Interrupt => {
                let prio = crate::runtime::DEVICE_PRIO;
                let (ports, links) = (opened.ports, Some(links));
                return interrupt::run(ports, cfg, screen, prio, wait, links, devices);
            }
            Mode::TwoLevel => {
                return Err(SysError {
                    what: "router".into(),
                    syscall: "configure",
                    source: std::io::Error::new(
                        std::io::ErrorKind::Unsupported,
                        "--mode two-level drives the receive threads: it needs --backend xdp",
                    ),
                })
            }
        }
    }
    let mut c = cfg.clone();
    if cfg.mode != Mode::Polling {
        c.feedback = None;
        // Two-level with an objective keeps M4 for its polling phase.
        if !(cfg.mode == Mode::TwoLevel && cfg.run.slo.is_some()) {
            c.run.cycle_limit = None;
        }
    }
    // A multi-queue device's other queues: more receive sides, after every
    // port's first (an output port is found by its MAC, the first match:
    // they transmit through their port's queue 0).
    let mut ports = opened.ports;
    let mut queue_of: Vec<(usize, u32)> = (0..ports.len()).map(|i| (i, 0)).collect();
    let mut next_queue = vec![1u32; ports.len()];
    for (i, rx) in opened.more_rx {
        queue_of.push((i, next_queue[i]));
        next_queue[i] += 1;
        ports.push(receive_side(&ports[i], rx));
    }
    if !c.cpus.is_empty() {
        // Each thread gates its own queues' receive threads.
        drop(opened.gate);
        return threads::run(&c, ports, &queue_of, devices, opened.thread_prio);
    }
    // The queues' protected sockets: more receive sides, after the rest.
    // They share their queue's receive work: no receive thread of their
    // own for the gate to order.
    let steered_from = ports.len();
    for (i, rx) in opened.steered_rx {
        queue_of.push((i, STEERED_SIDE));
        ports.push(receive_side(&ports[i], rx));
    }
    let mut router = polling::PollingRouter::new(ports, &c, screen, sys::MonoClock, wait)?;
    router.name_sides(
        queue_of
            .iter()
            .map(|&(i, q)| {
                let queue = match q {
                    STEERED_SIDE => "protected".to_string(),
                    q => q.to_string(),
                };
                (c.ports[i].clone(), queue)
            })
            .collect(),
    );
    if let Some(p) = &c.protect {
        let mut sides: Vec<usize> = (steered_from..queue_of.len()).collect();
        if let Some(queue) = p.queue {
            let on_queue: Vec<usize> = (0..steered_from)
                .filter(|&s| queue_of[s].1 == queue)
                .collect();
            if on_queue.is_empty() {
                return Err(SysError {
                    what: format!("--protect-queue {queue}"),
                    syscall: "configure",
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!(
                            "no port has a receive queue {queue} (the most any of {} has is {}; queues are numbered from 0)",
                            c.ports.join(", "),
                            next_queue.iter().max().copied().unwrap_or(1)
                        ),
                    ),
                });
            }
            sides.extend(on_queue);
        }
        router.protect(p.queue, &sides, p.quota);
    }
    // With an objective, M4's gate caps the receive threads in the
    // polling phase; the two-level monitor owns them in the other.
    let service = Arc::new(std::sync::Mutex::new(two_level::Serving::default()));
    let gate: Box<dyn crate::backend::Gate> = match (cfg.mode, cfg.run.slo) {
        (Mode::TwoLevel, Some(_)) => Box::new(two_level::ServiceGate::new(
            opened.gate,
            &cfg.ports,
            service.clone(),
        )?),
        _ => opened.gate,
    };
    router.attach(gate, links)?;
    // A protected queue's frames must not wait while the kernel stops the
    // router's real-time threads for having filled the CPU. Frames steered
    // on a shared queue come through that queue's receive work, which the
    // guard would hold back with the rest: there it costs forwarding (a
    // fifth of it, by hand, with the socket rings dropping what the
    // receive work had done) and saves nothing.
    let protected_queue = c.protect.as_ref().is_some_and(|p| p.queue.is_some());
    if protected_queue && opened.thread_prio.is_some() {
        if let Some(budget) = sys::rt_budget()? {
            router.guard_rt_budget(budget)?;
        }
    }
    // Two-level's monitor owns the receive threads' priorities: the
    // gate's round robin among them would raise a thread to device
    // priority, above the forwarding thread, while the monitor polls.
    if cfg.mode != Mode::TwoLevel {
        router.order_receive_work(&queue_of)?;
    }
    let _ = router.counters().devices.set(devices.clone());
    crate::runtime::take_priority(opened.thread_prio)?;
    if let Servicing::TimeShared { slice_ns: Some(ns) } = servicing(cfg) {
        sys::slice::set_time_shared(0, Some(ns))?;
        if sys::slice::slice(0)? != Some(ns) {
            eprintln!(
                "rxsched route: warning: a slice of {} µs was asked for, but this kernel keeps no slice per thread (Linux 6.12 and later do): the kernel's default slice applies",
                ns / 1000
            );
        }
    }
    crate::runtime::listening("route", &cfg.ports, &how(cfg));
    if cfg.mode != Mode::TwoLevel {
        return { router }.run(&c);
    }
    let polls = Arc::new(crate::runtime::Polls::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mon = two_level::spawn(
        c.two_level,
        &c.ports,
        two_level::Shared {
            cpu: c.run.cpu,
            polls: polls.clone(),
            stop: stop.clone(),
            service,
            wake_ns: c.run.wake_cost_ns.unwrap_or(0) as f64,
        },
    )?;
    let r = router.with_polls(polls).run(&c);
    stop.store(true, Relaxed);
    let out = mon.join().unwrap_or_else(|_| {
        Err(SysError {
            what: "two-level monitor".into(),
            syscall: "join",
            source: std::io::Error::other("the monitor thread panicked"),
        })
    });
    let mut r = r?;
    match out {
        Ok(out) => {
            r.two_level = Some(TwoLevelReport {
                switches: out.switches,
                polling_s: out.polling_ns as f64 / 1e9,
                service: out.service,
                return_below: out.return_below,
            })
        }
        // A device that disappeared took its receive threads, which the
        // monitor was reading, along: the fault is the report's.
        Err(_) if r.fault.is_some() => {}
        Err(e) => return Err(e),
    }
    Ok(r)
}

/// Another receive side `rx` of `port`'s device (another queue, or a
/// queue's protected socket): it transmits through the port's own side.
fn receive_side(
    port: &Port<crate::backend::AnyRx, crate::backend::AnyTx>,
    rx: crate::backend::AnyRx,
) -> Port<crate::backend::AnyRx, crate::backend::AnyTx> {
    Port {
        name: port.name.clone(),
        rx,
        tx: Box::new(crate::backend::copy::NoTx(port.name.clone())),
        mac: port.mac,
        mtu: port.mtu,
    }
}

#[cfg(test)]
mod tests;
