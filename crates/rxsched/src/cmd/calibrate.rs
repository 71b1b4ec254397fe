//! `rxsched calibrate PROFILE`: fits a profile's free parameters (its
//! `[calibrate]` section) to the calibration claims it names, by least
//! squares through the simulator. Each claim is a check of an experiment
//! on the profile; its residuals are the check's (ours less published,
//! over published, per published point), and each claim weighs the same
//! however many points it has (the mean of its squares). The search is
//! Nelder-Mead (argmin) over the parameters scaled to their ranges; the
//! simulator and the search are deterministic, so the fit is too.
//!
//! It prints each claim's residuals at the profile's values and at the
//! fit, and which claims pull a parameter opposite ways at the fit (the
//! claims that contradict each other); `--write` puts the fitted values,
//! the costs they set and the residuals into the profile file.

use super::run_plans;
use argmin::core::{CostFunction, Executor, State};
use argmin::solver::neldermead::NelderMead;
use rxsched::error::{Error, Result};
use rxsched::experiments::{self, ExperimentFile};
use rxsched::figure::{self, Options};
use rxsched_sim::profile::{Calibrate, ClaimRef, FreeParam, Profile, BUILTIN};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

/// The search's iterations at most.
const MAX_ITERS: u64 = 60;

/// A profile's text, where it lives, and its parsed form.
struct Source {
    path: PathBuf,
    text: String,
    profile: Profile,
}

/// A built-in profile's file in this source tree, or a path.
fn source(name: &str) -> Result<Source> {
    let path = if BUILTIN.iter().any(|(n, _)| *n == name) {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../profiles")
            .join(format!("{name}.toml"))
    } else {
        PathBuf::from(name)
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::Input(format!("{}: cannot read the profile: {e}", path.display())))?;
    let profile = Profile::parse(&path.display().to_string(), &text)?;
    Ok(Source {
        path,
        text,
        profile,
    })
}

/// One claim, found: its experiment and check.
struct Claim {
    r: ClaimRef,
    file: ExperimentFile,
    check: rxsched::checks::Check,
}

fn claims(cal: &Calibrate, profile: &str) -> Result<Vec<Claim>> {
    cal.claims
        .iter()
        .map(|c| {
            let src = experiments::get(&c.experiment).ok_or_else(|| {
                Error::Input(format!(
                    "[calibrate] claims: no experiment {:?}",
                    c.experiment
                ))
            })?;
            let file = ExperimentFile::parse(
                &format!("experiments/{}.toml", c.experiment),
                src.to_string(),
                None,
            )?;
            let on = file.loaded.tree.get("profile").and_then(|v| v.as_str());
            if on != Some(profile) {
                return Err(Error::Input(format!(
                    "[calibrate] claims: {} runs on profile {on:?}, not {profile:?}",
                    c.experiment
                )));
            }
            let check = file
                .exp
                .check
                .iter()
                .find(|k| k.name == c.check)
                .cloned()
                .ok_or_else(|| {
                    Error::Input(format!(
                        "[calibrate] claims: {} has no check {:?}",
                        c.experiment, c.check
                    ))
                })?;
            Ok(Claim {
                r: c.clone(),
                file,
                check,
            })
        })
        .collect()
}

/// The profile's text with every parameter's costs set to `values`.
fn with_values(text: &str, params: &[FreeParam], values: &[f64]) -> Result<String> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| Error::Input(format!("profile: {e}")))?;
    for (p, v) in params.iter().zip(values) {
        for (key, x) in p.costs(*v) {
            let (table, name) = key.split_once('.').ok_or_else(|| {
                Error::Input(format!("[calibrate] {}: {key:?} is not TABLE.KEY", p.name))
            })?;
            let item = &mut doc[table][name];
            let decor = item
                .as_value()
                .map(|v| v.decor().clone())
                .unwrap_or_default();
            let mut value = if item.as_integer().is_some() || item.is_none() {
                toml_edit::Value::from(x.round() as i64)
            } else {
                toml_edit::Value::from(x)
            };
            *value.decor_mut() = decor;
            *item = toml_edit::Item::Value(value);
        }
    }
    Ok(doc.to_string())
}

