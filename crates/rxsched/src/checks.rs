//! Verdicts computed from a result's points. A scenario's `[[check]]`
//! names a rule (`kind`) and its parameters; nothing here knows a paper's
//! numbers.

use crate::figure::{value, CheckOut, ResultFile};
use rxsched_sim::scenario::{CheckCfg, FigureCfg};
use rxsched_sim::{InputError, Loaded};
use serde_json::Value;

/// Every rule, with the parameters it needs.
const RULES: &[(&str, &[&str])] = &[
    ("flat", &["series", "min"]),
    ("collapses", &["series", "max"]),
    ("peak_ratio", &["series", "other"]),
    ("mlfrr_ratio", &["series", "other"]),
    ("last_ratio", &["series", "other"]),
    ("order_last", &["series"]),
    ("reference", &["series", "tolerance"]),
    ("peak_reference", &["series", "tolerance"]),
    ("below", &["series", "max"]),
    ("above", &["series", "min"]),
    ("stable", &["series", "max"]),
    ("linear", &["series", "min"]),
    ("quantile_diff", &["series", "other", "at", "min"]),
    ("spread_order", &["series", "other"]),
    ("point_diff", &["series", "other", "at"]),
    ("drop_share", &["series", "point", "min"]),
    ("fit", &["series", "tolerance"]),
    ("fit_slope", &["series", "max"]),
    ("last_over_mlfrr", &["series", "min"]),
    ("range_over_mlfrr", &["series", "min"]),
    ("first_ratio", &["series", "other"]),
];

/// Checks that every `[[check]]` names a known rule, known series and the
/// parameters its rule needs.
pub fn validate(l: &Loaded, _f: &FigureCfg) -> Result<(), InputError> {
    let labels: Vec<&str> = l.scenario.series.iter().map(|s| s.label.as_str()).collect();
    for (i, c) in l.scenario.check.iter().enumerate() {
        let key = |k: &str| format!("check.{i}.{k}");
        let Some((_, needs)) = RULES.iter().find(|(k, _)| *k == c.kind) else {
            let known: Vec<_> = RULES.iter().map(|(k, _)| *k).collect();
            return Err(l.error(
                &key("kind"),
                format!(
                    "unknown check kind {:?}; known: {}",
                    c.kind,
                    known.join(", ")
                ),
            ));
        };
        for n in *needs {
            let missing = match *n {
                "series" => c.series.is_empty(),
                "other" => c.other.is_empty(),
                "min" => c.min.is_none(),
                "max" => c.max.is_none(),
                "tolerance" => c.tolerance.is_none(),
                "at" => c.at.is_none(),
                "point" => c.point.is_none(),
                _ => false,
            };
            if missing {
                return Err(l.error(&key("kind"), format!("check kind {:?} needs `{n}`", c.kind)));
            }
        }
        for s in c.series.iter().chain(&c.other) {
            if !labels.is_empty() && !labels.contains(&s.as_str()) {
                return Err(l.error(&key("series"), format!("no series labelled {s:?}")));
            }
        }
    }
    Ok(())
}

/// A series' points as sorted `(x, y)` pairs.
pub fn curve(r: &ResultFile, label: &str) -> Vec<(f64, f64)> {
    curve_of(r, label, &r.y.metric)
}

