//! Verdicts computed from a result's points. A scenario's `[[check]]`
//! names a rule (`kind`) and exactly the parameters that rule takes; a
//! parameter a rule does not take is an error. Nothing here knows a paper's
//! numbers: every threshold comes from the file, every value from points.

use crate::result::{Claim, ResultFile, Verdict};
use serde::{Deserialize, Serialize};

/// One `[[check]]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// What it checks, in words.
    pub name: String,
    /// Look at this metric instead of the figure's y.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Ignore points beyond this x.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<f64>,
    /// The claim of the text this check stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
    /// The model is known to miss this claim, and why (the mechanism it
    /// lacks): the check is computed and shown, and a failure does not
    /// fail the result. A known miss that passes is an error in the tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_miss: Option<String>,
    /// The rule and its parameters.
    #[serde(flatten)]
    pub rule: Rule,
}

/// Two series (or groups) compared by a ratio or a difference, with bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    /// The series compared.
    pub series: Vec<String>,
    /// What it is compared with.
    pub other: Vec<String>,
    /// Lower bound.
    #[serde(default)]
    pub min: Option<f64>,
    /// Upper bound.
    #[serde(default)]
    pub max: Option<f64>,
}

/// Series whose number must lie within bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounded {
    /// The series.
    pub series: Vec<String>,
    /// Lower bound.
    #[serde(default)]
    pub min: Option<f64>,
    /// Upper bound.
    #[serde(default)]
    pub max: Option<f64>,
}

