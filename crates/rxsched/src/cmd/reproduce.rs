//! `rxsched reproduce`: the published figures.

use super::{run_plans, run_shard, summary, verdict, write, write_index};
use rxsched::error::{Error, Result};
use rxsched::experiments;
use rxsched::experiments::ExperimentFile;
use rxsched::figure::{self, Options, Plan};
use rxsched::result::ResultFile;
use rxsched::shard::{Shard, Study};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// `reproduce --list`: every id with its title and source.
pub fn list() -> Result<ExitCode> {
    for (id, src) in experiments::ALL {
        let f = ExperimentFile::parse(id, src.to_string(), None)?;
        rxsched::out::line(&format!(
            "{id:<16} {} [{}]",
            f.exp.title.as_deref().unwrap_or(""),
            f.exp.source.as_deref().unwrap_or("")
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One experiment to run: built in, or a user's scenario file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Chosen {
    Builtin(&'static str),
    File(PathBuf),
}

/// Whether `arg` names a scenario file rather than an id: it ends in
/// `.toml` or contains a path separator.
fn is_path(arg: &str) -> bool {
    arg.ends_with(".toml") || arg.contains(std::path::MAIN_SEPARATOR) || arg.contains('/')
}

/// The experiments `ids` name: ids, `all`, a prefix such as `spanos-fig5`,
/// or the path of a scenario file with its own figure and checks.
fn choose(ids: &[String]) -> Result<Vec<Chosen>> {
    if ids.is_empty() {
        return Err(Error::Input(
            "name experiments to reproduce, or `all`; `--list` shows them".into(),
        ));
    }
    let mut chosen: Vec<Chosen> = Vec::new();
    for id in ids {
        let all = experiments::ALL.iter().map(|(i, _)| *i);
        if id == "all" {
            chosen.extend(all.map(Chosen::Builtin));
        } else if let Some(i) = all.clone().find(|i| i == id) {
            chosen.push(Chosen::Builtin(i));
        } else if is_path(id) {
            chosen.push(Chosen::File(PathBuf::from(id)));
        } else {
            let prefixed: Vec<&str> = all.filter(|i| i.starts_with(&format!("{id}-"))).collect();
            if prefixed.is_empty() {
                return Err(Error::Input(format!(
                    "unknown experiment id {id:?}; `rxsched reproduce --list` shows them, \
                     and a scenario file is named by its path (`./{id}.toml`)"
                )));
            }
            chosen.extend(prefixed.into_iter().map(Chosen::Builtin));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    chosen.retain(|i| seen.insert(i.clone()));
    Ok(chosen)
}

/// The figures `reproduce ids` runs, planned.
pub fn plans(ids: &[String], opts: &Options) -> Result<Vec<Plan>> {
    let mut plans = Vec::new();
    for chosen in choose(ids)? {
        let f = match chosen {
            Chosen::Builtin(id) => {
                let src = experiments::get(id).expect("chosen ids exist");
                ExperimentFile::parse(&format!("experiments/{id}.toml"), src.to_string(), None)?
            }
            Chosen::File(path) => ExperimentFile::read(&path)?,
        };
        plans.push(figure::plan(&f, None, opts)?);
    }
    Ok(plans)
}

/// `reproduce ID...`; with `--shard K/N` only that shard's runs, kept for
/// `rxsched merge`.
pub fn run(
    ids: &[String],
    out: &Path,
    opts: Options,
    sets: &[String],
    jobs: Option<usize>,
    shard: Option<Shard>,
) -> Result<ExitCode> {
    let plans = plans(ids, &opts)?;
    if let Some(shard) = shard {
        let study = Study::Reproduce {
            ids: ids.to_vec(),
            quick: opts.quick,
            seed: opts.seed,
            sets: sets.to_vec(),
        };
        return run_shard(&plans, jobs, shard, study, out);
    }
    let t0 = Instant::now();
    let results = run_plans(&plans, jobs)?;
    finish(&results, out, t0)
}

/// Writes finished figures and the report, one summary line each.
pub fn finish(results: &[(ResultFile, f64)], out: &Path, t0: Instant) -> Result<ExitCode> {
    let mut ok = true;
    for (r, wall) in results {
        write(out, r)?;
        rxsched::out::line(&summary(r, *wall, out))?;
        ok &= r.passed();
    }
    write_index(out)?;
    rxsched::out::line(&format!(
        "{} experiments in {:.1} s; report: {}",
        results.len(),
        t0.elapsed().as_secs_f64(),
        out.join("index.html").display()
    ))?;
    Ok(verdict(ok))
}
