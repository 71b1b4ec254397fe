//! The screening stage's cost per frame, as an objective's M3 watermarks
//! need it ([`rxsched_core::StageMarks`]): the screening process's CPU time
//! over the frames it took off its queue, read once per controller window.

use crate::napi_threads;
use crate::stage::StageQueue;
use rxsched_core::slo::WINDOW_NS;
use rxsched_core::Nanos;

/// Reads the screening process's CPU time and what it has taken.
#[derive(Debug, Clone)]
pub struct StageMeter {
    pid: i32,
    /// When last read: the time, the process's CPU time and the frames it
    /// had taken.
    last: Option<(Nanos, u64, u64)>,
}

impl StageMeter {
    /// A meter of process `pid`.
    pub fn new(pid: u32) -> Self {
        StageMeter {
            pid: pid as i32,
            last: None,
        }
    }

    /// At `now`, once a window has passed since the last reading: the
    /// frames the stage took off `q` and the CPU time it spent meanwhile,
    /// in ns. `None` at the first reading, within a window, or when the
    /// process cannot be read (it has gone).
    pub fn read(&mut self, q: &StageQueue, now: Nanos) -> Option<(u64, u64)> {
        if self.last.is_some_and(|(t, _, _)| now < t + WINDOW_NS) {
            return None;
        }
        let cpu = napi_threads::cpu_ns(self.pid).ok()?;
        let taken = q.pushed().saturating_sub(u64::from(q.len()));
        let (_, cpu0, taken0) = self.last.replace((now, cpu, taken))?;
        Some((taken.saturating_sub(taken0), cpu.saturating_sub(cpu0)))
    }
}
