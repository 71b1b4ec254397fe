//! A compute-bound process whose progress is measured: the user work that
//! receive livelock starves.

use crate::sys::{self, mono_ns, SysResult};
use serde::{Deserialize, Serialize};

/// How much CPU the spinner got.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpinReport {
    /// Wall time it ran, in seconds.
    pub duration_s: f64,
    /// CPU time it got, in seconds.
    pub cpu_s: f64,
    /// `cpu_s / duration_s`: its share of the CPU it is pinned to.
    pub cpu_share: f64,
    /// Loop iterations completed (progress).
    pub iterations: u64,
    /// Time the hypervisor took from the CPU meanwhile (pinned runs only).
    pub steal_s: f64,
    /// Iterations per second of the time the CPU was there to be had:
    /// `iterations / (duration_s - steal_s)`.
    pub progress_rate: f64,
}

/// Computes until the monotonic clock reaches `end` (ns) or `stop` says
/// so; returns the iterations done, each `rounds` steps of a xorshift.
pub(crate) fn busy(end: u64, rounds: u32, stop: impl Fn() -> bool) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut iterations = 0u64;
    while mono_ns() < end && !stop() {
        for _ in 0..rounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        iterations += 1;
    }
    std::hint::black_box(x);
    iterations
}

/// Spins on `cpu` for `duration_s` seconds (bounded) and reports its share.
pub fn spin(cpu: Option<usize>, duration_s: f64) -> SysResult<SpinReport> {
    if let Some(c) = cpu {
        sys::pin_to_cpu(c)?;
    }
    let steal = || cpu.map_or(Ok(0), sys::cpu_steal_ns);
    let s0 = steal()?;
    let t0 = mono_ns();
    let c0 = sys::thread_cpu_ns();
    let end = t0 + (duration_s.clamp(0.0, 3600.0) * 1e9) as u64;
    let iterations = busy(end, 10_000, sys::signals::stopping);
    let wall = (mono_ns() - t0) as f64 / 1e9;
    let cpu_s = (sys::thread_cpu_ns() - c0) as f64 / 1e9;
    let steal_s = (steal()?.saturating_sub(s0) as f64 / 1e9).min(wall);
    Ok(SpinReport {
        duration_s: wall,
        cpu_s,
        cpu_share: cpu_s / wall.max(1e-9),
        iterations,
        steal_s,
        progress_rate: iterations as f64 / (wall - steal_s).max(1e-9),
    })
}

/// Brustoloni et al. 2000 §6's `onoff`: computes for `on_ms` of CPU time,
/// sleeps `off_ms`, and again, on `cpu` for `duration_s` seconds; reports
/// what it got like [`spin`].
pub fn onoff(
    cpu: Option<usize>,
    on_ms: f64,
    off_ms: f64,
    duration_s: f64,
) -> SysResult<SpinReport> {
    if let Some(c) = cpu {
        sys::pin_to_cpu(c)?;
    }
    let t0 = mono_ns();
    let c0 = sys::thread_cpu_ns();
    let end = t0 + (duration_s.clamp(0.0, 3600.0) * 1e9) as u64;
    let (on, off) = ((on_ms * 1e6) as u64, (off_ms * 1e6) as u64);
    let mut iterations = 0;
    while mono_ns() < end && !sys::signals::stopping() {
        let run0 = sys::thread_cpu_ns();
        iterations += busy(end, 1_000, || sys::thread_cpu_ns() - run0 >= on);
        std::thread::sleep(std::time::Duration::from_nanos(off));
    }
    let wall = (mono_ns() - t0) as f64 / 1e9;
    let cpu_s = (sys::thread_cpu_ns() - c0) as f64 / 1e9;
    Ok(SpinReport {
        duration_s: wall,
        cpu_s,
        cpu_share: cpu_s / wall.max(1e-9),
        iterations,
        steal_s: 0.0,
        progress_rate: iterations as f64 / wall.max(1e-9),
    })
}
