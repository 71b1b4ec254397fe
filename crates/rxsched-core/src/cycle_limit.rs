//! M4: a CPU-cycle limit on input handling per period.

use crate::Nanos;

/// Bounds the CPU the polling loop spends on input in each period.
///
/// The loop charges the measured cost of each pass. Once the total for the
/// current period exceeds the threshold, input is inhibited until the period
/// ends. Output handling is never inhibited. Whenever the idle thread runs,
/// input is re-enabled and the total cleared (Mogul & Ramakrishnan 1996 §7).
#[derive(Debug, Clone)]
pub struct CycleLimit {
    period_ns: Nanos,
    threshold_ns: Nanos,
    period_start: Nanos,
    used_ns: Nanos,
    inhibited: bool,
    episodes: u64,
}

impl CycleLimit {
    /// A limit of `fraction` (0 < fraction ≤ 1) of each `period_ns`.
    pub fn new(period_ns: Nanos, fraction: f64) -> Self {
        let period_ns = period_ns.max(1);
        CycleLimit {
            period_ns,
            threshold_ns: (period_ns as f64 * fraction.clamp(0.0, 1.0)).round() as Nanos,
            period_start: 0,
            used_ns: 0,
            inhibited: false,
            episodes: 0,
        }
    }

    /// Sets the limit to `fraction` of each period from now on.
    pub fn set_fraction(&mut self, fraction: f64) {
        self.threshold_ns = (self.period_ns as f64 * fraction.clamp(0.0, 1.0)).round() as Nanos;
    }

    fn roll(&mut self, now: Nanos) {
        if now >= self.period_start + self.period_ns {
            self.period_start = now - now % self.period_ns;
            self.used_ns = 0;
            self.inhibited = false;
        }
    }

    /// Adds the cost of one polling pass that ended at `now`.
    /// Returns true when this charge starts an inhibit.
    pub fn charge(&mut self, now: Nanos, cost_ns: Nanos) -> bool {
        self.roll(now);
        self.used_ns += cost_ns;
        if !self.inhibited && self.used_ns > self.threshold_ns && self.threshold_ns < self.period_ns
        {
            self.inhibited = true;
            self.episodes += 1;
            debug_assert!(
                self.deadline().is_some_and(|t| t > now),
                "an inhibit begun at {now} must end with its period, later"
            );
            return true;
        }
        false
    }

    /// Whether input may be handled at `now`.
    pub fn input_allowed(&mut self, now: Nanos) -> bool {
        self.roll(now);
        !self.inhibited
    }

    /// The idle thread ran: re-enable input and clear the total.
    pub fn idle(&mut self, now: Nanos) {
        self.roll(now);
        self.used_ns = 0;
        self.inhibited = false;
    }

    /// Input time left in the current period before an inhibit, while
    /// input is allowed (`None` while inhibited, or with no limit short of
    /// the whole period).
    pub fn headroom(&mut self, now: Nanos) -> Option<Nanos> {
        self.roll(now);
        (!self.inhibited && self.threshold_ns < self.period_ns)
            .then(|| self.threshold_ns.saturating_sub(self.used_ns))
    }

    /// When the current inhibit ends, if one is in force.
    pub fn deadline(&self) -> Option<Nanos> {
        self.inhibited.then_some(self.period_start + self.period_ns)
    }

    /// CPU charged in the current period.
    pub fn used_ns(&self) -> Nanos {
        self.used_ns
    }

    /// Inhibit episodes begun so far.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }
}

/// A guard on the host's real-time budget, for a polling thread whose
/// threads run in the real-time class: M4's mechanism over the same
/// charges, with two thresholds. Once a period's use passes `budget` less
/// `margin`, ordinary input waits for the period's end; the protected
/// class goes on until the use passes `budget` itself.
///
/// A thread of the real-time class that fills a CPU is stopped by the
/// kernel once the class has used its budget (`sched_rt_runtime_us` of
/// each `sched_rt_period_us`, 950 ms of each second by default), every
/// real-time thread with it, a protected queue's too. The guard stops
/// ordinary input first, for a short while every period, so the kernel
/// never has to, and the margin is the protected class's own room.
#[derive(Debug, Clone)]
pub struct RtGuard {
    ordinary: CycleLimit,
    all: CycleLimit,
}

