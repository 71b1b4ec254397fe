//! `rxsched`: reproduce the receive-livelock papers, simulate your own
//! scenarios, and (later) run the policies on real interfaces.

mod real;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use rxsched::figure::{self, Options, Plan, ResultFile};
use rxsched::{experiments, report};
use rxsched_sim::scenario::{parse_set, Axis, FigureCfg, FigureKind};
use rxsched_sim::{InputError, Loaded, SimError};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "rxsched",
    version,
    about = "Receive-livelock scheduling: simulator, reproductions and a real dataplane"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Reproduce published figures (`all` for every one).
    Reproduce {
        /// Experiment ids, or `all`.
        ids: Vec<String>,
        /// List the experiments and exit.
        #[arg(long)]
        list: bool,
        /// Where results go.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Fewer points and shorter runs, same verdicts.
        #[arg(long)]
        quick: bool,
        /// Simulations run in parallel (default: one per core).
        #[arg(long)]
        jobs: Option<usize>,
        /// Seed for every run (default: each scenario's own).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Run one scenario once and print its metrics record.
    Sim {
        /// The scenario file.
        scenario: PathBuf,
        /// Override a key, e.g. `--set kernel.quota=5` or `--set traffic.rate_pps=8000`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sweep one parameter of a scenario and write a figure.
    Sweep {
        /// The scenario file.
        scenario: PathBuf,
        /// `KEY=V1,V2,...` or `KEY=FROM:TO:STEP`.
        #[arg(long)]
        vary: String,
        /// The metric to plot (default: the scenario's figure y, or delivered_pps).
        #[arg(long)]
        y: Option<String>,
        /// Override a key in every run.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Where results go.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Simulations run in parallel.
        #[arg(long)]
        jobs: Option<usize>,
        /// At each value, search for the RFC 2544 throughput (the highest
        /// rate per source with zero loss) instead of running once.
        #[arg(long)]
        throughput: bool,
        /// Search resolution, as a fraction of the line rate.
        #[arg(long, default_value_t = 0.002)]
        resolution: f64,
        /// Length of one search trial, in ms.
        #[arg(long, default_value_t = 100.0)]
        trial_ms: f64,
    },
    /// List the machine profiles and what each cost was calibrated from.
    Profiles,
    /// The lab of network namespaces (root).
    Lab {
        #[command(subcommand)]
        cmd: real::LabCmd,
    },
    /// Send rate-controlled UDP with sequence numbers and send times.
    Gen(real::GenArgs),
    /// Receive the generator's UDP: loss, reordering, latency.
    Sink(real::SinkArgs),
    /// Forward IPv4 between interfaces with interrupt-driven or polled receive.
    Route(real::RouteArgs),
    /// Benchmarks: `bench real router` sweeps the real dataplane in the lab.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// A compute-bound process that reports the CPU share it got.
    Spin {
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// Seconds to run.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
    },
}

#[derive(Subcommand)]
enum BenchWhat {
    /// On the real dataplane, in the lab (`rxsched lab up` first; root).
    Real {
        #[command(subcommand)]
        which: RealBench,
    },
}

#[derive(Subcommand)]
enum RealBench {
    /// Kernel, interrupt-driven and polling forwarding, swept over offered load.
    Router {
        /// Fewer points and shorter trials.
        #[arg(long)]
        quick: bool,
        /// Where results go.
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
}

/// What went wrong, and which exit status it earns.
enum Failure {
    Input(String),
    Run(String),
}

impl From<InputError> for Failure {
    fn from(e: InputError) -> Self {
        Failure::Input(e.to_string())
    }
}

impl From<SimError> for Failure {
    fn from(e: SimError) -> Self {
        match e {
            SimError::Input(e) => Failure::Input(e.to_string()),
            e => Failure::Run(e.to_string()),
        }
    }
}

impl From<real::RealError> for Failure {
    fn from(e: real::RealError) -> Self {
        match e {
            real::RealError::Input(m) => Failure::Input(m),
            real::RealError::Run(m) => Failure::Run(m),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Run(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Reproduce {
            ids,
            list,
            out,
            quick,
            jobs,
            seed,
        } => reproduce(ids, list, &out, quick, jobs, seed),
        Cmd::Sim {
            scenario,
            sets,
            json,
        } => sim(&scenario, &sets, json),
        Cmd::Sweep {
            scenario,
            vary,
            y,
            sets,
            out,
            jobs,
            throughput,
            resolution,
            trial_ms,
        } => {
            let search = throughput.then_some(rxsched_sim::scenario::SearchCfg {
                resolution,
                trial_ms,
            });
            sweep(&scenario, &vary, y, &sets, &out, jobs, search)
        }
        Cmd::Profiles => profiles(),
        Cmd::Lab { cmd } => real::lab_cmd(cmd)
            .map(|_| ExitCode::SUCCESS)
            .map_err(Failure::from),
        Cmd::Gen(a) => real::gen(a)
            .map(|_| ExitCode::SUCCESS)
            .map_err(Failure::from),
        Cmd::Sink(a) => real::sink(a)
            .map(|_| ExitCode::SUCCESS)
            .map_err(Failure::from),
        Cmd::Route(a) => real::route(a)
            .map(|_| ExitCode::SUCCESS)
            .map_err(Failure::from),
        Cmd::Bench {
            what:
                BenchWhat::Real {
                    which: RealBench::Router { quick, out },
                },
        } => bench_router(quick, &out),
        Cmd::Spin { cpu, duration } => real::spin(cpu, duration)
            .map(|_| ExitCode::SUCCESS)
            .map_err(Failure::from),
    };
    match r {
        Ok(code) => code,
        Err(Failure::Input(m)) => {
            eprintln!("rxsched: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Run(m)) => {
            eprintln!("rxsched: {m}");
            ExitCode::from(1)
        }
    }
}

fn parse_sets(sets: &[String]) -> Result<Vec<(String, toml::Value)>, Failure> {
    Ok(sets
        .iter()
        .map(|s| parse_set(s))
        .collect::<Result<_, _>>()?)
}

fn pool(jobs: Option<usize>) -> Result<rayon::ThreadPool, Failure> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = jobs {
        if n == 0 {
            return Err(Failure::Input("--jobs: must be at least 1".into()));
        }
        b = b.num_threads(n);
    }
    b.build().map_err(|e| Failure::Run(e.to_string()))
}

/// Runs every job of every plan in one parallel pass, with a progress bar
/// on a terminal, and assembles the results in plan order.
fn run_plans(plans: &[Plan], jobs: Option<usize>) -> Result<Vec<(ResultFile, f64)>, Failure> {
    let pool = pool(jobs)?;
    let work: Vec<(usize, usize)> = plans
        .iter()
        .enumerate()
        .flat_map(|(p, plan)| (0..plan.jobs.len()).map(move |j| (p, j)))
        .collect();
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::new(work.len() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} runs ({eta} left)",
            )
            .expect("valid template"),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let outs: Vec<Result<(rxsched_sim::Metrics, rxsched_sim::Samples), SimError>> =
        pool.install(|| {
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
            .collect::<Result<_, _>>()?;
        let wall: f64 = mine.iter().map(|(m, _)| m.wall_ms).sum();
        results.push((figure::assemble(plan, mine), wall));
    }
    Ok(results)
}

fn summary(r: &ResultFile, wall_ms: f64, out: &Path) -> String {
    let failed = r.checks.iter().filter(|c| !c.pass).count();
    let mut s = format!(
        "{}: {} series, {} checks passed, {} failed ({:.0} ms of simulation) -> {}",
        r.id,
        r.series.len(),
        r.checks.len() - failed,
        failed,
        wall_ms,
        out.join(format!("{}.json", r.id)).display()
    );
    for c in r.checks.iter().filter(|c| !c.pass) {
        s += &format!("\n  FAILED {}: {}", c.name, c.detail);
    }
    s
}

fn reproduce(
    ids: Vec<String>,
    list: bool,
    out: &Path,
    quick: bool,
    jobs: Option<usize>,
    seed: Option<u64>,
) -> Result<ExitCode, Failure> {
    if list {
        for (id, src) in experiments::ALL {
            let l = Loaded::parse(id, src.to_string(), None)?;
            let s = &l.scenario;
            println!(
                "{id:<16} {} [{}]",
                s.title.as_deref().unwrap_or(""),
                s.source.as_deref().unwrap_or("")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if ids.is_empty() {
        return Err(Failure::Input(
            "name experiments to reproduce, or `all`; `--list` shows them".into(),
        ));
    }
    let mut chosen: Vec<&str> = Vec::new();
    for id in &ids {
        if id == "all" {
            chosen.extend(experiments::ALL.iter().map(|(i, _)| *i));
        } else if experiments::get(id).is_some() {
            chosen.push(id);
        } else {
            let prefixed: Vec<&str> = experiments::ALL
                .iter()
                .map(|(i, _)| *i)
                .filter(|i| i.starts_with(&format!("{id}-")))
                .collect();
            if prefixed.is_empty() {
                return Err(Failure::Input(format!(
                    "unknown experiment id {id:?}; `rxsched reproduce --list` shows them"
                )));
            }
            chosen.extend(prefixed);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    chosen.retain(|i| seen.insert(*i));
    let opts = Options {
        quick,
        seed,
        sets: Vec::new(),
    };
    let mut plans = Vec::new();
    for id in &chosen {
        let src = experiments::get(id).expect("chosen ids exist");
        let l = Loaded::parse(&format!("experiments/{id}.toml"), src.to_string(), None)?;
        plans.push(figure::plan(&l, None, &opts)?);
    }
    let t0 = Instant::now();
    let results = run_plans(&plans, jobs)?;
    let mut ok = true;
    for (r, wall) in &results {
        report::write_all(out, r)?;
        println!("{}", summary(r, *wall, out));
        ok &= r.passed();
    }
    report::write_index(out)?;
    println!(
        "{} experiments in {:.1} s; report: {}",
        results.len(),
        t0.elapsed().as_secs_f64(),
        out.join("index.html").display()
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn sim(path: &Path, sets: &[String], json: bool) -> Result<ExitCode, Failure> {
    let l = Loaded::read(path)?;
    let s = l.with(&parse_sets(sets)?)?;
    let t0 = Instant::now();
    let (mut m, _) = rxsched_sim::run(&s, l.dir.as_deref())?;
    m.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&m).map_err(|e| Failure::Run(e.to_string()))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "offered     {:>10.0} pkts/s   delivered {:>10.0} pkts/s",
        m.offered_pps, m.delivered_pps
    );
    println!(
        "arrived     {:>10}          delivered {:>10}   in flight {}",
        m.arrived, m.delivered, m.in_flight
    );
    let drops: Vec<String> = m.drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "drops       {}",
        if drops.is_empty() {
            "none".into()
        } else {
            drops.join(", ")
        }
    );
    let cpu: Vec<String> = m
        .cpu
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(k, v)| format!("{k} {:.1}%", v * 100.0))
        .collect();
    println!("cpu         {}", cpu.join(", "));
    println!("interrupts  rx {}  tx {}", m.interrupts.rx, m.interrupts.tx);
    println!(
        "latency     p50 {:.0} µs  p90 {:.0}  p99 {:.0}  max {:.0}",
        m.latency_us.p50, m.latency_us.p90, m.latency_us.p99, m.latency_us.max
    );
    let inh: Vec<String> = m.inhibits.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "inhibits    {}   mode switches {}",
        if inh.is_empty() {
            "none".into()
        } else {
            inh.join(", ")
        },
        m.mode_switches
    );
    println!("events      {} in {:.1} ms", m.events, m.wall_ms);
    Ok(ExitCode::SUCCESS)
}

/// Parses `KEY=V1,V2` or `KEY=FROM:TO:STEP`.
fn parse_vary(vary: &str) -> Result<(String, Vec<f64>), Failure> {
    let bad = |m: &str| Failure::Input(format!("--vary {vary:?}: {m}"));
    let (k, v) = vary
        .split_once('=')
        .ok_or_else(|| bad("expected KEY=LIST or KEY=FROM:TO:STEP"))?;
    let num = |s: &str| {
        s.trim()
            .parse::<f64>()
            .map_err(|_| bad(&format!("{s:?} is not a number")))
    };
    let values = if v.contains(':') {
        let p: Vec<&str> = v.split(':').collect();
        if p.len() != 3 {
            return Err(bad("a range is FROM:TO:STEP"));
        }
        let (from, to, step) = (num(p[0])?, num(p[1])?, num(p[2])?);
        if step.is_nan() || step <= 0.0 || to < from {
            return Err(bad("need FROM <= TO and STEP > 0"));
        }
        let n = ((to - from) / step + 1e-9).floor() as usize;
        if n > 10_000 {
            return Err(bad("more than 10,000 points"));
        }
        (0..=n).map(|i| from + step * i as f64).collect()
    } else {
        v.split(',').map(num).collect::<Result<Vec<_>, _>>()?
    };
    if values.is_empty() {
        return Err(bad("no values"));
    }
    Ok((k.trim().to_string(), values))
}

fn sweep(
    path: &Path,
    vary: &str,
    y: Option<String>,
    sets: &[String],
    out: &Path,
    jobs: Option<usize>,
    search: Option<rxsched_sim::scenario::SearchCfg>,
) -> Result<ExitCode, Failure> {
    let mut l = Loaded::read(path)?;
    let (key, values) = parse_vary(vary)?;
    let stem = path
        .file_stem()
        .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
    let x = if key.ends_with("rate_pps") {
        Axis {
            metric: "offered_pps".into(),
            label: "Input packet rate".into(),
            unit: "pkts/s".into(),
        }
    } else {
        Axis {
            metric: key.clone(),
            label: key.clone(),
            unit: String::new(),
        }
    };
    let base_y = if search.is_some() {
        Some(Axis {
            metric: "throughput_mbps_per_port".into(),
            label: "RFC 2544 throughput per port".into(),
            unit: "Mb/s".into(),
        })
    } else {
        l.scenario.figure.as_ref().map(|f| f.y.clone())
    };
    let y = match (y, base_y) {
        (Some(m), _) => Axis {
            label: m.clone(),
            metric: m,
            unit: String::new(),
        },
        (None, Some(a)) => a,
        (None, None) => Axis {
            metric: "delivered_pps".into(),
            label: "Output packet rate".into(),
            unit: "pkts/s".into(),
        },
    };
    let fig = FigureCfg {
        kind: if search.is_some() {
            FigureKind::Throughput
        } else {
            FigureKind::Sweep
        },
        x,
        y,
        vary: Some(key),
        values,
        quick_values: Vec::new(),
        quick_set: Default::default(),
        sample: None,
        search: search.unwrap_or_default(),
        table: Vec::new(),
        legend: None,
    };
    l.scenario.id = Some(format!("{}-sweep", l.scenario.id.clone().unwrap_or(stem)));
    // The file's own checks and references belong to its own figure.
    l.scenario.check.clear();
    l.scenario.reference.clear();
    l.scenario.figure = Some(fig.clone());
    l.scenario
        .validate()
        .map_err(|(k, m)| Failure::Input(format!("{}: {k}: {m}", path.display())))?;
    let opts = Options {
        quick: false,
        seed: None,
        sets: parse_sets(sets)?,
    };
    let plan = figure::plan(&l, Some(fig), &opts)?;
    let results = run_plans(&[plan], jobs)?;
    let (r, wall) = &results[0];
    report::write_all(out, r)?;
    report::write_index(out)?;
    println!("{}", summary(r, *wall, out));
    Ok(if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn bench_router(quick: bool, out: &Path) -> Result<ExitCode, Failure> {
    if !rxsched_linux::sys::is_root() {
        return Err(Failure::Input(
            "bench real: needs root (CAP_NET_ADMIN and packet sockets): run it with sudo".into(),
        ));
    }
    let lab = rxsched_linux::lab::Lab::standard();
    if !lab.is_up() {
        return Err(Failure::Input(
            "bench real: the lab is not up: run `rxsched lab up` first".into(),
        ));
    }
    let opts = rxsched::bench::BenchOpts {
        quick,
        out: out.to_path_buf(),
        lab,
    };
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::new_spinner();
        b.enable_steady_tick(std::time::Duration::from_millis(200));
        b
    } else {
        ProgressBar::hidden()
    };
    let plain = !std::io::stderr().is_terminal();
    let progress = |m: &str| {
        if plain {
            eprintln!("bench: {m}");
        } else {
            bar.set_message(m.to_string());
        }
    };
    let results =
        rxsched::bench::router(&opts, &progress).map_err(|e| Failure::Run(e.to_string()))?;
    bar.finish_and_clear();
    rxsched::bench::write(out, &results)?;
    let mut ok = true;
    for r in &results {
        println!("{}", summary(r, 0.0, out));
        ok &= r.passed();
    }
    println!("report: {}", out.join("index.html").display());
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn profiles() -> Result<ExitCode, Failure> {
    for (name, src) in rxsched_sim::profile::BUILTIN {
        let p = rxsched_sim::Profile::parse(name, src)?;
        println!("{name}: {}", p.testbed);
        println!("  calibrated from:");
        for c in &p.calibrated_from {
            println!("    - {c}");
        }
        println!("  costs:");
        let doc: toml_edit::DocumentMut = src
            .parse()
            .map_err(|e: toml_edit::TomlError| Failure::Run(e.to_string()))?;
        for section in ["wire", "nic", "cost"] {
            let Some(t) = doc.get(section).and_then(|i| i.as_table()) else {
                continue;
            };
            for (k, v) in t.iter() {
                let comment = v
                    .as_value()
                    .and_then(|v| v.decor().suffix())
                    .and_then(|s| s.as_str())
                    .map(|s| s.trim().trim_start_matches('#').trim().to_string())
                    .unwrap_or_default();
                let val = v.as_value().map(|v| v.to_string()).unwrap_or_default();
                let val = val.split('#').next().unwrap_or("").trim().to_string();
                println!("    {:<26} {val:>12}   {comment}", format!("{section}.{k}"));
            }
        }
        println!();
    }
    Ok(ExitCode::SUCCESS)
}
