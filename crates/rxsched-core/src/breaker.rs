//! M5: the circuit breaker for interrupt-driven drivers.

use crate::Nanos;

/// After one interrupt has processed `batch` packets, device interrupts are
/// disabled for `off_ns` (Mogul & Ramakrishnan 1996 §8: 250 packets, 1 ms).
#[derive(Debug, Clone)]
pub struct CircuitBreaker {
    batch: u32,
    off_ns: Nanos,
    in_batch: u32,
    off_until: Option<Nanos>,
    trips: u64,
}

impl CircuitBreaker {
    /// A breaker that trips after `batch` packets in one interrupt.
    pub fn new(batch: u32, off_ns: Nanos) -> Self {
        CircuitBreaker {
            batch: batch.max(1),
            off_ns,
            in_batch: 0,
            off_until: None,
            trips: 0,
        }
    }

    /// A new interrupt begins.
    pub fn interrupt(&mut self) {
        self.in_batch = 0;
    }

    /// One packet handled inside the interrupt. Returns true if the handler
    /// must stop now and leave interrupts disabled.
    pub fn packet(&mut self, now: Nanos) -> bool {
        self.in_batch += 1;
        debug_assert!(
            self.in_batch <= self.batch,
            "an interrupt handled {} packets past its batch of {}",
            self.in_batch,
            self.batch
        );
        if self.in_batch >= self.batch {
            self.off_until = Some(now + self.off_ns);
            self.trips += 1;
            debug_assert!(self.off_ns > 0, "a breaker that trips stays open a while");
            true
        } else {
            false
        }
    }

    /// When interrupts may be re-enabled, if the breaker is open.
    pub fn deadline(&self) -> Option<Nanos> {
        self.off_until
    }

    /// Closes the breaker if its time is up. Returns true if it closed.
    pub fn timer(&mut self, now: Nanos) -> bool {
        if self.off_until.is_some_and(|t| now >= t) {
            self.off_until = None;
            true
        } else {
            false
        }
    }

    /// Times the breaker has tripped.
    pub fn trips(&self) -> u64 {
        self.trips
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    #[test]
    fn trips_after_batch() {
        let mut b = CircuitBreaker::new(3, MS);
        b.interrupt();
        assert!(!b.packet(0));
        assert!(!b.packet(1));
        assert!(b.packet(2));
        assert_eq!(b.deadline(), Some(2 + MS));
        assert!(!b.timer(MS));
        assert!(b.timer(2 + MS));
        assert_eq!(b.trips(), 1);
        b.interrupt();
        assert!(!b.packet(3));
    }
}
