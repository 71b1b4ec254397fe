//! One polling thread per CPU (`route --cpus`): the receive queues of every
//! port are dealt out to the threads (queue q of port p to thread p + q,
//! modulo the threads), each thread pinned to its
//! CPU with its queues' NAPI threads, each with its own polling loop
//! (quota, M3, M4 over its own queues' receive work) and its own output
//! queues. They count into one set of counters and send through each
//! port's queue-0 socket, taking turns on it. A cap for the whole router
//! (`--cycle-limit-total`) is split evenly over the threads, so their sum
//! never passes it.

use super::polling::{Part, PollingRouter};
use super::{Counters, Devices, Port, RouterConfig, RouterReport};
use crate::backend::copy::NoTx;
use crate::backend::packet::EpollWait;
use crate::backend::{AnyRx, AnyTx, RxBackend};
use crate::links::LinkWatch;
use crate::napi_threads::{self, NapiGate, Sched};
use crate::runtime::{NAPI_PRIO, POLL_PRIO};
use crate::sys::{self, SysError, SysResult};
use rxsched_core::DropPoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// What one polling thread did, in the router's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadReport {
    /// Its CPU.
    pub cpu: usize,
    /// Its receive queues, as `PORT:QUEUE`.
    pub queues: Vec<String>,
    /// Frames it took off them.
    pub taken: u64,
    /// Its CPU time, in seconds.
    pub cpu_s: f64,
}

/// A receive side with nothing to receive: a port whose queue 0 another
/// thread serves, kept in this thread's list for its transmit side. Its
/// descriptor never becomes readable.
struct Elsewhere(OwnedFd);

impl Elsewhere {
    fn new() -> SysResult<Elsewhere> {
        rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)
            .map(Elsewhere)
            .map_err(|e| SysError {
                what: "router".into(),
                syscall: "eventfd",
                source: e.into(),
            })
    }
}

impl RxBackend for Elsewhere {
    fn fd(&self) -> Option<RawFd> {
        Some(self.0.as_raw_fd())
    }
    fn recv_while(&mut self, _max: usize, _f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        0
    }
    fn pending(&self) -> bool {
        false
    }
    fn ring_drops(&mut self) -> SysResult<u64> {
        Ok(0)
    }
}

fn invalid(msg: &str) -> SysError {
    SysError {
        what: "router".into(),
        syscall: "configure",
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, msg.to_string()),
    }
}

/// One thread's share: its CPU, its ports (every port's transmit side
/// first, with that port's queue 0 if it is this thread's), its queues'
/// names and NAPI threads.
struct Share {
    cpu: usize,
    ports: Vec<Port<AnyRx, AnyTx>>,
    queues: Vec<String>,
    napi: Vec<i32>,
    /// Each receive side's port and queue, in `ports`' order (the queue
    /// empty for a port whose queue 0 another thread serves).
    sides: Vec<(String, String)>,
}

/// The metrics page the threads of a `--cpus` router share: each thread
/// puts its share in, and the page is the router's whole.
pub(crate) struct SharedPage {
    publisher: crate::metrics::Publisher,
    counters: Arc<Counters>,
    mode: super::Mode,
    slots: std::sync::Mutex<Vec<Option<(Part, crate::metrics::RouterExtras)>>>,
}

impl SharedPage {
    /// Thread `i`'s share now; publishes the router's page.
    pub(crate) fn publish(&self, i: usize, part: Part, extras: crate::metrics::RouterExtras) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slots.get_mut(i) {
            *s = Some((part, extras));
        }
        let have: Vec<&(Part, crate::metrics::RouterExtras)> = slots.iter().flatten().collect();
        let parts: Vec<&Part> = have.iter().map(|(p, _)| p).collect();
        let r = merge(self.mode, &self.counters, &parts);
        let mut all = crate::metrics::RouterExtras::default();
        for (_, e) in &have {
            all.rings.extend(e.rings.iter().cloned());
            all.queues.extend(e.queues.iter().cloned());
            for (name, s) in &e.cpu_s {
                match all.cpu_s.iter_mut().find(|(n, _)| n == name) {
                    Some((_, t)) => *t += s,
                    None => all.cpu_s.push((name, *s)),
                }
            }
            all.inhibited = all.inhibited.or(e.inhibited);
            all.cycle_headroom_ns = match (all.cycle_headroom_ns, e.cycle_headroom_ns) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
        }
        if let Some((_, e)) = have.first() {
            all.ports = e.ports.clone();
            all.quota = e.quota;
        }
        // Each thread's M4 share is of its own CPU: the router's is their sum.
        all.cycle_limit = have
            .iter()
            .filter_map(|(_, e)| e.cycle_limit)
            .reduce(|a, b| a + b);
        drop(slots);
        self.publisher
            .publish(crate::metrics::router_page(&r, &all));
    }
}

