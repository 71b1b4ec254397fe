//! What one wake-up of the receive work costs the task it interrupts,
//! beyond the CPU time the woken thread is charged with: the timer or
//! device interrupt that wakes it, the switches in and out, and the caches
//! the interrupted task finds cold. Without IRQ time accounting the kernel
//! charges all of it to whatever was running, so a CPU-cycle limit that
//! counts only its threads' CPU time lets the receive work take more than
//! its share from the other tasks (Mogul & Ramakrishnan §7 saw the same:
//! "the cost of handling the actual interrupts; these cycles are not
//! counted against the threshold").
//!
//! It is measured on the CPU itself: a compute loop runs alone, then while
//! a real-time thread is woken every [`PERIOD_NS`] by a timer, as NAPI's
//! deferred interrupt timer wakes its thread; the progress the loop lost,
//! less the woken thread's own CPU time, divided by the wake-ups, is the
//! cost of one.

use crate::sys::{self, mono_ns, SysResult};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// How often the calibrating thread is woken, in ns (NAPI's deferred
/// interrupt timer in the lab fires about this often).
pub const PERIOD_NS: u64 = 50_000;
/// Length of each measuring window, in ns.
const WINDOW_NS: u64 = 30_000_000;
/// Rounds of windows (alone, with wake-ups, alone); the median is kept.
const ROUNDS: usize = 5;

/// Loop iterations per ns of the time `cpu` had (wall time less the
/// hypervisor's steal), spinning for `ns` of wall time.
fn spin_for(cpu: usize, ns: u64) -> f64 {
    let steal0 = sys::cpu_steal_ns(cpu).unwrap_or(0);
    let n = crate::spin::busy(mono_ns() + ns, 100, || false);
    let stolen = sys::cpu_steal_ns(cpu).map_or(0, |s| s.saturating_sub(steal0));
    n as f64 / ns.saturating_sub(stolen).max(1) as f64
}

/// A thread on `cpu` at SCHED_FIFO 1, woken by a timer every
/// [`PERIOD_NS`] until `stop`; returns its wake-ups and CPU time.
fn waker(cpu: usize, stop: Arc<AtomicBool>, ready: Arc<AtomicU64>) -> SysResult<(u64, u64)> {
    sys::pin_to_cpu(cpu)?;
    crate::napi_threads::set_sched(0, crate::napi_threads::Sched::Fifo(1))?;
    let c0 = sys::thread_cpu_ns();
    let mut wakes = 0;
    ready.store(1, Relaxed);
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: PERIOD_NS as libc::c_long,
    };
    while !stop.load(Relaxed) {
        // SAFETY: a valid relative timespec; no remainder wanted.
        unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, std::ptr::null_mut()) };
        wakes += 1;
    }
    Ok((wakes, sys::thread_cpu_ns() - c0))
}

/// One round: the cost per wake-up in ns against the mean of the windows
/// alone before and after (may be below zero in a noisy round).
fn round(cpu: usize) -> SysResult<f64> {
    let before = spin_for(cpu, WINDOW_NS);
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicU64::new(0));
    let w = {
        let (stop, ready) = (stop.clone(), ready.clone());
        std::thread::spawn(move || waker(cpu, stop, ready))
    };
    while ready.load(Relaxed) == 0 && !w.is_finished() {
        std::thread::yield_now();
    }
    let with = spin_for(cpu, WINDOW_NS);
    stop.store(true, Relaxed);
    let (wakes, woken_cpu) = w.join().expect("the waker does not panic")?;
    let alone = (before + spin_for(cpu, WINDOW_NS)) / 2.0;
    let lost_ns = (1.0 - with / alone.max(f64::MIN_POSITIVE)) * WINDOW_NS as f64;
    Ok((lost_ns - woken_cpu as f64) / wakes.max(1) as f64)
}

/// The cost of one wake-up on `cpu`, in ns, measured from the calling
/// thread (which it pins to `cpu`; about 0.5 s). Needs the right to use
/// SCHED_FIFO.
pub fn measure(cpu: usize) -> SysResult<u64> {
    sys::pin_to_cpu(cpu)?;
    let mut v = (0..ROUNDS)
        .map(|_| round(cpu))
        .collect::<SysResult<Vec<f64>>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2].max(0.0) as u64)
}
