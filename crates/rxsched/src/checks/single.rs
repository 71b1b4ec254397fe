//! Rules that judge each listed series on its own: a curve's shape (flat,
//! collapsing, livelocking, bounded, stable, rising, linear, split into
//! levels), its MLFRR, where it drops, and its fitted line.

use super::curve::{at_x, bounds, from, last, line_fit, peak, r2, within, Curve};
use super::{Bounded, Outcome, View};

/// Beyond its peak, the curve never falls below `min` of the peak.
pub(super) fn flat(cv: &Curve, min: f64) -> Outcome {
    let (px, py) = peak(cv);
    let low = cv
        .iter()
        .filter(|p| p.0 >= px)
        .map(|p| p.1)
        .fold(f64::MAX, f64::min);
    let ratio = if py > 0.0 { low / py } else { 0.0 };
    (
        ratio >= min,
        format!("min/peak beyond the peak = {ratio:.3} (peak {py:.0} at {px:.0})"),
    )
}

/// The last point is at most `max` of the peak.
pub(super) fn collapses(cv: &Curve, max: f64) -> Outcome {
    let (_, py) = peak(cv);
    let ratio = if py > 0.0 { last(cv) / py } else { 0.0 };
    (
        ratio <= max,
        format!(
            "last/peak = {ratio:.3} (peak {py:.0}, last {:.0})",
            last(cv)
        ),
    )
}

/// Where the curve, past its peak, first falls to `fraction` of it.
/// Where the curve, past its peak, first falls to `fraction` of the peak
/// (interpolated between points), if it does.
pub(super) fn livelock_x(cv: &Curve, fraction: f64) -> Option<f64> {
    let (px, py) = peak(cv);
    let floor = fraction * py;
    let mut prev = (px, py);
    for &(x, y) in cv.iter().filter(|p| p.0 > px) {
        if y <= floor {
            return Some(if prev.1 > y {
                prev.0 + (x - prev.0) * (prev.1 - floor) / (prev.1 - y)
            } else {
                x
            });
        }
        prev = (x, y);
    }
    None
}

pub(super) fn livelock_at(
    cv: &Curve,
    fraction: f64,
    min: Option<f64>,
    max: Option<f64>,
) -> Outcome {
    let py = peak(cv).1;
    match livelock_x(cv, fraction) {
        Some(at) => (
            within(at, min, max),
            format!(
                "falls to {:.0}% of its peak ({py:.0}) at x = {at:.0} (want {})",
                fraction * 100.0,
                bounds(min, max)
            ),
        ),
        None => (
            false,
            format!(
                "never falls to {:.0}% of its peak ({py:.0}); last {:.0}",
                fraction * 100.0,
                last(cv)
            ),
        ),
    }
}

