//! `rxsched route`: IPv4 forwarding between interfaces, with the receive
//! scheduling of either the interrupt-driven baseline (M1) or the polling
//! facility from `rxsched-core` (M2, with M3 and M4).

use crate::ring::{PacketRing, PacketTx, RingConfig, RxBackend, TxBackend};
use crate::sys::{self, mono_ns, thread_cpu_ns, SysError, SysResult};
use crate::wire::{EthernetFrame, Ipv4Packet, Mac, Malformed, ETHERTYPE_IPV4};
use rxsched_core::{CycleLimit, DeviceId, Dir, PollingFacility, QueueFeedback, Quota, MS};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};

/// One route: a prefix, the port out, and the next hop's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Network address.
    pub prefix: [u8; 4],
    /// Prefix length.
    pub len: u8,
    /// Index of the output port.
    pub port: usize,
    /// The neighbour's MAC (static neighbour table).
    pub next_hop: Mac,
}

impl Route {
    /// Parses `198.19.0.0/24=d1@02:72:78:00:01:01`, resolving the interface
    /// among `ports`.
    pub fn parse(s: &str, ports: &[String]) -> Result<Route, String> {
        let (net, rest) = s.split_once('=').ok_or("expected PREFIX/LEN=IFACE@MAC")?;
        let (iface, mac) = rest
            .split_once('@')
            .ok_or("expected PREFIX/LEN=IFACE@MAC")?;
        let (addr, len) = net.split_once('/').unwrap_or((net, "32"));
        let prefix: std::net::Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or(format!("bad prefix length {len:?}"))?;
        let port = ports
            .iter()
            .position(|p| p == iface)
            .ok_or(format!("{iface:?} is not one of the router's interfaces"))?;
        let next_hop = Mac::parse(mac).ok_or(format!("{mac:?} is not a MAC address"))?;
        Ok(Route {
            prefix: prefix.octets(),
            len,
            port,
            next_hop,
        })
    }

    fn matches(&self, ip: [u8; 4]) -> bool {
        let mask = if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - self.len as u32)
        };
        u32::from_be_bytes(ip) & mask == u32::from_be_bytes(self.prefix) & mask
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
    /// The counter it goes under.
    pub fn name(self) -> &'static str {
        match self {
            Refused::Malformed(m) => m.name(),
            Refused::NoRoute => "no_route",
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
            .max_by_key(|r| r.len)
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// M1: a SCHED_FIFO receive thread fills a bounded input queue that a
    /// normal-priority forwarding thread on the same CPU drains.
    Interrupt,
    /// M2: one normal-priority thread driven by the polling facility.
    Polling,
}

/// A router's configuration.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// The interfaces (ports).
    pub ports: Vec<String>,
    /// The routing table.
    pub routes: Vec<Route>,
    /// Receive scheduling.
    pub mode: Mode,
    /// Polling: packets per callback.
    pub quota: Quota,
    /// Polling, M3: inhibit input while an output queue is this full
    /// (fraction of `out_queue`); `None`: off.
    pub feedback: Option<(f64, f64)>,
    /// Polling, M4: input may use this share of each 10 ms.
    pub cycle_limit: Option<f64>,
    /// The CPU everything runs on.
    pub cpu: Option<usize>,
    /// Stop after this many seconds.
    pub duration_s: f64,
    /// Print live counters this often (0: only on SIGUSR1).
    pub stats_every_s: f64,
    /// Interrupt mode: the input queue's limit (4.2BSD `ipintrq`: 50).
    pub input_queue: usize,
    /// Frames waiting to be sent per port, at most.
    pub out_queue: usize,
}

/// Counters, readable while the router runs.
#[derive(Default)]
pub struct Counters {
    /// Frames taken off the rings.
    pub rx: AtomicU64,
    /// Frames handed to the output interfaces.
    pub forwarded: AtomicU64,
    /// Dropped at the interrupt mode's input queue.
    pub ipintrq: AtomicU64,
    /// Dropped because an output queue was full.
    pub output_queue: AtomicU64,
    /// Refused frames by reason, indexed like [`REASONS`].
    pub refused: [AtomicU64; 6],
    /// Input-inhibit episodes: queue feedback, cycle limit.
    pub inhibits: [AtomicU64; 2],
    /// Polling: interrupt↔poll switches.
    pub mode_switches: AtomicU64,
}

