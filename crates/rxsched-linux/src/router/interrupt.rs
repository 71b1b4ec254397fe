//! The interrupt-driven router (M1, the baseline): a receive "interrupt
//! handler" at device priority takes every frame that is ready (batching)
//! onto a bounded input queue, and drops what does not fit after the work
//! of taking it is spent; a normal-priority forwarding thread on the same
//! CPU drains the queue, forwards, and sends. Under overload the handler
//! starves the forwarder: receive livelock.
//!
//! Each side is a value with a `turn` that tests call directly, in any
//! interleaving; [`run`] gives each its own thread.

use super::{
    forward_one, Counters, Devices, Egress, Mode, Onward, OutQueue, Port, Route, RouterConfig,
    RouterReport, ScreenEnd, Stats,
};
use crate::backend::{RxBackend, TxBackend, Wait};
use crate::links::LinkWatch;
use crate::sys::{self, SysResult};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The input queue (`ipintrq`) between the two sides: frames with the port
/// they came in on.
#[derive(Debug, Default)]
pub struct InputQueue {
    q: Mutex<VecDeque<(usize, Vec<u8>)>>,
    ready: Condvar,
}

impl InputQueue {
    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The receive side: the interrupt handler of every port.
pub struct RxSide<R> {
    rx: Vec<R>,
    queue: Arc<InputQueue>,
    counters: Arc<Counters>,
    cap: usize,
    batch: Vec<(usize, Vec<u8>)>,
}

impl<R: RxBackend> RxSide<R> {
    /// One handler pass: every frame ready on every port goes to the input
    /// queue, or is dropped there when it is full. Returns frames taken.
    pub fn turn(&mut self) -> usize {
        let mut n = 0;
        for (i, rx) in self.rx.iter_mut().enumerate() {
            let batch = &mut self.batch;
            n += rx.recv(usize::MAX, &mut |f| batch.push((i, f.to_vec())));
        }
        if self.batch.is_empty() {
            return 0;
        }
        self.counters.rx.fetch_add(n as u64, Relaxed);
        let mut q = self.queue.q.lock().unwrap_or_else(|e| e.into_inner());
        for v in self.batch.drain(..) {
            if q.len() >= self.cap {
                self.counters.ipintrq.fetch_add(1, Relaxed);
            } else {
                q.push_back(v);
            }
        }
        drop(q);
        self.queue.ready.notify_one();
        n
    }

    /// Whether any port has input.
    pub fn pending(&self) -> bool {
        self.rx.iter().any(|r| r.pending())
    }

    /// Frames the rings dropped, on every port.
    pub fn ring_drops(&mut self) -> SysResult<u64> {
        let mut n = 0;
        for r in &mut self.rx {
            n += r.ring_drops()?;
        }
        Ok(n)
    }

    /// What the devices' programs did (see [`crate::bpf::RouteOutcome`]).
    pub fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        crate::backend::program_counts(&mut self.rx)
    }

    /// Frames waiting on the rings and on the input queue.
    pub fn queued(&self) -> u64 {
        self.rx.iter().map(|r| r.queued()).sum::<u64>() + self.queue.len() as u64
    }
}

/// The forwarding side: IP input, forwarding and output.
pub struct FwdSide<T> {
    tx: Vec<T>,
    routes: Vec<Route>,
    egress: Vec<Egress>,
    outq: Vec<OutQueue>,
    out_cap: usize,
    queue: Arc<InputQueue>,
    counters: Arc<Counters>,
    work: VecDeque<(usize, Vec<u8>)>,
    buf: Vec<u8>,
    screen: Option<ScreenEnd>,
}

