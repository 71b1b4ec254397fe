//! `rxsched merge DIR... --out DIR`: the shards of a study (`--shard K/N`)
//! joined into what the whole study would have written.

use super::{plan_mark, reproduce, sweep};
use rxsched::error::{Error, Result};
use rxsched::experiments::SearchCfg;
use rxsched::figure::{self, Options, Plan, RunPoints};
use rxsched::shard::{self, Manifest, Study, SwarmPart};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Joins the shards found in `dirs` into `out`.
pub fn run(dirs: &[PathBuf], out: &Path) -> Result<ExitCode> {
    if dirs.is_empty() {
        return Err(Error::Input(
            "name the shards' directories: rxsched merge DIR... --out DIR".into(),
        ));
    }
    let t0 = Instant::now();
    let shards = shard::read_all(dirs)?;
    let study = shards[0].1.study.clone();
    let plans = match &study {
        Study::Swarm { seed, .. } => return swarm(&shards, *seed, out),
        Study::Reproduce {
            ids,
            quick,
            seed,
            sets,
        } => {
            let opts = Options {
                quick: *quick,
                seed: *seed,
                sets: super::parse_sets(sets)?,
            };
            reproduce::plans(ids, &opts)?
        }
        Study::Sweep {
            scenario,
            vary,
            y,
            sets,
            search,
        } => {
            let search = search.map(|(resolution, trial_ms)| SearchCfg {
                resolution,
                trial_ms,
            });
            vec![sweep::plan(scenario, vary, y.clone(), sets, search)?]
        }
    };
    let results = assemble(&plans, &shards)?;
    reproduce::finish(&results, out, t0)
}

/// The study's figures from the shards' runs, once each planned here and
/// checked against what the shards planned.
fn assemble(
    plans: &[Plan],
    shards: &[(PathBuf, Manifest)],
) -> Result<Vec<(rxsched::result::ResultFile, f64)>> {
    let marks: Vec<_> = plans.iter().map(plan_mark).collect();
    let (first, m0) = &shards[0];
    if marks != m0.plans {
        let which = marks
            .iter()
            .zip(&m0.plans)
            .find(|(a, b)| a != b)
            .map_or("the number of figures".to_string(), |(a, _)| a.id.clone());
        return Err(Error::Input(format!(
            "{}: the study is planned differently here ({which}): another version of rxsched, or other experiment files",
            first.display()
        )));
    }
    let mut got: Vec<Vec<Option<RunPoints>>> =
        plans.iter().map(|p| vec![None; p.jobs.len()]).collect();
    for (path, m) in shards {
        for r in &m.runs {
            let slot = got
                .get_mut(r.plan)
                .and_then(|p| p.get_mut(r.job))
                .ok_or_else(|| {
                    Error::Input(format!(
                        "{}: run {} of figure {} is not in the study",
                        path.display(),
                        r.job,
                        r.plan
                    ))
                })?;
            if slot.replace(r.points.clone()).is_some() {
                return Err(Error::Input(format!(
                    "{}: run {} of {} is in two shards",
                    path.display(),
                    r.job,
                    plans[r.plan].file.exp.id.as_deref().unwrap_or("sweep")
                )));
            }
        }
    }
    plans
        .iter()
        .zip(got)
        .map(|(plan, runs)| {
            let id = plan.file.exp.id.as_deref().unwrap_or("sweep");
            let runs: Vec<RunPoints> = runs
                .into_iter()
                .enumerate()
                .map(|(j, r)| {
                    r.ok_or_else(|| Error::Input(format!("run {j} of {id} is in no shard given")))
                })
                .collect::<Result<_>>()?;
            let wall = runs.iter().map(|r| r.wall_ms).sum();
            Ok((figure::assemble_points(plan, runs), wall))
        })
        .collect()
}

/// A swarm's shards: their cases added up, failing cases' files copied
/// into `out`, printed as the whole swarm prints.
fn swarm(shards: &[(PathBuf, Manifest)], seed: u64, out: &Path) -> Result<ExitCode> {
    let mut all = SwarmPart::default();
    for (path, m) in shards {
        let part = m.swarm.as_ref().ok_or_else(|| {
            Error::Input(format!(
                "{}: a swarm shard without its cases",
                path.display()
            ))
        })?;
        all.runs += part.runs;
        all.packets += part.packets;
        all.events += part.events;
        all.redraws += part.redraws;
        all.wall_s = all.wall_s.max(part.wall_s);
        for (k, n) in &part.covers {
            *all.covers.entry(k.clone()).or_default() += n;
        }
        let dir = super::dir_of(path);
        for f in &part.failures {
            let (from, to) = (dir.join(&f.2), out.join(&f.2));
            let same = std::fs::canonicalize(&from).ok() == std::fs::canonicalize(&to).ok();
            std::fs::create_dir_all(out)
                .and_then(|_| {
                    if same {
                        Ok(0)
                    } else {
                        std::fs::copy(&from, &to)
                    }
                })
                .map_err(|e| {
                    Error::Run(format!(
                        "cannot copy {} into {}: {e}",
                        dir.join(&f.2).display(),
                        out.display()
                    ))
                })?;
            all.failures.push(f.clone());
        }
    }
    all.failures.sort_by_key(|f| f.0);
    rxsched::out::print(&super::swarm::text(&all, seed, out))?;
    Ok(super::verdict(all.failures.is_empty()))
}
