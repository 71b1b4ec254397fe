//! How the real benches take their points: variants × offered rates (or
//! any x), one point per pair with a progress line, each measured again
//! while the hypervisor took the DUT CPU away ([`steady`]); and the median
//! of repeated trials where one point is all there is.

use super::error::BenchError;
use crate::result::{Point, Series};

/// The offered rates of a sweep and each trial's seconds; the last rate is
/// as fast as the generator goes.
pub fn rates(quick: bool) -> (Vec<f64>, f64) {
    if quick {
        (vec![50e3, 200e3, 400e3, 800e3, 1.5e6, TOP_RATE], 1.0)
    } else {
        (
            vec![
                25e3, 50e3, 100e3, 200e3, 300e3, 400e3, 500e3, 600e3, 800e3, 1e6, 1.3e6, 1.6e6,
                2e6, TOP_RATE,
            ],
            2.0,
        )
    }
}

/// A rate no generator reaches: asks for as fast as it goes.
pub const TOP_RATE: f64 = 1e9;

/// An offered rate in a progress line.
pub fn at_rate(r: f64) -> String {
    if r >= 1e8 {
        "at the generator's top rate".to_string()
    } else {
        format!("at {r:.0} pkts/s")
    }
}

/// A point measured while the hypervisor took more than this share of the
/// DUT CPU is measured again (a stall of the host's CPUs can halve a
/// point's rate and its compute progress; steal on this VM is usually
/// 0–5%, but runs of 20–50% happen).
const STEAL_RETRY: f64 = 0.1;
/// Trials of one point at most.
const MAX_TRIALS: usize = 3;

/// What one trial measured, as [`steady`] judges it.
pub trait Measured {
    /// The share of the DUT CPU the hypervisor took meanwhile (0 if unknown).
    fn steal(&self) -> f64;
    /// How many times the hypervisor stopped the DUT CPU at once for at
    /// least [`rxsched_linux::sys::steal::STALL_NS`] while a latency was
    /// measured (0 if not watched).
    fn stalls(&self) -> f64 {
        0.0
    }
    /// Records how many trials the point took.
    fn set_trials(&mut self, n: usize);
}

impl Measured for Point {
    fn steal(&self) -> f64 {
        self.get("dut_steal_share").unwrap_or(0.0)
    }

    fn stalls(&self) -> f64 {
        self.get("dut_stalls").unwrap_or(0.0)
    }

    fn set_trials(&mut self, n: usize) {
        self.set("trials", n as f64);
    }
}

/// Whether the host disturbed a trial: it stalled the DUT CPU during a
/// latency measurement, or took more than [`STEAL_RETRY`] of it.
fn disturbed<T: Measured>(t: &T) -> bool {
    t.stalls() > 0.0 || t.steal() > STEAL_RETRY
}

/// One point from up to [`MAX_TRIALS`] trials: the first the host did not
/// disturb ([`disturbed`]), or else the one with the fewest stalls and,
/// among those, the least steal. The point records how many trials it
/// took (`trials`).
pub fn steady<T: Measured>(
    mut trial: impl FnMut() -> Result<T, BenchError>,
    progress: &dyn Fn(&str),
) -> Result<T, BenchError> {
    let mut best = trial()?;
    let mut n = 1;
    while disturbed(&best) && n < MAX_TRIALS {
        progress(&if best.stalls() > 0.0 {
            format!(
                "  the hypervisor stopped the DUT CPU {} time(s) during the measurement; measuring again",
                best.stalls()
            )
        } else {
            format!(
                "  the hypervisor took {:.0}% of the DUT CPU; measuring again",
                100.0 * best.steal()
            )
        });
        let p = trial()?;
        n += 1;
        let key = |t: &T| (t.stalls(), t.steal());
        if key(&p).partial_cmp(&key(&best)) == Some(std::cmp::Ordering::Less) {
            best = p;
        }
    }
    best.set_trials(n);
    Ok(best)
}

/// A sweep of some variants over the same x values, counting its points
/// for the progress line (`[k/total] what at x`).
pub struct Sweep<'a> {
    xs: &'a [f64],
    describe: fn(f64) -> String,
    total: usize,
    done: usize,
    progress: &'a dyn Fn(&str),
}

impl<'a> Sweep<'a> {
    /// `variants` series over the offered rates `rates`.
    pub fn over_rates(variants: usize, rates: &'a [f64], progress: &'a dyn Fn(&str)) -> Self {
        Sweep::over(variants, rates, at_rate, progress)
    }

    /// `variants` series over `xs`, each x in words by `describe`.
    pub fn over(
        variants: usize,
        xs: &'a [f64],
        describe: fn(f64) -> String,
        progress: &'a dyn Fn(&str),
    ) -> Self {
        Sweep {
            xs,
            describe,
            total: variants * xs.len(),
            done: 0,
            progress,
        }
    }

