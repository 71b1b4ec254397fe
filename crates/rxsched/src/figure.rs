//! Turning an experiment into a figure: plan the runs, run them, assemble
//! the result file with its verdicts.

use crate::experiments::{ExperimentFile, FigureCfg, FigureKind, Milestone};
use crate::result::{Meta, Point, Reference, ResultFile, Series};
use crate::search;
use rxsched_sim::metrics::Histogram;
use rxsched_sim::metrics::TraceEvent;
use rxsched_sim::scenario::overlaps;
use rxsched_sim::{InputError, Metrics, Samples, Scenario, SimError};
use serde_json::Value;
use std::collections::BTreeMap;

/// How to run a figure.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Fewer points and shorter runs.
    pub quick: bool,
    /// Overrides every run's seed.
    pub seed: Option<u64>,
    /// Overrides applied to every run (`key`), or to one series' runs
    /// (`LABEL:key`), after the series' own. A key some series sets
    /// itself, or the swept key, is refused unless a series is named.
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
    /// The experiment file.
    pub file: ExperimentFile,
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
    /// Every override beyond the series' own, as `key=value`.
    pub overrides: Vec<String>,
    /// What each `[[reference]]`'s published values are multiplied by.
    pub ref_scales: Vec<f64>,
}

fn to_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// What a `[[reference]]`'s published values are multiplied by: its
/// `scale`, or the value its series' profile gives `scale_param` (the
/// first run of that series says which profile and parameters).
fn reference_scale(
    file: &ExperimentFile,
    r: &crate::experiments::ReferenceCfg,
    series: &[(String, BTreeMap<String, toml::Value>)],
    jobs: &[Job],
) -> Result<f64, InputError> {
    let Some(name) = &r.scale_param else {
        return Ok(r.scale.unwrap_or(1.0));
    };
    let refuse = |msg: String| InputError {
        file: file.loaded.file.clone(),
        line: None,
        key: Some("reference.scale_param".into()),
        msg,
    };
    if r.scale.is_some() {
        return Err(refuse("give `scale` or `scale_param`, not both".into()));
    }
    let i = series.iter().position(|(l, _)| *l == r.series);
    let job = i
        .and_then(|i| jobs.iter().find(|j| j.series == i))
        .ok_or_else(|| refuse(format!("no series {:?} runs", r.series)))?;
    let s = &job.scenario;
    if let Some(v) = s.profile_param.get(name) {
        return Ok(*v);
    }
    let p = rxsched_sim::Profile::load(&s.profile, file.loaded.dir.as_deref())?;
    p.calibrate
        .as_ref()
        .and_then(|c| c.param.iter().find(|fp| fp.name == *name))
        .map(|fp| fp.value)
        .ok_or_else(|| {
            refuse(format!(
                "profile {:?} has no free parameter {name:?}",
                s.profile
            ))
        })
}

/// The swept values of a figure (one `None` for distributions and bursts).
fn values(
    file: &ExperimentFile,
    figure: &FigureCfg,
    quick: bool,
) -> Result<Vec<Option<f64>>, InputError> {
    if matches!(
        figure.kind,
        FigureKind::Cdf | FigureKind::Burst | FigureKind::Timeline
    ) {
        return Ok(vec![None]);
    }
    let v = if quick && !figure.quick_values.is_empty() {
        figure.quick_values.clone()
    } else if quick {
        let n = figure.values.len();
        figure
            .values
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0 || *i == n - 1)
            .map(|(_, v)| *v)
            .collect()
    } else {
        figure.values.clone()
    };
    if v.is_empty() || figure.vary.is_none() {
        return Err(file
            .loaded
            .error("figure.vary", "a sweep needs `vary` and `values`".into()));
    }
    Ok(v.into_iter().map(Some).collect())
}

