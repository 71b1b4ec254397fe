//! M3's watermarks from an objective, kept to the screening stage's
//! measured cost (how they follow from that cost:
//! [`Slo::feedback_marks`]).
//!
//! **What it measures.** Once per controller window the caller reports the
//! frames the stage took off its queue and the CPU time the stage spent.
//! The first window with at least [`MIN_FRAMES`] frames sets the estimate
//! outright; later ones move it by [`WEIGHT`] of the difference, as the
//! callbacks' costs are smoothed.
//!
//! **Why the marks do not flap.** They are recomputed only when the
//! smoothed estimate has moved by more than [`BAND`] of the cost the marks
//! in force were computed at, or the quota they were computed with has
//! changed. A stage whose cost per frame stays within that band
//! (measurement noise, cache and scheduling jitter) keeps its marks; a
//! sustained change (other rules, a busier host) moves them within a few
//! windows (with weight 1/4, a step of half the cost crosses a band of a
//! quarter in two windows). Between two recomputations the estimate must
//! move by the band, so under a steady load the marks cannot alternate
//! between two values; the quota, which also moves them, settles by the
//! controller's own argument.

use super::{FeedbackMarks, Slo, SloCosts, MIN_FRAMES, WEIGHT};

/// How far the stage's cost must move before the marks are recomputed.
pub const BAND: f64 = 0.25;

/// The watermarks an objective keeps on a stage's queue.
#[derive(Debug, Clone)]
pub struct StageMarks {
    capacity: u32,
    /// The smoothed cost per frame, ns, once measured.
    cost_ns: Option<f64>,
    /// The cost and quota the marks in force were computed with.
    at: Option<(f64, u32)>,
    marks: Option<FeedbackMarks>,
    changes: u64,
    /// Why the last recomputation kept the marks, if it could not set any.
    kept_because: Option<String>,
}

impl StageMarks {
    /// Marks for a stage queue of `capacity` frames, none set yet.
    pub fn new(capacity: u32) -> Self {
        StageMarks {
            capacity,
            cost_ns: None,
            at: None,
            marks: None,
            changes: 0,
            kept_because: None,
        }
    }

    /// The stage's cost per frame as estimated now, in ns.
    pub fn cost_ns(&self) -> Option<f64> {
        self.cost_ns
    }

    /// The marks the objective set, once it has.
    pub fn marks(&self) -> Option<FeedbackMarks> {
        self.marks
    }

    /// How many times the marks were set.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Why the marks were last left as they were, when no marks fit.
    pub fn kept_because(&self) -> Option<&str> {
        self.kept_because.as_deref()
    }

    /// The stage took `frames` off its queue in `ns` of its CPU since the
    /// last report. With the objective, the router's costs and its quota
    /// now: the new marks, when they change.
    pub fn measured(
        &mut self,
        slo: &Slo,
        costs: &SloCosts,
        quota: u32,
        frames: u64,
        ns: u64,
    ) -> Option<FeedbackMarks> {
        if frames < MIN_FRAMES {
            return None;
        }
        let f = ns as f64 / frames as f64;
        let est = self.cost_ns.map_or(f, |old| old + WEIGHT * (f - old));
        self.cost_ns = Some(est);
        let due = self
            .at
            .is_none_or(|(a, q)| q != quota || (est - a).abs() > BAND * a);
        if !due {
            return None;
        }
        match slo.feedback_marks(costs, quota, est, self.capacity) {
            Ok(m) => {
                self.at = Some((est, quota));
                self.kept_because = None;
                (self.marks != Some(m)).then(|| {
                    self.marks = Some(m);
                    self.changes += 1;
                    m
                })
            }
            Err(e) => {
                self.kept_because = Some(e.0);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Slo, SloCosts) {
        let slo = Slo::parse("latency=2ms,cpu=50%").unwrap();
        let costs = SloCosts::unmeasured(slo, 10_000.0, 2).unwrap();
        (slo, costs)
    }

    #[test]
    fn the_first_measurement_sets_the_marks() {
        let (slo, c) = setup();
        let mut s = StageMarks::new(256);
        assert_eq!(s.measured(&slo, &c, 16, 4, 40_000), None, "too few frames");
        let m = s.measured(&slo, &c, 16, 100, 2_000_000).expect("marks");
        assert_eq!(s.cost_ns(), Some(20_000.0));
        assert_eq!(Some(m), slo.feedback_marks(&c, 16, 20_000.0, 256).ok());
        assert_eq!(s.changes(), 1);
    }

    #[test]
    fn noise_inside_the_band_keeps_the_marks_and_a_step_moves_them() {
        let (slo, c) = setup();
        let mut s = StageMarks::new(256);
        s.measured(&slo, &c, 16, 100, 2_000_000).unwrap();
        // Windows alternating 15 and 25 us a frame: the estimate stays
        // within a quarter of 20 us, so nothing moves.
        for i in 0..40 {
            let ns = if i % 2 == 0 { 1_500_000 } else { 2_500_000 };
            assert_eq!(s.measured(&slo, &c, 16, 100, ns), None, "window {i}");
        }
        assert_eq!(s.changes(), 1);
        // The stage's cost doubles for good: the marks follow, once.
        let moved: Vec<_> = (0..20)
            .filter_map(|_| s.measured(&slo, &c, 16, 100, 4_000_000))
            .collect();
        assert!(!moved.is_empty() && moved.len() <= 3, "{moved:?}");
        let last = *moved.last().unwrap();
        assert!(
            last.inhibit_at
                < slo
                    .feedback_marks(&c, 16, 20_000.0, 256)
                    .unwrap()
                    .inhibit_at
        );
    }

    #[test]
    fn a_new_quota_recomputes_them() {
        let (slo, c) = setup();
        let mut s = StageMarks::new(256);
        let a = s.measured(&slo, &c, 16, 100, 2_000_000).unwrap();
        let b = s.measured(&slo, &c, 200, 100, 2_000_000).unwrap();
        assert!(b.inhibit_at > a.inhibit_at, "{a:?} then {b:?}");
    }

    #[test]
    fn marks_that_cannot_fit_keep_the_old_ones_and_say_why() {
        let (slo, c) = setup();
        let mut s = StageMarks::new(8);
        // A stage that drains a frame in 1 ns empties 8 frames long before
        // input restarts: no marks fit.
        assert_eq!(s.measured(&slo, &c, 4, 1000, 1000), None);
        assert!(s
            .kept_because()
            .unwrap()
            .contains("cannot keep the stage busy"));
        assert_eq!(s.marks(), None);
    }
}
