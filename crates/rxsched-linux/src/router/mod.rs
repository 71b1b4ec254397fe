//! `rxsched route`: IPv4 forwarding between interfaces, with the receive
//! scheduling of either the interrupt-driven baseline (M1, [`interrupt`])
//! or the polling facility from `rxsched-core` (M2 with M3 and M4,
//! [`polling`], on the runtime's polling thread), or the two-level switch
//! between them ([`two_level`], M11). All are generic over the packet
//! backends, the clock and the way a thread waits, so that the same loops
//! run on AF_XDP and AF_PACKET sockets and, in tests, in memory with a fake
//! clock.

pub mod interrupt;
pub mod polling;
pub mod two_level;

use crate::backend::packet::EpollWait;
use crate::backend::TxBackend;
use crate::links::LinkWatch;
use crate::rules::Rules;
pub use crate::runtime::{Backend, Port};
use crate::runtime::{RunConfig, Servicing};
use crate::screen::{ScreenConfig, ScreenCounts, Screend};
use crate::stage::StageQueue;
use crate::sys::{self, SysError, SysResult};
use crate::wire::{EthernetFrame, Ipv4Packet, Mac, Malformed, ETHERTYPE_IPV4};
use ipnet::Ipv4Net;
use rxsched_core::{DropPoint, InhibitCause};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// One route: a prefix, the port out, and the next hop's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The destination network.
    pub net: Ipv4Net,
    /// Index of the output port.
    pub port: usize,
    /// The neighbour's MAC (static neighbour table).
    pub next_hop: Mac,
}

impl Route {
    /// Parses `198.19.0.0/24=d1@02:72:78:00:01:01`, resolving the interface
    /// among `ports`. A bare address is a /32.
    pub fn parse(s: &str, ports: &[String]) -> Result<Route, String> {
        let (net, rest) = s.split_once('=').ok_or("expected PREFIX/LEN=IFACE@MAC")?;
        let (iface, mac) = rest
            .split_once('@')
            .ok_or("expected PREFIX/LEN=IFACE@MAC")?;
        let net: Ipv4Net = if net.contains('/') {
            net.parse()
                .map_err(|_| format!("{net:?} is not an IPv4 prefix"))?
        } else {
            let a: Ipv4Addr = net
                .parse()
                .map_err(|_| format!("{net:?} is not an IPv4 address"))?;
            Ipv4Net::from(a)
        };
        let port = ports
            .iter()
            .position(|p| p == iface)
            .ok_or(format!("{iface:?} is not one of the router's interfaces"))?;
        let next_hop = Mac::parse(mac).ok_or(format!("{mac:?} is not a MAC address"))?;
        Ok(Route {
            net: net.trunc(),
            port,
            next_hop,
        })
    }

    fn matches(&self, ip: [u8; 4]) -> bool {
        self.net.contains(&Ipv4Addr::from(ip))
    }
}

/// Why the forwarding path refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A malformed frame.
    Malformed(Malformed),
    /// No route to the destination.
    NoRoute,
}

impl Refused {
    /// The drop point it is counted at.
    pub fn drop_point(self) -> DropPoint {
        match self {
            Refused::Malformed(m) => m.drop_point(),
            Refused::NoRoute => DropPoint::NoRoute,
        }
    }
}

/// The forwarding decision and rewrite, shared by both modes: check the
/// frame, find the route, rewrite both MACs, decrement the TTL with an
/// incremental checksum update. Returns the output port.
pub fn forward_in_place(
    frame: &mut [u8],
    routes: &[Route],
    port_macs: &[Mac],
) -> Result<usize, Refused> {
    let mut eth = EthernetFrame::new_checked(&mut *frame).map_err(Refused::Malformed)?;
    if eth.ethertype() != ETHERTYPE_IPV4 {
        return Err(Refused::Malformed(Malformed::NotIpv4));
    }
    let route = {
        let ip = Ipv4Packet::new_checked(eth.payload()).map_err(Refused::Malformed)?;
        if !ip.verify_checksum() {
            return Err(Refused::Malformed(Malformed::BadChecksum));
        }
        if ip.ttl() <= 1 {
            return Err(Refused::Malformed(Malformed::TtlExpired));
        }
        let dst = ip.dst();
        routes
            .iter()
            .filter(|r| r.matches(dst))
            .max_by_key(|r| r.net.prefix_len())
            .copied()
            .ok_or(Refused::NoRoute)?
    };
    eth.set_dst(route.next_hop);
    eth.set_src(port_macs[route.port]);
    let mut ip = Ipv4Packet::new_checked(eth.payload_mut()).map_err(Refused::Malformed)?;
    ip.decrement_ttl();
    Ok(route.port)
}

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
    /// Interrupt mode: the input queue's limit (4.2BSD `ipintrq`: 50).
    pub input_queue: usize,
    /// Frames waiting to be sent per port, at most.
    pub out_queue: usize,
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
}

