//! A lock the threads of a multithreaded consumer share, as an NT critical
//! section: a thread that finds it held blocks (H&J's figure 2 shows the
//! waiting as idle time "marked locking"), and the releaser hands it to the
//! first waiter. The lock keeps its own account of waiting, from each
//! waiter's arrival to the hand-over, which a test holds against the
//! scheduler's account of the same threads' blocked intervals.

use super::sched::Tid;
use rxsched_core::Nanos;
use std::collections::VecDeque;

/// The lock.
#[derive(Debug, Default, Clone)]
pub struct Lock {
    holder: Option<Tid>,
    waiters: VecDeque<(Tid, Nanos)>,
    /// Time threads spent waiting, summed, from the lock's side.
    pub waited_ns: Nanos,
    /// Acquisitions that had to wait.
    pub contended: u64,
    /// Acquisitions.
    pub acquired: u64,
}

impl Lock {
    /// Thread `t` asks for the lock at `now`: true if it has it, false if
    /// it must wait.
    pub fn acquire(&mut self, t: Tid, now: Nanos) -> bool {
        self.acquired += 1;
        if self.holder.is_none() {
            self.holder = Some(t);
            return true;
        }
        self.contended += 1;
        self.waiters.push_back((t, now));
        false
    }

    /// The holder releases it at `now`; the first waiter, if any, now holds
    /// it and is returned (to be woken).
    pub fn release(&mut self, now: Nanos) -> Option<Tid> {
        self.holder = None;
        let (t, since) = self.waiters.pop_front()?;
        self.waited_ns += now - since;
        self.holder = Some(t);
        Some(t)
    }

    /// Whether any thread waits.
    pub fn contended_now(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Waiting time of the threads still waiting at `now`, not yet counted.
    pub fn waiting_ns(&self, now: Nanos) -> Nanos {
        self.waiters.iter().map(|(_, s)| now - s).sum()
    }
}