/// The rules. Each applies to every series listed unless it compares.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Rule {
    /// Beyond its peak, a curve never falls below `min` of the peak.
    Flat { series: Vec<String>, min: f64 },
    /// The last point is at most `max` of the peak.
    Collapses { series: Vec<String>, max: f64 },
    /// Where the curve, past its peak, first falls to `fraction` of the peak
    /// (interpolated between points): the livelock point, within bounds.
    LivelockAt {
        series: Vec<String>,
        fraction: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// Peak of `series` over peak of `other`.
    PeakRatio(Compare),
    /// MLFRR of `series` over MLFRR of `other`.
    MlfrrRatio(Compare),
    /// Last point of `series` over that of `other`.
    LastRatio(Compare),
    /// First point of `series` over that of `other`.
    FirstRatio(Compare),
    /// At the highest x, the series are in the listed order (each at least
    /// the next, less `tolerance` of the largest peak).
    OrderLast {
        series: Vec<String>,
        #[serde(default)]
        tolerance: f64,
    },
    /// Our curve passes within `tolerance` (relative) of every published point.
    Reference { series: Vec<String>, tolerance: f64 },
    /// Our peak is within `tolerance` of the published peak.
    PeakReference { series: Vec<String>, tolerance: f64 },
    /// Every point from x = `at` on is at most `max`.
    Below {
        series: Vec<String>,
        max: f64,
        #[serde(default)]
        at: Option<f64>,
    },
    /// Every point from x = `at` on is at least `min`.
    Above {
        series: Vec<String>,
        min: f64,
        #[serde(default)]
        at: Option<f64>,
    },
    /// From x = `at` on, the points span at most `max` (with `relative`,
    /// at most `max` of their mean).
    Stable {
        series: Vec<String>,
        max: f64,
        #[serde(default)]
        at: Option<f64>,
        #[serde(default)]
        relative: bool,
    },
    /// The points rise with x: a timeline's milestones happen in the listed order.
    Increasing { series: Vec<String> },
    /// The points lie on a line: r² at least `min`.
    Linear { series: Vec<String>, min: f64 },
    /// A distribution's quantile `at`: `other`'s less `series`'s.
    QuantileDiff {
        series: Vec<String>,
        other: Vec<String>,
        at: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// `series` has a narrower p10–p90 spread than `other`.
    SpreadOrder {
        series: Vec<String>,
        other: Vec<String>,
    },
    /// At x = `at`: `other`'s value less `series`'s.
    PointDiff {
        series: Vec<String>,
        other: Vec<String>,
        at: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// At x = `at`: `series`'s value over `other`'s.
    PointRatio {
        series: Vec<String>,
        other: Vec<String>,
        at: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// At every offered rate (points paired in x order), `series` passes on
    /// at least the share of x that `other` does, less `tolerance`.
    AtEveryRate {
        series: Vec<String>,
        other: Vec<String>,
        tolerance: f64,
    },
    /// At the highest x, drop point `point` holds at least `min` of the drops.
    DropShare {
        series: Vec<String>,
        point: String,
        min: f64,
    },
    /// A line fitted to the CPU-bound points has the published intercept.
    Fit { series: Vec<String>, tolerance: f64 },
    /// ... and the published slope, within `max`.
    FitSlope { series: Vec<String>, max: f64 },
    /// At x = `at` (default: the highest x), the runs of a series (a figure
    /// with `repeats`) split into levels: the widest gap between two
    /// consecutive values, as a share of the highest, within bounds.
    Splits {
        series: Vec<String>,
        #[serde(default)]
        at: Option<f64>,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// At x = `at`, the mean of `series`'s runs over the mean of `other`'s
    /// (figures with `repeats`).
    MeanRatio {
        series: Vec<String>,
        other: Vec<String>,
        at: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// At every x (points paired in x order), `series`'s value over
    /// `other`'s, within bounds.
    RatioEverywhere(Compare),
    /// Delivered at the highest x over the MLFRR.
    LastOverMlfrr(Bounded),
    /// The MLFRR itself (highest loss-free offered rate), within bounds.
    Mlfrr(Bounded),
    /// The highest x over the MLFRR: how far past saturation the sweep went.
    RangeOverMlfrr(Bounded),
}

impl Rule {
    /// Every series the rule names.
    pub fn series(&self) -> Vec<&String> {
        use Rule::*;
        match self {
            PeakRatio(c) | MlfrrRatio(c) | LastRatio(c) | FirstRatio(c) | RatioEverywhere(c) => {
                c.series.iter().chain(&c.other).collect()
            }
            QuantileDiff { series, other, .. }
            | SpreadOrder { series, other }
            | PointDiff { series, other, .. }
            | PointRatio { series, other, .. }
            | MeanRatio { series, other, .. }
            | AtEveryRate { series, other, .. } => series.iter().chain(other).collect(),
            LastOverMlfrr(b) | RangeOverMlfrr(b) | Mlfrr(b) => b.series.iter().collect(),
            Flat { series, .. }
            | Collapses { series, .. }
            | LivelockAt { series, .. }
            | OrderLast { series, .. }
            | Reference { series, .. }
            | PeakReference { series, .. }
            | Below { series, .. }
            | Above { series, .. }
            | Stable { series, .. }
            | Linear { series, .. }
            | Increasing { series }
            | DropShare { series, .. }
            | Fit { series, .. }
            | Splits { series, .. }
            | FitSlope { series, .. } => series.iter().collect(),
        }
    }

    /// What makes the rule unable to fail, if anything: a comparison with no bound.
    pub fn vacuous(&self) -> Option<&'static str> {
        use Rule::*;
        let open = |min: &Option<f64>, max: &Option<f64>| min.is_none() && max.is_none();
        match self {
            PeakRatio(c) | MlfrrRatio(c) | LastRatio(c) | FirstRatio(c) | RatioEverywhere(c)
                if open(&c.min, &c.max) =>
            {
                Some("needs `min` or `max`")
            }
            LastOverMlfrr(b) | RangeOverMlfrr(b) | Mlfrr(b) if open(&b.min, &b.max) => {
                Some("needs `min` or `max`")
            }
            QuantileDiff { min, max, .. }
            | PointDiff { min, max, .. }
            | PointRatio { min, max, .. }
            | LivelockAt { min, max, .. }
            | Splits { min, max, .. }
            | MeanRatio { min, max, .. }
                if open(min, max) =>
            {
                Some("needs `min` or `max`")
            }
            _ => None,
        }
    }
}

impl Check {
    /// Evaluates the check against a result's points.
    pub fn evaluate(&self, r: &ResultFile) -> Verdict {
        let v = View {
            r,
            metric: self.metric.as_deref().unwrap_or(&r.y.metric),
            until: self.until.unwrap_or(f64::MAX),
        };
        let (pass, detail) = v.apply(&self.rule);
        Verdict {
            name: self.name.clone(),
            pass,
            detail,
            claim: self.claim.clone(),
            known_miss: self.known_miss.clone(),
        }
    }
}

/// A result as one check sees it: which metric, up to which x.
struct View<'a> {
    r: &'a ResultFile,
    metric: &'a str,
    until: f64,
}

type Outcome = (bool, String);

impl View<'_> {
    fn apply(&self, rule: &Rule) -> Outcome {
        use Rule::*;
        match rule {
            Flat { series, min } => self.each(series, |_, cv| flat(cv, *min)),
            Collapses { series, max } => self.each(series, |_, cv| collapses(cv, *max)),
            LivelockAt {
                series,
                fraction,
                min,
                max,
            } => self.each(series, |_, cv| livelock_at(cv, *fraction, *min, *max)),
            PeakRatio(c) => self.ratio("peak", c, |s| peak(&self.curve(s)).1),
            MlfrrRatio(c) => self.ratio("mlfrr", c, |s| self.r.mlfrr(s)),
            LastRatio(c) => self.ratio("last", c, |s| last(&self.curve(s))),
            FirstRatio(c) => self.first_ratio(c),
            OrderLast { series, tolerance } => self.order_last(series, *tolerance),
            Reference { series, tolerance } => self.reference(series, *tolerance),
            PeakReference { series, tolerance } => self.peak_reference(&series[0], *tolerance),
            Below { series, max, at } => {
                self.each(series, |_, cv| below(cv, *max, at.unwrap_or(f64::MIN)))
            }
            Above { series, min, at } => {
                self.each(series, |_, cv| above(cv, *min, at.unwrap_or(f64::MIN)))
            }
            Stable {
                series,
                max,
                at,
                relative,
            } => self.each(series, |_, cv| {
                stable(cv, *max, at.unwrap_or(f64::MIN), *relative)
            }),
            Increasing { series } => self.each(series, |_, cv| {
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
            }),
            Linear { series, min } => self.each(series, |_, cv| {
                let v = r2(cv);
                (v >= *min, format!("r² = {v:.4}"))
            }),
            QuantileDiff {
                series,
                other,
                at,
                min,
                max,
            } => self.quantile_diff(&series[0], &other[0], *at, *min, *max),
            SpreadOrder { series, other } => self.spread_order(&series[0], &other[0]),
            PointDiff {
                series,
                other,
                at,
                min,
                max,
            } => self.point_diff(&series[0], &other[0], *at, *min, *max),
            AtEveryRate {
                series,
                other,
                tolerance,
            } => self.at_every_rate(&series[0], &other[0], *tolerance),
            PointRatio {
                series,
                other,
                at,
                min,
                max,
            } => self.point_ratio(&series[0], &other[0], *at, *min, *max),
            DropShare { series, point, min } => {
                self.each(series, |s, _| self.drop_share(s, point, *min))
            }
            Fit { series, tolerance } => {
                self.each(series, |s, _| self.fit(s, Some(*tolerance), None))
            }
            FitSlope { series, max } => self.each(series, |s, _| self.fit(s, None, Some(*max))),
            Splits {
                series,
                at,
                min,
                max,
            } => self.each(series, |_, cv| splits(cv, *at, *min, *max)),
            MeanRatio {
                series,
                other,
                at,
                min,
                max,
            } => {
                let (s, o) = (&series[0], &other[0]);
                let (a, na) = mean_at(&self.curve(s), *at);
                let (b, nb) = mean_at(&self.curve(o), *at);
                if na == 0 || nb == 0 || b <= 0.0 {
                    return (
                        false,
                        format!("at x = {at}: {s} has {na} runs, {o} {nb} (mean {b:.0})"),
                    );
                }
                let ratio = a / b;
                (
                    within(ratio, *min, *max),
                    format!(
                        "at x = {at}: mean of {na} runs of {s} {a:.0}, of {nb} of {o} {b:.0}, ratio {ratio:.3} (want {})",
                        bounds(*min, *max)
                    ),
                )
            }
            RatioEverywhere(c) => {
                let (s0, o0) = (&c.series[0], &c.other[0]);
                let (a, b) = (self.curve(s0), self.curve(o0));
                if a.is_empty() || a.len() != b.len() {
                    return (
                        false,
                        format!("{s0} has {} points and {o0} {}", a.len(), b.len()),
                    );
                }
                let ratios: Vec<(f64, f64)> = a
                    .iter()
                    .zip(&b)
                    .map(|(p, q)| (p.0, if q.1 > 0.0 { p.1 / q.1 } else { f64::INFINITY }))
                    .collect();
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
                        "{s0} over {o0}: from {:.4} (x = {}) to {:.4} (x = {}) (want {} everywhere)",
                        lo.1,
                        lo.0,
                        hi.1,
                        hi.0,
                        bounds(c.min, c.max)
                    ),
                )
            }
            LastOverMlfrr(b) => self.over_mlfrr(b, true),
            RangeOverMlfrr(b) => self.over_mlfrr(b, false),
            Mlfrr(b) => self.each(&b.series, |s, _| {
                let m = self.r.mlfrr(s);
                (
                    within(m, b.min, b.max),
                    format!("MLFRR {m:.0} (want {})", bounds(b.min, b.max)),
                )
            }),
        }
    }

    /// A series' curve of the check's metric, up to `until`.
    fn curve(&self, label: &str) -> Vec<(f64, f64)> {
        self.r
            .curve_of(label, self.metric)
            .into_iter()
            .filter(|p| p.0 <= self.until)
            .collect()
    }

    /// A rule applied to each listed series; passes if all do.
    fn each(&self, series: &[String], f: impl Fn(&str, &[(f64, f64)]) -> Outcome) -> Outcome {
        let mut ok = true;
        let mut parts = Vec::new();
        for s in series {
            let cv = self.curve(s);
            if cv.is_empty() {
                ok = false;
                parts.push(format!("{s}: no points"));
                continue;
            }
            let (p, d) = f(s, &cv);
            ok &= p;
            parts.push(format!("{s}: {d}"));
        }
        (ok, parts.join("; "))
    }

    fn ratio(&self, what: &str, c: &Compare, f: impl Fn(&str) -> f64) -> Outcome {
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

    fn first_ratio(&self, c: &Compare) -> Outcome {
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

    fn order_last(&self, series: &[String], tolerance: f64) -> Outcome {
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

    fn reference(&self, series: &[String], tol: f64) -> Outcome {
        let mut worst = (0.0f64, String::new());
        let mut n = 0;
        for rf in self
            .r
            .reference
            .iter()
            .filter(|rf| series.contains(&rf.series))
        {
            let cv = self.curve(&rf.series);
            for [x, y] in rf.points.iter().filter(|p| p[0] <= self.until) {
                let Some(ours) = interpolate(&cv, *x) else {
                    continue;
                };
                n += 1;
                let err = if *y != 0.0 {
                    (ours - y).abs() / y.abs()
                } else {
                    ours.abs()
                };
                if err >= worst.0 {
                    worst = (
                        err,
                        format!("{} at {x}: ours {ours:.3}, published {y}", rf.series),
                    );
                }
            }
        }
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

    fn peak_reference(&self, s0: &str, tol: f64) -> Outcome {
        let ours = peak(&self.curve(s0)).1;
        let published = self
            .r
            .reference_points(s0)
            .iter()
            .map(|p| p.1)
            .fold(f64::MIN, f64::max);
        let err = (ours - published).abs() / published.abs().max(1e-9);
        (
            err <= tol,
            format!(
                "peak {ours:.0} vs published {published:.0}: {:.1}% off; tolerance {:.0}%",
                err * 100.0,
                tol * 100.0
            ),
        )
    }

    fn quantile_diff(
        &self,
        s0: &str,
        o0: &str,
        q: f64,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Outcome {
        let (a, b) = (quantile(&self.curve(s0), q), quantile(&self.curve(o0), q));
        let d = b - a;
        (
            within(d, min, max),
            format!(
                "quantile {q}: {s0} {a:.1}, {o0} {b:.1}, {s0} lower by {d:.1} (want {})",
                bounds(min, max)
            ),
        )
    }

    fn spread_order(&self, s0: &str, o0: &str) -> Outcome {
        let spread = |cv: &[(f64, f64)]| quantile(cv, 0.9) - quantile(cv, 0.1);
        let (a, b) = (spread(&self.curve(s0)), spread(&self.curve(o0)));
        (a < b, format!("p90-p10: {s0} {a:.1}, {o0} {b:.1}"))
    }

    fn point_diff(
        &self,
        s0: &str,
        o0: &str,
        at: f64,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Outcome {
        match (nearest(&self.curve(s0), at), nearest(&self.curve(o0), at)) {
            (Some(a), Some(b)) => (
                within(b - a, min, max),
                format!(
                    "at x={at}: {s0} {a:.1}, {o0} {b:.1}, difference {:.1} (want {})",
                    b - a,
                    bounds(min, max)
                ),
            ),
            _ => (false, format!("no point at x={at}")),
        }
    }

    fn point_ratio(
        &self,
        s0: &str,
        o0: &str,
        at: f64,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Outcome {
        match (nearest(&self.curve(s0), at), nearest(&self.curve(o0), at)) {
            (Some(a), Some(b)) if b > 0.0 => (
                within(a / b, min, max),
                format!(
                    "at x={at}: {s0} {a:.1}, {o0} {b:.1}, ratio {:.3} (want {})",
                    a / b,
                    bounds(min, max)
                ),
            ),
            _ => (false, format!("no point (or a zero) at x={at}")),
        }
    }

    fn at_every_rate(&self, s0: &str, o0: &str, tolerance: f64) -> Outcome {
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

    fn drop_share(&self, s: &str, point: &str, min: f64) -> Outcome {
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
    fn fit(&self, s: &str, tol: Option<f64>, max: Option<f64>) -> Outcome {
        let cpu_bound: Vec<(f64, f64)> = {
            let mut v: Vec<(f64, f64)> = self
                .r
                .points(s)
                .filter(|p| p.get("line_limited").unwrap_or(0.0) == 0.0)
                .filter_map(|p| Some((p.get(&self.r.x.metric)?, p.get(self.r.y_of(s))?)))
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        };
        match (line_fit(&cpu_bound), line_fit(&self.r.reference_points(s))) {
            (Some((a, b)), Some((ra, rb))) => match (tol, max) {
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
            _ => (
                false,
                "fewer than two CPU-bound points or reference points".to_string(),
            ),
        }
    }

    fn over_mlfrr(&self, b: &Bounded, delivered: bool) -> Outcome {
        self.each(&b.series, |s, cv| {
            let m = self.r.mlfrr(s);
            let v = if delivered {
                last(cv)
            } else {
                cv.last().map_or(0.0, |p| p.0)
            };
            let ratio = if m > 0.0 { v / m } else { 0.0 };
            let what = if delivered {
                "delivered at the highest rate"
            } else {
                "highest offered rate"
            };
            (
                within(ratio, b.min, b.max),
                format!(
                    "{what} {v:.0} / MLFRR {m:.0} = {ratio:.2} (want {})",
                    bounds(b.min, b.max)
                ),
            )
        })
    }
}

fn flat(cv: &[(f64, f64)], min: f64) -> Outcome {
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

fn collapses(cv: &[(f64, f64)], max: f64) -> Outcome {
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

fn livelock_at(cv: &[(f64, f64)], fraction: f64, min: Option<f64>, max: Option<f64>) -> Outcome {
    let (px, py) = peak(cv);
    let floor = fraction * py;
    let mut prev = (px, py);
    for &(x, y) in cv.iter().filter(|p| p.0 > px) {
        if y <= floor {
            let at = if prev.1 > y {
                prev.0 + (x - prev.0) * (prev.1 - floor) / (prev.1 - y)
            } else {
                x
            };
            return (
                within(at, min, max),
                format!(
                    "falls to {:.0}% of its peak ({py:.0}) at x = {at:.0} (want {})",
                    fraction * 100.0,
                    bounds(min, max)
                ),
            );
        }
        prev = (x, y);
    }
    (
        false,
        format!(
            "never falls to {:.0}% of its peak ({py:.0}); last {:.0}",
            fraction * 100.0,
            last(cv)
        ),
    )
}

fn from(cv: &[(f64, f64)], at: f64) -> Vec<f64> {
    cv.iter().filter(|p| p.0 >= at).map(|p| p.1).collect()
}

/// The values of the points at x (runs of one setting), as (mean, count).
fn mean_at(cv: &[(f64, f64)], x: f64) -> (f64, usize) {
    let ys: Vec<f64> = at_x(cv, x);
    let n = ys.len();
    (ys.iter().sum::<f64>() / n.max(1) as f64, n)
}

fn at_x(cv: &[(f64, f64)], x: f64) -> Vec<f64> {
    cv.iter()
        .filter(|p| (p.0 - x).abs() <= 1e-9 * x.abs().max(1.0))
        .map(|p| p.1)
        .collect()
}

fn splits(cv: &[(f64, f64)], at: Option<f64>, min: Option<f64>, max: Option<f64>) -> Outcome {
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

fn below(cv: &[(f64, f64)], max: f64, at: f64) -> Outcome {
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

fn above(cv: &[(f64, f64)], min: f64, at: f64) -> Outcome {
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

fn stable(cv: &[(f64, f64)], max: f64, at: f64, relative: bool) -> Outcome {
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

fn peak(c: &[(f64, f64)]) -> (f64, f64) {
    c.iter()
        .copied()
        .fold((0.0, f64::MIN), |a, p| if p.1 > a.1 { p } else { a })
}

fn last(c: &[(f64, f64)]) -> f64 {
    c.last().map_or(0.0, |p| p.1)
}

/// Linear interpolation of a curve at `x` (clamped to its ends).
pub fn interpolate(c: &[(f64, f64)], x: f64) -> Option<f64> {
    let (first, lastp) = (c.first()?, c.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= lastp.0 {
        return Some(lastp.1);
    }
    let i = c.iter().position(|p| p.0 >= x)?;
    let (a, b) = (c[i - 1], c[i]);
    Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
}

/// The x at which a distribution's cumulative fraction reaches `q`.
fn quantile(c: &[(f64, f64)], q: f64) -> f64 {
    c.iter()
        .find(|p| p.1 >= q)
        .or(c.last())
        .map_or(0.0, |p| p.0)
}

fn nearest(c: &[(f64, f64)], x: f64) -> Option<f64> {
    c.iter()
        .min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs()))
        .map(|p| p.1)
}

/// Least-squares line `y = a + b x` through the points.
pub fn line_fit(c: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = c.len() as f64;
    if n < 2.0 {
        return None;
    }
    let (mx, my) = (
        c.iter().map(|p| p.0).sum::<f64>() / n,
        c.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = c.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let b = c.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    Some((my - b * mx, b))
}

fn r2(c: &[(f64, f64)]) -> f64 {
    let n = c.len() as f64;
    if n < 3.0 {
        return 0.0;
    }
    let (mx, my) = (
        c.iter().map(|p| p.0).sum::<f64>() / n,
        c.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = c.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = c.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = c.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 || syy == 0.0 {
        return 0.0;
    }
    sxy * sxy / (sxx * syy)
}

fn within(v: f64, min: Option<f64>, max: Option<f64>) -> bool {
    min.is_none_or(|m| v >= m) && max.is_none_or(|m| v <= m)
}

fn bounds(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) => format!("in [{a}, {b}]"),
        (Some(a), None) => format!(">= {a}"),
        (None, Some(b)) => format!("<= {b}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Axis, Meta, Point, Series};

    #[test]
    fn interpolation_and_fit() {
        let c = vec![(0.0, 0.0), (10.0, 10.0), (20.0, 0.0)];
        assert_eq!(interpolate(&c, 5.0), Some(5.0));
        assert_eq!(interpolate(&c, 15.0), Some(5.0));
        assert_eq!(interpolate(&c, 30.0), Some(0.0));
        assert!((r2(&[(1.0, 2.0), (2.0, 4.0), (3.0, 6.1)]) - 1.0).abs() < 0.01);
        assert!(r2(&c) < 0.1);
        assert_eq!(peak(&c), (10.0, 10.0));
        assert_eq!(quantile(&[(1.0, 0.2), (2.0, 0.6), (3.0, 1.0)], 0.5), 2.0);
    }

    fn result(ys: &[(&str, &[f64])]) -> ResultFile {
        let series = ys
            .iter()
            .map(|(label, ys)| {
                let mut s = Series::new(label);
                s.points = ys
                    .iter()
                    .enumerate()
                    .map(|(i, y)| Point::xy("x", i as f64, "y", *y))
                    .collect();
                s
            })
            .collect();
        let meta = Meta {
            id: "t".into(),
            title: String::new(),
            source: String::new(),
            profile: String::new(),
            seed: 0,
            quick: false,
        };
        ResultFile::new(
            meta,
            Axis::new("x", "", ""),
            Axis::new("y", "", ""),
            series,
            Vec::new(),
        )
    }

    fn check(toml_src: &str) -> Check {
        toml::from_str(toml_src).unwrap()
    }

    #[test]
    fn rules_pass_and_fail_on_the_points() {
        let r = result(&[
            ("up", &[1.0, 5.0, 5.0, 4.9]),
            ("down", &[1.0, 5.0, 2.0, 0.5]),
        ]);
        let flat = check("name='f'\nkind='flat'\nseries=['up']\nmin=0.95\n");
        assert!(flat.evaluate(&r).pass);
        let flat_down = check("name='f'\nkind='flat'\nseries=['down']\nmin=0.95\n");
        assert!(!flat_down.evaluate(&r).pass);
        let coll = check("name='c'\nkind='collapses'\nseries=['down']\nmax=0.2\n");
        assert!(coll.evaluate(&r).pass);
        let ratio = check("name='r'\nkind='last_ratio'\nseries=['up']\nother=['down']\nmin=5\n");
        let v = ratio.evaluate(&r);
        assert!(v.pass, "{}", v.detail);
        let ratio = check("name='r'\nkind='last_ratio'\nseries=['up']\nother=['down']\nmin=20\n");
        assert!(!ratio.evaluate(&r).pass);
        let missing = check("name='m'\nkind='above'\nseries=['nope']\nmin=0\n");
        assert!(!missing.evaluate(&r).pass);
    }

    #[test]
    fn at_every_rate_compares_shares_point_by_point() {
        // x is 0, 1, 2, 3: the first point (x = 0) has share 0 for both.
        let r = result(&[
            ("ours", &[0.0, 1.0, 1.95, 2.9]),
            ("peer", &[0.0, 1.0, 2.0, 1.0]),
            ("worse", &[0.0, 1.0, 1.0, 3.0]),
        ]);
        let c = |s: &str, o: &str, tol: f64| {
            check(&format!(
                "name='e'\nkind='at_every_rate'\nseries=['{s}']\nother=['{o}']\ntolerance={tol}\n"
            ))
            .evaluate(&r)
        };
        let v = c("ours", "peer", 0.05);
        assert!(v.pass, "{}", v.detail);
        assert!(!c("ours", "peer", 0.01).pass, "2.5 points behind at x=2");
        let v = c("worse", "peer", 0.05);
        assert!(!v.pass && v.detail.contains("x=2"), "{}", v.detail);
    }

    #[test]
    fn a_parameter_the_rule_does_not_take_is_an_error() {
        assert!(toml::from_str::<Check>(
            "name='f'\nkind='flat'\nseries=['a']\nmin=1\ntolerance=3\n"
        )
        .is_err());
        assert!(toml::from_str::<Check>("name='f'\nkind='flat'\nseries=['a']\n").is_err());
        assert!(toml::from_str::<Check>("name='f'\nkind='nope'\nseries=['a']\n").is_err());
        let c = check("name='r'\nkind='peak_ratio'\nseries=['a']\nother=['b']\n");
        assert!(c.rule.vacuous().is_some());
    }
}
