//! `--predict PROFILE`: the simulator's lab host (`kernel.kind = "lab"`)
//! run at each measured point's offered rate on a profile of the machine
//! (`rxsched calibrate --real`), its curve beside the measured one as
//! `<label>-predicted`, and the check file's `[[prediction]]`s judging how
//! far it was. Which experiment models a bench is its check file's
//! `bench.predicted_by`; a measured series is predicted by the
//! experiment's series of the same label.

use super::BenchError;
use crate::experiments::{self, BenchFile, ExperimentFile};
use crate::result::{Point, ResultFile, Series};
use std::path::Path;

/// The suffix of a predicted series' label.
pub const SUFFIX: &str = "-predicted";

/// Whether the lab host predicts result `id`'s series.
pub fn predicts(id: &str) -> bool {
    BenchFile::load(id).is_ok_and(|f| f.bench.predicted_by.is_some())
}

/// Whether `profile` (a built-in name or a path) can predict the lab: it
/// loads and has the lab host's costs (`[lab]`, as `rxsched calibrate
/// --real` writes them). Asked before a bench measures anything.
pub fn check_profile(profile: &str) -> Result<(), BenchError> {
    let prof = rxsched_sim::Profile::load(profile, Some(Path::new(".")))?;
    if prof.lab.is_none() {
        return Err(BenchError(format!(
            "{profile}: the profile has no [lab] costs, which the lab host predicts from \
             (write them with rxsched calibrate --real --out FILE)"
        )));
    }
    Ok(())
}