/// Plans the runs of a figure. `figure` replaces the file's `[figure]` (for `sweep`).
pub fn plan(
    file: &ExperimentFile,
    figure: Option<FigureCfg>,
    opts: &Options,
) -> Result<Plan, InputError> {
    // A swept key that came from the command line is blamed on `--vary`.
    let vary_flag = figure.as_ref().and_then(|f| f.vary.clone());
    let figure = figure
        .or_else(|| file.exp.figure.clone())
        .ok_or_else(|| InputError {
            file: file.loaded.file.clone(),
            line: None,
            key: Some("figure".into()),
            msg: "no [figure] table: say which key to vary and what to plot, or use `sweep --vary`"
                .into(),
        })?;
    let seed = opts.seed.unwrap_or(file.loaded.scenario.run.seed);
    let series: Vec<(String, BTreeMap<String, toml::Value>)> = if file.exp.series.is_empty() {
        vec![("scenario".to_string(), BTreeMap::new())]
    } else {
        file.exp
            .series
            .iter()
            .map(|c| (c.label.clone(), c.set.clone()))
            .collect()
    };
    let user = user_sets(&opts.sets, &series, figure.vary.as_deref())?;
    let mut overrides: Vec<String> = Vec::new();
    let mut common: Vec<(String, toml::Value)> = Vec::new();
    if opts.quick {
        common.extend(figure.quick_set.iter().map(|(k, v)| (k.clone(), v.clone())));
        overrides.extend(
            figure
                .quick_set
                .iter()
                .map(|(k, v)| format!("{k}={v} (quick)")),
        );
    }
    for (label, k, v) in &user {
        overrides.push(match label {
            Some(l) => format!("{l}:{k}={v}"),
            None => format!("{k}={v}"),
        });
        if label.is_none() {
            common.push((k.clone(), v.clone()));
        }
    }
    if let Some(s) = opts.seed {
        overrides.push(format!("run.seed={s}"));
    }
    common.push(("run.seed".into(), toml::Value::Integer(seed as i64)));
    let values = values(file, &figure, opts.quick)?;
    let mut jobs = Vec::new();
    let repeats = figure.runs_per_value(opts.quick);
    for (i, (label, set)) in series.iter().enumerate() {
        for (v, r) in values
            .iter()
            .flat_map(|v| (0..repeats).map(move |r| (v, r)))
        {
            let mut sets: Vec<(String, toml::Value)> =
                set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            sets.extend(common.iter().cloned());
            sets.extend(
                user.iter()
                    .filter(|(l, _, _)| l.as_ref() == Some(label))
                    .map(|(_, k, v)| (k.clone(), v.clone())),
            );
            if r > 0 {
                let s = seed.wrapping_add(u64::from(r)) as i64;
                sets.push(("run.seed".into(), toml::Value::Integer(s)));
            }
            if let (Some(v), Some(key)) = (v, &figure.vary) {
                sets.push((key.clone(), number(*v)));
            }
            let scenario = file.loaded.with(&sets).map_err(|mut e| {
                if e.file == "--set" && e.key.is_some() && e.key == vary_flag {
                    e.file = "--vary".into();
                }
                e
            })?;
            jobs.push(Job {
                series: i,
                value: *v,
                scenario,
            });
        }
    }
    let ref_scales = file
        .exp
        .reference
        .iter()
        .map(|r| reference_scale(file, r, &series, &jobs))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        file: file.clone(),
        ref_scales,
        figure,
        series: series
            .into_iter()
            .map(|(l, s)| {
                let mut config: BTreeMap<String, Value> =
                    s.iter().map(|(k, v)| (k.clone(), to_json(v))).collect();
                for (_, k, v) in user.iter().filter(|(ul, _, _)| ul.as_ref() == Some(&l)) {
                    config.insert(k.clone(), to_json(v));
                }
                (l, config)
            })
            .collect(),
        jobs,
        seed,
        quick: opts.quick,
        overrides,
    })
}

/// A user's override for one series (`LABEL:key`) or for every run.
type UserSet = (Option<String>, String, toml::Value);