impl Default for TwoLevelCfg {
    fn default() -> Self {
        TwoLevelCfg {
            detector: rxsched_core::Detector::CpuFraction(0.5),
            hold_ns: 2_000_000_000,
            window_ns: 100_000_000,
            idle_grace_ns: 0,
            return_below: None,
        }
    }
}

/// Counters, readable while the router runs (from another thread too).
#[derive(Debug, Default)]
pub struct Counters {
    /// Frames taken off the rings.
    pub rx: AtomicU64,
    /// Frames handed to the output interfaces.
    pub forwarded: AtomicU64,
    /// Dropped at the interrupt mode's input queue.
    pub ipintrq: AtomicU64,
    /// Dropped because an output queue was full.
    pub output_queue: AtomicU64,
    /// Dropped because the screening queue was full.
    pub screen_queue: AtomicU64,
    /// Dropped because their output port was down or gone.
    pub port_down: AtomicU64,
    /// Refused frames by reason, indexed like [`REASONS`].
    pub refused: [AtomicU64; 6],
}

/// Refusal reasons in counter order.
pub const REASONS: [DropPoint; 6] = [
    DropPoint::Truncated,
    DropPoint::NotIpv4,
    DropPoint::BadIhl,
    DropPoint::BadChecksum,
    DropPoint::TtlExpired,
    DropPoint::NoRoute,
];

impl Counters {
    fn refuse(&self, r: Refused) {
        let p = r.drop_point();
        let i = REASONS
            .iter()
            .position(|n| *n == p)
            .expect("every refusal has a counter");
        self.refused[i].fetch_add(1, Relaxed);
    }

    /// Frames refused, for every reason.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().map(|a| a.load(Relaxed)).sum()
    }

    /// Frames dropped or refused inside the router (not on the rings).
    pub fn dropped(&self) -> u64 {
        self.ipintrq.load(Relaxed)
            + self.output_queue.load(Relaxed)
            + self.screen_queue.load(Relaxed)
            + self.port_down.load(Relaxed)
            + self.refused_total()
    }
}

/// What a router did, printed as JSON at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RouterReport {
    /// How it scheduled receive work.
    pub mode: Mode,
    /// Seconds it ran.
    pub duration_s: f64,
    /// Frames taken off the rings.
    pub rx: u64,
    /// Frames handed to the output interfaces.
    pub forwarded: u64,
    /// Drops by point, refusals by reason among them.
    pub drops: BTreeMap<DropPoint, u64>,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<InhibitCause, u64>,
    /// Interrupt/poll mode switches.
    pub mode_switches: u64,
    /// Frames still inside the router when it stopped.
    pub in_flight: u64,
    /// CPU time the router's threads used, in seconds.
    pub cpu_s: f64,
    /// With M4: the cost charged per wake-up, in ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_cost_ns: Option<u64>,
    /// Two-level: switches between interrupt and polling service, and
    /// seconds spent polling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub two_level: Option<TwoLevelReport>,
    /// With `--screen`: what the screening process did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<ScreenReport>,
    /// Why the run ended early, if it did (a port disappeared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
}

impl RouterReport {
    /// Frames dropped at `point` (0 if none were).
    pub fn dropped(&self, point: DropPoint) -> u64 {
        self.drops.get(&point).copied().unwrap_or(0)
    }

    /// Frames dropped everywhere.
    pub fn dropped_total(&self) -> u64 {
        self.drops.values().sum()
    }
}

/// The two-level switch's part of a router's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TwoLevelReport {
    /// Switches either way.
    pub switches: u64,
    /// Seconds serviced by polling.
    pub polling_s: f64,
    /// How the devices were serviced when it stopped.
    pub service: rxsched_core::Service,
}

/// The screening stage's part of a router's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScreenReport {
    /// The screening process's id.
    pub pid: u32,
    /// Its exit status, if it exited by itself when asked to stop.
    pub exit_code: Option<i32>,
    /// Frames the router handed to it.
    pub queued: u64,
    /// What it did with them.
    #[serde(flatten)]
    pub counts: ScreenCounts,
}

