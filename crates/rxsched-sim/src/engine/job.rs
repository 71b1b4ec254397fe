//! Work on a CPU: a job with the CPU time it still needs, the event that
//! says it ended, and the generation numbers that let preemption take a
//! CPU from a job (which resumes later with exactly its remaining time)
//! without unscheduling that event: the event then names an old
//! generation and is stale.

use rxsched_core::{Nanos, US};

/// A compute-bound process (or thread) runs in slices of this length
/// between scheduling decisions.
pub const COMPUTE_SLICE: Nanos = 500 * US;

/// One indivisible piece of work of kind `W`; its effect happens when it
/// completes.
#[derive(Debug, Clone, Copy)]
pub struct Job<W> {
    /// The work.
    pub work: W,
    /// CPU time it still needs.
    pub remaining: Nanos,
}

/// The job CPU `cpu` started as generation `gen` ended (stale if the CPU
/// has switched since).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// The CPU.
    pub cpu: u16,
    /// The generation it started.
    pub gen: u64,
}

/// What one CPU is running: its generation, and when the job ends.
#[derive(Debug, Default, Clone)]
pub struct Runner {
    gen: u64,
    end: Nanos,
}

impl Runner {
    /// Takes the CPU at `now` from the job running on it, if any, which
    /// keeps the time it still needs; the job's [`Done`] goes stale.
    pub fn preempt<W>(&mut self, now: Nanos, job: Option<&mut Job<W>>) {
        self.gen += 1;
        if let Some(j) = job {
            j.remaining = self.end.saturating_sub(now);
        }
    }

    /// Gives CPU `cpu` to `job` at `now`: returns when it ends, and the
    /// event to schedule then.
    pub fn start<W>(&mut self, cpu: u16, now: Nanos, job: &Job<W>) -> (Nanos, Done) {
        self.gen += 1;
        self.end = now + job.remaining;
        (self.end, Done { cpu, gen: self.gen })
    }

    /// Whether `done` names the job running now.
    pub fn current(&self, done: Done) -> bool {
        done.gen == self.gen
    }
}

/// CPU time of `ns` per byte for `bytes`, rounded to the nanosecond.
pub fn per_byte(bytes: u32, ns: f64) -> Nanos {
    (bytes as f64 * ns).round() as Nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preempted_job_resumes_with_its_remaining_time_and_its_end_goes_stale() {
        let mut r = Runner::default();
        let mut j = Job {
            work: (),
            remaining: 100,
        };
        let (t, first) = r.start(0, 1000, &j);
        assert_eq!(t, 1100);
        r.preempt(1030, Some(&mut j));
        assert_eq!(j.remaining, 70);
        assert!(!r.current(first));
        let (t, second) = r.start(0, 2000, &j);
        assert_eq!(t, 2070);
        assert!(r.current(second));
    }
}
