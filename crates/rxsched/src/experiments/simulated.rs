//! Simulated experiment files: a scenario plus how to build a figure from
//! it (what to vary, which series, the published points, the checks). The simulator
//! crate reads the model part; this module reads the rest and checks it
//! against the model when the file loads: series named by checks exist,
//! every metric named exists, and no check is unable to fail.

use crate::checks::Check;
use crate::result::{Axis, Claim};
use rxsched_sim::{InputError, Loaded};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The top-level keys of an experiment file that are not the model's.
pub const KEYS: &[&str] = &[
    "id",
    "title",
    "source",
    "figure",
    "series",
    "reference",
    "check",
    "claim",
];

/// The top-level table of a real bench's check file (`experiments/real-*.toml`).
pub const BENCH_TABLE: &str = "bench";

/// Numbers a throughput search adds to each point.
pub const THROUGHPUT_METRICS: &[&str] = &[
    "throughput_pps_per_port",
    "throughput_mbps_per_port",
    "t_per_packet_us",
    "line_rate_pct",
    "line_limited",
    "trials",
];

/// How a figure's points are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FigureKind {
    /// One run per value of `vary`; a point is that run's metrics record.
    #[default]
    Sweep,
    /// One run per series; the points are the cumulative distribution of a sample.
    Cdf,
    /// One run per series; one point per packet of a burst.
    Burst,
    /// One RFC 2544 throughput search per value of `vary`: the highest
    /// per-source rate at which a trial loses nothing.
    Throughput,
    /// One run per series; one point per milestone of a kernel trace (the
    /// time a named step first starts or ends), as in a traced timeline.
    Timeline,
}

/// An RFC 2544 throughput search: binary search on `traffic.rate_pps` (of
/// every source) between 0 and the line rate, with trials of fixed length.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchCfg {
    /// Stop when the bracket is narrower than this fraction of the line rate.
    pub resolution: f64,
    /// The length of one trial, in ms (after `run.warmup_ms`).
    pub trial_ms: f64,
}

impl SearchCfg {
    /// The first out-of-range field, as (field, what it must be).
    pub fn check(&self) -> Result<(), (&'static str, &'static str)> {
        if !(1e-6..=0.5).contains(&self.resolution) {
            return Err((
                "resolution",
                "must be a fraction of the line rate from 1e-6 to 0.5",
            ));
        }
        let t = self.trial_ms;
        if !(t.is_finite() && t > 0.0 && t <= 1e6) {
            return Err(("trial_ms", "must be a positive time of at most 1e6 ms"));
        }
        Ok(())
    }
}

impl Default for SearchCfg {
    fn default() -> Self {
        SearchCfg {
            resolution: 0.002,
            trial_ms: 100.0,
        }
    }
}

/// `[figure]`: how `reproduce` and `sweep` turn runs into a figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureCfg {
    /// How points are made.
    #[serde(default)]
    pub kind: FigureKind,
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The key a sweep varies (a `--set` key).
    #[serde(default)]
    pub vary: Option<String>,
    /// The values it takes.
    #[serde(default)]
    pub values: Vec<f64>,
    /// The values in `--quick` form (default: every other value).
    #[serde(default)]
    pub quick_values: Vec<f64>,
    /// Overrides applied in `--quick` form.
    #[serde(default)]
    pub quick_set: BTreeMap<String, toml::Value>,
    /// For `cdf`: which sample (`ipin_latency`, `latency`).
    #[serde(default)]
    pub sample: Option<String>,
    /// For `throughput`: the search.
    #[serde(default)]
    pub search: SearchCfg,
    /// Metrics to show as a table in the report, one row per point.
    #[serde(default)]
    pub table: Vec<String>,
    /// For `timeline`: the milestones, in order. Each is a step's name
    /// (`rx_intr`, `rx_link`, `ip_input`, ...), optionally `#k` for packet
    /// k's step (from 0) and `.end` for its end rather than its start; each
    /// is the first such event of the run.
    #[serde(default)]
    pub milestones: Vec<String>,
    /// Runs per swept value, each with its own seed (the run's seed plus
    /// 0, 1, 2, ...); with more than one, each run is a dot of its own and
    /// the plot draws dots, not lines (default 1).
    #[serde(default = "one")]
    pub repeats: u32,
    /// Runs per value in `--quick` form (default: `repeats`).
    #[serde(default)]
    pub quick_repeats: Option<u32>,
    /// Where the plot's legend goes: `upper-right` (default), `upper-left`,
    /// `lower-right` or `lower-left`.
    #[serde(default)]
    pub legend: Option<String>,
}