impl RouterReport {
    /// The report of a run of `mode` from its counters; `ring_drops` is what
    /// the receive rings dropped.
    pub fn new(mode: Mode, c: &Counters, ring_drops: u64, in_flight: u64) -> RouterReport {
        let mut drops = BTreeMap::new();
        drops.insert(DropPoint::NicRxRing, ring_drops);
        drops.insert(DropPoint::Ipintrq, c.ipintrq.load(Relaxed));
        drops.insert(DropPoint::OutputQueue, c.output_queue.load(Relaxed));
        if c.screen_queue.load(Relaxed) > 0 {
            drops.insert(DropPoint::ScreenQueue, c.screen_queue.load(Relaxed));
        }
        if c.port_down.load(Relaxed) > 0 {
            drops.insert(DropPoint::PortDown, c.port_down.load(Relaxed));
        }
        for (p, n) in REASONS.iter().zip(&c.refused) {
            drops.insert(*p, n.load(Relaxed));
        }
        RouterReport {
            mode,
            duration_s: 0.0,
            rx: c.rx.load(Relaxed),
            forwarded: c.forwarded.load(Relaxed),
            drops,
            inhibits: BTreeMap::new(),
            mode_switches: 0,
            in_flight,
            cpu_s: 0.0,
            wake_cost_ns: None,
            two_level: None,
            screen: None,
            fault: None,
        }
    }

    /// Adds what the screening stage behind `end` did: the frames it sent
    /// are the router's output, its denials and output refusals are drops
    /// (`screen_denied`, `output_queue`), and what its queue still holds is
    /// in flight.
    pub fn add_screen(&mut self, end: &ScreenEnd, pid: u32, exit_code: Option<i32>) {
        let counts = ScreenCounts::read(&end.queue, &end.rules);
        let queued = end.queue.pushed();
        self.forwarded += counts.sent;
        *self.drops.entry(DropPoint::OutputQueue).or_default() += counts.tx_dropped;
        self.drops
            .insert(DropPoint::ScreenDenied, counts.denied_total());
        self.drops.entry(DropPoint::ScreenQueue).or_insert(0);
        // Handed over and not yet judged: queued, or being screened.
        self.in_flight += queued.saturating_sub(counts.accepted + counts.denied_total());
        self.screen = Some(ScreenReport {
            pid,
            exit_code,
            queued,
            counts,
        });
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
        })
    }
}

