//! One module per command. What several commands share lives here: running
//! planned figures in parallel with a progress bar, and the summary line.

pub mod bench;
pub mod calibrate;
pub mod merge;
pub mod profiles;
pub mod real;
pub mod reproduce;
pub mod sim;
pub mod swarm;
pub mod sweep;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use rxsched::error::{Error, Result};
use rxsched::figure::{self, Plan};
use rxsched::result::ResultFile;
use rxsched::shard::{Manifest, PlanMark, Shard, ShardRun, Study};
use rxsched_sim::scenario::parse_set;
use std::io::IsTerminal;
use std::path::Path;

/// Parses `--set KEY=VALUE` arguments.
pub fn parse_sets(sets: &[String]) -> Result<Vec<(String, toml::Value)>> {
    Ok(sets
        .iter()
        .map(|s| parse_set(s))
        .collect::<std::result::Result<_, _>>()?)
}

/// A progress bar on a terminal, nothing otherwise.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    let template = format!(
        "{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {what} ({{eta}} left)"
    );
    b.set_style(ProgressStyle::with_template(&template).expect("valid template"));
    b
}

/// Runs every job of every plan in one parallel pass, with a progress bar
/// on a terminal, and assembles the results in plan order, each with the
/// simulation wall time it took.
pub fn run_plans(plans: &[Plan], jobs: Option<usize>) -> Result<Vec<(ResultFile, f64)>> {
    let pool = rxsched::flags::pool(jobs)?;
    let work: Vec<(usize, usize)> = plans
        .iter()
        .enumerate()
        .flat_map(|(p, plan)| (0..plan.jobs.len()).map(move |j| (p, j)))
        .collect();
    let bar = bar(work.len() as u64, "runs");
    let outs: Vec<_> = pool.install(|| {
        work.par_iter()
            .map(|&(p, j)| {
                let r = figure::run_job(&plans[p].jobs[j], &plans[p]);
                bar.inc(1);
                r
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut outs = outs.into_iter();
    let mut results = Vec::new();
    for plan in plans {
        let mine: Vec<_> = outs
            .by_ref()
            .take(plan.jobs.len())
            .collect::<std::result::Result<_, _>>()?;
        let wall: f64 = mine.iter().map(|(m, _)| m.wall_ms).sum();
        results.push((figure::assemble(plan, mine), wall));
    }
    Ok(results)
}

/// Runs shard `shard` of the study `study` planned as `plans`: every run
/// whose index over the plans (in order) is the shard's, in parallel, and
/// writes what each gave to `out/shard-K-of-N.json` for `rxsched merge`.
pub fn run_shard(
    plans: &[Plan],
    jobs: Option<usize>,
    shard: Shard,
    study: Study,
    out: &Path,
) -> Result<std::process::ExitCode> {
    let pool = rxsched::flags::pool(jobs)?;
    let work: Vec<(usize, usize)> = plans
        .iter()
        .enumerate()
        .flat_map(|(p, plan)| (0..plan.jobs.len()).map(move |j| (p, j)))
        .enumerate()
        .filter(|(i, _)| shard.picks(*i as u64))
        .map(|(_, w)| w)
        .collect();
    let total: usize = plans.iter().map(|p| p.jobs.len()).sum();
    let bar = bar(work.len() as u64, "runs");
    let outs: Vec<_> = pool.install(|| {
        work.par_iter()
            .map(|&(p, j)| {
                let (plan, job) = (&plans[p], &plans[p].jobs[j]);
                let r = figure::run_job(job, plan).map(|(m, s)| ShardRun {
                    plan: p,
                    job: j,
                    points: figure::RunPoints::of(plan, job, &m, &s),
                });
                bar.inc(1);
                r
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut m = Manifest::new(shard, study);
    m.plans = plans.iter().map(plan_mark).collect();
    m.runs = outs.into_iter().collect::<std::result::Result<_, _>>()?;
    let path = m.write(out)?;
    rxsched::out::line(&format!(
        "shard {}/{}: {} of {} runs -> {}; join the shards with `rxsched merge DIR... --out DIR`",
        shard.k,
        shard.n,
        m.runs.len(),
        total,
        path.display()
    ))?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// What a shard records of a plan.
pub fn plan_mark(plan: &Plan) -> PlanMark {
    PlanMark {
        id: plan.file.exp.id.clone().unwrap_or_else(|| "sweep".into()),
        jobs: plan.jobs.len(),
        fingerprint: figure::fingerprint(plan),
    }
}

/// The directory a file is in: `.` for a bare file name (whose parent is
/// the empty path).
pub fn dir_of(file: &Path) -> &Path {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Writes a result's files into `out`; a failure names the directory.
pub fn write(out: &Path, r: &ResultFile) -> Result<()> {
    rxsched::report::write_all(out, r).map_err(|e| out_error(out, e))
}

/// Refreshes `out/index.html`; a failure names the directory.
pub fn write_index(out: &Path) -> Result<()> {
    rxsched::report::write_index(out).map_err(|e| out_error(out, e))
}

fn out_error(out: &Path, e: std::io::Error) -> Error {
    Error::flag(
        "out",
        format!("cannot write results to {}: {e}", out.display()),
    )
}

/// One line per result: series, checks passed and failed, time, file.
pub fn summary(r: &ResultFile, wall_ms: f64, out: &Path) -> String {
    let failed = r
        .checks
        .iter()
        .filter(|c| !c.pass && c.known_miss.is_none())
        .count();
    let missed = r
        .checks
        .iter()
        .filter(|c| !c.pass && c.known_miss.is_some())
        .count();
    let mut s = format!(
        "{}: {} series, {} checks passed, {} failed{} ({:.0} ms of simulation) -> {}",
        r.id,
        r.series.len(),
        r.checks.iter().filter(|c| c.pass).count(),
        failed,
        if missed > 0 {
            format!(", {missed} known misses")
        } else {
            String::new()
        },
        wall_ms,
        out.join(format!("{}.json", r.id)).display()
    );
    for c in r.checks.iter().filter(|c| !c.pass) {
        let what = if c.known_miss.is_some() {
            "MISSED (known)"
        } else {
            "FAILED"
        };
        s += &format!("\n  {what} {}: {}", c.name, c.detail);
    }
    s
}

/// Exit status 0 if every result passed, 1 otherwise.
pub fn verdict(ok: bool) -> std::process::ExitCode {
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}