/// The user's `--set`s, each split into its series (if named) and key;
/// refused when the series does not exist, or when an override of every
/// run names a key a series or the sweep sets itself (which would hide
/// what the file says that series is).
fn user_sets(
    sets: &[(String, toml::Value)],
    series: &[(String, BTreeMap<String, toml::Value>)],
    vary: Option<&str>,
) -> Result<Vec<UserSet>, InputError> {
    let refuse = |key: &str, msg: String| InputError {
        file: "--set".into(),
        line: None,
        key: Some(key.to_string()),
        msg,
    };
    let mut out = Vec::new();
    for (k, v) in sets {
        if let Some((label, key)) = k.split_once(':') {
            if !series.iter().any(|(l, _)| l == label) {
                let labels: Vec<&str> = series.iter().map(|(l, _)| l.as_str()).collect();
                return Err(refuse(
                    k,
                    format!(
                        "no series {label:?} (the series are: {})",
                        labels.join(", ")
                    ),
                ));
            }
            out.push((Some(label.to_string()), key.to_string(), v.clone()));
            continue;
        }
        if vary.is_some_and(|x| overlaps(k, x)) {
            return Err(refuse(
                k,
                "the figure sweeps this key: each point sets it, so an override would be lost"
                    .into(),
            ));
        }
        if let Some((label, _)) = series
            .iter()
            .find(|(_, set)| set.keys().any(|s| overlaps(k, s)))
        {
            return Err(refuse(
                k,
                format!(
                    "series {label:?} sets this key itself; name the series to override it there \
                     (`--set {label}:{k}=…`)"
                ),
            ));
        }
        out.push((None, k.clone(), v.clone()));
    }
    Ok(out)
}

/// A TOML number for a swept value: an integer when it is one.
fn number(v: f64) -> toml::Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        toml::Value::Integer(v as i64)
    } else {
        toml::Value::Float(v)
    }
}

/// Runs one job; the record's `wall_ms` is the job's wall time.
pub fn run_job(job: &Job, plan: &Plan) -> Result<(Metrics, Samples), SimError> {
    let t0 = std::time::Instant::now();
    let dir = plan.file.loaded.dir.as_deref();
    let (mut m, s) = if plan.figure.kind == FigureKind::Throughput {
        let mut search = plan.figure.search.clone();
        if plan.quick {
            search.trial_ms *= 0.5;
        }
        search::rfc2544(&job.scenario, &search, dir)?
    } else {
        rxsched_sim::run(&job.scenario, dir)?
    };
    m.x = job.value;
    m.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok((m, s))
}

/// The points one run gives, and the record behind them when the points
/// are not records themselves.
fn points(f: &FigureCfg, job: &Job, m: &Metrics, samples: &Samples) -> (Vec<Point>, Option<Value>) {
    let mut rec = Point::of(m);
    let run = || Some(Value::Object(rec.0.clone()));
    match f.kind {
        FigureKind::Sweep | FigureKind::Throughput => {
            if let Some(v) = job.value {
                if rec.get(&f.x.metric).is_none() {
                    rec.set(&f.x.metric, v);
                }
            }
            (vec![rec], None)
        }
        FigureKind::Cdf => {
            let h = match f.sample.as_deref() {
                Some("latency") => &samples.latency,
                _ => &samples.ipin_latency,
            };
            (cdf_points(h, &f.x.metric, &f.y.metric), run())
        }
        FigureKind::Timeline => (timeline_points(f, &samples.trace), run()),
        FigureKind::Burst => {
            let n = job
                .scenario
                .traffic
                .first()
                .map_or(0, |t| t.count.max(t.burst as u64));
            let pts = samples
                .to_device_ns
                .iter()
                .take(n as usize)
                .enumerate()
                .map(|(i, t)| Point::xy(&f.x.metric, (i + 1) as f64, &f.y.metric, *t as f64 / 1e3))
                .collect();
            (pts, run())
        }
    }
}

/// The milestones of a timeline figure found in a run's trace: x is the
/// milestone's position (from 1), y the time in µs, from the trace's first
/// event, of the first event that matches it. A milestone the trace never
/// reaches has no point.
fn timeline_points(f: &FigureCfg, trace: &[TraceEvent]) -> Vec<Point> {
    let t0 = trace.first().map_or(0, |e| e.t);
    let mut pts = Vec::new();
    for (i, m) in f.milestones.iter().enumerate() {
        // Validated when the file was read.
        let Ok(m) = Milestone::parse(m) else { continue };
        let hit = trace.iter().find(|e| {
            e.step == m.step && e.end == m.end && (m.packet.is_none() || e.packet == m.packet)
        });
        if let Some(e) = hit {
            let us = (e.t - t0) as f64 / 1e3;
            pts.push(Point::xy(&f.x.metric, (i + 1) as f64, &f.y.metric, us));
        }
    }
    pts
}