/// The runs at one x split into levels: the widest gap, as a share of the highest.
pub(super) fn splits(cv: &Curve, at: Option<f64>, min: Option<f64>, max: Option<f64>) -> Outcome {
    let x = at.unwrap_or_else(|| cv.last().map_or(0.0, |p| p.0));
    let mut ys = at_x(cv, x);
    if ys.len() < 2 {
        return (
            false,
            format!("{} runs at x = {x}; a split needs two", ys.len()),
        );
    }
    ys.sort_by(f64::total_cmp);
    let hi = ys[ys.len() - 1];
    let (gap, lo_side, hi_side) = ys
        .windows(2)
        .map(|w| (w[1] - w[0], w[0], w[1]))
        .fold((f64::MIN, 0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
    let share = if hi > 0.0 { gap / hi } else { 0.0 };
    (
        within(share, min, max),
        format!(
            "at x = {x}: {} runs from {:.0} to {hi:.0}; widest gap {share:.3} of the highest, between {lo_side:.0} and {hi_side:.0} (want {})",
            ys.len(),
            ys[0],
            bounds(min, max)
        ),
    )
}

/// Every point from x = `at` on is at most `max`.
pub(super) fn below(cv: &Curve, max: f64, at: f64) -> Outcome {
    let ys = from(cv, at);
    if ys.is_empty() {
        return (false, format!("no points from x = {at}"));
    }
    let hi = ys.iter().copied().fold(f64::MIN, f64::max);
    (
        !ys.is_empty() && hi <= max,
        format!("highest {hi:.3} (want <= {max})"),
    )
}

/// Every point from x = `at` on is at least `min`.
pub(super) fn above(cv: &Curve, min: f64, at: f64) -> Outcome {
    let ys = from(cv, at);
    if ys.is_empty() {
        return (false, format!("no points from x = {at}"));
    }
    let lo = ys.iter().copied().fold(f64::MAX, f64::min);
    (
        !ys.is_empty() && lo >= min,
        format!("lowest {lo:.3} (want >= {min})"),
    )
}

/// From x = `at` on, the points span at most `max` (of their mean, if `relative`).
pub(super) fn stable(cv: &Curve, max: f64, at: f64, relative: bool) -> Outcome {
    let ys = from(cv, at);
    let mut spread =
        ys.iter().copied().fold(f64::MIN, f64::max) - ys.iter().copied().fold(f64::MAX, f64::min);
    let mean = ys.iter().sum::<f64>() / ys.len().max(1) as f64;
    if relative {
        spread = if mean > 0.0 {
            spread / mean
        } else {
            f64::INFINITY
        };
    }
    let of = if relative { " of the mean" } else { "" };
    (
        ys.len() >= 2 && spread <= max,
        format!(
            "spread {spread:.3}{of} over {} points (want <= {max})",
            ys.len()
        ),
    )
}

/// The points rise with x (at least two of them).
pub(super) fn increasing(cv: &Curve) -> Outcome {
    let bad = cv.windows(2).find(|w| w[1].1 < w[0].1);
    match bad {
        None => (cv.len() >= 2, format!("{} points in order", cv.len())),
        Some(w) => (
            false,
            format!(
                "x = {} at {:.1} comes before x = {} at {:.1}",
                w[1].0, w[1].1, w[0].0, w[0].1
            ),
        ),
    }
}

/// The points lie on a line: r² at least `min`.
pub(super) fn linear(cv: &Curve, min: f64) -> Outcome {
    let v = r2(cv);
    (v >= min, format!("r² = {v:.4}"))
}

impl View<'_> {
    /// At the highest x, drop point `point` holds at least `min` of the drops.
    pub(super) fn drop_share(&self, s: &str, point: &str, min: f64) -> Outcome {
        let x = &self.r.x.metric;
        let last = self.r.points(s).max_by(|a, b| {
            let xa = a.get(x).unwrap_or(0.0);
            xa.total_cmp(&b.get(x).unwrap_or(0.0))
        });
        let total = last.map_or(0.0, |p| p.drops());
        let here = last
            .and_then(|p| p.get(&format!("drops.{point}")))
            .unwrap_or(0.0);
        let share = if total > 0.0 { here / total } else { 0.0 };
        (
            share >= min,
            format!(
                "{point} holds {:.1}% of {total:.0} drops at the highest rate",
                share * 100.0
            ),
        )
    }

    /// A line through the CPU-bound points of a throughput search against
    /// the published line: its intercept within `tol`, or its slope within `max`.
    pub(super) fn fit(&self, s: &str, tol: Option<f64>, max: Option<f64>) -> Outcome {
        match self.fits(s) {
            Some(((a, b), (ra, rb))) => match (tol, max) {
                (Some(tol), _) => {
                    let err = (a - ra).abs() / ra.abs().max(1e-12);
                    (err <= tol, format!("fitted T_const {a:.2}, k {b:.4}; published {ra:.2}, {rb:.4} ({:.1}% off)", err * 100.0))
                }
                (None, max) => {
                    let d = (b - rb).abs();
                    (
                        d <= max.unwrap_or(0.0),
                        format!("fitted k {b:.4} vs published {rb:.4}"),
                    )
                }
            },
            None => (
                false,
                "fewer than two CPU-bound points or reference points".to_string(),
            ),
        }
    }

    /// The line (intercept, slope) through series `s`'s CPU-bound points
    /// of a throughput search, and the published line, if both exist.
    pub(super) fn fits(&self, s: &str) -> Option<((f64, f64), (f64, f64))> {
        let mut cpu_bound: Vec<(f64, f64)> = self
            .r
            .points(s)
            .filter(|p| p.get("line_limited").unwrap_or(0.0) == 0.0)
            .filter_map(|p| Some((p.get(&self.r.x.metric)?, p.get(self.r.y_of(s))?)))
            .collect();
        cpu_bound.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some((
            line_fit(&cpu_bound)?,
            line_fit(&self.r.reference_points(s))?,
        ))
    }

    /// The MLFRR of a series, within bounds.
    pub(super) fn mlfrr(&self, s: &str, b: &Bounded) -> Outcome {
        let m = self.r.mlfrr(s);
        (
            within(m, b.min, b.max),
            format!("MLFRR {m:.0} (want {})", bounds(b.min, b.max)),
        )
    }

    /// Delivered at the highest x over delivered at the MLFRR's point
    /// (`delivered`), or the highest x itself over the MLFRR, within
    /// bounds. Where the MLFRR tolerates some loss (a real bench's), its
    /// point may deliver up to that much less than its x: the delivered
    /// rates are compared with each other, not with an offered one.
    pub(super) fn over_mlfrr(&self, s: &str, cv: &Curve, b: &Bounded, delivered: bool) -> Outcome {
        let m = self.r.mlfrr(s);
        let (what, v, of, m) = if delivered {
            let at_m = cv.iter().find(|p| p.0 == m).map_or(m, |p| p.1);
            (
                "delivered at the highest rate",
                last(cv),
                "delivered at the MLFRR",
                at_m,
            )
        } else {
            (
                "highest offered rate",
                cv.last().map_or(0.0, |p| p.0),
                "MLFRR",
                m,
            )
        };
        let ratio = if m > 0.0 { v / m } else { 0.0 };
        (
            within(ratio, b.min, b.max),
            format!(
                "{what} {v:.0} / {of} {m:.0} = {ratio:.2} (want {})",
                bounds(b.min, b.max)
            ),
        )
    }
}

/// Every point less the first (lowest-x) point, within the bounds.
pub(super) fn from_first(cv: &Curve, b: &Bounded) -> Outcome {
    let Some(&(_, y0)) = cv.first() else {
        return (false, "no points".into());
    };
    let diffs: Vec<f64> = cv.iter().map(|&(_, y)| y - y0).collect();
    let lo = diffs.iter().copied().fold(f64::MAX, f64::min);
    let hi = diffs.iter().copied().fold(f64::MIN, f64::max);
    (
        diffs.iter().all(|d| within(*d, b.min, b.max)),
        format!(
            "less the first point ({y0:.3}): {lo:+.3} to {hi:+.3} (want {})",
            bounds(b.min, b.max)
        ),
    )
}

/// Every point over the first (lowest-x) point, within the bounds.
pub(super) fn over_first(cv: &Curve, b: &Bounded) -> Outcome {
    let Some(&(_, y0)) = cv.first() else {
        return (false, "no points".into());
    };
    if y0 <= 0.0 {
        return (false, format!("the first point is {y0}: no ratio to it"));
    }
    let ratios: Vec<f64> = cv.iter().map(|&(_, y)| y / y0).collect();
    let lo = ratios.iter().copied().fold(f64::MAX, f64::min);
    let hi = ratios.iter().copied().fold(f64::MIN, f64::max);
    let ok = ratios.iter().all(|r| within(*r, b.min, b.max));
    (
        ok,
        format!(
            "over the first point ({y0:.3}): {lo:.3} to {hi:.3} (want {})",
            bounds(b.min, b.max)
        ),
    )
}
