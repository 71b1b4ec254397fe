//! M3: queue-state feedback from a downstream queue.

use crate::Nanos;

/// Inhibits input while a downstream queue that a lower-priority consumer
/// drains is too full, so that the consumer gets the CPU.
///
/// Input stops when the queue length reaches `inhibit_at`. It resumes when
/// the length falls to `resume_at` (if set) or when `timeout_ns` has passed
/// since the inhibit began, in case the consumer hangs.
#[derive(Debug, Clone)]
pub struct QueueFeedback {
    inhibit_at: u32,
    resume_at: Option<u32>,
    timeout_ns: Nanos,
    since: Option<Nanos>,
    episodes: u64,
    timeouts: u64,
}

impl QueueFeedback {
    /// Watermarks as fractions of `capacity`: the router form.
    /// Mogul & Ramakrishnan 1996 §6.6.1: a 32-entry screend queue, inhibit at
    /// 75%, resume at 25%, timeout one clock tick.
    pub fn watermarks(capacity: u32, high: f64, low: f64, timeout_ns: Nanos) -> Self {
        let inhibit_at = ((capacity as f64 * high).ceil() as u32).clamp(1, capacity.max(1));
        let resume_at = ((capacity as f64 * low).floor() as u32).min(inhibit_at.saturating_sub(1));
        QueueFeedback::new(inhibit_at, Some(resume_at), timeout_ns)
    }

    /// Inhibit when fewer than `min_free` slots are free; resume only by
    /// timeout: the monitor form (Mogul & Ramakrishnan 1996 §8: 32-entry
    /// packet-filter queue, fewer than 8 free, 1 ms).
    pub fn min_free(capacity: u32, min_free: u32, timeout_ns: Nanos) -> Self {
        let inhibit_at = capacity.saturating_sub(min_free).saturating_add(1).max(1);
        QueueFeedback::new(inhibit_at, None, timeout_ns)
    }

    /// The same inhibit, ended also when the queue has drained to `len`
    /// entries (below the inhibit threshold), not only by the timeout.
    pub fn resume_at_len(mut self, len: u32) -> Self {
        self.resume_at = Some(len.min(self.inhibit_at.saturating_sub(1)));
        self
    }

    /// Explicit thresholds in queue entries.
    pub fn new(inhibit_at: u32, resume_at: Option<u32>, timeout_ns: Nanos) -> Self {
        QueueFeedback {
            inhibit_at,
            resume_at,
            timeout_ns,
            since: None,
            episodes: 0,
            timeouts: 0,
        }
    }

    /// The queue reports its length. Returns true when this starts an inhibit.
    pub fn queue_level(&mut self, len: u32, now: Nanos) -> bool {
        self.timer(now);
        match self.since {
            None if len >= self.inhibit_at => {
                self.since = Some(now);
                self.episodes += 1;
                debug_assert!(
                    self.deadline().is_some_and(|t| t > now),
                    "an inhibit begun at {now} must end later (timeout {} ns)",
                    self.timeout_ns
                );
                true
            }
            Some(_) if self.resume_at.is_some_and(|low| len <= low) => {
                self.since = None;
                false
            }
            _ => false,
        }
    }

    /// New thresholds and timeout, keeping the inhibit in force (if any)
    /// and the counts: an objective's controller moves them as the stage's
    /// measured cost moves.
    pub fn retune(&mut self, inhibit_at: u32, resume_at: Option<u32>, timeout_ns: Nanos) {
        self.inhibit_at = inhibit_at.max(1);
        self.resume_at = resume_at.map(|r| r.min(self.inhibit_at - 1));
        self.timeout_ns = timeout_ns.max(1);
    }

    /// The length at which input stops.
    pub fn inhibit_at(&self) -> u32 {
        self.inhibit_at
    }

    /// How long an inhibit lasts at most, in ns.
    pub fn timeout_ns(&self) -> Nanos {
        self.timeout_ns
    }

    /// Ends an inhibit whose timeout has passed.
    pub fn timer(&mut self, now: Nanos) {
        if let Some(t) = self.deadline() {
            if now >= t {
                self.since = None;
                self.timeouts += 1;
            }
        }
    }

    /// Whether input is inhibited at `now`.
    pub fn inhibited(&self, now: Nanos) -> bool {
        self.deadline().is_some_and(|t| now < t)
    }

    /// When the current inhibit times out, if one is in force.
    pub fn deadline(&self) -> Option<Nanos> {
        self.since.map(|s| s.saturating_add(self.timeout_ns))
    }

    /// The length at or below which an inhibit ends, if it ends that way.
    pub fn resume_at(&self) -> Option<u32> {
        self.resume_at
    }

    /// Inhibit episodes begun so far.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }

    /// Inhibits that ended by timeout rather than by the low watermark.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;
    use proptest::prelude::*;

    #[test]
    fn router_watermarks() {
        let mut f = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
        assert!(!f.queue_level(23, 0));
        assert!(f.queue_level(24, 10));
        assert!(f.inhibited(11));
        f.queue_level(9, 20);
        assert!(f.inhibited(21));
        f.queue_level(8, 30);
        assert!(!f.inhibited(31));
        assert_eq!(f.episodes(), 1);
        assert_eq!(f.timeouts(), 0);
    }

    #[test]
    fn monitor_resumes_only_by_timeout() {
        let mut f = QueueFeedback::min_free(32, 8, MS);
        assert!(!f.queue_level(24, 0)); // 8 free: still fine
        assert!(f.queue_level(25, 5)); // 7 free: inhibit
        f.queue_level(0, 100);
        assert!(f.inhibited(100));
        assert!(!f.inhibited(5 + MS));
        f.timer(5 + MS);
        assert_eq!(f.timeouts(), 1);
    }

    proptest! {
        /// Every inhibit ends by its timeout, whatever the queue reports.
        #[test]
        fn inhibit_ends_by_timeout(
            timeout in 1u64..5_000_000,
            reports in prop::collection::vec((0u32..40, 0u64..3_000_000), 1..200),
            router in any::<bool>(),
        ) {
            let mut f = if router {
                QueueFeedback::watermarks(32, 0.75, 0.25, timeout)
            } else {
                QueueFeedback::min_free(32, 8, timeout)
            };
            let mut now = 0u64;
            for (len, dt) in reports {
                now += dt;
                f.queue_level(len, now);
                if let Some(start) = f.since {
                    prop_assert!(start <= now);
                    prop_assert!(!f.inhibited(start + timeout));
                    prop_assert!(now < start + timeout);
                }
            }
        }
    }
}