/// What one polling thread hands back when the run ends.
struct Done {
    part: Part,
    duration_s: f64,
    cpu_s: f64,
    /// Its queues, as `PORT:QUEUE`.
    queues: Vec<String>,
    cpu: usize,
    by_queue: Vec<super::QueueTaken>,
}

/// The router's report from its threads' shares (without the run's
/// duration, CPU time and the threads' own lines).
fn merge(mode: super::Mode, counters: &Counters, parts: &[&Part]) -> RouterReport {
    let ring: u64 = parts.iter().map(|p| p.ring).sum();
    let sock: u64 = parts.iter().map(|p| p.sock).sum();
    let in_flight: u64 = parts.iter().map(|p| p.in_flight).sum();
    let mut r = RouterReport::new(mode, counters, ring, in_flight);
    if sock > 0 {
        r.drops.insert(DropPoint::XskRxRing, sock);
    }
    let mut program: Vec<u64> = Vec::new();
    let mut inhibits = BTreeMap::new();
    for p in parts {
        if program.len() < p.program.len() {
            program.resize(p.program.len(), 0);
        }
        for (a, b) in program.iter_mut().zip(&p.program) {
            *a += b;
        }
        for (cause, n) in &p.inhibits {
            *inhibits.entry(*cause).or_insert(0) += n;
        }
    }
    r.add_program(&program, false);
    r.inhibits = inhibits;
    r.wake_cost_ns = parts.iter().find_map(|p| p.wake_cost_ns);
    r.fault = parts.iter().find_map(|p| p.fault.clone());
    r
}

/// Deals `ports` (every port's queue 0, then the other queues, `queue_of`
/// naming each receive side's port and queue) out to the CPUs `cpus`.
fn deal(
    ports: Vec<Port<AnyRx, AnyTx>>,
    queue_of: &[(usize, u32)],
    nports: usize,
    cpus: &[usize],
) -> SysResult<Vec<Share>> {
    let mut napi: Vec<Vec<i32>> = Vec::new();
    for p in &ports[..nports] {
        napi.push(napi_threads::queue_threads(&p.name)?);
    }
    let mut shares: Vec<Share> = cpus
        .iter()
        .map(|&cpu| Share {
            cpu,
            ports: Vec::new(),
            queues: Vec::new(),
            napi: Vec::new(),
            sides: Vec::new(),
        })
        .collect();
    let egress: Vec<(String, crate::wire::Mac, usize)> = ports[..nports]
        .iter()
        .map(|p| (p.name.clone(), p.mac, p.mtu))
        .collect();
    let shared_tx: Vec<Vec<AnyTx>> = ports[..nports]
        .iter()
        .map(|p| {
            (0..cpus.len())
                .map(|_| {
                    p.tx.share()
                        .ok_or_else(|| invalid("--cpus needs the xdp backend"))
                })
                .collect::<SysResult<Vec<_>>>()
        })
        .collect::<SysResult<_>>()?;
    let mut firsts: Vec<Vec<Option<AnyRx>>> = (0..cpus.len())
        .map(|_| (0..nports).map(|_| None).collect())
        .collect();
    let mut extra: Vec<Vec<Port<AnyRx, AnyTx>>> = (0..cpus.len()).map(|_| Vec::new()).collect();
    let mut extra_sides: Vec<Vec<(String, String)>> = (0..cpus.len()).map(|_| Vec::new()).collect();
    for (j, port) in ports.into_iter().enumerate() {
        // Queue q of port p to thread (p + q) mod k: each port's queues
        // spread over the threads, and one queue per port still spreads
        // the ports.
        let (p, q) = queue_of[j];
        let t = (p + q as usize) % cpus.len();
        shares[t].queues.push(format!("{}:{q}", egress[p].0));
        if let Some(tid) = napi[p].get(q as usize).copied().filter(|t| *t > 0) {
            shares[t].napi.push(tid);
        }
        if j < nports {
            firsts[t][p] = Some(port.rx);
        } else {
            extra_sides[t].push((egress[p].0.clone(), q.to_string()));
            extra[t].push(Port {
                tx: Box::new(NoTx(port.name.clone())) as AnyTx,
                ..port
            });
        }
    }
    let mut shared_tx: Vec<std::vec::IntoIter<AnyTx>> =
        shared_tx.into_iter().map(|v| v.into_iter()).collect();
    for (t, share) in shares.iter_mut().enumerate() {
        for (p, first) in firsts[t].iter_mut().enumerate() {
            let (name, mac, mtu) = egress[p].clone();
            let (rx, queue) = match first.take() {
                Some(rx) => (rx, "0".to_string()),
                None => (Box::new(Elsewhere::new()?) as AnyRx, String::new()),
            };
            share.sides.push((name.clone(), queue));
            share.ports.push(Port {
                name,
                rx,
                tx: shared_tx[p].next().expect("one per thread"),
                mac,
                mtu,
            });
        }
        share.ports.append(&mut extra[t]);
        share.sides.append(&mut extra_sides[t]);
    }
    Ok(shares)
}