impl<T: TxBackend> FwdSide<T> {
    /// One pass: takes what the input queue holds (waiting up to `wait` if
    /// there is nothing to do), forwards it and sends what is queued.
    /// Returns frames taken from the input queue.
    pub fn turn(&mut self, wait: Duration) -> SysResult<usize> {
        {
            let mut q = self.queue.q.lock().unwrap_or_else(|e| e.into_inner());
            if q.is_empty() && self.outq.iter().all(|o| o.is_empty()) && !wait.is_zero() {
                q = self
                    .queue
                    .ready
                    .wait_timeout(q, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            std::mem::swap(&mut *q, &mut self.work);
        }
        let n = self.work.len();
        for (_, frame) in self.work.drain(..) {
            // Both directions share the table; the input port is not needed.
            let onward = match &self.screen {
                Some(s) => Onward::Screen(&s.queue),
                None => Onward::Out {
                    outq: &mut self.outq,
                    cap: self.out_cap,
                },
            };
            forward_one(
                &frame,
                &mut self.buf,
                &self.routes,
                &self.egress,
                onward,
                &self.counters,
            );
        }
        for (i, o) in self.outq.iter_mut().enumerate() {
            o.flush(&mut self.tx[i], usize::MAX, &self.counters)?;
        }
        Ok(n)
    }

    /// Hands forwarded frames to the screening stage behind `screen`
    /// instead of the output queues (where, without feedback, they
    /// overflow its queue when it cannot keep up: the baseline).
    pub fn with_screen(mut self, screen: Option<ScreenEnd>) -> Self {
        self.screen = screen;
        self
    }

    /// Frames on the output queues.
    pub fn queued(&self) -> u64 {
        self.outq.iter().map(|q| q.len() as u64).sum()
    }
}

/// Splits `ports` into the two sides, sharing counters and the input queue.
pub fn sides<R, T>(
    ports: Vec<Port<R, T>>,
    cfg: &RouterConfig,
) -> (RxSide<R>, FwdSide<T>, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let queue = Arc::new(InputQueue::default());
    let egress = ports
        .iter()
        .map(|p| Egress {
            mac: p.mac,
            mtu: p.mtu,
        })
        .collect();
    let outq = ports.iter().map(|_| OutQueue::default()).collect();
    let (rx, tx): (Vec<R>, Vec<T>) = ports.into_iter().map(|p| (p.rx, p.tx)).unzip();
    let rxs = RxSide {
        rx,
        queue: queue.clone(),
        counters: counters.clone(),
        cap: cfg.input_queue,
        batch: Vec::new(),
    };
    let fwd = FwdSide {
        tx,
        routes: cfg.routes.clone(),
        egress,
        outq,
        out_cap: cfg.out_queue,
        queue,
        counters: counters.clone(),
        work: VecDeque::new(),
        buf: vec![0u8; 65_536],
        screen: None,
    };
    (rxs, fwd, counters)
}

/// Runs the two sides on their own threads until the duration is over or
/// a stop signal arrives; the receive thread at SCHED_FIFO `prio`.
pub fn run<R, T, W>(
    ports: Vec<Port<R, T>>,
    cfg: &RouterConfig,
    screen: Option<ScreenEnd>,
    prio: i32,
    mut wait: W,
    mut links: Option<LinkWatch>,
    devices: &Devices,
) -> SysResult<RouterReport>
where
    R: RxBackend + Send + 'static,
    T: TxBackend + Send + 'static,
    W: Wait + Send + 'static,
{
    let t0 = sys::mono_ns();
    for (i, p) in ports.iter().enumerate() {
        wait.add(i, p.rx.fd())?;
    }
    let (rxs, fwd, c) = sides(ports, cfg);
    let _ = c.devices.set(devices.clone());
    let fwd = fwd.with_screen(screen.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let cpu = cfg.run.cpu;
    let armed = vec![true; rxs.rx.len()];
    let rx_thread = spawn_side("rx", cpu, Some(prio), &stop, rxs, move |rxs| {
        let rx = &rxs.rx;
        wait.wait(&armed, &|i| rx[i].pending(), 50_000_000)?;
        // The supervising loop watches the links themselves.
        let _ = wait.take_errors();
        rxs.turn();
        Ok(())
    });
    let fw_thread = spawn_side("forward", cpu, None, &stop, fwd, |fwd| {
        fwd.turn(Duration::from_millis(50)).map(|_| ())
    });
    crate::runtime::listening("route", &cfg.ports, &super::how(cfg));
    let end = t0 + (cfg.run.duration_s * 1e9) as u64;
    let mut stats = Stats::new(cfg.run.stats_every_s, t0);
    let mut fault = None;
    while sys::mono_ns() < end
        && !sys::signals::stopping()
        && !rx_thread.is_finished()
        && !fw_thread.is_finished()
        && fault.is_none()
    {
        std::thread::sleep(Duration::from_millis(20));
        let now = sys::mono_ns();
        stats.tick(Mode::Interrupt, &c, screen.as_ref(), "", now);
        if let Some(l) = links.as_mut().filter(|l| l.due(now)) {
            fault = l.check(now)?;
        }
    }
    stop.store(true, Relaxed);
    let (mut rxs, rx_cpu) = rx_thread.join().expect("receive thread")?;
    rxs.queue.ready.notify_all();
    let (fwd, fw_cpu) = fw_thread.join().expect("forwarding thread")?;
    let in_flight = fwd.queued() + rxs.queue.len() as u64;
    let mut r = RouterReport::new(Mode::Interrupt, &c, rxs.ring_drops()?, in_flight);
    r.add_program(&rxs.program_counts()?, false);
    r.duration_s = (sys::mono_ns() - t0) as f64 / 1e9;
    r.cpu_s = (rx_cpu + fw_cpu) as f64 / 1e9;
    r.fault = fault;
    Ok(r)
}

/// Starts a side's thread, pinned to `cpu` and at SCHED_FIFO `prio` if
/// given, that turns `side` until `stop`; it returns the side and the CPU
/// time the thread used.
fn spawn_side<S: Send + 'static>(
    name: &str,
    cpu: Option<usize>,
    prio: Option<i32>,
    stop: &Arc<AtomicBool>,
    mut side: S,
    mut turn: impl FnMut(&mut S) -> SysResult<()> + Send + 'static,
) -> std::thread::JoinHandle<SysResult<(S, u64)>> {
    let stop = stop.clone();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if let Some(c) = cpu {
                sys::pin_to_cpu(c)?;
            }
            if let Some(p) = prio {
                sys::set_fifo(p)?;
            }
            let cpu0 = sys::thread_cpu_ns();
            while !stop.load(Relaxed) {
                turn(&mut side)?;
            }
            Ok((side, sys::thread_cpu_ns() - cpu0))
        })
        .expect("spawn a router thread")
}