/// `[[series]]`: one curve, as overrides of the base scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesCfg {
    /// The label, as result files and checks name it.
    pub label: String,
    /// Overrides of the base scenario.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
    /// Plot this metric for the series instead of the figure's y (for
    /// example what the kernel received beside what it delivered).
    #[serde(default)]
    pub y: Option<String>,
}

/// `[[reference]]`: published points drawn beside ours.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceCfg {
    /// The series they belong to.
    pub series: String,
    /// `[x, y]` pairs.
    pub points: Vec<[f64; 2]>,
    /// Where they come from.
    #[serde(default)]
    pub note: String,
    /// Multiply the published y values by this before drawing or comparing
    /// (e.g. to remove tracing overhead); the note must say why.
    #[serde(default)]
    pub scale: Option<f64>,
    /// Or by the value of this free parameter of the profile the series
    /// runs on (its `[profile_param]`, else its `[calibrate]` value), so
    /// that the published points follow a fit of that parameter.
    #[serde(default)]
    pub scale_param: Option<String>,
}

/// The figure part of an experiment file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Experiment id (for `reproduce`).
    #[serde(default)]
    pub id: Option<String>,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// The publication reproduced.
    #[serde(default)]
    pub source: Option<String>,
    /// Figure construction.
    #[serde(default)]
    pub figure: Option<FigureCfg>,
    /// Curves.
    #[serde(default)]
    pub series: Vec<SeriesCfg>,
    /// Published points.
    #[serde(default)]
    pub reference: Vec<ReferenceCfg>,
    /// Verdicts.
    #[serde(default)]
    pub check: Vec<Check>,
    /// Claims of the text that no check stands for.
    #[serde(default)]
    pub claim: Vec<Claim>,
}

/// A scenario file read whole: the model and the figure.
#[derive(Debug, Clone)]
pub struct ExperimentFile {
    /// The model part, with the source for error lines.
    pub loaded: Loaded,
    /// The figure part.
    pub exp: Experiment,
}

impl ExperimentFile {
    /// Parses a scenario file's text.
    pub fn parse(file: &str, src: String, dir: Option<PathBuf>) -> Result<Self, InputError> {
        refuse_bench_file(file, &src)?;
        Self::from_loaded(Loaded::parse_with(file, src, dir, KEYS)?)
    }

    /// Reads a scenario file.
    pub fn read(path: &Path) -> Result<Self, InputError> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|e| InputError {
            file: file.clone(),
            line: None,
            key: None,
            msg: format!("cannot read scenario: {e}"),
        })?;
        Self::parse(&file, src, path.parent().map(Path::to_path_buf))
    }

    fn from_loaded(loaded: Loaded) -> Result<Self, InputError> {
        let exp: Experiment = loaded.deserialize()?;
        let f = ExperimentFile { loaded, exp };
        f.validate()?;
        Ok(f)
    }

    /// The names of every process any series may run (`cpu.user:<name>`).
    pub fn process_names(&self) -> Vec<String> {
        let mut names = self.loaded.scenario.process_names();
        for s in &self.exp.series {
            if let Some(toml::Value::Array(procs)) = s.set.get("process") {
                for p in procs {
                    let name = p.get("name").or_else(|| p.get("kind"));
                    if let Some(n) = name.and_then(toml::Value::as_str) {
                        names.push(n.to_string());
                    }
                }
            }
        }
        names
    }

    /// Checks that a metric exists in the points of `figure`: a record's
    /// number for sweeps (and a search's for throughput figures), or one of
    /// the figure's own axes for distributions and bursts.
    pub fn check_metric(&self, figure: &FigureCfg, name: &str) -> Result<(), String> {
        let axes = [figure.x.metric.as_str(), figure.y.metric.as_str()];
        match figure.kind {
            FigureKind::Cdf | FigureKind::Burst | FigureKind::Timeline if axes.contains(&name) => {
                Ok(())
            }
            FigureKind::Cdf | FigureKind::Burst | FigureKind::Timeline => Err(format!(
                "a {:?} figure's points have only `{}` and `{}`",
                figure.kind, axes[0], axes[1]
            )),
            FigureKind::Throughput => {
                rxsched_sim::metrics::check_metric(name, &self.process_names(), THROUGHPUT_METRICS)
            }
            FigureKind::Sweep => {
                rxsched_sim::metrics::check_metric(name, &self.process_names(), &[])
            }
        }
    }

    fn validate(&self) -> Result<(), InputError> {
        let l = &self.loaded;
        if let Some(f) = &self.exp.figure {
            f.validate().map_err(|(k, m)| l.error(&k, m))?;
            self.check_metric(f, &f.y.metric)
                .map_err(|m| l.error("figure.y.metric", m))?;
            for (i, s) in self.exp.series.iter().enumerate() {
                if let Some(m) = &s.y {
                    self.check_metric(f, m)
                        .map_err(|e| l.error(&format!("series.{i}.y"), e))?;
                }
            }
        }
        let labels: Vec<&str> = self.exp.series.iter().map(|s| s.label.as_str()).collect();
        let metric = |m: &str| match &self.exp.figure {
            Some(f) => self.check_metric(f, m),
            None => Ok(()),
        };
        crate::checks::validate(&self.exp.check, &labels, metric)
            .map_err(|(k, m)| l.error(&k, m))?;
        for (i, cl) in self.exp.claim.iter().enumerate() {
            if cl.unchecked.is_none() {
                return Err(l.error(
                    &format!("claim.{i}"),
                    "a claim that no check stands for must say why (`unchecked`); a checked claim goes in its [[check]]".into(),
                ));
            }
        }
        Ok(())
    }
}

