//! Turning a scenario into a figure: plan the runs, run them, assemble the
//! result file with its checks.

use crate::checks;
use rxsched_sim::scenario::{Axis, FigureCfg, FigureKind, Scenario};
use rxsched_sim::{InputError, Loaded, Metrics, Samples, SimError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The result schema this build writes.
pub const SCHEMA: &str = "rxsched.result/1";

/// An axis as written to the result file.
pub type AxisOut = Axis;

/// One curve of a result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeriesOut {
    /// The series label.
    pub label: String,
    /// The overrides that make this series.
    pub config: BTreeMap<String, Value>,
    /// One object per point: a metrics record, or a distribution or burst point.
    pub points: Vec<Value>,
    /// For distributions and bursts: the metrics record of the run behind the points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Value>,
}

/// Published points drawn beside ours.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefOut {
    /// The series they belong to.
    pub series: String,
    /// `[x, y]` pairs.
    pub points: Vec<[f64; 2]>,
    /// Where they come from.
    pub note: String,
}

/// One verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckOut {
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub pass: bool,
    /// The computed numbers behind the verdict.
    pub detail: String,
}

/// A whole result file (`DIR/<id>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultFile {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Experiment id.
    pub id: String,
    /// Title.
    pub title: String,
    /// The publication reproduced.
    pub source: String,
    /// The cost profile used.
    pub profile: String,
    /// The seed every run used.
    pub seed: u64,
    /// Whether this was the `--quick` form.
    #[serde(default)]
    pub quick: bool,
    /// The x axis.
    pub x: AxisOut,
    /// The y axis.
    pub y: AxisOut,
    /// The curves.
    pub series: Vec<SeriesOut>,
    /// Published points.
    pub reference: Vec<RefOut>,
    /// Verdicts computed from the points.
    pub checks: Vec<CheckOut>,
    /// Metrics the report shows as a table, one row per point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table: Vec<String>,
    /// Where the plot's legend goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legend: Option<String>,
}

impl ResultFile {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

/// How to run a figure.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Fewer points and shorter runs.
    pub quick: bool,
    /// Overrides every run's seed.
    pub seed: Option<u64>,
    /// Overrides applied to every run, after the series' own.
    pub sets: Vec<(String, toml::Value)>,
}

/// One simulation to run.
#[derive(Debug, Clone)]
pub struct Job {
    /// Index of the series.
    pub series: usize,
    /// The swept value, for sweeps.
    pub value: Option<f64>,
    /// The scenario to run.
    pub scenario: Scenario,
}

/// A figure ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The scenario file.
    pub loaded: Loaded,
    /// How its points are made.
    pub figure: FigureCfg,
    /// Series labels and their overrides, as JSON for the result.
    pub series: Vec<(String, BTreeMap<String, Value>)>,
    /// The runs.
    pub jobs: Vec<Job>,
    /// The seed used.
    pub seed: u64,
    /// Quick form.
    pub quick: bool,
}

fn to_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Plans the runs of a figure. `figure` replaces the file's `[figure]` (for `sweep`).
pub fn plan(
    loaded: &Loaded,
    figure: Option<FigureCfg>,
    opts: &Options,
) -> Result<Plan, InputError> {
    let s = &loaded.scenario;
    let figure = figure
        .or_else(|| s.figure.clone())
        .ok_or_else(|| InputError {
            file: loaded.file.clone(),
            line: None,
            key: Some("figure".into()),
            msg: "no [figure] table: say which key to vary and what to plot, or use `sweep --vary`"
                .into(),
        })?;
    checks::validate(loaded, &figure)?;
    let seed = opts.seed.unwrap_or(s.run.seed);
    let mut common: Vec<(String, toml::Value)> = Vec::new();
    if opts.quick {
        common.extend(figure.quick_set.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    common.extend(opts.sets.iter().cloned());
    common.push(("run.seed".into(), toml::Value::Integer(seed as i64)));
    let series: Vec<(String, BTreeMap<String, toml::Value>)> = if s.series.is_empty() {
        vec![("scenario".to_string(), BTreeMap::new())]
    } else {
        s.series
            .iter()
            .map(|c| (c.label.clone(), c.set.clone()))
            .collect()
    };
    let values: Vec<Option<f64>> = match figure.kind {
        FigureKind::Sweep | FigureKind::Throughput => {
            let v = if opts.quick && !figure.quick_values.is_empty() {
                figure.quick_values.clone()
            } else if opts.quick {
                figure
                    .values
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 2 == 0 || *i == figure.values.len() - 1)
                    .map(|(_, v)| *v)
                    .collect()
            } else {
                figure.values.clone()
            };
            if v.is_empty() || figure.vary.is_none() {
                return Err(loaded.error("figure.vary", "a sweep needs `vary` and `values`".into()));
            }
            v.into_iter().map(Some).collect()
        }
        FigureKind::Cdf | FigureKind::Burst => vec![None],
    };
    let mut jobs = Vec::new();
    for (i, (_, set)) in series.iter().enumerate() {
        for v in &values {
            let mut sets: Vec<(String, toml::Value)> =
                set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            sets.extend(common.iter().cloned());
            if let (Some(v), Some(key)) = (v, &figure.vary) {
                sets.push((key.clone(), number(*v)));
            }
            let scenario = loaded.with(&sets)?;
            jobs.push(Job {
                series: i,
                value: *v,
                scenario,
            });
        }
    }
    Ok(Plan {
        loaded: loaded.clone(),
        figure,
        series: series
            .into_iter()
            .map(|(l, s)| (l, s.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()))
            .collect(),
        jobs,
        seed,
        quick: opts.quick,
    })
}

/// A TOML number for a swept value: an integer when it is one.
fn number(v: f64) -> toml::Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        toml::Value::Integer(v as i64)
    } else {
        toml::Value::Float(v)
    }
}

