//! `rxsched sweep`: one parameter of a user's scenario, varied, as a figure.

use super::{parse_sets, run_plans, run_shard, summary, verdict, write, write_index};
use rxsched::error::{Error, Result};
use rxsched::experiments::{ExperimentFile, FigureCfg, FigureKind, SearchCfg};
use rxsched::figure::{self, Options, Plan};
use rxsched::flags::parse_vary;
use rxsched::result::Axis;
use rxsched::shard::{Shard, Study};
use std::path::Path;
use std::process::ExitCode;

/// The figure a sweep of `key` draws.
fn figure(
    file: &ExperimentFile,
    key: &str,
    values: Vec<f64>,
    y: Option<String>,
    search: Option<SearchCfg>,
) -> Result<FigureCfg> {
    // The file's own figure names its axis when it varies the same key.
    let own = file
        .exp
        .figure
        .as_ref()
        .filter(|f| f.vary.as_deref() == Some(key))
        .map(|f| f.x.clone());
    let x = match own {
        Some(a) => a,
        None if key.ends_with("rate_pps") => {
            Axis::new("offered_pps", "Input packet rate", "pkts/s")
        }
        None => Axis::new(key, key, ""),
    };
    let kind = if search.is_some() {
        FigureKind::Throughput
    } else {
        FigureKind::Sweep
    };
    let base_y = if search.is_some() {
        Some(Axis::new(
            "throughput_mbps_per_port",
            "RFC 2544 throughput per port",
            "Mb/s",
        ))
    } else {
        file.exp.figure.as_ref().map(|f| f.y.clone())
    };
    let y = match (y, base_y) {
        (Some(m), _) => Axis::new(&m, &m, ""),
        (None, Some(a)) => a,
        (None, None) => Axis::new("delivered_pps", "Output packet rate", "pkts/s"),
    };
    let fig = FigureCfg {
        kind,
        x,
        y,
        vary: Some(key.to_string()),
        values,
        quick_values: Vec::new(),
        quick_set: Default::default(),
        sample: None,
        search: search.unwrap_or_default(),
        table: Vec::new(),
        legend: None,
        milestones: Vec::new(),
        repeats: 1,
        quick_repeats: None,
    };
    file.check_metric(&fig, &fig.y.metric)
        .map_err(|m| Error::flag("y", m))?;
    Ok(fig)
}

/// Runs the sweep and writes its figure; with `shard`, only that shard's
/// runs, kept for `rxsched merge`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    path: &Path,
    vary: &str,
    y: Option<String>,
    sets: &[String],
    out: &Path,
    jobs: Option<usize>,
    search: Option<SearchCfg>,
    shard: Option<Shard>,
) -> Result<ExitCode> {
    let p = plan(path, vary, y.clone(), sets, search.clone())?;
    if let Some(shard) = shard {
        let study = Study::Sweep {
            scenario: path.to_path_buf(),
            vary: vary.to_string(),
            y,
            sets: sets.to_vec(),
            search: search.map(|s| (s.resolution, s.trial_ms)),
        };
        return run_shard(&[p], jobs, shard, study, out);
    }
    let results = run_plans(&[p], jobs)?;
    let (r, wall) = &results[0];
    write(out, r)?;
    write_index(out)?;
    rxsched::out::line(&summary(r, *wall, out))?;
    Ok(verdict(r.passed()))
}

/// The sweep's figure, planned.
pub fn plan(
    path: &Path,
    vary: &str,
    y: Option<String>,
    sets: &[String],
    search: Option<SearchCfg>,
) -> Result<Plan> {
    if let Some(s) = &search {
        s.check()
            .map_err(|(k, m)| Error::flag(&k.replace('_', "-"), m))?;
    }
    let mut file = ExperimentFile::read(path)?;
    let (key, values) = parse_vary(vary)?;
    let fig = figure(&file, &key, values, y, search)?;
    let stem = path
        .file_stem()
        .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
    let id = file.exp.id.clone().unwrap_or(stem);
    file.exp.id = Some(format!("{id}-sweep"));
    // The file's own checks and references belong to its own figure.
    file.exp.check.clear();
    file.exp.reference.clear();
    let opts = Options {
        quick: false,
        seed: None,
        sets: parse_sets(sets)?,
    };
    Ok(figure::plan(&file, Some(fig), &opts)?)
}
