//! Studies bigger than one machine: `--shard K/N` runs every N-th run of a
//! study (from the K-th) and keeps what each gave in `DIR/shard-K-of-N.json`;
//! `rxsched merge` joins the shards into the result the whole study would
//! have written, byte for byte apart from wall times.
//!
//! A shard is judged against the study it claims to be part of: the merge
//! plans the study again from the command the shard recorded and refuses
//! shards whose plans differ (another version of rxsched, other experiment
//! files), shards of different studies, and a set with a shard missing or
//! given twice.

use crate::error::{Error, Result};
use crate::figure::RunPoints;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The schema tag of a shard file.
pub const SCHEMA: &str = "rxsched.shard/1";

/// Shard `k` of `n` (1-based): the runs whose index in the study is `k - 1`
/// modulo `n`, so that every shard gets runs of every experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, from 1.
    pub k: u32,
    /// Of how many.
    pub n: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let bad = || format!("{s:?} is not K/N with 1 <= K <= N (e.g. 2/8)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (u32, u32) = match (k.trim().parse(), n.trim().parse()) {
            (Ok(k), Ok(n)) => (k, n),
            _ => return Err(bad()),
        };
        if k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl Shard {
    /// Whether the run at `index` in the study is this shard's.
    pub fn picks(&self, index: u64) -> bool {
        index % u64::from(self.n) == u64::from(self.k - 1)
    }

    /// The shard's file name.
    pub fn file_name(&self) -> String {
        format!("shard-{}-of-{}.json", self.k, self.n)
    }
}

/// The study a shard is part of, as its command gave it: enough to plan
/// it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Study {
    /// `reproduce IDS... [--quick] [--seed S] [--set ...]`.
    Reproduce {
        /// The ids (or scenario files) named.
        ids: Vec<String>,
        /// `--quick`.
        quick: bool,
        /// `--seed`.
        seed: Option<u64>,
        /// `--set`s.
        sets: Vec<String>,
    },
    /// `sweep SCENARIO --vary ... [--y] [--set ...] [--throughput ...]`.
    Sweep {
        /// The scenario file.
        scenario: PathBuf,
        /// `--vary`.
        vary: String,
        /// `--y`.
        y: Option<String>,
        /// `--set`s.
        sets: Vec<String>,
        /// With `--throughput`: the search's resolution and trial length.
        search: Option<(f64, f64)>,
    },
    /// `swarm --runs R --seed S --timeout T`.
    Swarm {
        /// `--runs`.
        runs: u64,
        /// `--seed`.
        seed: u64,
    },
}

/// A planned figure of the study, as the shard saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanMark {
    /// The experiment's id.
    pub id: String,
    /// Its runs.
    pub jobs: usize,
    /// [`crate::figure::fingerprint`].
    pub fingerprint: String,
}

/// One run a shard did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRun {
    /// Its figure, an index into the study's plans.
    pub plan: usize,
    /// Its index among the figure's runs.
    pub job: usize,
    /// What it gave.
    #[serde(flatten)]
    pub points: RunPoints,
}

/// What a swarm shard found (its cases' totals).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SwarmPart {
    /// Cases run.
    pub runs: u64,
    /// Failing cases: seed, what, and the scenario file's name in the
    /// shard's directory.
    pub failures: Vec<(u64, String, String)>,
    /// Packets over the passing cases.
    pub packets: u64,
    /// Events over the passing cases.
    pub events: u64,
    /// Draws refused and drawn again.
    pub redraws: u64,
    /// Cases per kind and switch covered.
    pub covers: BTreeMap<String, u64>,
    /// Wall time, in s.
    pub wall_s: f64,
}

