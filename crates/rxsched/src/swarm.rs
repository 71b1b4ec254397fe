//! Runs many swarm cases (`rxsched_sim::swarm`) in parallel, each under a
//! wall-clock watchdog, and writes every failing case as a scenario file.

use crate::error::{Error, Result};
use rayon::prelude::*;
use rxsched_sim::swarm;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The first case's seed; case `i` uses `seed + i`.
    pub seed: u64,
    /// How many cases.
    pub runs: u64,
    /// Worker threads (default: one per core).
    pub jobs: Option<usize>,
    /// A case running longer than this (both runs together) is a hang.
    pub timeout: Duration,
    /// Where failing cases are written.
    pub out: PathBuf,
    /// Only this shard's cases (case `i` is shard `i mod N + 1`'s).
    pub shard: Option<crate::shard::Shard>,
}

/// A failing case.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Its seed.
    pub seed: u64,
    /// What went wrong.
    pub what: String,
    /// The scenario file that reproduces it.
    pub file: PathBuf,
}

/// What a swarm did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Cases run to the end (passed or failed).
    pub runs: u64,
    /// Failing cases.
    pub failures: Vec<Failure>,
    /// Packets that arrived over all passing cases (one run of each).
    pub packets: u64,
    /// Events the model handled over all passing cases (one run of each).
    pub events: u64,
    /// Draws the validator refused and the generator drew again.
    pub redraws: u64,
    /// Wall time.
    pub wall: Duration,
    /// How many cases exercised each kind and switch.
    pub covers: BTreeMap<String, u64>,
}

/// Writes a case's scenario file into `out`; returns its path.
pub fn write_case(out: &Path, case: &swarm::Case) -> Result<PathBuf> {
    std::fs::create_dir_all(out)
        .map_err(|e| Error::Run(format!("--out: cannot create {}: {e}", out.display())))?;
    let path = out.join(format!("swarm-{}.toml", case.seed));
    std::fs::write(&path, &case.toml)
        .map_err(|e| Error::Run(format!("--out: cannot write {}: {e}", path.display())))?;
    Ok(path)
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// What the workers share: which case each runs and since when (for the
/// watchdog), and what the cases add up to.
struct Shared {
    running: Mutex<Vec<Option<(u64, Instant)>>>,
    done: AtomicBool,
    packets: AtomicU64,
    events: AtomicU64,
    redraws: AtomicU64,
    covers: Mutex<BTreeMap<String, u64>>,
    failures: Mutex<Vec<Failure>>,
}

/// Runs the cases. `tick` is called once per finished case (a progress
/// bar). A case that outlives the timeout is written out and reported, and
/// the process exits 1: a hung simulation cannot be stopped from outside
/// its thread.
pub fn run(cfg: &Config, tick: &(dyn Fn() + Sync)) -> Result<Summary> {
    let pool = crate::flags::pool(cfg.jobs)?;
    let shared = Shared {
        running: Mutex::new(vec![None; pool.current_num_threads()]),
        done: AtomicBool::new(false),
        packets: AtomicU64::new(0),
        events: AtomicU64::new(0),
        redraws: AtomicU64::new(0),
        covers: Mutex::default(),
        failures: Mutex::default(),
    };
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| watchdog(cfg, &shared));
        pool.install(|| {
            (0..cfg.runs)
                .into_par_iter()
                .filter(|i| cfg.shard.is_none_or(|s| s.picks(*i)))
                .for_each(|i| {
                    one_case(cfg, &shared, cfg.seed.wrapping_add(i));
                    tick();
                });
        });
        shared.done.store(true, Ordering::Relaxed);
    });
    let mut failures = shared.failures.into_inner().expect("failures");
    failures.sort_by_key(|f| f.seed);
    let runs = (0..cfg.runs)
        .filter(|i| cfg.shard.is_none_or(|s| s.picks(*i)))
        .count() as u64;
    Ok(Summary {
        runs,
        failures,
        packets: shared.packets.into_inner(),
        events: shared.events.into_inner(),
        redraws: shared.redraws.into_inner(),
        wall: t0.elapsed(),
        covers: shared.covers.into_inner().expect("covers"),
    })
}

/// Until the cases are done: a case running longer than the timeout is
/// written out, and the process exits 1.
fn watchdog(cfg: &Config, shared: &Shared) {
    while !shared.done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        let late = shared
            .running
            .lock()
            .expect("watchdog lock")
            .iter()
            .flatten()
            .find(|(_, t)| t.elapsed() > cfg.timeout)
            .copied();
        if let Some((seed, _)) = late {
            let case = swarm::case(seed);
            let file = write_case(&cfg.out, &case)
                .map_or_else(|e| e.to_string(), |p| p.display().to_string());
            eprintln!(
                "rxsched swarm: seed {seed} ran longer than {:?} (a hang); the case: {file}",
                cfg.timeout
            );
            std::process::exit(1);
        }
    }
}

/// Runs case `seed` on this worker and adds what it did, or its failure
/// (with the case written out), to `shared`.
fn one_case(cfg: &Config, shared: &Shared, seed: u64) {
    let slot = rayon::current_thread_index().unwrap_or(0);
    shared.running.lock().expect("slot lock")[slot] = Some((seed, Instant::now()));
    let result = catch_unwind(AssertUnwindSafe(|| {
        let case = swarm::case(seed);
        let r = swarm::check(&case);
        (case, r)
    }));
    shared.running.lock().expect("slot lock")[slot] = None;
    let (case, what) = match result {
        Ok((case, Ok(o))) => {
            shared.packets.fetch_add(o.packets, Ordering::Relaxed);
            shared.events.fetch_add(o.events, Ordering::Relaxed);
            shared
                .redraws
                .fetch_add(u64::from(case.redraws), Ordering::Relaxed);
            let mut c = shared.covers.lock().expect("covers lock");
            for k in &case.covers {
                *c.entry(k.clone()).or_default() += 1;
            }
            return;
        }
        Ok((case, Err(what))) => (Some(case), what),
        Err(p) => (
            catch_unwind(|| swarm::case(seed)).ok(),
            format!("panicked: {}", panic_text(&*p)),
        ),
    };
    let file = case
        .and_then(|c| write_case(&cfg.out, &c).ok())
        .unwrap_or_default();
    shared
        .failures
        .lock()
        .expect("failures lock")
        .push(Failure { seed, what, file });
}
