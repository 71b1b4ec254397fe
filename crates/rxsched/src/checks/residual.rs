//! A check's residuals: how far our numbers are from the published ones it
//! names, as relative errors (ours less published, over published), for
//! the rules a calibration can be fitted to. A published range (`min` to
//! `max`) counts from its middle, in units of its half-width over the
//! middle, so that the range's ends sit at ±(half-width / middle). A bound
//! on one side only counts past it: nothing inside, the relative distance
//! outside. A published slope given to its rounding (`fit_slope`'s `max`)
//! counts only past that rounding.

use super::curve::{from, interpolated_peak, last, nearest, quantile};
use super::{Check, Rule, View};
use crate::result::ResultFile;

impl Check {
    /// The residuals of this check against result `r`, one per published
    /// point; `None` for a rule that names no published number.
    pub fn residuals(&self, r: &ResultFile) -> Option<Vec<f64>> {
        self.view(r).residuals(&self.rule)
    }
}

/// `ours` against the middle of `[min, max]`.
fn from_middle(ours: f64, min: Option<f64>, max: Option<f64>) -> Option<f64> {
    let mid = (min? + max?) / 2.0;
    (mid != 0.0).then(|| (ours - mid) / mid.abs())
}

/// `ours` against a range, or against its one bound (nothing inside).
fn bounded(ours: f64, min: Option<f64>, max: Option<f64>) -> Option<f64> {
    match (min, max) {
        (Some(_), Some(_)) => from_middle(ours, min, max),
        (Some(lo), None) if lo != 0.0 => Some(((ours - lo) / lo.abs()).min(0.0)),
        (None, Some(hi)) if hi != 0.0 => Some(((ours - hi) / hi.abs()).max(0.0)),
        _ => None,
    }
}

impl View<'_> {
    /// Each point of the first of `series` from x = `at` on against a
    /// one-sided bound.
    fn past_bound(
        &self,
        series: &[String],
        at: Option<f64>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Option<Vec<f64>> {
        let out: Vec<f64> = from(&self.curve(series.first()?), at.unwrap_or(f64::MIN))
            .into_iter()
            .map(|y| bounded(y, min, max))
            .collect::<Option<_>>()?;
        (!out.is_empty()).then_some(out)
    }

    fn residuals(&self, rule: &Rule) -> Option<Vec<f64>> {
        match rule {
            Rule::PeakReference { series, .. } => {
                let (ours, published) = self.peaks(series.first()?);
                (published > 0.0).then(|| vec![(ours - published) / published])
            }
            Rule::Reference { series, at, .. } => {
                let out: Vec<f64> = self
                    .published_pairs(series, at)
                    .into_iter()
                    .filter(|p| p.2 != 0.0)
                    .map(|(_, _, y, ours)| (ours - y) / y.abs())
                    .collect();
                (!out.is_empty()).then_some(out)
            }
            Rule::PointDiff(c) => {
                let (a, b) = (
                    nearest(&self.curve(&c.series[0]), c.at)?,
                    nearest(&self.curve(&c.other[0]), c.at)?,
                );
                Some(vec![from_middle(b - a, c.min, c.max)?])
            }
            Rule::LivelockAt {
                series,
                fraction,
                min,
                max,
            } => {
                let cv = self.curve(series.first()?);
                match super::single::livelock_x(&cv, *fraction) {
                    Some(at) => Some(vec![bounded(at, *min, *max)?]),
                    // Never falls that far: how far above it the last point
                    // stays, as a share of the peak.
                    None => {
                        let peak = interpolated_peak(&cv);
                        (peak > 0.0).then(|| vec![last(&cv) / peak - fraction])
                    }
                }
            }
            // Ratios read between the points, so that they move with the
            // costs: peaks as `peak_reference` reads them, MLFRRs between
            // the swept rates.
            Rule::PeakRatio(c) | Rule::MlfrrRatio(c) | Rule::MlfrrBetweenRatio(c) => {
                let f = |s: &str| match rule {
                    Rule::PeakRatio(_) => interpolated_peak(&self.curve(s)),
                    _ => self.r.mlfrr_between(s),
                };
                let (a, b) = (f(c.series.first()?), f(c.other.first()?));
                (b > 0.0).then_some(())?;
                Some(vec![bounded(a / b, c.min, c.max)?])
            }
            Rule::QuantileDiff(c) => {
                let q = |s: &str| quantile(&self.curve(s), c.at);
                let d = q(c.other.first()?) - q(c.series.first()?);
                Some(vec![bounded(d, c.min, c.max)?])
            }
            // The fitted line's intercept (T_const) against the published
            // line's, series by series.
            Rule::Fit { series, .. } => series
                .iter()
                .map(|s| {
                    let ((a, _), (ra, _)) = self.fits(s)?;
                    (ra != 0.0).then(|| (a - ra) / ra.abs())
                })
                .collect(),
            // The slope (k) against the published one, which is given to
            // within `max` (its rounding): anything inside that says the
            // same as the published value, so only the excess counts.
            Rule::FitSlope { series, max } => series
                .iter()
                .map(|s| {
                    let ((_, b), (_, rb)) = self.fits(s)?;
                    let excess = ((b - rb).abs() - max).max(0.0);
                    let signed = if excess > 0.0 {
                        excess.copysign(b - rb)
                    } else {
                        0.0
                    };
                    (rb != 0.0).then(|| signed / rb.abs())
                })
                .collect(),
            // A bound on every point from x = `at` on: each point past it
            // counts, the points inside it count nothing.
            Rule::Above { series, min, at } => self.past_bound(series, *at, Some(*min), None),
            Rule::Below { series, max, at } => self.past_bound(series, *at, None, Some(*max)),
            Rule::Mlfrr(b) => {
                // Between the swept points: the swept MLFRR is a step.
                let m = self.r.mlfrr_between(b.series.first()?);
                Some(vec![from_middle(m, b.min, b.max)?])
            }
            _ => None,
        }
    }
}