/// A series' points as sorted `(x, metric)` pairs.
pub fn curve_of(r: &ResultFile, label: &str, metric: &str) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = r
        .series
        .iter()
        .filter(|s| s.label == label)
        .flat_map(|s| s.points.iter())
        .filter_map(|p| Some((value(p, &r.x.metric)?, value(p, metric)?)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn drops(p: &Value) -> f64 {
    p.get("drops")
        .and_then(Value::as_object)
        .map_or(0.0, |o| o.values().filter_map(Value::as_f64).sum())
}

/// The maximum loss-free receive rate of a series: the highest x up to
/// which no point lost anything (0 if even the first point lost packets).
pub fn mlfrr(r: &ResultFile, label: &str) -> f64 {
    let mut pts: Vec<(f64, f64)> = r
        .series
        .iter()
        .filter(|s| s.label == label)
        .flat_map(|s| s.points.iter())
        .filter_map(|p| Some((value(p, &r.x.metric)?, drops(p))))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts.iter()
        .take_while(|(_, d)| *d == 0.0)
        .last()
        .map_or(0.0, |(x, _)| *x)
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

/// A series' points below the line rate (a throughput search's CPU-bound points).
fn cpu_bound(r: &ResultFile, label: &str) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = r
        .series
        .iter()
        .filter(|s| s.label == label)
        .flat_map(|s| s.points.iter())
        .filter(|p| value(p, "line_limited").unwrap_or(0.0) == 0.0)
        .filter_map(|p| Some((value(p, &r.x.metric)?, value(p, &r.y.metric)?)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn reference_points(r: &ResultFile, label: &str) -> Vec<(f64, f64)> {
    r.reference
        .iter()
        .filter(|rf| rf.series == label)
        .flat_map(|rf| rf.points.iter().map(|p| (p[0], p[1])))
        .collect()
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

/// A rule applied to one series' curve: verdict and detail.
type SeriesRule<'a> = dyn Fn(&str, &[(f64, f64)]) -> (bool, String) + 'a;

/// Evaluates one check against the points.
pub fn evaluate(c: &CheckCfg, r: &ResultFile) -> CheckOut {
    let (pass, detail) = rule(c, r);
    CheckOut {
        name: c.name.clone(),
        pass,
        detail,
    }
}

fn rule(c: &CheckCfg, r: &ResultFile) -> (bool, String) {
    let metric = c.metric.clone().unwrap_or_else(|| r.y.metric.clone());
    let until = c.until.unwrap_or(f64::MAX);
    let one = |s: &str| -> Vec<(f64, f64)> {
        curve_of(r, s, &metric)
            .into_iter()
            .filter(|p| p.0 <= until)
            .collect()
    };
    let s0 = c.series.first().cloned().unwrap_or_default();
    let o0 = c.other.first().cloned().unwrap_or_default();
    let at = c.at.unwrap_or(f64::MIN);
    // A rule applied to each listed series; passes if all do.
    let each = |f: &SeriesRule| {
        let mut ok = true;
        let mut parts = Vec::new();
        for s in &c.series {
            let cv = one(s);
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
    };
    match c.kind.as_str() {
        "flat" => each(&|_, cv| {
            let (px, py) = peak(cv);
            let low = cv
                .iter()
                .filter(|p| p.0 >= px)
                .map(|p| p.1)
                .fold(f64::MAX, f64::min);
            let ratio = if py > 0.0 { low / py } else { 0.0 };
            (
                ratio >= c.min.unwrap_or(1.0),
                format!("min/peak beyond the peak = {ratio:.3} (peak {py:.0} at {px:.0})"),
            )
        }),
        "collapses" => each(&|_, cv| {
            let (_, py) = peak(cv);
            let ratio = if py > 0.0 { last(cv) / py } else { 0.0 };
            (
                ratio <= c.max.unwrap_or(0.0),
                format!(
                    "last/peak = {ratio:.3} (peak {py:.0}, last {:.0})",
                    last(cv)
                ),
            )
        }),
        "peak_ratio" | "mlfrr_ratio" | "last_ratio" => {
            let (a, b) = match c.kind.as_str() {
                "peak_ratio" => (peak(&one(&s0)).1, peak(&one(&o0)).1),
                "mlfrr_ratio" => (mlfrr(r, &s0), mlfrr(r, &o0)),
                _ => (last(&one(&s0)), last(&one(&o0))),
            };
            let ratio = if b > 0.0 {
                a / b
            } else if a > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            let what = c.kind.trim_end_matches("_ratio");
            (
                within(ratio, c.min, c.max),
                format!(
                    "{what} {s0} = {a:.0}, {o0} = {b:.0}, ratio {ratio:.3} (want {})",
                    bounds(c.min, c.max)
                ),
            )
        }
        "order_last" => {
            let vals: Vec<(String, f64, f64)> = c
                .series
                .iter()
                .map(|s| {
                    let cv = one(s);
                    (s.clone(), last(&cv), peak(&cv).1)
                })
                .collect();
            let slack = c.tolerance.unwrap_or(0.0) * vals.iter().map(|v| v.2).fold(0.0, f64::max);
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
        "reference" => {
            let tol = c.tolerance.unwrap_or(0.15);
            let mut worst = (0.0f64, String::new());
            let mut n = 0;
            for rf in r
                .reference
                .iter()
                .filter(|rf| c.series.contains(&rf.series))
            {
                let cv = one(&rf.series);
                for [x, y] in &rf.points {
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
        "peak_reference" => {
            let tol = c.tolerance.unwrap_or(0.05);
            let ours = peak(&one(&s0)).1;
            let published = r
                .reference
                .iter()
                .filter(|rf| rf.series == s0)
                .flat_map(|rf| rf.points.iter().map(|p| p[1]))
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
        "below" | "above" => each(&|_, cv| {
            let ys: Vec<f64> = cv.iter().filter(|p| p.0 >= at).map(|p| p.1).collect();
            let (lo, hi) = (
                ys.iter().copied().fold(f64::MAX, f64::min),
                ys.iter().copied().fold(f64::MIN, f64::max),
            );
            if c.kind == "below" {
                (
                    !ys.is_empty() && hi <= c.max.unwrap_or(0.0),
                    format!("highest {hi:.3} (want <= {})", c.max.unwrap_or(0.0)),
                )
            } else {
                (
                    !ys.is_empty() && lo >= c.min.unwrap_or(0.0),
                    format!("lowest {lo:.3} (want >= {})", c.min.unwrap_or(0.0)),
                )
            }
        }),
        "stable" => each(&|_, cv| {
            let ys: Vec<f64> = cv.iter().filter(|p| p.0 >= at).map(|p| p.1).collect();
            let spread = ys.iter().copied().fold(f64::MIN, f64::max)
                - ys.iter().copied().fold(f64::MAX, f64::min);
            (
                ys.len() >= 2 && spread <= c.max.unwrap_or(0.0),
                format!("spread {spread:.3} over {} points", ys.len()),
            )
        }),
        "linear" => each(&|_, cv| {
            let v = r2(cv);
            (v >= c.min.unwrap_or(1.0), format!("r² = {v:.4}"))
        }),
        "quantile_diff" => {
            let q = c.at.unwrap_or(0.5);
            let (a, b) = (quantile(&one(&s0), q), quantile(&one(&o0), q));
            let d = b - a;
            (
                within(d, c.min, c.max),
                format!(
                    "quantile {q}: {s0} {a:.1}, {o0} {b:.1}, {s0} lower by {d:.1} (want {})",
                    bounds(c.min, c.max)
                ),
            )
        }
        "spread_order" => {
            let spread = |cv: &[(f64, f64)]| quantile(cv, 0.9) - quantile(cv, 0.1);
            let (a, b) = (spread(&one(&s0)), spread(&one(&o0)));
            (a < b, format!("p90-p10: {s0} {a:.1}, {o0} {b:.1}"))
        }
        "point_diff" => {
            let (a, b) = (nearest(&one(&s0), at), nearest(&one(&o0), at));
            match (a, b) {
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
        "drop_share" => each(&|s, _| {
            let point = c.point.clone().unwrap_or_default();
            let last = r
                .series
                .iter()
                .filter(|x| x.label == s)
                .flat_map(|x| x.points.iter())
                .max_by(|a, b| {
                    let xa = value(a, &r.x.metric).unwrap_or(0.0);
                    xa.total_cmp(&value(b, &r.x.metric).unwrap_or(0.0))
                });
            let total = last.map_or(0.0, drops);
            let here = last
                .and_then(|p| value(p, &format!("drops.{point}")))
                .unwrap_or(0.0);
            let share = if total > 0.0 { here / total } else { 0.0 };
            (
                share >= c.min.unwrap_or(1.0),
                format!(
                    "{point} holds {:.1}% of {total:.0} drops at the highest rate",
                    share * 100.0
                ),
            )
        }),
        "last_over_mlfrr" | "range_over_mlfrr" => each(&|s, cv| {
            let m = mlfrr(r, s);
            let v = if c.kind == "last_over_mlfrr" {
                last(cv)
            } else {
                cv.last().map_or(0.0, |p| p.0)
            };
            let ratio = if m > 0.0 { v / m } else { 0.0 };
            let what = if c.kind == "last_over_mlfrr" {
                "delivered at the highest rate"
            } else {
                "highest offered rate"
            };
            (
                within(ratio, c.min, c.max),
                format!(
                    "{what} {v:.0} / MLFRR {m:.0} = {ratio:.2} (want {})",
                    bounds(c.min, c.max)
                ),
            )
        }),
        "first_ratio" => {
            let (a, b) = (one(&s0).first().map(|p| p.1), one(&o0).first().map(|p| p.1));
            match (a, b) {
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
        "fit" | "fit_slope" => each(&|s, _| match (
            line_fit(&cpu_bound(r, s)),
            line_fit(&reference_points(r, s)),
        ) {
            (Some((a, b)), Some((ra, rb))) => {
                if c.kind == "fit" {
                    let err = (a - ra).abs() / ra.abs().max(1e-12);
                    let tol = c.tolerance.unwrap_or(0.15);
                    (err <= tol, format!("fitted T_const {a:.2}, k {b:.4}; published {ra:.2}, {rb:.4} ({:.1}% off)", err * 100.0))
                } else {
                    let d = (b - rb).abs();
                    (
                        d <= c.max.unwrap_or(0.0),
                        format!("fitted k {b:.4} vs published {rb:.4}"),
                    )
                }
            }
            _ => (
                false,
                "fewer than two CPU-bound points or reference points".to_string(),
            ),
        }),
        k => (false, format!("unknown check kind {k:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