    /// One variant's points: `trial(x)` at each x, each through [`steady`].
    pub fn points<T: Measured>(
        &mut self,
        what: &str,
        mut trial: impl FnMut(f64) -> Result<T, BenchError>,
    ) -> Result<Vec<T>, BenchError> {
        let mut points = Vec::with_capacity(self.xs.len());
        for &x in self.xs {
            self.done += 1;
            (self.progress)(&format!(
                "[{}/{}] {what} {}",
                self.done,
                self.total,
                (self.describe)(x)
            ));
            points.push(steady(|| trial(x), self.progress)?);
        }
        Ok(points)
    }

    /// [`Sweep::points`] as the series labelled `label`.
    pub fn series(
        &mut self,
        label: &str,
        trial: impl FnMut(f64) -> Result<Point, BenchError>,
    ) -> Result<Series, BenchError> {
        let mut s = Series::new(label);
        s.points = self.points(label, trial)?;
        Ok(s)
    }
}

/// The median of repeated trials of one setting by `key` (a single stall
/// of this VM's CPUs can decide one trial), recording the lowest and
/// highest `key` beside it as `low` and `high`.
pub fn median(mut trials: Vec<Point>, key: impl Fn(&Point) -> f64, low: &str, high: &str) -> Point {
    trials.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let (lo, hi) = (key(&trials[0]), key(&trials[trials.len() - 1]));
    let mut m = trials.swap_remove(trials.len() / 2);
    m.set(low, lo);
    m.set(high, hi);
    m
}

/// The median of `v` (the mean of the middle two when their number is
/// even), sorting it; `None` when it is empty.
pub fn median_of(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Trials whose steal shares are `steals`, in order; each point's y is
    /// its trial number.
    fn points(steals: &[f64]) -> (Point, usize) {
        stalled(steals, &[0.0; 3])
    }

    /// [`points`], the trials stalled `stalls` times.
    fn stalled(steals: &[f64], stalls: &[f64]) -> (Point, usize) {
        let next = RefCell::new(0);
        let p = steady(
            || {
                let mut i = next.borrow_mut();
                let mut p = Point::xy("offered_pps", 1.0, "delivered_pps", *i as f64);
                p.set("dut_steal_share", steals[*i]);
                p.set("dut_stalls", stalls[*i]);
                *i += 1;
                Ok(p)
            },
            &|_| {},
        )
        .unwrap();
        let n = *next.borrow();
        (p, n)
    }

    #[test]
    fn a_quiet_point_is_measured_once() {
        let (p, n) = points(&[0.02, 0.0, 0.0]);
        assert_eq!((n, p.get("trials")), (1, Some(1.0)));
    }

    #[test]
    fn a_stolen_point_is_measured_again_and_the_quietest_kept() {
        let (p, n) = points(&[0.4, 0.05, 0.0]);
        assert_eq!((n, p.get("delivered_pps")), (2, Some(1.0)));
        let (p, n) = points(&[0.4, 0.3, 0.35]);
        assert_eq!(
            (n, p.get("delivered_pps"), p.get("trials")),
            (3, Some(1.0), Some(3.0))
        );
    }

    /// A stall during the measurement counts before a larger steal share.
    #[test]
    fn a_stalled_point_is_measured_again_and_the_least_stalled_kept() {
        let (p, n) = stalled(&[0.01, 0.0, 0.0], &[1.0, 0.0, 0.0]);
        assert_eq!((n, p.get("delivered_pps")), (2, Some(1.0)));
        let (p, n) = stalled(&[0.01, 0.05, 0.02], &[2.0, 1.0, 1.0]);
        assert_eq!((n, p.get("delivered_pps")), (3, Some(2.0)));
    }

    /// Every variant at every x, in order, numbered across the whole sweep.
    #[test]
    fn a_sweep_takes_each_variant_at_each_rate() {
        let lines = RefCell::new(Vec::new());
        let progress = |m: &str| lines.borrow_mut().push(m.to_string());
        let rates = [50e3, TOP_RATE];
        let mut sweep = Sweep::over_rates(2, &rates, &progress);
        let mut series = Vec::new();
        for label in ["a", "b"] {
            let s = sweep.series(label, |r| {
                Ok(Point::xy("offered_pps", r, "delivered_pps", r / 2.0))
            });
            series.push(s.unwrap());
        }
        assert_eq!(series[1].label, "b");
        assert_eq!(
            series[1].points[1].get("delivered_pps"),
            Some(TOP_RATE / 2.0)
        );
        assert_eq!(series[0].points[0].get("trials"), Some(1.0));
        assert_eq!(
            *lines.borrow(),
            [
                "[1/4] a at 50000 pkts/s",
                "[2/4] a at the generator's top rate",
                "[3/4] b at 50000 pkts/s",
                "[4/4] b at the generator's top rate"
            ]
        );
    }

    #[test]
    fn the_median_trial_keeps_the_spread() {
        let trials = [5.0, 1.0, 9.0, 3.0, 7.0]
            .iter()
            .map(|&y| Point::xy("offered_pps", 1.0, "delivered_pps", y))
            .collect();
        let y = |p: &Point| p.get("delivered_pps").unwrap_or(0.0);
        let m = median(trials, y, "lowest", "highest");
        assert_eq!(
            (y(&m), m.get("lowest"), m.get("highest")),
            (5.0, Some(1.0), Some(9.0))
        );
    }
}
