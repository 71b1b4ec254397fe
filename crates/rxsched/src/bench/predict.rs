//! `--predict PROFILE`: the simulator's lab host (`kernel.kind = "lab"`,
//! the scenario of `experiments/lab-router.toml`) run at each measured
//! point's offered rate on a profile of the machine (`rxsched calibrate
//! --real`), its curve beside the measured one as `<label>-predicted`, and
//! the check file's `[[prediction]]`s judging how far it was.

use super::BenchError;
use crate::experiments::{self, BenchFile, ExperimentFile};
use crate::result::{Point, ResultFile, Series};
use std::path::Path;

/// The suffix of a predicted series' label.
pub const SUFFIX: &str = "-predicted";

/// The measured series the lab host predicts: label, its forwarder, and
/// whether M4 is on at 50%.
const PREDICTED: &[(&str, &str, bool)] = &[
    ("kernel", "kernel", false),
    ("xdp-fwd", "xdp-fwd", false),
    ("interrupt", "interrupt", false),
    ("polling", "polling", false),
    ("polling-in-xdp", "polling-in-xdp", false),
    ("polling-cycle-limit-50", "polling", true),
    ("polling-in-xdp-cycle-limit-50", "polling-in-xdp", true),
];

/// The experiment whose scenario the predictions run.
const SCENARIO: &str = "lab-router";

/// Whether the lab host predicts result `id`'s series.
pub fn predicts(id: &str) -> bool {
    BenchFile::load(id).is_ok_and(|f| !f.prediction.is_empty())
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
    let src = experiments::get(SCENARIO).expect("lab-router is compiled in");
    let exp = ExperimentFile::parse(&format!("experiments/{SCENARIO}.toml"), src.into(), None)?;
    r.series.retain(|s| !s.label.ends_with(SUFFIX));
    let mut added = Vec::new();
    let mut n = 0;
    for s in &r.series {
        let Some(&(_, fwd, limit)) = PREDICTED.iter().find(|p| p.0 == s.label) else {
            continue;
        };
        progress(&format!("predicting {} on {profile}", s.label));
        let mut out = Series::new(&format!("{}{SUFFIX}", s.label));
        for p in &s.points {
            let rate = p.get("offered_pps").unwrap_or(0.0);
            let sets = [
                format!("profile={profile:?}"),
                format!("lab.forwarder={fwd:?}"),
                format!("traffic.rate_pps={rate}"),
                format!("kernel.cycle_limit.enabled={limit}"),
            ];
            let sets = sets
                .iter()
                .map(|s| rxsched_sim::scenario::parse_set(s))
                .collect::<Result<Vec<_>, _>>()?;
            let scenario = exp.loaded.with(&sets)?;
            let (m, _) = rxsched_sim::run(&scenario, Some(Path::new(".")))
                .map_err(|e| BenchError(format!("predicting {}: {e}", s.label)))?;
            out.points.push(Point::of(&m));
            n += 1;
        }
        added.push(out);
    }
    r.series.extend(added);
    let mut checks = file.check.clone();
    checks.extend(file.prediction.iter().cloned());
    r.checks = crate::checks::evaluate_all(&checks, r);
    Ok(n)
}