/// A shard file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`SCHEMA`].
    pub schema: String,
    /// rxsched's version.
    pub version: String,
    /// Which shard.
    pub shard: Shard,
    /// The study.
    pub study: Study,
    /// Its figures, as planned (reproduce and sweep).
    #[serde(default)]
    pub plans: Vec<PlanMark>,
    /// The runs this shard did (reproduce and sweep).
    #[serde(default)]
    pub runs: Vec<ShardRun>,
    /// What its cases found (swarm).
    #[serde(default)]
    pub swarm: Option<SwarmPart>,
}

impl Manifest {
    /// A shard's file, not yet filled in.
    pub fn new(shard: Shard, study: Study) -> Manifest {
        Manifest {
            schema: SCHEMA.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            shard,
            study,
            plans: Vec::new(),
            runs: Vec::new(),
            swarm: None,
        }
    }

    /// Writes it into `dir` as `shard-K-of-N.json`; returns the path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let io = |e: std::io::Error| {
            Error::flag("out", format!("cannot write to {}: {e}", dir.display()))
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(self.shard.file_name());
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::Run(e.to_string()))?;
        std::fs::write(&path, json + "\n").map_err(io)?;
        Ok(path)
    }
}

/// Every shard file in `dirs` (`shard-K-of-N.json`), read, with its path;
/// checked to be of one study, of one N, and each K once and all there.
pub fn read_all(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, Manifest)>> {
    let mut found = Vec::new();
    for d in dirs {
        let entries = std::fs::read_dir(d).map_err(|e| {
            Error::Input(format!("{}: cannot read the directory: {e}", d.display()))
        })?;
        let mut here: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("shard-") && n.ends_with(".json"))
            })
            .collect();
        if here.is_empty() {
            return Err(Error::Input(format!(
                "{}: no shard file (shard-K-of-N.json) in it; run the study with --shard K/N --out {}",
                d.display(),
                d.display()
            )));
        }
        here.sort();
        for p in here {
            let text = std::fs::read_to_string(&p)
                .map_err(|e| Error::Input(format!("{}: {e}", p.display())))?;
            let m: Manifest = serde_json::from_str(&text)
                .map_err(|e| Error::Input(format!("{}: not a shard file: {e}", p.display())))?;
            if m.schema != SCHEMA {
                return Err(Error::Input(format!(
                    "{}: schema {:?}, expected {SCHEMA:?}",
                    p.display(),
                    m.schema
                )));
            }
            found.push((p, m));
        }
    }
    check_set(&found)?;
    found.sort_by_key(|(_, m)| m.shard.k);
    Ok(found)
}

/// The shards are of one study and one N, each K once, none missing.
fn check_set(found: &[(PathBuf, Manifest)]) -> Result<()> {
    let (p0, first) = &found[0];
    let mut seen: BTreeMap<u32, &Path> = BTreeMap::new();
    for (p, m) in found {
        let differs = |what: &str| {
            Err(Error::Input(format!(
                "{} and {} are shards of different studies ({what} differs)",
                p0.display(),
                p.display()
            )))
        };
        if m.study != first.study {
            return differs("the command");
        }
        if m.shard.n != first.shard.n {
            return differs("the number of shards");
        }
        if m.version != first.version {
            return differs("rxsched's version");
        }
        if m.plans != first.plans {
            return differs("the plan");
        }
        if let Some(other) = seen.insert(m.shard.k, p) {
            return Err(Error::Input(format!(
                "shard {}/{} given twice: {} and {}",
                m.shard.k,
                m.shard.n,
                other.display(),
                p.display()
            )));
        }
    }
    let missing: Vec<String> = (1..=first.shard.n)
        .filter(|k| !seen.contains_key(k))
        .map(|k| format!("{k}/{}", first.shard.n))
        .collect();
    if !missing.is_empty() {
        return Err(Error::Input(format!(
            "shard{} {} missing (give every shard's directory)",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_the_runs_once_each() {
        let shards: Vec<Shard> = (1..=3).map(|k| format!("{k}/3").parse().unwrap()).collect();
        for i in 0..20u64 {
            assert_eq!(shards.iter().filter(|s| s.picks(i)).count(), 1);
        }
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