/// Runs the router's polling threads, one per CPU of `cfg.cpus`, over
/// `ports` (each port's queue 0 first, then the other queues, `queue_of`
/// naming each), until the run ends; returns the router's report and each
/// thread's.
pub(super) fn run(
    cfg: &RouterConfig,
    ports: Vec<Port<AnyRx, AnyTx>>,
    queue_of: &[(usize, u32)],
    devices: &Devices,
    prio: Option<i32>,
) -> SysResult<RouterReport> {
    let nports = cfg.ports.len();
    if cfg.screen.is_some() || cfg.in_xdp || cfg.mode != super::Mode::Polling {
        return Err(invalid(
            "--cpus runs polling threads that forward in user space: no --screen, --forward-in xdp or --mode other than polling",
        ));
    }
    let k = cfg.cpus.len();
    let mut c = cfg.clone();
    if let Some(total) = cfg.cycle_limit_total {
        // Each thread its equal part: the sum never passes the cap.
        let each = total / k as f64;
        c.run.cycle_limit = Some(c.run.cycle_limit.map_or(each, |l| l.min(each)));
    }
    if c.run.cycle_limit.is_some() && c.run.wake_cost_ns.is_none() {
        c.run.wake_cost_ns = Some(crate::wakecost::measure(cfg.cpus[0])?);
    }
    let counters: Arc<Counters> = Arc::default();
    let _ = counters.devices.set(devices.clone());
    let shares = deal(ports, queue_of, nports, &cfg.cpus)?;
    // One page for the router, which each thread fills in its part of.
    let page = c.metrics.take().map(|publisher| {
        Arc::new(SharedPage {
            publisher,
            counters: counters.clone(),
            mode: cfg.mode,
            slots: std::sync::Mutex::new(vec![None; k]),
        })
    });
    let mut handles = Vec::new();
    // Each thread says when it takes frames; the router is listening when
    // all of them do.
    let (ready, all_ready) = std::sync::mpsc::channel();
    for (i, share) in shares.into_iter().enumerate() {
        let (c, counters, ifaces) = (c.clone(), counters.clone(), cfg.ports.clone());
        let page = page.clone();
        let ready = ready.clone();
        let h = std::thread::Builder::new()
            .name(format!("poll-cpu{}", share.cpu))
            .spawn(move || -> SysResult<Done> {
                sys::pin_to_cpu(share.cpu)?;
                for t in &share.napi {
                    napi_threads::pin(*t, share.cpu)?;
                }
                let gate = NapiGate::of_threads(share.napi.clone(), Sched::Fifo(NAPI_PRIO))?;
                let mut mine = c.clone();
                mine.run.cpu = Some(share.cpu);
                let wait = EpollWait::new()?;
                let mut r = PollingRouter::with_counters(
                    share.ports,
                    &mine,
                    None,
                    sys::MonoClock,
                    wait,
                    counters,
                )?;
                r.attach(
                    Box::new(gate),
                    LinkWatch::new("route", &ifaces, sys::mono_ns())?,
                )?;
                r.name_sides(share.sides);
                if let Some(page) = page {
                    r.share_page(page, i);
                }
                crate::runtime::take_priority(prio.or(Some(POLL_PRIO)))?;
                let _ = ready.send(());
                drop(ready);
                // The first thread prints the live line for the router.
                let every = if i == 0 { mine.run.stats_every_s } else { 0.0 };
                let (d, cpu) = r.serve(&mine, every)?;
                let by_queue = r.report()?.received_by_queue;
                let by_queue = by_queue
                    .into_iter()
                    .filter(|q| !q.queue.is_empty())
                    .collect();
                Ok(Done {
                    part: r.part()?,
                    duration_s: d,
                    cpu_s: cpu,
                    queues: share.queues,
                    cpu: share.cpu,
                    by_queue,
                })
            })
            .map_err(|e| SysError {
                what: "router".into(),
                syscall: "clone",
                source: e,
            })?;
        handles.push(h);
    }
    drop(ready);
    // A thread that failed before taking frames never says so: its error
    // is the report's, below.
    if all_ready.iter().take(k).count() == k {
        crate::runtime::listening("route", &cfg.ports, &super::how(cfg));
    }
    let mut parts = Vec::new();
    for h in handles {
        parts.push(
            h.join()
                .map_err(|_| invalid("a polling thread panicked"))??,
        );
    }
    let shares: Vec<&Part> = parts.iter().map(|p| &p.part).collect();
    let mut r = merge(cfg.mode, &counters, &shares);
    r.received_by_queue = parts.iter().flat_map(|p| p.by_queue.clone()).collect();
    r.duration_s = parts.iter().map(|p| p.duration_s).fold(0.0, f64::max);
    r.cpu_s = parts.iter().map(|p| p.cpu_s).sum();
    r.threads = parts
        .into_iter()
        .map(|d| ThreadReport {
            cpu: d.cpu,
            queues: d.queues,
            taken: d.part.taken,
            cpu_s: d.cpu_s,
        })
        .collect();
    Ok(r)
}