impl RtGuard {
    /// A guard at `budget` (the share of each `period_ns` the kernel lets
    /// the real-time class take), ordinary input held `margin` below it.
    pub fn new(period_ns: Nanos, budget: f64, margin: f64) -> Self {
        RtGuard {
            ordinary: CycleLimit::new(period_ns, (budget - margin).max(0.0)),
            all: CycleLimit::new(period_ns, budget),
        }
    }

    /// The share of each period ordinary input may use.
    pub fn share(&self) -> f64 {
        self.ordinary.threshold_ns as f64 / self.ordinary.period_ns as f64
    }

    /// Adds the cost of a pass that ended at `now`; true when this starts
    /// a hold on ordinary input.
    pub fn charge(&mut self, now: Nanos, cost_ns: Nanos) -> bool {
        self.all.charge(now, cost_ns);
        self.ordinary.charge(now, cost_ns)
    }

    /// Whether ordinary input may be handled at `now`.
    pub fn input_allowed(&mut self, now: Nanos) -> bool {
        self.ordinary.input_allowed(now)
    }

    /// Whether the protected class may be handled at `now`.
    pub fn protected_allowed(&mut self, now: Nanos) -> bool {
        self.all.input_allowed(now)
    }

    /// The idle thread ran: both totals cleared.
    pub fn idle(&mut self, now: Nanos) {
        self.ordinary.idle(now);
        self.all.idle(now);
    }

    /// Ordinary input's time left in this period (see [`CycleLimit::headroom`]).
    pub fn headroom(&mut self, now: Nanos) -> Option<Nanos> {
        self.ordinary.headroom(now)
    }

    /// When the hold in force ends, if one is.
    pub fn deadline(&self) -> Option<Nanos> {
        self.ordinary.deadline()
    }

    /// Holds on ordinary input begun so far.
    pub fn episodes(&self) -> u64 {
        self.ordinary.episodes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;
    use proptest::prelude::*;

    #[test]
    fn inhibits_until_period_end() {
        let mut c = CycleLimit::new(10 * MS, 0.5);
        assert!(!c.charge(MS, 4 * MS));
        assert!(c.charge(2 * MS, 2 * MS));
        assert!(!c.input_allowed(3 * MS));
        assert_eq!(c.deadline(), Some(10 * MS));
        assert!(c.input_allowed(10 * MS));
        assert_eq!(c.used_ns(), 0);
    }

    #[test]
    fn idle_reenables() {
        let mut c = CycleLimit::new(10 * MS, 0.25);
        c.charge(MS, 3 * MS);
        assert!(!c.input_allowed(MS));
        c.idle(2 * MS);
        assert!(c.input_allowed(2 * MS));
    }

    #[test]
    fn full_limit_never_inhibits() {
        let mut c = CycleLimit::new(10 * MS, 1.0);
        for i in 0..100 {
            assert!(!c.charge(i * MS, 20 * MS));
        }
    }

    #[test]
    fn the_rt_guard_holds_ordinary_input_first() {
        let mut g = RtGuard::new(10 * MS, 0.95, 0.05);
        assert!((g.share() - 0.90).abs() < 1e-9);
        assert!(!g.charge(MS, 8 * MS));
        assert!(g.charge(2 * MS, 2 * MS / 10 * 7)); // 9.4 ms
        assert!(!g.input_allowed(3 * MS) && g.protected_allowed(3 * MS));
        assert!(!g.charge(4 * MS, MS / 5)); // 9.6 ms: past the budget
        assert!(!g.protected_allowed(4 * MS));
        assert_eq!(g.deadline(), Some(10 * MS));
        assert!(g.input_allowed(10 * MS) && g.protected_allowed(10 * MS));
        assert_eq!(g.episodes(), 1);
    }

    proptest! {
        /// The charged total never passes the threshold by more than one pass,
        /// and every inhibit ends at its period boundary.
        #[test]
        fn bounded_per_period(frac in 0.05f64..0.95, passes in prop::collection::vec((1u64..500_000, 0u64..200_000), 1..300)) {
            let period = 10 * MS;
            let mut c = CycleLimit::new(period, frac);
            let mut now = 0;
            for (cost, gap) in passes {
                now += gap;
                if c.input_allowed(now) {
                    now += cost;
                        c.charge(now, cost);
                    prop_assert!(c.used_ns() <= (period as f64 * frac) as u64 + cost + 1);
                }
                if let Some(d) = c.deadline() {
                    prop_assert!(d > now && d - now <= period);
                    prop_assert!(d % period == 0);
                }
            }
        }
    }
}
