//! M1: interrupt-driven receive with batching (the 4.2BSD baseline).

use crate::{CircuitBreaker, Nanos};

/// What the receive interrupt handler does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchStep {
    /// Take the next packet from the ring and do its link-level work.
    Packet,
    /// Return from the interrupt with device interrupts enabled.
    Exit,
    /// Return with device interrupts disabled until the given time (M5).
    ExitDisabled(Nanos),
}

/// The receive interrupt handler's loop: it handles every packet ready on
/// the ring, including those that arrive while it runs (interrupt
/// batching), unless a circuit breaker cuts the batch short.
#[derive(Debug, Clone, Default)]
pub struct InterruptBatch {
    breaker: Option<CircuitBreaker>,
    batch: u32,
    largest_batch: u32,
}

impl InterruptBatch {
    /// The plain M1 handler.
    pub fn new() -> Self {
        Self::default()
    }

    /// The M1 handler with an M5 circuit breaker.
    pub fn with_breaker(breaker: CircuitBreaker) -> Self {
        InterruptBatch {
            breaker: Some(breaker),
            ..Self::default()
        }
    }

    /// A receive interrupt was taken.
    pub fn begin(&mut self) {
        self.batch = 0;
    }

    /// Decides the next step, given whether the ring holds a packet.
    /// Call [`InterruptBatch::handled`] after each packet.
    pub fn next(&self, ring_has_packet: bool) -> BatchStep {
        if let Some(until) = self.breaker.as_ref().and_then(|b| b.deadline()) {
            return BatchStep::ExitDisabled(until);
        }
        if ring_has_packet {
            BatchStep::Packet
        } else {
            BatchStep::Exit
        }
    }

    /// One packet's link-level work finished at `now`.
    pub fn handled(&mut self, now: Nanos) {
        self.batch += 1;
        self.largest_batch = self.largest_batch.max(self.batch);
        if let Some(b) = &mut self.breaker {
            b.packet(now);
        }
    }

    /// Re-arms the breaker once its time is up. Returns true if interrupts
    /// may now be enabled again.
    pub fn timer(&mut self, now: Nanos) -> bool {
        self.breaker.as_mut().is_some_and(|b| b.timer(now))
    }

    /// When the open breaker closes, if it is open.
    pub fn deadline(&self) -> Option<Nanos> {
        self.breaker.as_ref().and_then(|b| b.deadline())
    }

    /// Times the circuit breaker tripped.
    pub fn trips(&self) -> u64 {
        self.breaker.as_ref().map_or(0, |b| b.trips())
    }

    /// The most packets one interrupt handled.
    pub fn largest_batch(&self) -> u32 {
        self.largest_batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    #[test]
    fn batches_until_ring_empty() {
        let mut h = InterruptBatch::new();
        h.begin();
        for i in 0..5 {
            assert_eq!(h.next(true), BatchStep::Packet);
            h.handled(i);
        }
        assert_eq!(h.next(false), BatchStep::Exit);
        assert_eq!(h.largest_batch(), 5);
    }

    #[test]
    fn breaker_cuts_batch() {
        let mut h = InterruptBatch::with_breaker(CircuitBreaker::new(2, MS));
        h.begin();
        h.handled(0);
        assert_eq!(h.next(true), BatchStep::Packet);
        h.handled(10);
        assert_eq!(h.next(true), BatchStep::ExitDisabled(10 + MS));
        assert!(h.timer(10 + MS));
        h.begin();
        assert_eq!(h.next(true), BatchStep::Packet);
        assert_eq!(h.trips(), 1);
    }

    /// A handler entered anew goes on counting toward the breaker's batch:
    /// three interrupts of one packet each trip a breaker of three.
    #[test]
    fn the_breakers_batch_spans_interrupts() {
        let mut h = InterruptBatch::with_breaker(CircuitBreaker::new(3, MS));
        for (i, t) in [0, 100, 200].into_iter().enumerate() {
            h.begin();
            assert_eq!(h.next(true), BatchStep::Packet, "interrupt {i}");
            h.handled(t);
            if i < 2 {
                assert_eq!(
                    h.next(false),
                    BatchStep::Exit,
                    "interrupt {i} empties its ring"
                );
            }
        }
        assert_eq!(h.next(true), BatchStep::ExitDisabled(200 + MS));
        assert_eq!(h.largest_batch(), 1);
        assert_eq!(h.trips(), 1);
    }
}
