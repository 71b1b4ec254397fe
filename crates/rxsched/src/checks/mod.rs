//! Verdicts computed from a result's points. A `[[check]]` names a rule
//! (`kind`) and exactly the parameters that rule takes; a parameter a rule
//! does not take is an error. Nothing here knows a paper's numbers: every
//! threshold comes from the file, every value from points. The simulator's
//! scenario files and the real benches' check files (`experiments/real-*.toml`)
//! hold their checks in this one format, evaluated here.
//!
//! [`rule`] is the vocabulary; [`single`] judges each listed series on its
//! own, [`compare`] one series against another or against the published
//! points; [`curve`] holds the numbers both read off a curve.

mod compare;
mod curve;
mod residual;
mod rule;
mod single;

use crate::result::{Claim, ClaimKind, ResultFile, Verdict};
pub use rule::{Bounded, Compare, CompareAt, Rule};
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
    /// Leave out the points where this metric is above 0 (say
    /// `dut_stalls`: the hypervisor stopped the DUT's CPU in every trial of
    /// the point). The verdict says how many it left out; a rule against a
    /// series' first point fails when that point is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unless: Option<String>,
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

impl Check {
    /// Evaluates the check against a result's points.
    pub fn evaluate(&self, r: &ResultFile) -> Verdict {
        let (pass, detail) = self.view(r).apply(&self.rule);
        Verdict {
            name: self.name.clone(),
            pass,
            detail,
            claim: self.claim.clone(),
            known_miss: self.known_miss.clone(),
        }
    }
}

impl Check {
    /// A result as this check sees it.
    fn view<'a>(&'a self, r: &'a ResultFile) -> View<'a> {
        View {
            r,
            metric: self.metric.as_deref().unwrap_or(&r.y.metric),
            until: self.until.unwrap_or(f64::MAX),
            unless: self.unless.as_deref(),
        }
    }
}

/// Every check evaluated against a result's points, in order.
pub fn evaluate_all(checks: &[Check], r: &ResultFile) -> Vec<Verdict> {
    checks.iter().map(|c| c.evaluate(r)).collect()
}

/// What is wrong with a file's checks, as (dotted key, message), if
/// anything: a check that can never fail, a series the file does not have
/// (when `labels` names any), a metric `metric` refuses, or a claim that
/// belongs in a top-level `[[claim]]`.
pub fn validate(
    checks: &[Check],
    labels: &[&str],
    metric: impl Fn(&str) -> Result<(), String>,
) -> Result<(), (String, String)> {
    for (i, c) in checks.iter().enumerate() {
        let key = |k: &str| format!("check.{i}.{k}");
        if let Some(m) = c.rule.vacuous() {
            return Err((key("kind"), format!("this check can never fail: it {m}")));
        }
        for s in c.rule.series() {
            if !labels.is_empty() && !labels.contains(&s.as_str()) {
                return Err((key("series"), format!("no series labelled {s:?}")));
            }
        }
        if let Some(m) = &c.metric {
            metric(m).map_err(|e| (key("metric"), e))?;
        }
        if let Some(m) = &c.unless {
            metric(m).map_err(|e| (key("unless"), e))?;
        }
        if let Some(cl) = &c.claim {
            if (cl.kind == ClaimKind::Construction) != cl.construction.is_some() {
                return Err((
                    key("claim"),
                    "a claim met by construction says how (`construction = \"...\"`), and only such a claim does".into(),
                ));
            }
            if cl.kind == ClaimKind::HeldOut || cl.unchecked.is_some() {
                return Err((
                    key("claim"),
                    "a check stands for a claim it checks: a held-out or unchecked claim goes in a top-level [[claim]]".into(),
                ));
            }
        }
    }
    Ok(())
}

/// A result as one check sees it: which metric, up to which x, without
/// which points.
struct View<'a> {
    r: &'a ResultFile,
    metric: &'a str,
    until: f64,
    unless: Option<&'a str>,
}

/// A verdict and the numbers behind it.
type Outcome = (bool, String);