/// Runs one job.
pub fn run_job(job: &Job, plan: &Plan) -> Result<(Metrics, Samples), SimError> {
    let t0 = std::time::Instant::now();
    let dir = plan.loaded.dir.as_deref();
    let (mut m, s) = if plan.figure.kind == FigureKind::Throughput {
        let mut search = plan.figure.search.clone();
        if plan.quick {
            search.trial_ms *= 0.5;
        }
        rfc2544(&job.scenario, &search, dir)?
    } else {
        rxsched_sim::run(&job.scenario, dir)?
    };
    m.x = job.value;
    m.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok((m, s))
}

/// RFC 2544 throughput: the highest rate, per source, at which a trial of
/// fixed length loses nothing, by binary search between zero and the line
/// rate. Returns the last loss-free trial's record, with the throughput
/// (`throughput_pps_per_port`, `throughput_mbps_per_port`, the per-packet
/// time `t_per_packet_us` over all ports, `line_limited` and `trials`) added.
pub fn rfc2544(
    base: &Scenario,
    search: &rxsched_sim::scenario::SearchCfg,
    dir: Option<&std::path::Path>,
) -> Result<(Metrics, Samples), SimError> {
    let profile = rxsched_sim::Profile::load(&base.profile, dir)?;
    let bytes = base.traffic.first().map_or(64, |t| t.frame_bytes);
    let line = 1e9 / profile.wire.frame_ns(bytes) as f64;
    let mut s = base.clone();
    s.run.duration_ms = search.trial_ms;
    let mut trial = |rate: f64| -> Result<(Metrics, Samples), SimError> {
        for t in &mut s.traffic {
            t.rate_pps = rate;
        }
        rxsched_sim::run(&s, dir)
    };
    let lossless = |m: &Metrics| m.drops.values().sum::<u64>() == 0;
    let mut trials = 1;
    let first = trial(line)?;
    let (rate, (mut m, samples)) = if lossless(&first.0) {
        (line, first)
    } else {
        let (mut lo, mut hi) = (0.0, line);
        let mut best = None;
        while hi - lo > search.resolution * line {
            let mid = (lo + hi) / 2.0;
            let r = trial(mid)?;
            trials += 1;
            if lossless(&r.0) {
                lo = mid;
                best = Some(r);
            } else {
                hi = mid;
            }
        }
        match best {
            Some(b) => (lo, b),
            None => (0.0, trial(0.0)?),
        }
    };
    let ports = base
        .traffic
        .iter()
        .map(|t| t.port)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        .max(1);
    let wire_bits =
        (bytes.max(profile.wire.min_frame_bytes) + profile.wire.framing_bytes) as f64 * 8.0;
    m.extra.insert("throughput_pps_per_port".into(), rate);
    m.extra
        .insert("throughput_mbps_per_port".into(), rate * wire_bits / 1e6);
    m.extra.insert("line_rate_pct".into(), 100.0 * rate / line);
    m.extra
        .insert("line_limited".into(), if rate >= line { 1.0 } else { 0.0 });
    if rate > 0.0 {
        m.extra
            .insert("t_per_packet_us".into(), 1e6 / (rate * ports as f64));
    }
    m.extra.insert("trials".into(), trials as f64);
    Ok((m, samples))
}

