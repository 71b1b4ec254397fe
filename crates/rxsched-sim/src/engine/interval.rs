//! The measured interval of a run: `[w0, end)`, after the warm-up.

use crate::scenario::RunCfg;
use rxsched_core::Nanos;

/// The measured interval `[w0, end)`; the run stops at `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// Where measuring starts: the warm-up's end.
    pub w0: Nanos,
    /// The end of the run.
    pub end: Nanos,
}

impl Interval {
    /// The interval a scenario's `[run]` describes.
    pub fn of(run: &RunCfg) -> Interval {
        let w0 = (run.warmup_ms * 1e6) as Nanos;
        Interval {
            w0,
            end: w0 + (run.duration_ms * 1e6) as Nanos,
        }
    }

    /// Its length, in ns.
    pub fn len(&self) -> Nanos {
        self.end - self.w0
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.end == self.w0
    }

    /// Its length, in seconds.
    pub fn secs(&self) -> f64 {
        self.len() as f64 / 1e9
    }

    /// Whether `t` lies inside it.
    pub fn contains(&self, t: Nanos) -> bool {
        (self.w0..self.end).contains(&t)
    }

    /// The part of `[a, b)` inside it.
    pub fn clip(&self, a: Nanos, b: Nanos) -> Nanos {
        b.min(self.end).saturating_sub(a.max(self.w0))
    }
}
