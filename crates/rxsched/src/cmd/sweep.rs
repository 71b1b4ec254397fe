//! `rxsched sweep`: one parameter of a user's scenario, varied, as a figure.

use super::{parse_sets, run_plans, summary, verdict, write, write_index};
use rxsched::error::{Error, Result};
use rxsched::experiment::{ExperimentFile, FigureCfg, FigureKind, SearchCfg};
use rxsched::figure::{self, Options};
use rxsched::result::Axis;
use std::path::Path;
use std::process::ExitCode;

/// At most this many points in one sweep.
const MAX_POINTS: usize = 10_000;

/// Parses `KEY=V1,V2` or `KEY=FROM:TO:STEP`.
pub fn parse_vary(vary: &str) -> Result<(String, Vec<f64>)> {
    let bad = |m: &str| Error::Input(format!("--vary {:?}: {m}", short(vary)));
    let (k, v) = vary
        .split_once('=')
        .ok_or_else(|| bad("expected KEY=LIST or KEY=FROM:TO:STEP"))?;
    let num = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(&format!("{s:?} is not a finite number")))
    };
    let values = if v.contains(':') {
        let p: Vec<&str> = v.split(':').collect();
        if p.len() != 3 {
            return Err(bad("a range is FROM:TO:STEP"));
        }
        let (from, to, step) = (num(p[0])?, num(p[1])?, num(p[2])?);
        if step <= 0.0 || to < from {
            return Err(bad("need FROM <= TO and STEP > 0"));
        }
        let n = ((to - from) / step + 1e-9).floor();
        if n >= MAX_POINTS as f64 {
            return Err(bad("more than 10,000 points"));
        }
        (0..=n as usize).map(|i| from + step * i as f64).collect()
    } else {
        v.split(',').map(num).collect::<Result<Vec<_>>>()?
    };
    if values.is_empty() {
        return Err(bad("no values"));
    }
    if values.len() > MAX_POINTS {
        return Err(bad("more than 10,000 points"));
    }
    Ok((k.trim().to_string(), values))
}

/// A flag's value cut to a readable length for an error message.
fn short(v: &str) -> String {
    match v.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &v[..i]),
        None => v.to_string(),
    }
}

/// The figure a sweep of `key` draws.
fn figure(
    file: &ExperimentFile,
    key: &str,
    values: Vec<f64>,
    y: Option<String>,
    search: Option<SearchCfg>,
) -> Result<FigureCfg> {
    let x = if key.ends_with("rate_pps") {
        Axis::new("offered_pps", "Input packet rate", "pkts/s")
    } else {
        Axis::new(key, key, "")
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
    };
    file.check_metric(&fig, &fig.y.metric)
        .map_err(|m| Error::flag("y", m))?;
    Ok(fig)
}

/// Runs the sweep and writes its figure.
#[allow(clippy::too_many_arguments)]
pub fn run(
    path: &Path,
    vary: &str,
    y: Option<String>,
    sets: &[String],
    out: &Path,
    jobs: Option<usize>,
    search: Option<SearchCfg>,
) -> Result<ExitCode> {
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
    let plan = figure::plan(&file, Some(fig), &opts)?;
    let results = run_plans(&[plan], jobs)?;
    let (r, wall) = &results[0];
    write(out, r)?;
    write_index(out)?;
    rxsched::out::line(&summary(r, *wall, out))?;
    Ok(verdict(r.passed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_forms_and_limits() {
        assert_eq!(parse_vary("a=1,2,3").unwrap().1, vec![1.0, 2.0, 3.0]);
        assert_eq!(parse_vary("a=0:10:5").unwrap().1, vec![0.0, 5.0, 10.0]);
        assert!(parse_vary("a=1:nan:1").is_err());
        assert!(parse_vary("a=0:1e9:1").is_err());
        let many = format!("a={}", vec!["1"; 20_000].join(","));
        assert!(parse_vary(&many).is_err());
        assert!(parse_vary("a").is_err());
    }
}
