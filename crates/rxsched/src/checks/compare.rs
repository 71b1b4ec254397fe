//! Rules that compare: one series with another (by their peaks, MLFRRs,
//! first or last points, values at an x, quantiles, shares of the offered
//! rate), several in order, or ours with the published points.

use super::curve::{
    bounds, interpolate, interpolated_peak, last, mean_at, nearest, peak, quantile, within, Curve,
};
use super::{Compare, CompareAt, Outcome, View};

/// A series' points, owned, as `View::curve` gives them.
type Points = Vec<(f64, f64)>;

impl View<'_> {
    /// `f` of the first `series` over `f` of the first `other`.
    pub(super) fn ratio(&self, what: &str, c: &Compare, f: impl Fn(&str) -> f64) -> Outcome {
        let (s0, o0) = (&c.series[0], &c.other[0]);
        let (a, b) = (f(s0), f(o0));
        let ratio = if b > 0.0 {
            a / b
        } else if a > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        (
            within(ratio, c.min, c.max),
            format!(
                "{what} {s0} = {a:.0}, {o0} = {b:.0}, ratio {ratio:.3} (want {})",
                bounds(c.min, c.max)
            ),
        )
    }

    /// The first points' ratio.
    pub(super) fn first_ratio(&self, c: &Compare) -> Outcome {
        let (s0, o0) = (&c.series[0], &c.other[0]);
        let first = |s: &str| self.curve(s).first().map(|p| p.1);
        match (first(s0), first(o0)) {
            (Some(a), Some(b)) if b > 0.0 => {
                let ratio = a / b;
                (
                    within(ratio, c.min, c.max),
                    format!(
                        "at the lowest x: {s0} {a:.1}, {o0} {b:.1}, ratio {ratio:.2} (want {})",
                        bounds(c.min, c.max)
                    ),
                )
            }
            _ => (false, "no comparable first points".into()),
        }
    }

    /// At the highest x the series are in the listed order.
    pub(super) fn order_last(&self, series: &[String], tolerance: f64) -> Outcome {
        let vals: Vec<(&String, f64, f64)> = series
            .iter()
            .map(|s| {
                let cv = self.curve(s);
                (s, last(&cv), peak(&cv).1)
            })
            .collect();
        let slack = tolerance * vals.iter().map(|v| v.2).fold(0.0, f64::max);
        let ok = vals.windows(2).all(|w| w[0].1 + slack >= w[1].1);
        let list: Vec<String> = vals.iter().map(|(s, l, _)| format!("{s} {l:.0}")).collect();
        (
            ok,
            format!(
                "at the highest rate: {} (each >= the next less {slack:.0})",
                list.join(" >= ")
            ),
        )
    }

    /// Our curves pass within `tol` of every published point.
    pub(super) fn reference(&self, series: &[String], at: &[f64], tol: f64) -> Outcome {
        let mut worst = (0.0f64, String::new());
        let pairs = self.published_pairs(series, at);
        for (label, x, y, ours) in &pairs {
            let err = if *y != 0.0 {
                (ours - y).abs() / y.abs()
            } else {
                ours.abs()
            };
            if err >= worst.0 {
                worst = (
                    err,
                    format!("{label} at {x}: ours {ours:.3}, published {y}"),
                );
            }
        }
        let n = pairs.len();
        (
            n > 0 && worst.0 <= tol,
            format!(
                "{n} points, worst error {:.1}% ({}); tolerance {:.0}%",
                worst.0 * 100.0,
                worst.1,
                tol * 100.0
            ),
        )
    }

    /// Our peak of `s0` (read between the points) and its highest published point.
    pub(super) fn peaks(&self, s0: &str) -> (f64, f64) {
        let published = self
            .r
            .reference_points(s0)
            .iter()
            .map(|p| p.1)
            .fold(f64::MIN, f64::max);
        (interpolated_peak(&self.curve(s0)), published)
    }

    /// Every published point of `series` up to `until` (only those at the x
    /// values `at`, unless it is empty) where our curve has a value:
    /// (series, x, published, ours).
    pub(super) fn published_pairs(
        &self,
        series: &[String],
        at: &[f64],
    ) -> Vec<(String, f64, f64, f64)> {
        let mut out = Vec::new();
        for rf in self
            .r
            .reference
            .iter()
            .filter(|rf| series.contains(&rf.series))
        {
            let cv = self.curve(&rf.series);
            let chosen = |x: f64| at.is_empty() || at.contains(&x);
            for [x, y] in rf
                .points
                .iter()
                .filter(|p| p[0] <= self.until && chosen(p[0]))
            {
                if let Some(ours) = interpolate(&cv, *x) {
                    out.push((rf.series.clone(), *x, *y, ours));
                }
            }
        }
        out
    }

    /// Our peak within `tol` of the published peak.
    pub(super) fn peak_reference(&self, s0: &str, tol: f64) -> Outcome {
        let (ours, published) = self.peaks(s0);
        let err = (ours - published).abs() / published.abs().max(1e-9);
        (
            err <= tol,
            format!(
                "peak {ours:.0} (read between the points) vs published {published:.0}: {:.1}% off; tolerance {:.0}%",
                err * 100.0,
                tol * 100.0
            ),
        )
    }

    /// A distribution's quantile `c.at`: `other`'s less `series`'s.
    pub(super) fn quantile_diff(&self, c: &CompareAt) -> Outcome {
        let (s0, o0, q) = (&c.series[0], &c.other[0], c.at);
        let (a, b) = (quantile(&self.curve(s0), q), quantile(&self.curve(o0), q));
        let d = b - a;
        (
            within(d, c.min, c.max),
            format!(
                "quantile {q}: {s0} {a:.1}, {o0} {b:.1}, {s0} lower by {d:.1} (want {})",
                bounds(c.min, c.max)
            ),
        )
    }

    /// `s0` has a narrower p10–p90 spread than `o0`.
    pub(super) fn spread_order(&self, s0: &str, o0: &str) -> Outcome {
        let spread = |cv: &Curve| quantile(cv, 0.9) - quantile(cv, 0.1);
        let (a, b) = (spread(&self.curve(s0)), spread(&self.curve(o0)));
        (a < b, format!("p90-p10: {s0} {a:.1}, {o0} {b:.1}"))
    }

    /// At x = `c.at`: `other`'s value less `series`'s.
    pub(super) fn point_diff(&self, c: &CompareAt) -> Outcome {
        let (s0, o0, at) = (&c.series[0], &c.other[0], c.at);
        match (nearest(&self.curve(s0), at), nearest(&self.curve(o0), at)) {
            (Some(a), Some(b)) => (
                within(b - a, c.min, c.max),
                format!(
                    "at x={at}: {s0} {a:.1}, {o0} {b:.1}, difference {:.1} (want {})",
                    b - a,
                    bounds(c.min, c.max)
                ),
            ),
            _ => (false, format!("no point at x={at}")),
        }
    }

    /// At x = `c.at`: `series`'s value over `other`'s.
    pub(super) fn point_ratio(&self, c: &CompareAt) -> Outcome {
        let (s0, o0, at) = (&c.series[0], &c.other[0], c.at);
        match (nearest(&self.curve(s0), at), nearest(&self.curve(o0), at)) {
            (Some(a), Some(b)) if b > 0.0 => (
                within(a / b, c.min, c.max),
                format!(
                    "at x={at}: {s0} {a:.1}, {o0} {b:.1}, ratio {:.3} (want {})",
                    a / b,
                    bounds(c.min, c.max)
                ),
            ),
            _ => (false, format!("no point (or a zero) at x={at}")),
        }
    }

    /// At x = `c.at`, the mean of `series`'s runs over the mean of `other`'s.
    pub(super) fn mean_ratio(&self, c: &CompareAt) -> Outcome {
        let (s, o, at) = (&c.series[0], &c.other[0], c.at);
        let (a, na) = mean_at(&self.curve(s), at);
        let (b, nb) = mean_at(&self.curve(o), at);
        if na == 0 || nb == 0 || b <= 0.0 {
            return (
                false,
                format!("at x = {at}: {s} has {na} runs, {o} {nb} (mean {b:.0})"),
            );
        }
        let ratio = a / b;
        (
            within(ratio, c.min, c.max),
            format!(
                "at x = {at}: mean of {na} runs of {s} {a:.0}, of {nb} of {o} {b:.0}, ratio {ratio:.3} (want {})",
                bounds(c.min, c.max)
            ),
        )
    }

    /// The curves of `s0` and `o0`, point for point; refused (a failing
    /// outcome) when either is empty or they differ in length.
    fn paired(&self, s0: &str, o0: &str) -> Result<(Points, Points), Outcome> {
        let (a, b) = (self.curve(s0), self.curve(o0));
        if a.is_empty() || a.len() != b.len() {
            return Err((
                false,
                format!("{s0} has {} points and {o0} {}", a.len(), b.len()),
            ));
        }
        Ok((a, b))
    }

    /// At every x, `series`'s value over `other`'s within bounds.
    pub(super) fn ratio_everywhere(&self, c: &Compare) -> Outcome {
        let (s0, o0) = (&c.series[0], &c.other[0]);
        let (a, b) = match self.paired(s0, o0) {
            Ok(ab) => ab,
            Err(e) => return e,
        };
        // A point where neither delivered anything (no load) says nothing
        // of their ratio: it is left out, and said so.
        let ratios: Vec<(f64, f64)> = a
            .iter()
            .zip(&b)
            .filter(|(p, q)| p.1 > 0.0 || q.1 > 0.0)
            .map(|(p, q)| (p.0, if q.1 > 0.0 { p.1 / q.1 } else { f64::INFINITY }))
            .collect();
        let skipped = a.len() - ratios.len();
        if ratios.is_empty() {
            return (
                false,
                format!(
                    "{s0} and {o0} delivered nothing at any of their {} points",
                    a.len()
                ),
            );
        }
        let skipped = if skipped > 0 {
            format!("; {skipped} point(s) where neither delivered anything left out")
        } else {
            String::new()
        };
        let lo = ratios
            .iter()
            .copied()
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .expect("points");
        let hi = ratios
            .iter()
            .copied()
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .expect("points");
        (
            ratios.iter().all(|r| within(r.1, c.min, c.max)),
            format!(
                "{s0} over {o0}: from {:.4} (x = {}) to {:.4} (x = {}) (want {} everywhere){skipped}",
                lo.1,
                lo.0,
                hi.1,
                hi.0,
                bounds(c.min, c.max)
            ),
        )
    }

    /// Everything `series` delivered over the sweep over everything `other`
    /// did (points paired in x order): a ratio pooled over the rates, for
    /// measurements whose single points scatter more than the bound. The
    /// per-point ratios are shown beside it, not judged.
    pub(super) fn pooled_ratio(&self, c: &Compare) -> Outcome {
        let (s0, o0) = (&c.series[0], &c.other[0]);
        let (a, b) = match self.paired(s0, o0) {
            Ok(ab) => ab,
            Err(e) => return e,
        };
        let (sa, sb) = (
            a.iter().map(|p| p.1).sum::<f64>(),
            b.iter().map(|p| p.1).sum::<f64>(),
        );
        if sb <= 0.0 {
            return (false, format!("{o0} has nothing at any of its points"));
        }
        let pooled = sa / sb;
        let each: Vec<f64> = a
            .iter()
            .zip(&b)
            .filter(|(_, q)| q.1 > 0.0)
            .map(|(p, q)| p.1 / q.1)
            .collect();
        let lo = each.iter().copied().fold(f64::MAX, f64::min);
        let hi = each.iter().copied().fold(f64::MIN, f64::max);
        (
            within(pooled, c.min, c.max),
            format!(
                "{s0} over {o0}, summed over {} points: {pooled:.4} (want {}); \
                 point by point {lo:.3} to {hi:.3}, shown, not judged",
                a.len(),
                bounds(c.min, c.max)
            ),
        )
    }

    /// At every point (from `o0`'s peak on, with `past_peak`), `s0` within
    /// `rel` of `o0` or within `abs` of it; says the worst point.
    pub(super) fn tracks(
        &self,
        s0: &str,
        o0: &str,
        rel: f64,
        abs: f64,
        past_peak: bool,
    ) -> Outcome {
        let (a, b) = (self.curve(s0), self.curve(o0));
        if a.is_empty() || a.len() != b.len() {
            return (
                false,
                format!("{s0} has {} points and {o0} {}", a.len(), b.len()),
            );
        }
        let from = if past_peak {
            (0..b.len())
                .max_by(|&i, &j| b[i].1.total_cmp(&b[j].1))
                .unwrap_or(0)
        } else {
            0
        };
        // Each point's miss as a share of what was allowed there.
        let miss = |p: &(f64, f64), q: &(f64, f64)| {
            let off = (p.1 - q.1).abs();
            off / (rel * q.1.abs()).max(abs).max(f64::MIN_POSITIVE)
        };
        let (worst, w) = a[from..]
            .iter()
            .zip(&b[from..])
            .map(|(p, q)| (miss(p, q), (p, q)))
            .max_by(|x, y| x.0.total_cmp(&y.0))
            .expect("points");
        let (p, q) = w;
        let extra = if abs > 0.0 {
            format!(" or {abs}")
        } else {
            String::new()
        };
        let span = if past_peak { " from its peak on" } else { "" };
        (
            worst <= 1.0,
            format!(
                "{s0} against {o0}{span}: worst at x = {:.0}, {:.4} against {:.4} ({:+.1}%; allowed {:.0}%{extra})",
                q.0,
                p.1,
                q.1,
                100.0 * (p.1 - q.1) / q.1.abs().max(f64::MIN_POSITIVE),
                100.0 * rel
            ),
        )
    }

    /// At every offered rate, `s0` passes at least `o0`'s share of x, less `tolerance`.
    pub(super) fn at_every_rate(&self, s0: &str, o0: &str, tolerance: f64) -> Outcome {
        let (a, b) = (self.curve(s0), self.curve(o0));
        if a.is_empty() || a.len() != b.len() {
            return (
                false,
                format!("{s0} has {} points and {o0} {}", a.len(), b.len()),
            );
        }
        let share = |p: &(f64, f64)| if p.0 > 0.0 { p.1 / p.0 } else { 0.0 };
        let worst = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (share(p) - share(q), p, q))
            .min_by(|x, y| x.0.total_cmp(&y.0))
            .expect("at least one pair");
        let (d, p, q) = worst;
        (
            d >= -tolerance,
            format!(
                "worst at x={:.0}: {s0} passes {:.1}% of offered ({:.0}), {o0} {:.1}% ({:.0} at x={:.0}); difference {:+.1} points (want at least -{:.1})",
                p.0,
                100.0 * share(p),
                p.1,
                100.0 * share(q),
                q.1,
                q.0,
                100.0 * d,
                100.0 * tolerance
            ),
        )
    }

    /// At every x of `s0`, its value against the best of `others` whose
    /// points there meet every target.
    pub(super) fn best_within(
        &self,
        s0: &str,
        others: &[String],
        within: f64,
        targets: &[super::rule::Target],
    ) -> Outcome {
        let ours = self.curve(s0);
        if ours.is_empty() {
            return (false, format!("{s0}: no points"));
        }
        let at = |label: &str, metric: &str, x: f64| {
            self.r
                .curve_of(label, metric)
                .into_iter()
                .find(|p| (p.0 - x).abs() <= 1e-9 * x.abs().max(1.0))
                .map(|p| p.1)
        };
        let meets = |label: &str, x: f64| {
            targets.iter().all(|t| {
                t.until.is_some_and(|u| x > u)
                    || at(label, &t.metric, x)
                        .is_some_and(|v| super::curve::within(v, t.min, t.max))
            })
        };
        let (mut ok, mut worst, mut none) = (true, None::<(f64, f64, f64, String)>, Vec::new());
        for &(x, y) in &ours {
            let best = others
                .iter()
                .filter(|o| meets(o, x))
                .filter_map(|o| at(o, self.metric, x).map(|v| (v, o.clone())))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            let Some((b, label)) = best else {
                none.push(format!("{x}"));
                continue;
            };
            let ratio = if b > 0.0 { y / b } else { 1.0 };
            ok &= ratio >= 1.0 - within;
            if worst.as_ref().is_none_or(|w| ratio < w.2) {
                worst = Some((x, b, ratio, label));
            }
        }
        let mut detail = match &worst {
            Some((x, b, r, label)) => format!(
                "worst at x={x}: {s0} {:.0}, the best hand-set meeting every target {label} {b:.0}: {r:.3} (want at least {:.3})",
                r * b,
                1.0 - within
            ),
            None => format!("no series of {others:?} meets every target at any x"),
        };
        if !none.is_empty() {
            detail.push_str(&format!(
                "; none meets every target at x = {}",
                none.join(", ")
            ));
        }
        (ok && worst.is_some(), detail)
    }
}
