//! `route --mode two-level` (M11, Hansen & Jul 1997): the devices are
//! serviced by interrupts (the receive threads at device priority above
//! the forwarding thread, the M1 baseline) until the overload detector has
//! stayed over its threshold for longer than the hold time; then by
//! polling (the router's thread above the receive threads, M2); and by
//! interrupts again once polling runs out of work.
//!
//! The switch runs in a monitor thread of its own, at a real-time priority
//! above the receive work, reading it every 10 ms: under interrupts the
//! forwarding thread is exactly what overload starves (the paper's DPC
//! timed itself for the same reason: the monitoring must not depend on the
//! work it watches). It moves the servicing by setting the receive
//! threads' and the forwarding thread's priorities. With an objective
//! (`--slo`) it takes its marks from it, and M4 caps the polling phase
//! through [`ServiceGate`].

use crate::backend::Gate;
use crate::napi_threads::{self, Sched};
use crate::runtime::Polls;
use crate::sys::{self, SysResult};
use rxsched_core::{Detector, Service, TwoLevel, MS};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// What the monitor did.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Switches either way.
    pub switches: u64,
    /// Nanoseconds serviced by polling.
    pub polling_ns: u64,
    /// The servicing when it stopped.
    pub service: Service,
    /// The return mark then, if any.
    pub return_below: Option<f64>,
}

/// The monitor's priority: above the receive threads at device priority.
const MONITOR_PRIO: i32 = crate::runtime::DEVICE_PRIO + 10;
/// How often it looks.
const SAMPLE_NS: u64 = 10 * MS;

/// What the monitor shares with the forwarding thread.
pub struct Shared {
    /// The CPU the monitor runs on.
    pub cpu: Option<usize>,
    /// What the polling thread tells it.
    pub polls: Arc<Polls>,
    /// Set when the router stops.
    pub stop: Arc<AtomicBool>,
    /// The servicing in force, which the gate of an objective's M4 reads
    /// ([`ServiceGate`]).
    pub service: Arc<Mutex<Serving>>,
    /// A wake-up's cost, as measured at start, in ns.
    pub wake_ns: f64,
}

/// The servicing in force and, for the polling phase, whether M4 wants
/// input open.
#[derive(Debug, Clone, Copy)]
pub struct Serving {
    /// Interrupts or polling.
    pub service: Service,
    /// What M4's gate last asked.
    pub gate_open: bool,
}

impl Default for Serving {
    fn default() -> Self {
        Serving {
            service: Service::Interrupt,
            gate_open: true,
        }
    }
}

/// M4's gate under the two-level switch (with an objective): it opens and
/// closes the receive threads as M4 asks only while polling services the
/// devices; under interrupts the threads are the monitor's, at device
/// priority, and the switch, not M4, answers an overload (by moving to
/// polling). The monitor moves the servicing under the same lock, so a
/// gate's move and a switch never interleave; switching to polling, it
/// leaves the threads as the gate last asked.
pub struct ServiceGate {
    /// The device's gate, for the receive threads' CPU time and wake-ups
    /// (its own open level is device priority, the interrupt phase's).
    inner: Box<dyn Gate>,
    napi: Vec<i32>,
    router: i32,
    service: Arc<Mutex<Serving>>,
}

impl ServiceGate {
    /// The gate on the receive threads of `ports`, acting only while
    /// `service` is polling, as the calling (forwarding) thread's.
    pub fn new(
        inner: Box<dyn Gate>,
        ports: &[String],
        service: Arc<Mutex<Serving>>,
    ) -> SysResult<Self> {
        let (napi, router) = threads(ports)?;
        Ok(ServiceGate {
            inner,
            napi,
            router,
            service,
        })
    }
}

impl Gate for ServiceGate {
    fn set(&mut self, open: bool) -> SysResult<()> {
        let mut s = self.service.lock().unwrap_or_else(|e| e.into_inner());
        s.gate_open = open;
        match s.service {
            Service::Polling => serve(Service::Polling, open, &self.napi, self.router),
            Service::Interrupt => Ok(()),
        }
    }
    fn cpu_ns(&self) -> SysResult<u64> {
        self.inner.cpu_ns()
    }
    fn wakeups(&self) -> SysResult<u64> {
        self.inner.wakeups()
    }
}

/// The receive threads of `ports` and the calling (forwarding) thread.
fn threads(ports: &[String]) -> SysResult<(Vec<i32>, i32)> {
    let mut napi = Vec::new();
    for p in ports {
        napi.extend(napi_threads::thread_ids(p)?);
    }
    Ok((napi, rustix::thread::gettid().as_raw_nonzero().get()))
}