impl View<'_> {
    /// The rule's verdict: one arm per rule, each a call into [`single`]
    /// (through [`View::each`]) or [`compare`].
    fn apply(&self, rule: &Rule) -> Outcome {
        use single::*;
        use Rule::*;
        let from = |at: &Option<f64>| at.unwrap_or(f64::MIN);
        match rule {
            Flat { series, min } => self.each(series, |_, cv| flat(cv, *min)),
            Collapses { series, max } => self.each(series, |_, cv| collapses(cv, *max)),
            LivelockAt {
                series,
                fraction,
                min,
                max,
            } => self.each(series, |_, cv| livelock_at(cv, *fraction, *min, *max)),
            PeakRatio(c) => self.ratio("peak", c, |s| curve::peak(&self.curve(s)).1),
            MlfrrRatio(c) => self.ratio("mlfrr", c, |s| self.r.mlfrr(s)),
            MlfrrBetweenRatio(c) => self.ratio("mlfrr between the swept rates", c, |s| {
                self.r.mlfrr_between(s)
            }),
            LastRatio(c) => self.ratio("last", c, |s| curve::last(&self.curve(s))),
            FirstRatio(c) => self.first_ratio(c),
            OrderLast { series, tolerance } => self.order_last(series, *tolerance),
            Reference {
                series,
                tolerance,
                at,
            } => self.reference(series, at, *tolerance),
            PeakReference { series, tolerance } => self.peak_reference(&series[0], *tolerance),
            Below { series, max, at } => self.each(series, |_, cv| below(cv, *max, from(at))),
            Above { series, min, at } => self.each(series, |_, cv| above(cv, *min, from(at))),
            Stable {
                series,
                max,
                at,
                relative,
            } => self.each(series, |_, cv| stable(cv, *max, from(at), *relative)),
            Increasing { series } => self.each(series, |_, cv| increasing(cv)),
            Linear { series, min } => self.each(series, |_, cv| linear(cv, *min)),
            QuantileDiff(c) => self.quantile_diff(c),
            SpreadOrder { series, other } => self.spread_order(&series[0], &other[0]),
            PointDiff(c) => self.point_diff(c),
            PointRatio(c) => self.point_ratio(c),
            AtEveryRate {
                series,
                other,
                tolerance,
            } => self.at_every_rate(&series[0], &other[0], *tolerance),
            BestWithin {
                series,
                other,
                within,
                targets,
            } => self.best_within(&series[0], other, *within, targets),
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
            MeanRatio(c) => self.mean_ratio(c),
            RatioEverywhere(c) => self.ratio_everywhere(c),
            PooledRatio(c) => self.pooled_ratio(c),
            LastOverMlfrr(b) => self.each(&b.series, |s, cv| self.over_mlfrr(s, cv, b, true)),
            OverFirst(b) => self.each(&b.series, |s, cv| {
                self.first_kept(s).unwrap_or_else(|| over_first(cv, b))
            }),
            FromFirst(b) => self.each(&b.series, |s, cv| {
                self.first_kept(s).unwrap_or_else(|| from_first(cv, b))
            }),
            RangeOverMlfrr(b) => self.each(&b.series, |s, cv| self.over_mlfrr(s, cv, b, false)),
            Mlfrr(b) => self.each(&b.series, |s, _| self.mlfrr(s, b)),
            Tracks {
                series,
                other,
                rel,
                abs,
                past_peak,
            } => self.tracks(&series[0], &other[0], *rel, *abs, *past_peak),
        }
    }

    /// A series' curve of the check's metric, up to `until`, without the
    /// points `unless` leaves out.
    fn curve(&self, label: &str) -> Vec<(f64, f64)> {
        let out = self.left_out(label);
        self.r
            .curve_of(label, self.metric)
            .into_iter()
            .filter(|p| p.0 <= self.until && !out.contains(&p.0))
            .collect()
    }

    /// The x of each point of a series that `unless` leaves out.
    fn left_out(&self, label: &str) -> Vec<f64> {
        self.unless.map_or_else(Vec::new, |m| {
            self.r
                .curve_of(label, m)
                .into_iter()
                .filter(|p| p.1 > 0.0)
                .map(|p| p.0)
                .collect()
        })
    }

    /// A failure if `unless` leaves out the series' first point, which a
    /// rule against the first point needs.
    fn first_kept(&self, label: &str) -> Option<Outcome> {
        let first = self.r.curve_of(label, self.metric).first()?.0;
        self.left_out(label).contains(&first).then(|| {
            (
                false,
                format!(
                    "its first point (x = {first}) is left out ({} above 0): nothing to measure against",
                    self.unless.unwrap_or_default()
                ),
            )
        })
    }

    /// A rule applied to each listed series; passes if all do.
    fn each(&self, series: &[String], f: impl Fn(&str, &curve::Curve) -> Outcome) -> Outcome {
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
            let out = self
                .left_out(s)
                .iter()
                .filter(|x| **x <= self.until)
                .count();
            let note = match (out, self.unless) {
                (0, _) | (_, None) => String::new(),
                (n, Some(m)) => format!(" ({n} point(s) left out: {m} above 0)"),
            };
            parts.push(format!("{s}: {d}{note}"));
        }
        (ok, parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Axis, Meta, Point, Series};

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
            ..Default::default()
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

    /// Latencies 100, 150, 900, 120 with the third point stalled (and,
    /// in the second result, the first too).
    #[test]
    fn unless_leaves_out_the_points_it_names() {
        let stalled = |first: bool| {
            let mut r = result(&[("s", &[100.0, 150.0, 900.0, 120.0])]);
            for (i, p) in r.series[0].points.iter_mut().enumerate() {
                p.set("stalls", f64::from(u8::from(i == 2 || (first && i == 0))));
            }
            r
        };
        let over = |unless: &str| {
            check(&format!(
                "name='o'\nkind='over_first'\nseries=['s']\nmax=2{unless}\n"
            ))
        };
        let v = over("").evaluate(&stalled(false));
        assert!(!v.pass, "{}", v.detail);
        let v = over("\nunless='stalls'").evaluate(&stalled(false));
        assert!(
            v.pass && v.detail.contains("1 point(s) left out"),
            "{}",
            v.detail
        );
        let v = over("\nunless='stalls'").evaluate(&stalled(true));
        assert!(!v.pass && v.detail.contains("first point"), "{}", v.detail);
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
        // `down` ends 0.5 below its first point; `up` gains 4 at the most.
        let keeps = check("name='k'\nkind='from_first'\nseries=['down']\nmin=-0.6\n");
        assert!(keeps.evaluate(&r).pass);
        let keeps = check("name='k'\nkind='from_first'\nseries=['down']\nmin=-0.4\n");
        assert!(!keeps.evaluate(&r).pass);
        let gains = check("name='g'\nkind='from_first'\nseries=['up']\nmax=3.9\n");
        assert!(!gains.evaluate(&r).pass);
        // Summed: `down` has 8.5 to `up`'s 15.9, though equal at two points.
        let pooled = |min: f64| {
            check(&format!(
                "name='p'\nkind='pooled_ratio'\nseries=['down']\nother=['up']\nmin={min}\n"
            ))
            .evaluate(&r)
        };
        assert!(pooled(0.5).pass, "{}", pooled(0.5).detail);
        assert!(!pooled(0.6).pass, "{}", pooled(0.6).detail);
        assert!(
            pooled(0.5).detail.contains("0.102 to 1.000"),
            "{}",
            pooled(0.5).detail
        );
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
    fn ratio_everywhere_leaves_out_points_where_neither_delivered() {
        let r = result(&[
            ("ours", &[0.0, 95.0, 190.0]),
            ("peer", &[0.0, 100.0, 200.0]),
            ("none", &[0.0, 0.0, 0.0]),
        ]);
        let c = |s: &str, o: &str, min: f64| {
            check(&format!(
                "name='r'\nkind='ratio_everywhere'\nseries=['{s}']\nother=['{o}']\nmin={min}\n"
            ))
            .evaluate(&r)
        };
        let v = c("ours", "peer", 0.95);
        assert!(v.pass, "{}", v.detail);
        assert!(
            v.detail.contains("to 0.9500") && v.detail.contains("1 point(s)"),
            "{}",
            v.detail
        );
        assert!(!c("ours", "peer", 0.96).pass);
        let v = c("none", "none", 0.95);
        assert!(
            !v.pass && v.detail.contains("delivered nothing"),
            "{}",
            v.detail
        );
    }

    #[test]
    fn tracks_allows_a_share_or_an_amount_point_by_point() {
        let r = result(&[
            ("measured", &[100.0, 1000.0, 400.0, 50.0]),
            ("predicted", &[110.0, 1100.0, 300.0, 60.0]),
        ]);
        let c = |rel: f64, abs: f64, past: bool| {
            check(&format!(
                "name='t'\nkind='tracks'\nseries=['predicted']\nother=['measured']\n\
                 rel={rel}\nabs={abs}\npast_peak={past}\n"
            ))
            .evaluate(&r)
        };
        // 10%, 10%, -25%, +20%: the worst share is at x = 2.
        let v = c(0.25, 0.0, false);
        assert!(v.pass, "{}", v.detail);
        let v = c(0.2, 0.0, false);
        assert!(!v.pass && v.detail.contains("x = 2"), "{}", v.detail);
        // 100 off at x = 2 passes with an allowance of 100 anyway.
        assert!(c(0.1, 100.0, false).pass);
        // From the peak (x = 1) on, the first point does not count.
        let r2 = result(&[
            ("measured", &[10.0, 1000.0]),
            ("predicted", &[20.0, 1000.0]),
        ]);
        let past = check(
            "name='t'\nkind='tracks'\nseries=['predicted']\nother=['measured']\nrel=0.1\npast_peak=true\n",
        );
        assert!(past.evaluate(&r2).pass);
    }

    #[test]
    fn a_reference_check_may_judge_only_some_points() {
        let mut r = result(&[("ours", &[0.0, 10.0, 20.0, 30.0])]);
        r.reference.push(crate::result::Reference {
            series: "ours".into(),
            points: vec![[1.0, 10.0], [2.0, 30.0], [3.0, 30.5]],
            note: String::new(),
        });
        let c = |at: &str| {
            check(&format!(
                "name='r'\nkind='reference'\nseries=['ours']\ntolerance=0.05\n{at}"
            ))
            .evaluate(&r)
        };
        let all = c("");
        assert!(
            !all.pass && all.detail.contains("3 points"),
            "{}",
            all.detail
        );
        let some = c("at=[1, 3]\n");
        assert!(
            some.pass && some.detail.contains("2 points"),
            "{}",
            some.detail
        );
        assert!(!c("at=[2]\n").pass);
        assert!(!c("at=[7]\n").pass, "no point chosen: nothing reproduced");
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

    /// `best_within`: against the best of the series that meet every
    /// target at each x, a target with `until` holding only up to it.
    #[test]
    fn best_within_compares_with_the_best_that_meets_the_targets() {
        let mut r = result(&[
            ("knob", &[1.0, 2.0, 3.0]),
            ("fast", &[1.0, 2.5, 4.0]),
            ("slow", &[1.0, 2.0, 2.9]),
        ]);
        // "fast" misses the cost target at x = 1 and 2; "slow" meets it.
        let cost = [
            ("knob", [1.0, 1.0, 1.0]),
            ("fast", [1.0, 3.0, 3.0]),
            ("slow", [1.0, 1.0, 1.0]),
        ];
        for s in &mut r.series {
            let c = cost.iter().find(|(l, _)| *l == s.label).unwrap().1;
            for (p, v) in s.points.iter_mut().zip(c) {
                p.set("cost", v);
            }
        }
        let c = |within: f64, until: &str| {
            check(&format!(
                "name='b'\nkind='best_within'\nseries=['knob']\nother=['fast', 'slow']\nwithin={within}\ntargets=[{{ metric = 'cost', max = 2{until} }}]\n"
            ))
        };
        // Everywhere: the best that meets it is "slow" (2.9 at x = 2): 3.0 passes.
        let v = c(0.05, "").evaluate(&r);
        assert!(v.pass, "{}", v.detail);
        // The cost target only up to x = 1: at x = 2 "fast" (4.0) counts,
        // and 3.0 is 0.75 of it.
        let v = c(0.05, ", until = 1").evaluate(&r);
        assert!(!v.pass && v.detail.contains("worst at x=2"), "{}", v.detail);
        let v = c(0.3, ", until = 1").evaluate(&r);
        assert!(v.pass, "{}", v.detail);
        // A target with no bound is refused as vacuous.
        let open = check("name='b'\nkind='best_within'\nseries=['knob']\nother=['slow']\nwithin=0.05\ntargets=[{ metric = 'cost' }]\n");
        assert!(open.rule.vacuous().is_some());
    }
}