/// Looks up a metric in a point: a field, or `group.key` for nested ones.
pub fn value(point: &Value, metric: &str) -> Option<f64> {
    if let Some(v) = point.get(metric).and_then(Value::as_f64) {
        return Some(v);
    }
    let (group, key) = metric.split_once('.')?;
    let g = point.get(group)?;
    Some(g.get(key).and_then(Value::as_f64).unwrap_or(0.0))
}

/// Builds the result file from finished runs (in job order).
pub fn assemble(plan: &Plan, results: Vec<(Metrics, Samples)>) -> ResultFile {
    let f = &plan.figure;
    let s = &plan.loaded.scenario;
    let mut series: Vec<SeriesOut> = plan
        .series
        .iter()
        .map(|(label, config)| SeriesOut {
            label: label.clone(),
            config: config.clone(),
            points: Vec::new(),
            run: None,
        })
        .collect();
    for (job, (m, samples)) in plan.jobs.iter().zip(results) {
        let out = &mut series[job.series];
        let mut rec = serde_json::to_value(&m).unwrap_or(Value::Null);
        match f.kind {
            FigureKind::Sweep | FigureKind::Throughput => {
                if let (Some(v), Value::Object(o)) = (job.value, &mut rec) {
                    if value(&Value::Object(o.clone()), &f.x.metric).is_none() {
                        o.insert(f.x.metric.clone(), json!(v));
                    }
                }
                out.points.push(rec);
            }
            FigureKind::Cdf => {
                let h = match f.sample.as_deref() {
                    Some("latency") => &samples.latency,
                    _ => &samples.ipin_latency,
                };
                out.points = cdf_points(h, &f.x.metric, &f.y.metric);
                out.run = Some(rec);
            }
            FigureKind::Burst => {
                let n = job
                    .scenario
                    .traffic
                    .first()
                    .map_or(0, |t| t.count.max(t.burst as u64));
                out.points = samples
                    .to_device_ns
                    .iter()
                    .take(n as usize)
                    .enumerate()
                    .map(|(i, t)| json!({ f.x.metric.clone(): i + 1, f.y.metric.clone(): *t as f64 / 1e3 }))
                    .collect();
                out.run = Some(rec);
            }
        }
    }
    let reference = s
        .reference
        .iter()
        .map(|r| {
            let k = r.scale.unwrap_or(1.0);
            RefOut {
                series: r.series.clone(),
                points: r.points.iter().map(|p| [p[0], p[1] * k]).collect(),
                note: r.note.clone(),
            }
        })
        .collect();
    let mut result = ResultFile {
        schema: SCHEMA.into(),
        id: s.id.clone().unwrap_or_else(|| "sweep".into()),
        title: s.title.clone().unwrap_or_default(),
        source: s.source.clone().unwrap_or_default(),
        profile: s.profile.clone(),
        seed: plan.seed,
        quick: plan.quick,
        x: f.x.clone(),
        y: f.y.clone(),
        series,
        reference,
        checks: Vec::new(),
        table: f.table.clone(),
        legend: f.legend.clone(),
    };
    result.checks = s
        .check
        .iter()
        .map(|c| checks::evaluate(c, &result))
        .collect();
    result
}

/// At most this many points describe a distribution.
const CDF_POINTS: usize = 200;

fn cdf_points(h: &rxsched_sim::metrics::Histogram, x: &str, y: &str) -> Vec<Value> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    // Samples of rank 0, step, 2 step, ... and the last, counting from 0.
    let step = n.div_ceil(CDF_POINTS as u64).max(1);
    let mut ranks: Vec<u64> = (0..n).step_by(step as usize).collect();
    if ranks.last() != Some(&(n - 1)) {
        ranks.push(n - 1);
    }
    let mut out = Vec::with_capacity(ranks.len());
    let mut seen = 0;
    let mut it = ranks.into_iter().peekable();
    for v in h.iter_recorded() {
        seen += v.count_since_last_iteration();
        let at = h.median_equivalent(v.value_iterated_to()) as f64 / 1e3;
        while let Some(r) = it.next_if(|r| *r < seen) {
            out.push(json!({ x: at, y: (r + 1) as f64 / n as f64 }));
        }
    }
    out
}