/// Frames waiting to be sent on one port.
#[derive(Debug, Default)]
pub struct OutQueue {
    frames: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

impl OutQueue {
    /// Queues a copy of `frame`; false (and counted) if `cap` frames wait.
    pub fn push(&mut self, frame: &[u8], cap: usize, c: &Counters) -> bool {
        if self.frames.len() >= cap {
            c.output_queue.fetch_add(1, Relaxed);
            return false;
        }
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        self.frames.push_back(b);
        true
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Sends up to `max` frames in batches; returns how many left. Stops
    /// early when the device takes fewer than offered (it is full).
    pub fn flush(&mut self, tx: &mut impl TxBackend, max: usize, c: &Counters) -> SysResult<usize> {
        let mut sent = 0;
        while sent < max && !self.frames.is_empty() {
            let n = self.frames.len().min(max - sent).min(64);
            let (a, b) = self.frames.as_slices();
            let frames: Vec<&[u8]> = a
                .iter()
                .chain(b.iter())
                .take(n)
                .map(|v| v.as_slice())
                .collect();
            let k = match tx.send(&frames) {
                Ok(k) => k,
                // The port is down or gone: what waits for it is lost
                // there (the link watch reports the port).
                Err(e) if sys::is_link_error(&e.source) => {
                    let lost = self.frames.len();
                    self.spare.extend(self.frames.drain(..));
                    c.port_down.fetch_add(lost as u64, Relaxed);
                    break;
                }
                Err(e) => return Err(e),
            };
            for _ in 0..k {
                if let Some(f) = self.frames.pop_front() {
                    self.spare.push(f);
                }
            }
            sent += k;
            c.forwarded.fetch_add(k as u64, Relaxed);
            if k < n {
                break; // the device queue is full: try again later
            }
        }
        Ok(sent)
    }
}

/// Where a routed frame goes next.
pub enum Onward<'a> {
    /// Onto its output port's queue, which holds `cap` frames.
    Out {
        /// Every port's queue.
        outq: &'a mut [OutQueue],
        /// Their limit.
        cap: usize,
    },
    /// To the screening process, which sends it if its rules accept it.
    Screen(&'a StageQueue),
}

/// Checks a frame, routes it and rewrites it in `buf` (a copy), then hands
/// it on (see [`Onward`]) or counts why not. Returns the output port if the
/// frame went onto an output queue.
pub fn forward_one(
    frame: &[u8],
    buf: &mut [u8],
    routes: &[Route],
    macs: &[Mac],
    onward: Onward<'_>,
    c: &Counters,
) -> Option<usize> {
    let n = frame.len().min(buf.len());
    let b = &mut buf[..n];
    b.copy_from_slice(&frame[..n]);
    match (forward_in_place(b, routes, macs), onward) {
        (Ok(out), Onward::Out { outq, cap }) => outq[out].push(b, cap, c).then_some(out),
        (Ok(out), Onward::Screen(q)) => {
            if !q.push(b, usize::MAX, out as u32, 0) {
                c.screen_queue.fetch_add(1, Relaxed);
            }
            None
        }
        (Err(r), _) => {
            c.refuse(r);
            None
        }
    }
}

/// One line of live counters.
pub fn live_line(
    mode: Mode,
    c: &Counters,
    screen: Option<&ScreenEnd>,
    extra: &str,
    prev: &mut (u64, u64, u64),
    now: u64,
) -> String {
    let sent = screen.map_or(0, |s| s.queue.counter(crate::screen::SENT));
    let (rx, fw) = (c.rx.load(Relaxed), c.forwarded.load(Relaxed) + sent);
    let dt = (now.saturating_sub(prev.2)).max(1) as f64 / 1e9;
    let line = format!(
        "route {}: rx {:.0}/s forwarded {:.0}/s; drops ipintrq {} output_queue {} screen_queue {} refused {}{extra}",
        mode.name(),
        (rx - prev.0) as f64 / dt,
        (fw - prev.1) as f64 / dt,
        c.ipintrq.load(Relaxed),
        c.output_queue.load(Relaxed),
        c.screen_queue.load(Relaxed),
        c.refused_total(),
    );
    *prev = (rx, fw, now);
    line
}

/// Live counters every `every_ns` (if not 0) and on SIGUSR1.
pub struct Stats {
    every: u64,
    next: u64,
    prev: (u64, u64, u64),
}

impl Stats {
    /// Starting at `t0`.
    pub fn new(every_s: f64, t0: u64) -> Stats {
        let every = (every_s * 1e9) as u64;
        Stats {
            every,
            next: if every > 0 { t0 + every } else { u64::MAX },
            prev: (0, 0, t0),
        }
    }

    /// The next time a line is due.
    pub fn due(&self) -> u64 {
        self.next
    }

