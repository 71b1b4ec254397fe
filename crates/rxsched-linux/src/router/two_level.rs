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
//! threads' and the forwarding thread's priorities.

use crate::napi_threads::{self, Sched};
use crate::runtime::Polls;
use crate::sys::{self, SysResult};
use rxsched_core::{Detector, Service, TwoLevel, MS};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// What the monitor did.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Switches either way.
    pub switches: u64,
    /// Nanoseconds serviced by polling.
    pub polling_ns: u64,
    /// The servicing when it stopped.
    pub service: Service,
}

/// The monitor's priority: above the receive threads at device priority.
const MONITOR_PRIO: i32 = crate::runtime::DEVICE_PRIO + 10;
/// How often it looks.
const SAMPLE_NS: u64 = 10 * MS;

/// Moves the servicing: the receive threads `napi` and the forwarding
/// thread `router` get the priorities `service` gives them.
fn serve(service: Service, napi: &[i32], router: i32) -> SysResult<()> {
    let (rx, fwd) = match service {
        Service::Interrupt => (Sched::Fifo(crate::runtime::DEVICE_PRIO), Sched::Normal),
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
/// thread (the forwarding thread), on `cpu`. It stops when `stop` is set.
pub fn spawn(
    cfg: super::TwoLevelCfg,
    ports: &[String],
    cpu: Option<usize>,
    polls: Arc<Polls>,
    stop: Arc<AtomicBool>,
) -> SysResult<std::thread::JoinHandle<SysResult<Outcome>>> {
    let mut napi_tids = Vec::new();
    for p in ports {
        napi_tids.extend(napi_threads::thread_ids(p)?);
    }
    let router = rustix::thread::gettid().as_raw_nonzero().get();
    serve(Service::Interrupt, &napi_tids, router)?;
    std::thread::Builder::new()
        .name("rxsched-two-level".into())
        .spawn(move || {
            if let Some(c) = cpu {
                sys::pin_to_cpu(c)?;
            }
            sys::set_fifo(MONITOR_PRIO)?;
            monitor(cfg, &napi_tids, router, &polls, &stop)
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
    polls: &Polls,
    stop: &AtomicBool,
) -> SysResult<Outcome> {
    let mut tl =
        TwoLevel::new(cfg.detector, cfg.hold_ns, cfg.window_ns).with_idle_grace(cfg.idle_grace_ns);
    if let Some(f) = cfg.return_below {
        tl = tl.with_return_below(f);
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
        let want = tl.tick(now);
        if want != service {
            match want {
                Service::Polling => polling_since = Some(now),
                Service::Interrupt => polling_ns += polling_since.take().map_or(0, |s| now - s),
            }
            service = want;
            serve(service, napi_tids, router)?;
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
    })
}