/// Refusal reasons in counter order.
pub const REASONS: [&str; 6] = [
    "truncated",
    "not_ipv4",
    "bad_ihl",
    "bad_checksum",
    "ttl_expired",
    "no_route",
];

impl Counters {
    fn refuse(&self, r: Refused) {
        let i = REASONS.iter().position(|n| *n == r.name()).unwrap_or(0);
        self.refused[i].fetch_add(1, Relaxed);
    }
}

/// What a router did, printed as JSON at the end.
#[derive(Debug, Clone, Serialize)]
pub struct RouterReport {
    /// `interrupt` or `polling`.
    pub mode: &'static str,
    /// Seconds it ran.
    pub duration_s: f64,
    /// Frames taken off the rings.
    pub rx: u64,
    /// Frames handed to the output interfaces.
    pub forwarded: u64,
    /// Drops by point and refusals by reason.
    pub drops: BTreeMap<String, u64>,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<String, u64>,
    /// Polling: interrupt↔poll switches.
    pub mode_switches: u64,
    /// CPU time the router's threads used, in seconds.
    pub cpu_s: f64,
}

struct Port {
    name: String,
    rx: PacketRing,
    tx: PacketTx,
    mac: Mac,
}

/// Frames waiting to be sent on one port.
#[derive(Default)]
struct OutQueue {
    frames: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

impl OutQueue {
    fn push(&mut self, frame: &[u8], cap: usize, c: &Counters) -> bool {
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

    /// Sends up to `max` frames; returns how many left.
    fn flush(&mut self, tx: &mut PacketTx, max: usize, c: &Counters) -> SysResult<usize> {
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
            let k = tx.send(&frames)?;
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

fn open_ports(cfg: &RouterConfig) -> SysResult<Vec<Port>> {
    cfg.ports
        .iter()
        .map(|p| {
            Ok(Port {
                name: p.clone(),
                rx: PacketRing::open(p, RingConfig::default())?,
                tx: PacketTx::open(p)?,
                mac: sys::mac_of(p)?,
            })
        })
        .collect()
}

fn report(
    cfg: &RouterConfig,
    c: &Counters,
    ports: &mut [Port],
    secs: f64,
    cpu_s: f64,
) -> SysResult<RouterReport> {
    let mut drops = BTreeMap::new();
    let mut ring = 0;
    for p in ports.iter_mut() {
        ring += p.rx.ring_drops()?;
    }
    drops.insert("nic_rx_ring".to_string(), ring);
    drops.insert("ipintrq".to_string(), c.ipintrq.load(Relaxed));
    drops.insert("output_queue".to_string(), c.output_queue.load(Relaxed));
    for (i, n) in REASONS.iter().enumerate() {
        drops.insert(n.to_string(), c.refused[i].load(Relaxed));
    }
    let mut inhibits = BTreeMap::new();
    inhibits.insert("queue_feedback".to_string(), c.inhibits[0].load(Relaxed));
    inhibits.insert("cycle_limit".to_string(), c.inhibits[1].load(Relaxed));
    Ok(RouterReport {
        mode: if cfg.mode == Mode::Polling {
            "polling"
        } else {
            "interrupt"
        },
        duration_s: secs,
        rx: c.rx.load(Relaxed),
        forwarded: c.forwarded.load(Relaxed),
        drops,
        inhibits,
        mode_switches: c.mode_switches.load(Relaxed),
        cpu_s,
    })
}

/// One line of live counters.
pub fn live_line(mode: Mode, c: &Counters, prev: &mut (u64, u64, u64), now: u64) -> String {
    let (rx, fw) = (c.rx.load(Relaxed), c.forwarded.load(Relaxed));
    let dt = (now.saturating_sub(prev.2)).max(1) as f64 / 1e9;
    let line = format!(
        "route {}: rx {:.0}/s forwarded {:.0}/s; drops ipintrq {} output_queue {} refused {}; inhibits feedback {} cycle_limit {}; mode switches {}",
        if mode == Mode::Polling { "polling" } else { "interrupt" },
        (rx - prev.0) as f64 / dt,
        (fw - prev.1) as f64 / dt,
        c.ipintrq.load(Relaxed),
        c.output_queue.load(Relaxed),
        c.refused.iter().map(|a| a.load(Relaxed)).sum::<u64>(),
        c.inhibits[0].load(Relaxed),
        c.inhibits[1].load(Relaxed),
        c.mode_switches.load(Relaxed),
    );
    *prev = (rx, fw, now);
    line
}

/// Runs the router until the duration is over or a stop signal arrives.
pub fn run(cfg: &RouterConfig) -> SysResult<RouterReport> {
    if cfg.ports.is_empty() {
        return Err(SysError {
            what: "router".into(),
            syscall: "configure",
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no interfaces"),
        });
    }
    sys::signals::install();
    match cfg.mode {
        Mode::Polling => run_polling(cfg),
        Mode::Interrupt => run_interrupt(cfg),
    }
}

/// Device priority: the interrupt mode's receive thread (M1's interrupt
/// handler) preempts everything else on the CPU.
const DEVICE_PRIO: i32 = 50;
/// Kernel-thread priority for the polling thread: Mogul & Ramakrishnan's
/// polling thread was a kernel thread, above every user process and below
/// interrupts. The lowest real-time priority keeps that order: a
/// compute-bound process gets the CPU only when the thread is idle, or when
/// the M4 cycle limit makes it give the CPU up. (As a nice-0 thread its
/// wake-ups waited out a compute process's time slice: p99 latency of 3-5 ms
/// where the interrupt mode had under 1 ms.) The interrupt mode's
/// forwarding thread stays a normal-priority thread, as the M1 baseline is
/// defined.
const KTHREAD_PRIO: i32 = 1;

fn run_polling(cfg: &RouterConfig) -> SysResult<RouterReport> {
    if let Some(c) = cfg.cpu {
        sys::pin_to_cpu(c)?;
    }
    sys::set_fifo(KTHREAD_PRIO)?;
    let mut ports = open_ports(cfg)?;
    let macs: Vec<Mac> = ports.iter().map(|p| p.mac).collect();
    let c = Counters::default();
    let mut fac = PollingFacility::new(cfg.quota);
    if let Some((hi, lo)) = cfg.feedback {
        fac = fac.with_feedback(QueueFeedback::watermarks(cfg.out_queue as u32, hi, lo, MS));
    }
    if let Some(pct) = cfg.cycle_limit {
        fac = fac.with_cycle_limit(CycleLimit::new(10 * MS, pct));
    }
    let devs: Vec<DeviceId> = ports.iter().map(|_| fac.register(true, true)).collect();
    let mut epoll = sys::Epoll::new()?;
    for p in &ports {
        epoll.add(p.rx.fd())?;
    }
    let mut outq: Vec<OutQueue> = ports.iter().map(|_| OutQueue::default()).collect();
    let t0 = mono_ns();
    let cpu0 = thread_cpu_ns();
    let end = t0 + (cfg.duration_s * 1e9) as u64;
    let every = (cfg.stats_every_s * 1e9) as u64;
    let mut next_stats = if every > 0 { t0 + every } else { u64::MAX };
    let mut prev = (0, 0, t0);
    let mut buf = vec![0u8; 2048];
    let mut inhibited_before = false;
    loop {
        // M4's cycle counter is read around every turn of the loop: each
        // turn's wall time, up to any sleep, is charged (so interrupt work
        // landing inside a turn counts too).
        let now_abs = mono_ns();
        if now_abs >= end || sys::signals::stopping() {
            break;
        }
        if now_abs >= next_stats || sys::signals::take_usr1() {
            eprintln!("{}", live_line(Mode::Polling, &c, &mut prev, now_abs));
            if now_abs >= next_stats {
                next_stats += every;
            }
        }
        let now = now_abs - t0;
        let inhibited = fac.input_inhibited(now);
        if inhibited.is_some() && !inhibited_before {
            let i = if inhibited == Some(rxsched_core::InhibitCause::QueueFeedback) {
                0
            } else {
                1
            };
            c.inhibits[i].fetch_add(1, Relaxed);
        }
        inhibited_before = inhibited.is_some();
        match fac.next_action(now) {
            rxsched_core::Action::Poll { dev, dir, quota } => {
                let d = dev.0;
                let (handled, more) = match dir {
                    Dir::Rx => {
                        let mut wanted_tx = vec![false; ports.len()];
                        let n = ports[d].rx.recv(quota.as_count() as usize, &mut |f| {
                            c.rx.fetch_add(1, Relaxed);
                            let b = &mut buf[..f.len()];
                            b.copy_from_slice(f);
                            match forward_in_place(b, &cfg.routes, &macs) {
                                Ok(out) => {
                                    outq[out].push(b, cfg.out_queue, &c);
                                    wanted_tx[out] = true;
                                }
                                Err(r) => c.refuse(r),
                            }
                        });
                        for (o, w) in wanted_tx.iter().enumerate() {
                            if *w {
                                fac.interrupt(devs[o], Dir::Tx);
                                fac.queue_level(outq[o].frames.len() as u32, now);
                            }
                        }
                        (n, ports[d].rx.pending())
                    }
                    Dir::Tx => {
                        // A full device keeps its frames queued for the next
                        // turn; when the queue is full, input drops at it.
                        let n = outq[d].flush(&mut ports[d].tx, quota.as_count() as usize, &c)?;
                        fac.queue_level(outq[d].frames.len() as u32, now);
                        (n, !outq[d].frames.is_empty())
                    }
                };
                fac.poll_done(dev, dir, handled as u32, more);
                let t = mono_ns();
                fac.charge(t - t0, t - now_abs);
            }
            rxsched_core::Action::EnableInterrupts { dev, dir } => {
                let pending = match dir {
                    Dir::Rx => ports[dev.0].rx.pending(),
                    Dir::Tx => !outq[dev.0].frames.is_empty(),
                };
                if pending {
                    fac.interrupt(dev, dir);
                } else if dir == Dir::Rx {
                    c.mode_switches.fetch_add(1, Relaxed);
                }
                let t = mono_ns();
                fac.charge(t - t0, t - now_abs);
            }
            rxsched_core::Action::Idle { until } => {
                // M4 re-enables input when the idle thread runs. Blocking
                // here is not that: another process (the compute process)
                // may take the CPU, so only the period's end re-enables.
                let limit = end.min(next_stats).saturating_sub(now_abs);
                let wait_ns = until.map_or(limit, |u| u.saturating_sub(now).min(limit));
                // Wait only on the devices whose "interrupt" is enabled.
                for (i, d) in devs.iter().enumerate() {
                    epoll.arm(i, fac.interrupts_enabled(*d, Dir::Rx))?;
                }
                let ms = wait_ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
                let t = mono_ns();
                fac.charge(t - t0, t - now_abs);
                for i in epoll.wait(ms)? {
                    fac.interrupt(devs[i], Dir::Rx);
                    c.mode_switches.fetch_add(1, Relaxed);
                }
            }
        }
    }
    let secs = (mono_ns() - t0) as f64 / 1e9;
    let cpu_s = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    report(cfg, &c, &mut ports, secs, cpu_s)
}

fn run_interrupt(cfg: &RouterConfig) -> SysResult<RouterReport> {
    let ports = open_ports(cfg)?;
    let macs: Vec<Mac> = ports.iter().map(|p| p.mac).collect();
    let c = Arc::new(Counters::default());
    let queue: Arc<(Mutex<VecDeque<Vec<u8>>>, Condvar)> =
        Arc::new((Mutex::new(VecDeque::new()), Condvar::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (mut rxs, mut txs): (Vec<PacketRing>, Vec<PacketTx>) = (Vec::new(), Vec::new());
    let names: Vec<String> = ports.iter().map(|p| p.name.clone()).collect();
    for p in ports {
        rxs.push(p.rx);
        txs.push(p.tx);
    }
    let t0 = mono_ns();
    // The receive thread: device priority. It does the link-level work for
    // every frame ready (batching) and queues it, or drops it when the
    // queue is full, after the work is spent.
    let rx_thread = {
        let (c, queue, stop, cfg) = (c.clone(), queue.clone(), stop.clone(), cfg.clone());
        std::thread::Builder::new()
            .name("rx".into())
            .spawn(move || -> SysResult<(Vec<PacketRing>, u64)> {
                if let Some(cpu) = cfg.cpu {
                    sys::pin_to_cpu(cpu)?;
                }
                sys::set_fifo(DEVICE_PRIO)?;
                let cpu0 = thread_cpu_ns();
                let fds: Vec<_> = rxs.iter().map(|r| r.fd()).collect();
                let mut batch: Vec<Vec<u8>> = Vec::new();
                while !stop.load(Relaxed) {
                    let ready = sys::poll_fds(&fds, libc::POLLIN, 50)?;
                    for (i, r) in ready.iter().enumerate() {
                        if !r {
                            continue;
                        }
                        rxs[i].recv(usize::MAX, &mut |f| {
                            c.rx.fetch_add(1, Relaxed);
                            let mut v = f.to_vec();
                            v.push(i as u8); // the input port rides at the end
                            batch.push(v);
                        });
                    }
                    if batch.is_empty() {
                        continue;
                    }
                    let (lock, cv) = &*queue;
                    let mut q = lock.lock().expect("queue lock");
                    for v in batch.drain(..) {
                        if q.len() >= cfg.input_queue {
                            c.ipintrq.fetch_add(1, Relaxed);
                        } else {
                            q.push_back(v);
                        }
                    }
                    drop(q);
                    cv.notify_one();
                }
                Ok((rxs, thread_cpu_ns() - cpu0))
            })
            .expect("spawn the receive thread")
    };
    // The forwarding thread: normal priority (SCHED_OTHER), on the same CPU.
    let fw_thread = {
        let (c, queue, stop, cfg) = (c.clone(), queue.clone(), stop.clone(), cfg.clone());
        std::thread::Builder::new()
            .name("forward".into())
            .spawn(move || -> SysResult<u64> {
                if let Some(cpu) = cfg.cpu {
                    sys::pin_to_cpu(cpu)?;
                }
                let cpu0 = thread_cpu_ns();
                let mut outq: Vec<OutQueue> = txs.iter().map(|_| OutQueue::default()).collect();
                let mut work: VecDeque<Vec<u8>> = VecDeque::new();
                while !stop.load(Relaxed) {
                    {
                        let (lock, cv) = &*queue;
                        let mut q = lock.lock().expect("queue lock");
                        if q.is_empty() && outq.iter().all(|o| o.frames.is_empty()) {
                            q = cv
                                .wait_timeout(q, std::time::Duration::from_millis(50))
                                .expect("queue lock")
                                .0;
                        }
                        std::mem::swap(&mut *q, &mut work);
                    }
                    for mut v in work.drain(..) {
                        v.pop(); // input port; both directions share the table
                        match forward_in_place(&mut v, &cfg.routes, &macs) {
                            Ok(out) => {
                                outq[out].push(&v, cfg.out_queue, &c);
                            }
                            Err(r) => c.refuse(r),
                        }
                    }
                    for (i, o) in outq.iter_mut().enumerate() {
                        o.flush(&mut txs[i], usize::MAX, &c)?;
                    }
                }
                Ok(thread_cpu_ns() - cpu0)
            })
            .expect("spawn the forwarding thread")
    };
    let end = t0 + (cfg.duration_s * 1e9) as u64;
    let every = (cfg.stats_every_s * 1e9) as u64;
    let mut next_stats = if every > 0 { t0 + every } else { u64::MAX };
    let mut prev = (0, 0, t0);
    while mono_ns() < end
        && !sys::signals::stopping()
        && !rx_thread.is_finished()
        && !fw_thread.is_finished()
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = mono_ns();
        if now >= next_stats || sys::signals::take_usr1() {
            eprintln!("{}", live_line(Mode::Interrupt, &c, &mut prev, now));
            if now >= next_stats {
                next_stats += every;
            }
        }
    }
    stop.store(true, Relaxed);
    queue.1.notify_all();
    let (rxs, rx_cpu) = rx_thread.join().expect("receive thread")?;
    let fw_cpu = fw_thread.join().expect("forwarding thread")?;
    let secs = (mono_ns() - t0) as f64 / 1e9;
    let mut ports: Vec<Port> = rxs
        .into_iter()
        .zip(names)
        .map(|(rx, name)| {
            Ok(Port {
                tx: PacketTx::open(&name)?,
                mac: sys::mac_of(&name)?,
                name,
                rx,
            })
        })
        .collect::<SysResult<_>>()?;
    report(cfg, &c, &mut ports, secs, (rx_cpu + fw_cpu) as f64 / 1e9)
}

#[cfg(test)]
mod tests {
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
        let wide = Route::parse("198.18.0.0/15=a@02:00:00:00:00:01", &ports).unwrap();
        let narrow = Route::parse("198.19.0.0/24=b@02:00:00:00:00:02", &ports).unwrap();
        assert!(wide.matches([198, 19, 0, 9]) && narrow.matches([198, 19, 0, 9]));
        assert!(!narrow.matches([198, 18, 0, 9]));
    }
}