    /// Prints a line to stderr if one is due at `now`.
    pub fn tick(
        &mut self,
        mode: Mode,
        c: &Counters,
        screen: Option<&ScreenEnd>,
        extra: &str,
        now: u64,
    ) {
        if now >= self.next || sys::signals::take_usr1() {
            eprintln!("{}", live_line(mode, c, screen, extra, &mut self.prev, now));
            if now >= self.next {
                self.next += self.every;
            }
        }
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
    // priority, and runs as an ordinary process beside it.
    let screen = match &cfg.screen {
        Some(s) => {
            let end = ScreenEnd::new(s)?;
            let proc = Screend::spawn(s, &end.queue, &cfg.ports, cfg.run.cpu)?;
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
    Ok(r)
}

/// Who does the receive work in each mode: polling owns it (time-shared
/// or above every process); the baseline, and two-level until it switches,
/// leave it at device priority.
fn servicing(cfg: &RouterConfig) -> Servicing {
    match cfg.mode {
        Mode::Polling if cfg.time_shared => Servicing::TimeShared,
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
    let opened = cfg.run.backend.open(&cfg.ports, servicing(cfg))?;
    let links = LinkWatch::new("route", &cfg.ports, sys::mono_ns())?;
    let wait = EpollWait::new()?;
    if !opened.threaded {
        match cfg.mode {
            Mode::Polling => {}
            Mode::Interrupt => {
                let prio = crate::runtime::DEVICE_PRIO;
                return interrupt::run(opened.ports, cfg, screen, prio, wait, Some(links));
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
        c.run.cycle_limit = None;
    }
    let router = polling::PollingRouter::new(opened.ports, &c, screen, sys::MonoClock, wait)?
        .with_gate(opened.gate)?
        .with_links(links);
    crate::runtime::take_priority(opened.thread_prio)?;
    if cfg.mode != Mode::TwoLevel {
        return { router }.run(&c);
    }
    let polls = Arc::new(crate::runtime::Polls::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mon = two_level::spawn(
        c.two_level,
        &c.ports,
        c.run.cpu,
        polls.clone(),
        stop.clone(),
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
            })
        }
        // A device that disappeared took its receive threads, which the
        // monitor was reading, along: the fault is the report's.
        Err(_) if r.fault.is_some() => {}
        Err(e) => return Err(e),
    }
    Ok(r)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod parse_tests {
    use super::*;
    use crate::wire::build_udp_frame;

    fn table() -> (Vec<Route>, Vec<Mac>) {
        let ports = vec!["d0".to_string(), "d1".to_string()];
        let r = vec![
            Route::parse("198.19.0.0/24=d1@02:00:00:00:01:01", &ports).unwrap(),
            Route::parse("198.18.0.0/24=d0@02:00:00:00:00:01", &ports).unwrap(),
        ];
        (r, vec![Mac([2, 0, 0, 0, 0, 2]), Mac([2, 0, 0, 0, 1, 2])])
    }

    fn frame(ttl: u8, dst: [u8; 4]) -> Vec<u8> {
        let mut b = vec![0u8; 128];
        let n = build_udp_frame(
            &mut b,
            64,
            Mac([2; 6]),
            Mac([2, 0, 0, 0, 0, 2]),
            [198, 18, 0, 1],
            dst,
            (1, 2),
            0,
            0,
        );
        b.truncate(n);
        b[ETH_TTL] = ttl;
        let mut ip = Ipv4Packet::new_checked(&mut b[14..]).unwrap();
        ip.fill_checksum();
        b
    }

    const ETH_TTL: usize = 14 + 8;

    #[test]
    fn forwards_and_rewrites() {
        let (r, macs) = table();
        let mut f = frame(64, [198, 19, 0, 1]);
        assert_eq!(forward_in_place(&mut f, &r, &macs), Ok(1));
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.dst(), Mac([2, 0, 0, 0, 1, 1]));
        assert_eq!(eth.src(), macs[1]);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn each_malformed_class_has_its_reason() {
        let (r, macs) = table();
        let mut short = frame(64, [198, 19, 0, 1]);
        short.truncate(20);
        assert_eq!(
            forward_in_place(&mut short, &r, &macs),
            Err(Refused::Malformed(Malformed::Truncated))
        );
        let mut arp = frame(64, [198, 19, 0, 1]);
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(
            forward_in_place(&mut arp, &r, &macs),
            Err(Refused::Malformed(Malformed::NotIpv4))
        );
        let mut ihl = frame(64, [198, 19, 0, 1]);
        ihl[14] = 0x44;
        assert_eq!(
            forward_in_place(&mut ihl, &r, &macs),
            Err(Refused::Malformed(Malformed::BadIhl))
        );
        let mut sum = frame(64, [198, 19, 0, 1]);
        sum[14 + 10] ^= 0xff;
        assert_eq!(
            forward_in_place(&mut sum, &r, &macs),
            Err(Refused::Malformed(Malformed::BadChecksum))
        );
        let mut ttl = frame(1, [198, 19, 0, 1]);
        assert_eq!(
            forward_in_place(&mut ttl, &r, &macs),
            Err(Refused::Malformed(Malformed::TtlExpired))
        );
        let mut far = frame(64, [198, 20, 0, 1]);
        assert_eq!(forward_in_place(&mut far, &r, &macs), Err(Refused::NoRoute));
    }

    #[test]
    fn routes_parse_and_match_longest_prefix() {
        let ports = vec!["a".to_string(), "b".to_string()];
        assert!(Route::parse("198.19.0.0/24=c@02:00:00:00:00:01", &ports).is_err());
        assert!(Route::parse("198.19.0.0/33=a@02:00:00:00:00:01", &ports).is_err());
        assert!(
            Route::parse("198.19.0.9=a@02:00:00:00:00:01", &ports)
                .unwrap()
                .net
                .prefix_len()
                == 32
        );
        let wide = Route::parse("198.18.0.0/15=a@02:00:00:00:00:01", &ports).unwrap();
        let narrow = Route::parse("198.19.0.0/24=b@02:00:00:00:00:02", &ports).unwrap();
        assert!(wide.matches([198, 19, 0, 9]) && narrow.matches([198, 19, 0, 9]));
        assert!(!narrow.matches([198, 18, 0, 9]));
    }
}