/// A real bench's check file (a top-level [`BENCH_TABLE`]) is not a
/// scenario: say so, rather than that it lacks a profile. Text that is not
/// TOML passes here, for the scenario loader to name its syntax error.
fn refuse_bench_file(file: &str, src: &str) -> Result<(), InputError> {
    match src.parse::<toml::Table>() {
        Ok(t) if t.contains_key(BENCH_TABLE) => Err(InputError {
            file: file.to_string(),
            line: rxsched_sim::error::line_of(src, BENCH_TABLE),
            key: Some(BENCH_TABLE.to_string()),
            msg: "this is a real bench's check file, not a scenario: `rxsched bench real ...` evaluates it".into(),
        }),
        _ => Ok(()),
    }
}

/// One milestone of a timeline figure: `step`, `step#k`, `step.end`, `step#k.end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Milestone<'a> {
    /// The step's name.
    pub step: &'a str,
    /// Packet k's step only.
    pub packet: Option<u32>,
    /// The step's end rather than its start.
    pub end: bool,
}

impl<'a> Milestone<'a> {
    /// Reads a milestone; the error says what is wrong with it.
    pub fn parse(m: &'a str) -> Result<Milestone<'a>, String> {
        let (name, end) = match m.strip_suffix(".end") {
            Some(n) => (n, true),
            None => (m, false),
        };
        let (step, packet) = match name.split_once('#') {
            Some((n, k)) => {
                let k = k.parse::<u32>().map_err(|_| {
                    format!("milestone {m:?}: `#` must be followed by a packet number")
                })?;
                (n, Some(k))
            }
            None => (name, None),
        };
        if step.is_empty() {
            return Err(format!("milestone {m:?} names no step"));
        }
        Ok(Milestone { step, packet, end })
    }
}

fn one() -> u32 {
    1
}

impl FigureCfg {
    /// Runs per swept value.
    pub fn runs_per_value(&self, quick: bool) -> u32 {
        match (quick, self.quick_repeats) {
            (true, Some(r)) => r,
            _ => self.repeats,
        }
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        if let Some(l) = &self.legend {
            if !["upper-right", "upper-left", "lower-right", "lower-left"].contains(&l.as_str()) {
                return bad(
                    "figure.legend",
                    "must be upper-right, upper-left, lower-right or lower-left",
                );
            }
        }
        for (k, r) in [
            ("figure.repeats", Some(self.repeats)),
            ("figure.quick_repeats", self.quick_repeats),
        ] {
            if r.is_some_and(|r| !(1..=100).contains(&r)) {
                return bad(k, "runs per value: from 1 to 100");
            }
        }
        if let Err((k, m)) = self.search.check() {
            return bad(&format!("figure.search.{k}"), m);
        }
        if (self.kind == FigureKind::Timeline) == self.milestones.is_empty() {
            return bad(
                "figure.milestones",
                "a timeline figure needs milestones, and only a timeline has them",
            );
        }
        for m in &self.milestones {
            Milestone::parse(m).map_err(|e| ("figure.milestones".to_string(), e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod milestone_tests {
    use super::Milestone;

    #[test]
    fn milestones_parse_and_bad_ones_are_refused() {
        let m = Milestone::parse("rx_link#2.end").unwrap();
        assert_eq!((m.step, m.packet, m.end), ("rx_link", Some(2), true));
        let m = Milestone::parse("isr_exit").unwrap();
        assert_eq!((m.step, m.packet, m.end), ("isr_exit", None, false));
        assert!(Milestone::parse("rx_link#x").is_err());
        assert!(Milestone::parse("#1").is_err());
    }
}
