//! The event queue: ordered by virtual time, then by a sequence number, so
//! that events at the same time keep the order they were scheduled in.

use super::kernel::Timer;
use rxsched_core::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Something that happens at a point in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ev {
    /// Traffic source `s` delivers a frame's last bit.
    Arrive(u8),
    /// The frame on port `n`'s wire has left.
    TxWireDone(u8),
    /// The chunk of work started as generation `g` ends (stale if the CPU
    /// switched since).
    ChunkDone(u64),
    /// A kernel's own timer.
    Timer(Timer),
    /// The periodic clock interrupt.
    Tick,
    /// User process `u` wakes from a timed sleep.
    UserWake(u8),
    /// An event of the TCP connection through the host.
    Tcp(super::tcp::TcpEv),
    /// An event of the ping-pong client.
    Echo(super::echo::EchoEv),
    /// An event of the multiprocessor host (`crate::smp`).
    Smp(crate::smp::SmpEv),
}

/// A min-heap of events by (time, sequence).
#[derive(Debug, Default)]
pub struct Events {
    heap: BinaryHeap<Reverse<(Nanos, u64, Ev)>>,
    seq: u64,
}

impl Events {
    /// Schedules `ev` at `t`.
    pub fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, Ev)> {
        self.heap.pop().map(|Reverse((t, _, ev))| (t, ev))
    }
}
