//! What the NT host's CPUs run, at any level: one kind of work per job.

use crate::engine::job;
use crate::engine::packet::Packet;
use rxsched_core::Nanos;

/// A piece of work.
#[derive(Debug, Clone, Copy)]
pub(super) enum Work {
    /// The interrupt service routine.
    Isr,
    /// Entering a DPC (or a polling pass), with the monitoring if any.
    Entry,
    /// The receive work for one datagram, in the DPC or the polling thread.
    Receive(Packet),
    /// Readying a thread the receive work woke.
    Wake,
    /// A CPU switches to this thread.
    Switch,
    /// The consumer's receive call.
    Recv(Packet),
    /// The consumer's work inside its lock.
    Critical,
    /// The consumer's work outside its lock.
    Unlocked,
    /// A slice of a compute thread.
    Compute,
}

/// A job of the NT host: a piece of work and the CPU time it still needs.
pub(super) type Job = job::Job<Work>;

impl Work {
    /// The datagram the work carries: in flight while the work is.
    pub(super) fn packet(&self) -> Option<Packet> {
        match *self {
            Work::Receive(p) | Work::Recv(p) => Some(p),
            _ => None,
        }
    }
}

/// A job of `work` that needs `remaining` of CPU time.
pub(super) fn job(work: Work, remaining: Nanos) -> Job {
    Job { work, remaining }
}