/// Runs the claims' experiments on a profile file and returns each
/// claim's residuals.
fn residuals(claims: &[Claim], profile: &Path, jobs: Option<usize>) -> Result<Vec<Vec<f64>>> {
    let opts = Options {
        quick: false,
        seed: None,
        sets: vec![(
            "profile".into(),
            toml::Value::String(profile.display().to_string()),
        )],
    };
    let mut ids: Vec<&str> = claims.iter().map(|c| c.r.experiment.as_str()).collect();
    ids.dedup();
    let plans = ids
        .iter()
        .map(|id| {
            let f = &claims
                .iter()
                .find(|c| c.r.experiment == *id)
                .expect("an id of a claim")
                .file;
            Ok(figure::plan(f, None, &opts)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let results = run_plans(&plans, jobs)?;
    claims
        .iter()
        .map(|c| {
            let i = ids
                .iter()
                .position(|id| *id == c.r.experiment)
                .expect("run");
            c.check.residuals(&results[i].0).ok_or_else(|| {
                Error::Input(format!(
                    "{}: check {:?} names no published number to fit to",
                    c.r.experiment, c.r.check
                ))
            })
        })
        .collect()
}

/// Each claim weighs the same: the sum over claims of the mean square of
/// its residuals.
fn cost_of(r: &[Vec<f64>]) -> f64 {
    r.iter()
        .map(|v| v.iter().map(|x| x * x).sum::<f64>() / v.len().max(1) as f64)
        .sum()
}

/// The problem argmin minimises: parameters scaled to [0, 1] over their
/// ranges (outside, a penalty).
struct Fit<'a> {
    src: &'a Source,
    params: &'a [FreeParam],
    claims: &'a [Claim],
    dir: PathBuf,
    jobs: Option<usize>,
    evals: Mutex<u32>,
}

impl<'a> Fit<'a> {
    fn new(
        src: &'a Source,
        params: &'a [FreeParam],
        claims: &'a [Claim],
        dir: &Path,
        jobs: Option<usize>,
    ) -> Fit<'a> {
        Fit {
            src,
            params,
            claims,
            dir: dir.to_path_buf(),
            jobs,
            evals: Mutex::new(0),
        }
    }

    fn values(&self, u: &[f64]) -> Vec<f64> {
        self.params
            .iter()
            .zip(u)
            .map(|(p, u)| p.range[0] + u.clamp(0.0, 1.0) * (p.range[1] - p.range[0]))
            .collect()
    }

    fn scaled(&self, v: &[f64]) -> Vec<f64> {
        self.params
            .iter()
            .zip(v)
            .map(|(p, v)| (v - p.range[0]) / (p.range[1] - p.range[0]))
            .collect()
    }

    fn run(&self, values: &[f64]) -> Result<Vec<Vec<f64>>> {
        let text = with_values(&self.src.text, self.params, values)?;
        let path = self.dir.join(format!("{}.toml", self.src.profile.name));
        std::fs::write(&path, text).map_err(|e| Error::Run(format!("{}: {e}", path.display())))?;
        *self.evals.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        residuals(self.claims, &path, self.jobs)
    }
}

impl CostFunction for &Fit<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, u: &Self::Param) -> std::result::Result<f64, argmin::core::Error> {
        let outside: f64 = u.iter().map(|x| (x.clamp(0.0, 1.0) - x).powi(2)).sum();
        let r = self
            .run(&self.values(u))
            .map_err(|e| argmin::core::Error::msg(e.to_string()))?;
        Ok(cost_of(&r) + 100.0 * outside)
    }
}

fn show(claims: &[Claim], r: &[Vec<f64>]) -> Result<()> {
    for (c, v) in claims.iter().zip(r) {
        let cells: Vec<String> = v.iter().map(|x| format!("{:+.1}%", x * 100.0)).collect();
        rxsched::out::line(&format!(
            "  {:<14} {:<60} {}",
            c.r.experiment,
            truncate(&c.r.check, 60),
            cells.join(" ")
        ))?;
    }
    rxsched::out::line(&format!(
        "  sum of the claims' mean squares: {:.5}",
        cost_of(r)
    ))
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n - 1).collect();
        format!("{t}…")
    }
}