/// Adds a predicted series beside each measured one the lab host models,
/// on `profile` (a built-in name or a path), and judges the result again
/// with its prediction checks. Returns how many points it predicted.
pub fn add(
    r: &mut ResultFile,
    profile: &str,
    progress: &dyn Fn(&str),
) -> Result<usize, BenchError> {
    let file = BenchFile::load(&r.id)?;
    let Some(model) = file.bench.predicted_by.as_deref() else {
        return Err(BenchError(format!(
            "{}: the simulator has no model of this bench (its check file names no \
             bench.predicted_by)",
            r.id
        )));
    };
    let path = format!("experiments/{model}.toml");
    let src =
        experiments::get(model).ok_or_else(|| BenchError(format!("{path}: not compiled in")))?;
    let exp = ExperimentFile::parse(&path, src.into(), None)?;
    let vary = exp
        .exp
        .figure
        .as_ref()
        .and_then(|f| f.vary.clone())
        .ok_or_else(|| BenchError(format!("{path}: its figure varies no key")))?;
    let on = rxsched_sim::scenario::parse_set(&format!("profile={profile:?}"))?;
    r.series.retain(|s| !s.label.ends_with(SUFFIX));
    let mut added = Vec::new();
    let mut n = 0;
    for s in &r.series {
        let Some(cfg) = exp.exp.series.iter().find(|c| c.label == s.label) else {
            continue;
        };
        progress(&format!("predicting {} on {profile}", s.label));
        let mut out = Series::new(&format!("{}{SUFFIX}", s.label));
        for p in &s.points {
            let rate = p.get("offered_pps").unwrap_or(0.0);
            let mut sets: Vec<(String, toml::Value)> = cfg
                .set
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            sets.push(on.clone());
            sets.push((vary.clone(), toml::Value::Float(rate)));
            let scenario = exp.loaded.with(&sets)?;
            let (m, _) = rxsched_sim::run(&scenario, Some(Path::new(".")))
                .map_err(|e| BenchError(format!("predicting {}: {e}", s.label)))?;
            out.points.push(Point::of(&m));
            n += 1;
        }
        added.push(out);
    }
    r.series.extend(added);
    if let Some(pace) = &mut r.pace {
        let prof = rxsched_sim::Profile::load(profile, Some(Path::new(".")))?;
        pace.profile = prof.lab.map(|l| l.pace).unwrap_or_default();
    }
    let mut checks = file.check.clone();
    checks.extend(file.prediction.iter().cloned());
    r.checks = crate::checks::evaluate_all(&checks, r);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Series;

    /// A measured series of `label`: delivered = offered up to `cap`.
    fn measured(label: &str, cap: f64) -> Series {
        let mut s = Series::new(label);
        for x in [25e3, 100e3, 400e3, 2e6] {
            s.points
                .push(Point::xy("offered_pps", x, "delivered_pps", x.min(cap)));
        }
        s
    }

    #[test]
    fn each_modelled_series_gets_its_prediction_and_the_predictions_are_judged() {
        let file = BenchFile::load("real-router").unwrap();
        let series = vec![
            measured("polling", 450e3),
            measured("interrupt", 150e3),
            measured("polling-idle", 0.0),
        ];
        let mut r = super::super::result(&file, series);
        let n = add(&mut r, "linux-veth-lab", &|_| {}).unwrap();
        assert_eq!(n, 8, "two series of four points predicted");
        let p = r
            .series
            .iter()
            .find(|s| s.label == "polling-predicted")
            .unwrap();
        assert_eq!(p.points.len(), 4);
        // Each prediction runs at the measured point's offered rate.
        for (a, b) in p.points.iter().zip(&r.series[0].points) {
            let (x, y) = (a.get("offered_pps").unwrap(), b.get("offered_pps").unwrap());
            assert!((x - y).abs() < 0.01 * y, "{x} against {y}");
        }
        assert!(!r.series.iter().any(|s| s.label == "polling-idle-predicted"));
        for c in &file.prediction {
            assert!(r.checks.iter().any(|v| v.name == c.name), "{}", c.name);
        }
        // The report says how far each prediction was.
        let table = crate::report::html::prediction_table(&r);
        assert!(
            table.contains("<td>polling</td>") && table.contains("<td>interrupt</td>"),
            "{table}"
        );
        // Predicting again replaces the prediction rather than adding one.
        add(&mut r, "linux-veth-lab", &|_| {}).unwrap();
        let again = r
            .series
            .iter()
            .filter(|s| s.label == "polling-predicted")
            .count();
        assert_eq!(again, 1);
    }

    /// A bench's model is compiled in and predicts only series the bench
    /// measures, by the same labels.
    #[test]
    fn each_model_names_series_its_bench_measures() {
        for (id, _) in crate::experiments::BENCHES {
            let file = BenchFile::load(id).unwrap();
            let Some(model) = &file.bench.predicted_by else {
                continue;
            };
            let src = experiments::get(model).unwrap_or_else(|| panic!("{id}: {model}"));
            let exp = ExperimentFile::parse(model, src.into(), None).unwrap();
            for s in &exp.exp.series {
                assert!(
                    file.bench.series.contains(&s.label),
                    "{model}'s {} is not a series of {id}",
                    s.label
                );
            }
        }
    }

    #[test]
    fn only_results_with_predictions_are_predicted() {
        assert!(predicts("real-router") && predicts("real-cpu-limit") && predicts("real-screen"));
        assert!(!predicts("real-latency"));
    }

    /// A bench's pace meets its calibration's in the result, and the
    /// words say when the machine was in another state.
    #[test]
    fn the_bench_s_pace_is_set_beside_its_calibration_s() {
        let file = BenchFile::load("real-router").unwrap();
        let mut r = super::super::result(&file, vec![measured("polling", 450e3)]);
        r.pace = Some(crate::result::Pace {
            bench: vec![700.0, 720.0],
            profile: Vec::new(),
        });
        let text = include_str!("../../../../profiles/linux-veth-lab.toml").replacen(
            "repeats = ",
            "pace = [500, 520]\nrepeats = ",
            1,
        );
        let path = std::env::temp_dir().join(format!("rxsched-pace-{}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        add(&mut r, &path.display().to_string(), &|_| {}).unwrap();
        std::fs::remove_file(&path).ok();
        let pace = r.pace.as_ref().unwrap();
        assert_eq!(pace.profile, [500.0, 520.0]);
        let words = crate::bench::calibrate::verdict(pace);
        assert!(words.contains("39% more"), "{words}");
        assert!(crate::report::html::prediction_table(&r).contains("39% more"));
        // On the committed profile, which records none, it says so.
        add(&mut r, "linux-veth-lab", &|_| {}).unwrap();
        let words = crate::bench::calibrate::verdict(r.pace.as_ref().unwrap());
        assert!(words.contains("records none"), "{words}");
    }

    #[test]
    fn a_profile_without_lab_costs_is_refused_by_name() {
        let file = BenchFile::load("real-router").unwrap();
        let mut r = super::super::result(&file, vec![measured("polling", 450e3)]);
        let e = add(&mut r, "dec3000-300", &|_| {}).unwrap_err().to_string();
        assert!(e.contains("[lab]"), "{e}");
    }
}
