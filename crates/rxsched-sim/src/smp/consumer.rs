//! The NT host's consumer: its socket, the reader threads that wait on
//! it, the lock they may share, and what each datagram costs them beyond
//! the receive call.

use super::lock::Lock;
use super::sched::Tid;
use super::thread::Phase;
use crate::engine::socket::Socket;
use crate::scenario::{KernelCfg, ProcessCfg};
use rxsched_core::Nanos;
use std::collections::VecDeque;

/// The consumer.
#[derive(Debug)]
pub(super) struct Consumer {
    pub(super) sock: Socket,
    /// Reader threads waiting for a datagram, first come first served.
    pub(super) waiting: VecDeque<Tid>,
    pub(super) lock: Lock,
    /// Per datagram: the time inside the lock, and the work outside it.
    pub(super) lock_us: Nanos,
    pub(super) work_us: Nanos,
    /// Time threads spent blocked on the lock, from the threads' side.
    pub(super) blocked_ns: Nanos,
}

impl Consumer {
    /// The socket `kernel` sizes, read by `reader`'s threads.
    pub(super) fn new(kernel: &KernelCfg, reader: Option<&ProcessCfg>) -> Consumer {
        let us = |v: Option<f64>| (v.unwrap_or(0.0) * 1e3) as Nanos;
        Consumer {
            sock: Socket::new(kernel.socket_packets, kernel.socket_bytes),
            waiting: VecDeque::new(),
            lock: Lock::default(),
            lock_us: reader.map_or(0, |q| us(q.lock_us)),
            work_us: reader.map_or(0, |q| us(q.work_us)),
            blocked_ns: 0,
        }
    }

    /// Where a reader thread goes after its receive call.
    pub(super) fn after_recv(&self) -> Phase {
        if self.lock_us > 0 {
            Phase::Lock
        } else {
            self.after_critical()
        }
    }

    /// Where a reader thread goes after its critical section.
    pub(super) fn after_critical(&self) -> Phase {
        if self.work_us > 0 {
            Phase::Work
        } else {
            Phase::Recv
        }
    }
}