/// Which claims pull each parameter opposite ways at `values`: for each
/// parameter, the sign of each claim's gradient of its mean square, by a
/// step of 2% of the range.
fn tensions(fit: &Fit, values: &[f64], at: &[Vec<f64>]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (k, p) in fit.params.iter().enumerate() {
        let mut v = values.to_vec();
        let step = 0.02 * (p.range[1] - p.range[0]);
        v[k] = (v[k] + step).min(p.range[1]);
        let h = v[k] - values[k];
        if h <= 0.0 {
            continue;
        }
        let r = fit.run(&v)?;
        let grad: Vec<f64> = at
            .iter()
            .zip(&r)
            .map(|(a, b)| (cost_of(std::slice::from_ref(b)) - cost_of(std::slice::from_ref(a))) / h)
            .collect();
        let up: Vec<&str> = fit
            .claims
            .iter()
            .zip(&grad)
            .filter(|(_, g)| **g < -1e-12)
            .map(|(c, _)| c.r.check.as_str())
            .collect();
        let down: Vec<&str> = fit
            .claims
            .iter()
            .zip(&grad)
            .filter(|(_, g)| **g > 1e-12)
            .map(|(c, _)| c.r.check.as_str())
            .collect();
        if !up.is_empty() && !down.is_empty() {
            out.push(format!(
                "{}: raising it helps {} and hurts {}",
                p.name,
                up.iter()
                    .map(|c| format!("{:?}", truncate(c, 50)))
                    .collect::<Vec<_>>()
                    .join(", "),
                down.iter()
                    .map(|c| format!("{:?}", truncate(c, 50)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(out)
}

/// A parameter's value rounded as the profile keeps it: six significant
/// digits (the nearest double to that decimal).
fn decimal(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let per_unit = 10f64.powi(5 - v.abs().log10().floor() as i32);
    (v * per_unit).round() / per_unit
}

/// Writes the fit into the profile file: each parameter's value, the costs
/// it sets, and each claim's residuals.
fn write_back(
    src: &Source,
    params: &[FreeParam],
    values: &[f64],
    claims: &[Claim],
    r: &[Vec<f64>],
) -> Result<()> {
    let text = with_values(&src.text, params, values)?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| Error::Input(format!("profile: {e}")))?;
    if let Some(ps) = doc["calibrate"]["param"].as_array_of_tables_mut() {
        for (t, v) in ps.iter_mut().zip(values) {
            t["value"] = toml_edit::value(decimal(*v));
        }
    }
    let mut fitted = toml_edit::ArrayOfTables::new();
    for (c, v) in claims.iter().zip(r) {
        let mut t = toml_edit::Table::new();
        t["experiment"] = toml_edit::value(c.r.experiment.clone());
        t["check"] = toml_edit::value(c.r.check.clone());
        let mut a = toml_edit::Array::new();
        for x in v {
            a.push((x * 1e4).round() / 1e4);
        }
        t["residuals"] = toml_edit::value(a);
        fitted.push(t);
    }
    doc["calibrate"]["fitted"] = toml_edit::Item::ArrayOfTables(fitted);
    std::fs::write(&src.path, doc.to_string())
        .map_err(|e| Error::Run(format!("{}: {e}", src.path.display())))
}

/// A profile's fit, checked: its source, its [calibrate] section, its
/// claims and a scratch directory for the runs.
fn prepare(name: &str) -> Result<(Source, Calibrate, Vec<Claim>, PathBuf)> {
    let src = source(name)?;
    let cal = src.profile.calibrate.clone().ok_or_else(|| {
        Error::Input(format!(
            "profile {name:?} names no free parameters: it has no [calibrate] section"
        ))
    })?;
    if cal.param.is_empty() || cal.param.len() > cal.claims.len() {
        return Err(Error::Input(format!(
            "[calibrate]: {} free parameters for {} claims: a fit needs at least as many claims",
            cal.param.len(),
            cal.claims.len()
        )));
    }
    for p in &cal.param {
        let increasing = p.range[0] < p.range[1];
        if !increasing || !(p.range[0]..=p.range[1]).contains(&p.value) {
            return Err(Error::Input(format!(
                "[calibrate] {}: range {:?} must be increasing and hold its value {}",
                p.name, p.range, p.value
            )));
        }
    }
    let claims = claims(&cal, &src.profile.name)?;
    let dir = std::env::temp_dir().join(format!("rxsched-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::Run(format!("{}: {e}", dir.display())))?;
    Ok((src, cal, claims, dir))
}

/// The first line of `calibrate`'s output: the profile, its free
/// parameters and claims.
fn heading(src: &Source, cal: &Calibrate, claims: &[Claim]) -> Result<()> {
    rxsched::out::line(&format!(
        "{}: {} free parameters, {} claims",
        src.profile.name,
        cal.param.len(),
        claims.len()
    ))
}

/// `rxsched calibrate PROFILE --check`: the profile's values against a
/// step of 2% of each parameter's range either way. A simulator change
/// that moved a calibration claim leaves a step that does better.
pub fn check(name: &str, jobs: Option<usize>) -> Result<ExitCode> {
    let (src, cal, claims, dir) = prepare(name)?;
    let fit = Fit::new(&src, &cal.param, &claims, &dir, jobs);
    let start: Vec<f64> = cal.param.iter().map(|p| p.value).collect();
    let at = cost_of(&fit.run(&start)?);
    heading(&src, &cal, &claims)?;
    rxsched::out::line(&format!(
        "  at the profile's values the claims' mean squares sum to {at:.5}"
    ))?;
    let mut better = Vec::new();
    for (k, p) in cal.param.iter().enumerate() {
        let step = 0.02 * (p.range[1] - p.range[0]);
        for v in [start[k] - step, start[k] + step] {
            if !(p.range[0]..=p.range[1]).contains(&v) {
                continue;
            }
            let mut vs = start.clone();
            vs[k] = v;
            let c = cost_of(&fit.run(&vs)?);
            let v = decimal(v);
            rxsched::out::line(&format!("  {} = {v}: {c:.5}", p.name))?;
            if c < at - (0.1 * at).max(0.001) {
                better.push(format!("{} = {v} ({c:.5})", p.name));
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    if better.is_empty() {
        rxsched::out::line("no step does markedly better: the profile is its fit")?;
        Ok(ExitCode::SUCCESS)
    } else {
        rxsched::out::line(&format!(
            "better than the profile's values: {}; run `rxsched calibrate {name} --write`",
            better.join(", ")
        ))?;
        Ok(ExitCode::from(1))
    }
}

/// `rxsched calibrate PROFILE [--write]`
pub fn run(name: &str, write: bool, jobs: Option<usize>) -> Result<ExitCode> {
    let (src, cal, claims, dir) = prepare(name)?;
    let fit = Fit::new(&src, &cal.param, &claims, &dir, jobs);
    let start: Vec<f64> = cal.param.iter().map(|p| p.value).collect();
    let r0 = fit.run(&start)?;
    heading(&src, &cal, &claims)?;
    rxsched::out::line("at the profile's values:")?;
    show(&claims, &r0)?;
    // A simplex around the profile's values, a tenth of each range wide.
    let u0 = fit.scaled(&start);
    let mut simplex = vec![u0.clone()];
    for k in 0..u0.len() {
        let mut u = u0.clone();
        u[k] = if u[k] + 0.1 <= 1.0 {
            u[k] + 0.1
        } else {
            u[k] - 0.1
        };
        simplex.push(u);
    }
    let solver = NelderMead::new(simplex)
        .with_sd_tolerance(1e-6)
        .map_err(|e| Error::Run(format!("calibrate: {e}")))?;
    eprintln!("calibrate: searching (each step runs the claims' experiments)…");
    let res = Executor::new(&fit, solver)
        .configure(|s| s.max_iters(MAX_ITERS))
        .run()
        .map_err(|e| Error::Run(format!("calibrate: {e}")))?;
    let best_u = res.state().get_best_param().cloned().unwrap_or(u0);
    // The values as written (a decimal step), so that the costs and the
    // residuals written beside them are those of the written value.
    let best: Vec<f64> = fit.values(&best_u).into_iter().map(decimal).collect();
    let r1 = fit.run(&best)?;
    rxsched::out::line("fitted:")?;
    for (p, (v0, v1)) in cal.param.iter().zip(start.iter().zip(&best)) {
        rxsched::out::line(&format!(
            "  {:<14} {v1:.4} (was {v0:.4}; {})",
            p.name, p.why
        ))?;
    }
    show(&claims, &r1)?;
    let t = tensions(&fit, &best, &r1)?;
    if t.is_empty() {
        rxsched::out::line("no claims pull a parameter opposite ways at the fit")?;
    } else {
        rxsched::out::line("claims that pull against each other at the fit:")?;
        for l in t {
            rxsched::out::line(&format!("  {l}"))?;
        }
    }
    rxsched::out::line(&format!(
        "{} runs of the claims' experiments",
        fit.evals.lock().unwrap_or_else(|e| e.into_inner())
    ))?;
    if write {
        write_back(&src, &cal.param, &best, &claims, &r1)?;
        rxsched::out::line(&format!("wrote {}", src.path.display()))?;
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(ExitCode::SUCCESS)
}
