//! The event queue: ordered by virtual time, then by a sequence number, so
//! that events at the same time keep the order they were scheduled in.
//! Generic over the events of the host that owns it.

use rxsched_core::Nanos;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// An event with its time and sequence number; ordered by those two only.
#[derive(Debug)]
struct Entry<E> {
    t: Nanos,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.t, self.seq) == (other.t, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.t, self.seq).cmp(&(other.t, other.seq))
    }
}

/// A min-heap of events by (time, sequence).
#[derive(Debug)]
pub struct Events<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    seq: u64,
}

impl<E> Default for Events<E> {
    fn default() -> Self {
        Events {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> Events<E> {
    /// Schedules `ev` at `t`.
    pub fn push(&mut self, t: Nanos, ev: impl Into<E>) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            t,
            seq: self.seq,
            ev: ev.into(),
        }));
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|Reverse(e)| (e.t, e.ev))
    }
}

/// Lets a host's event type carry the engine's events: `From` each engine
/// event (an arrival, a job's end, an outside endpoint's event) into the
/// variant of the host's type that wraps it, so the engine can schedule it.
macro_rules! carries {
    ($ev:ident { $($from:ty => $variant:ident),+ $(,)? }) => {
        $(
            impl From<$from> for $ev {
                fn from(e: $from) -> $ev {
                    $ev::$variant(e)
                }
            }
        )+
    };
}

pub(crate) use carries;