/// What one run gives its figure: its points, the record behind them when
/// the points are not records themselves, and the wall time it took. A
/// shard of a study keeps these (`crate::shard`); merging shards
/// assembles them as the unsharded run does.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunPoints {
    /// The points.
    pub points: Vec<Point>,
    /// The record behind them, if they are not records.
    pub run: Option<Value>,
    /// The simulation's wall time, in ms.
    pub wall_ms: f64,
}

impl RunPoints {
    /// The points job `job` of `plan` gave, as it finished with `m` and
    /// `samples`.
    pub fn of(plan: &Plan, job: &Job, m: &Metrics, samples: &Samples) -> RunPoints {
        let (points, run) = points(&plan.figure, job, m, samples);
        RunPoints {
            points,
            run,
            wall_ms: m.wall_ms,
        }
    }
}

/// Builds the result file from finished runs (in job order) and evaluates its checks.
pub fn assemble(plan: &Plan, results: Vec<(Metrics, Samples)>) -> ResultFile {
    let done = plan
        .jobs
        .iter()
        .zip(&results)
        .map(|(job, (m, s))| RunPoints::of(plan, job, m, s))
        .collect();
    assemble_points(plan, done)
}

/// A stable digest of what a plan runs (every job's scenario and swept
/// value), so that shards planned by another version of rxsched, or from
/// other files, are not merged.
pub fn fingerprint(plan: &Plan) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!(
        "{:?}|{:?}|{}|{}",
        plan.jobs, plan.series, plan.seed, plan.quick
    )
    .hash(&mut h);
    format!("{:016x}", h.finish())
}

/// [`assemble`] from each job's points (in job order).
pub fn assemble_points(plan: &Plan, done: Vec<RunPoints>) -> ResultFile {
    let f = &plan.figure;
    let exp = &plan.file.exp;
    let mut series: Vec<Series> = plan
        .series
        .iter()
        .map(|(label, config)| Series {
            config: config.clone(),
            y: plan
                .file
                .exp
                .series
                .iter()
                .find(|c| &c.label == label)
                .and_then(|c| c.y.clone()),
            ..Series::new(label)
        })
        .collect();
    for (job, d) in plan.jobs.iter().zip(done) {
        let out = &mut series[job.series];
        out.points.extend(d.points);
        if d.run.is_some() {
            out.run = d.run;
        }
    }
    let reference = exp
        .reference
        .iter()
        .zip(&plan.ref_scales)
        .map(|(r, &k)| Reference {
            series: r.series.clone(),
            points: r.points.iter().map(|p| [p[0], p[1] * k]).collect(),
            note: r.note.clone(),
        })
        .collect();
    let meta = Meta {
        id: exp.id.clone().unwrap_or_else(|| "sweep".into()),
        title: exp.title.clone().unwrap_or_default(),
        source: exp.source.clone().unwrap_or_default(),
        profile: plan.file.loaded.scenario.profile.clone(),
        seed: plan.seed,
        quick: plan.quick,
    };
    let mut result = ResultFile::new(meta, f.x.clone(), f.y.clone(), series, reference);
    result.table = f.table.clone();
    result.overrides = plan.overrides.clone();
    result.legend = f.legend.clone();
    result.scatter = f.runs_per_value(plan.quick) > 1;
    result.checks = exp.check.iter().map(|c| c.evaluate(&result)).collect();
    result.claims = exp.claim.clone();
    result
}

/// At most this many points describe a distribution.
const CDF_POINTS: u64 = 200;

fn cdf_points(h: &Histogram, x: &str, y: &str) -> Vec<Point> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    // Samples of rank 0, step, 2 step, ... and the last, counting from 0.
    let step = n.div_ceil(CDF_POINTS).max(1);
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
            out.push(Point::xy(x, at, y, (r + 1) as f64 / n as f64));
        }
    }
    out
}