/// Moves the servicing: the receive threads `napi` and the forwarding
/// thread `router` get the priorities `service` gives them (polling, with
/// input closed by M4's gate, the receive threads idle).
fn serve(service: Service, gate_open: bool, napi: &[i32], router: i32) -> SysResult<()> {
    let (rx, fwd) = match service {
        Service::Interrupt => (Sched::Fifo(crate::runtime::DEVICE_PRIO), Sched::Normal),
        Service::Polling if !gate_open => (Sched::Idle, Sched::Fifo(crate::runtime::POLL_PRIO)),
        Service::Polling => (
            Sched::Fifo(crate::runtime::NAPI_PRIO),
            Sched::Fifo(crate::runtime::POLL_PRIO),
        ),
    };
    napi_threads::set_sched(router, fwd)?;
    napi.iter()
        .try_for_each(|t| napi_threads::set_sched(*t, rx))
}

/// Starts the monitor for the receive threads of `ports` and the calling
/// thread (the forwarding thread), on `sh.cpu`. It stops when `sh.stop`
/// is set.
pub fn spawn(
    cfg: super::TwoLevelCfg,
    ports: &[String],
    sh: Shared,
) -> SysResult<std::thread::JoinHandle<SysResult<Outcome>>> {
    let (napi_tids, router) = threads(ports)?;
    serve(Service::Interrupt, true, &napi_tids, router)?;
    std::thread::Builder::new()
        .name("rxsched-two-level".into())
        .spawn(move || {
            if let Some(c) = sh.cpu {
                sys::pin_to_cpu(c)?;
            }
            sys::set_fifo(MONITOR_PRIO)?;
            monitor(cfg, &napi_tids, router, &sh)
        })
        .map_err(|e| sys::SysError {
            what: "two-level monitor".into(),
            syscall: "clone",
            source: e,
        })
}

fn monitor(
    cfg: super::TwoLevelCfg,
    napi_tids: &[i32],
    router: i32,
    sh: &Shared,
) -> SysResult<Outcome> {
    let (polls, stop) = (&*sh.polls, &*sh.stop);
    let mut tl =
        TwoLevel::new(cfg.detector, cfg.hold_ns, cfg.window_ns).with_idle_grace(cfg.idle_grace_ns);
    if let Some(f) = cfg.return_below {
        tl = tl.with_return_below(f);
    }
    // An objective's return mark: none until a frame's cost is measured
    // (polling, where the share is capped, is the safe side meanwhile).
    if cfg.slo.is_some() {
        tl = tl.with_return_below(0.0);
    }
    let receive_ns =
        || -> SysResult<u64> { napi_tids.iter().map(|t| napi_threads::cpu_ns(*t)).sum() };
    let mut last = receive_ns()?;
    let mut last_router = napi_threads::cpu_ns(router)?;
    let mut service = Service::Interrupt;
    let (mut polling_since, mut polling_ns) = (None, 0u64);
    while !stop.load(Relaxed) && !sys::signals::stopping() {
        std::thread::sleep(std::time::Duration::from_nanos(SAMPLE_NS));
        let now = sys::mono_ns();
        let cpu = receive_ns()?;
        match tl.detector() {
            Detector::CpuFraction(_) => {
                tl.dpc_ran(now, cpu.saturating_sub(last));
            }
            Detector::QueueLength(_) => {
                let q = polls.queued.load(Relaxed).min(u32::MAX as u64) as u32;
                tl.queue_length(now, q);
            }
            Detector::InterruptRate(_) => {
                for _ in 0..polls.wakeups.swap(0, Relaxed) {
                    tl.interrupt(now);
                }
            }
        }
        let router_ns = napi_threads::cpu_ns(router)?;
        if service == Service::Polling {
            // The polling work: the forwarding thread's time and the
            // receive threads' (they run while it waits).
            let work = router_ns.saturating_sub(last_router) + cpu.saturating_sub(last);
            tl.poll_ran(now, work);
        }
        last_router = router_ns;
        last = cpu;
        let busy = polls.busy.swap(0, Relaxed);
        polls.dry.store(0, Relaxed);
        if service == Service::Polling {
            // Polling empties the rings all the time (the receive threads
            // fill them only while it waits): it has run out of work when
            // a whole sample brought nothing to take.
            tl.polled(now, busy > 0);
        }
        if let Some(slo) = cfg.slo {
            // Under interrupts a frame alone costs a wake-up and itself;
            // polled, itself.
            let frame = polls.frame_ns.load(Relaxed) as f64;
            if frame > 0.0 {
                if let Ok(m) = slo.switch_marks(sh.wake_ns + frame, frame) {
                    tl.set_return_below(m.return_below);
                }
            }
        }
        let want = tl.tick(now);
        if want != service {
            match want {
                Service::Polling => polling_since = Some(now),
                Service::Interrupt => polling_ns += polling_since.take().map_or(0, |s| now - s),
            }
            service = want;
            let mut s = sh.service.lock().unwrap_or_else(|e| e.into_inner());
            s.service = service;
            serve(service, s.gate_open, napi_tids, router)?;
            drop(s);
            polls.switches.store(tl.switches(), Relaxed);
            polls
                .polling
                .store((service == Service::Polling) as u64, Relaxed);
        }
    }
    let now = sys::mono_ns();
    polling_ns += polling_since.map_or(0, |s| now - s);
    Ok(Outcome {
        switches: tl.switches(),
        polling_ns,
        service,
        return_below: tl.return_below(),
    })
}
