//! `rxsched`: reproduce the receive-livelock papers, simulate your own
//! scenarios, and run the policies on real interfaces. This file holds the
//! command line and sends each command to its module under `cmd/`.

mod cmd;

use clap::{Args, Parser, Subcommand};
use rxsched::error::Result;
use rxsched::experiments::SearchCfg;
use rxsched::figure::Options;
use std::path::PathBuf;
use std::process::ExitCode;

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
        /// Experiment ids, `all`, or scenario files (`my.toml`), run with their checks.
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
        /// Seed for every run (default: each scenario's own), 0 to
        /// 9223372036854775807 (what a TOML integer holds).
        #[arg(long, value_parser = clap::value_parser!(u64).range(0..=i64::MAX as u64))]
        seed: Option<u64>,
        /// Override a key in every run (`kernel.quota=5`), or in one
        /// series' runs (`polling:kernel.quota=5`); the result records it.
        #[arg(long = "set", value_name = "[SERIES:]KEY=VALUE")]
        sets: Vec<String>,
        /// Run only shard K of N of the study (every N-th run, from the
        /// K-th) and keep what it gave in OUT/shard-K-of-N.json, for
        /// `rxsched merge`.
        #[arg(long, value_name = "K/N")]
        shard: Option<rxsched::shard::Shard>,
    },
    /// Join the shards of a study (`reproduce`, `sweep` or `swarm` with
    /// `--shard K/N`) into the result the whole study writes.
    Merge {
        /// Directories holding the shards' files (shard-K-of-N.json).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where the joined results go.
        #[arg(long, default_value = "results")]
        out: PathBuf,
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
        /// Run only shard K of N of the study (every N-th run, from the
        /// K-th) and keep what it gave in OUT/shard-K-of-N.json, for
        /// `rxsched merge`.
        #[arg(long, value_name = "K/N")]
        shard: Option<rxsched::shard::Shard>,
    },
    /// Run random valid scenarios, each twice, checking that every one
    /// finishes, conserves packets, closes its CPU accounting and replays
    /// byte for byte; a failing case is written out as a scenario file.
    Swarm {
        /// How many cases.
        #[arg(long, default_value_t = 1000)]
        runs: u64,
        /// The first case's seed (case i uses SEED + i; `--runs 1 --seed S`
        /// runs case S alone).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Cases run in parallel (default: one per core).
        #[arg(long)]
        jobs: Option<usize>,
        /// A case taking longer than this many seconds is reported as a hang.
        #[arg(long, default_value_t = 120.0)]
        timeout: f64,
        /// Where failing cases are written.
        #[arg(long, default_value = "swarm-failures")]
        out: PathBuf,
        /// Also write every case's scenario file (with `--runs 1`, to look at one).
        #[arg(long)]
        keep: bool,
        /// Run only shard K of N of the study (every N-th case, from the
        /// K-th) and keep what it gave in OUT/shard-K-of-N.json, for
        /// `rxsched merge`.
        #[arg(long, value_name = "K/N")]
        shard: Option<rxsched::shard::Shard>,
    },
    /// List the machine profiles and what each cost was calibrated from.
    Profiles {
        /// Print the profile format's reference (every key, its type and
        /// meaning, from the types themselves) instead: profiles/README.md.
        #[arg(long)]
        schema: bool,
    },
    /// Fit a profile's free parameters to its calibration claims, by least
    /// squares through the simulator.
    Calibrate {
        /// A built-in profile's name (its file in this source tree), or a
        /// profile file with a [calibrate] section.
        #[arg(required_unless_present = "real")]
        profile: Option<String>,
        /// Measure this machine in the lab instead (root, `rxsched lab up`):
        /// each per-frame cost in isolation on the DUT CPU, written as a
        /// profile with how each was measured and its spread.
        #[arg(long, conflicts_with = "write")]
        real: bool,
        /// With --real: the profile file to write.
        #[arg(long, requires = "real", default_value = "linux-veth-lab.toml")]
        out: PathBuf,
        /// With --real: repeats of each measurement (the median is kept).
        #[arg(long, requires = "real", default_value_t = 3,
              value_parser = clap::value_parser!(u64).range(1..=20))]
        repeats: u64,
        /// With --real: shorter trials (1 s instead of 3).
        #[arg(long, requires = "real")]
        quick: bool,
        /// Write the fitted values, the costs they set and the residuals
        /// into the profile file.
        #[arg(long)]
        write: bool,
        /// Instead of fitting, check that the profile's values are its fit:
        /// no step of 2% of a parameter's range, either way, lowers the
        /// claims' mean squares by more than a tenth (or 0.001); exit 1
        /// if one does.
        #[arg(long, conflicts_with_all = ["write", "real"])]
        check: bool,
        /// Runs in parallel (default: one per core).
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// The lab of network namespaces (root).
    Lab {
        #[command(subcommand)]
        cmd: cmd::real::LabCmd,
    },
    /// Send rate-controlled UDP with sequence numbers and send times.
    Gen(cmd::real::GenArgs),
    /// Receive the generator's UDP: loss, reordering, latency.
    Sink(cmd::real::SinkArgs),
    /// Forward IPv4 between interfaces with interrupt-driven or polled receive.
    Route(Box<cmd::real::RouteArgs>),
    /// Capture frames to a pcap file with polled receive and queue feedback (the monitor).
    Capture(cmd::real::CaptureArgs),
    /// Forward IPv4 in XDP (bpf_fib_lookup + bpf_redirect): the lab's fastest peer.
    XdpFwd {
        /// The input interfaces to attach to.
        #[arg(long, value_delimiter = ',', default_value = "d0")]
        ports: Vec<String>,
        /// Seconds to stay attached.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
    },
    /// Benchmarks: `bench real router` sweeps the real dataplane in the lab.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Signaled Receiver Processing on real frames: early demultiplexing by
    /// UDP port into per-consumer queues, each consumer a process doing its
    /// own protocol work.
    Serve(cmd::real::ServeArgs),
    /// Early discard for every UDP socket, applications unchanged: drop in
    /// XDP a datagram whose socket's receive buffer is already full, before
    /// the kernel spends its protocol work on it.
    Guard(cmd::real::GuardArgs),
    /// A process that computes for `--on-ms` of CPU, sleeps `--off-ms`, and again.
    Onoff {
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// CPU time per run, in ms.
        #[arg(long, default_value_t = 11.0)]
        on_ms: f64,
        /// Sleep between runs, in ms.
        #[arg(long, default_value_t = 5.0)]
        off_ms: f64,
        /// Seconds to run.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
    },
    /// An ordinary UDP socket receiver (the kernel peer of `serve`).
    UdpRecv {
        /// The UDP port to bind.
        #[arg(long)]
        port: u16,
        /// SO_RCVBUF, in bytes.
        #[arg(long, default_value_t = 65536)]
        rcvbuf: u32,
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// Stop after this many seconds.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
    },
    /// A consumer process `serve` starts (not for direct use).
    #[command(hide = true)]
    Consume {
        /// The queue's descriptors, `REGION,TO_CONSUMER,TO_PRODUCER`.
        #[arg(long)]
        stage: String,
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// The screening process `route --screen` starts (not for direct use).
    #[command(hide = true)]
    Screend(cmd::real::ScreendArgs),
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
    /// Predict result files measured earlier (`bench real ... --out DIR`)
    /// on a profile, as `bench real ... --predict` does, and write them back.
    Predict {
        /// The result files (`DIR/real-router.json`, ...).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The machine's profile: a built-in name or a path.
        #[arg(long)]
        profile: String,
    },
}

/// The flags every real bench takes.
#[derive(Args)]
struct RealBenchArgs {
    /// Fewer points and shorter trials.
    #[arg(long)]
    quick: bool,
    /// Where results go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Beside each measured curve the lab host models, the simulator's
    /// prediction on this profile of the machine (`rxsched calibrate
    /// --real`; a built-in name or a path), judged by the check file's
    /// predictions.
    #[arg(long, value_name = "PROFILE")]
    predict: Option<String>,
}

#[derive(Subcommand)]
enum RealBench {
    /// Kernel, interrupt-driven and polling forwarding, swept over offered load.
    Router(RealBenchArgs),
    /// The monitor against tcpdump, tshark, xdpdump and netsniff-ng, to
    /// /dev/null and to a file, swept over offered load.
    Capture(RealBenchArgs),
    /// Forwarding through a screening process against the kernel with nftables.
    Screen(RealBenchArgs),
    /// One consumer flooded, one modest: SRP's serve against Linux's UDP sockets.
    Srp(RealBenchArgs),
    /// The polling router flooded at the generator's top rate for minutes:
    /// no crash, flat memory, every frame accounted for, the lab clean after.
    Soak {
        /// How long, in minutes (default 10, or half a minute with --quick).
        #[arg(long)]
        minutes: Option<f64>,
        #[command(flatten)]
        args: RealBenchArgs,
    },
    /// Load stepping up and down through route --mode two-level, against interrupt and polling.
    TwoLevel(RealBenchArgs),
    /// A protected stream (ping through and to the router, steered to
    /// queue 1) under a flood on queue 0, through the polling router with
    /// and without `--protect-queue 1`, the interrupt-driven router and
    /// the kernel. Needs `rxsched lab up --queues 2`.
    Protect(RealBenchArgs),
    /// The lab's own capacity: how fast the XDP generator offers and the
    /// XDP sink counts, one core each.
    Lab(RealBenchArgs),
}

impl RealBench {
    /// The bench, its flags, and a soak's length.
    fn bench(self) -> (rxsched::bench::Real, RealBenchArgs, Option<f64>) {
        use rxsched::bench::{self, Real};
        let real = |name, run, tools| Real { name, run, tools };
        match self {
            RealBench::Router(a) => (real("router", bench::router, &[]), a, None),
            RealBench::Capture(a) => (
                real("capture", bench::capture, bench::capture::TOOLS),
                a,
                None,
            ),
            RealBench::Screen(a) => (real("screen", bench::screen, bench::screen::TOOLS), a, None),
            RealBench::Srp(a) => (real("srp", bench::srp, bench::srp::TOOLS), a, None),
            RealBench::Soak { minutes, args } => (real("soak", bench::soak, &[]), args, minutes),
            RealBench::TwoLevel(a) => (real("two-level", bench::two_level, &[]), a, None),
            RealBench::Protect(a) => (
                real("protect", bench::protect, bench::protect::TOOLS),
                a,
                None,
            ),
            RealBench::Lab(a) => (real("lab", bench::lab, &[]), a, None),
        }
    }
}

fn main() -> ExitCode {
    match dispatch(Cli::parse().cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rxsched: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn done(r: Result<()>) -> Result<ExitCode> {
    r.map(|_| ExitCode::SUCCESS)
}

fn dispatch(cmd: Cmd) -> Result<ExitCode> {
    match cmd {
        Cmd::Reproduce { list: true, .. } => cmd::reproduce::list(),
        Cmd::Reproduce {
            ids,
            out,
            quick,
            jobs,
            seed,
            sets,
            shard,
            ..
        } => {
            let opts = Options {
                quick,
                seed,
                sets: cmd::parse_sets(&sets)?,
            };
            cmd::reproduce::run(&ids, &out, opts, &sets, jobs, shard)
        }
        Cmd::Merge { dirs, out } => cmd::merge::run(&dirs, &out),
        Cmd::Sim {
            scenario,
            sets,
            json,
        } => cmd::sim::run(&scenario, &sets, json),
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
            shard,
        } => {
            let search = throughput.then_some(SearchCfg {
                resolution,
                trial_ms,
            });
            cmd::sweep::run(&scenario, &vary, y, &sets, &out, jobs, search, shard)
        }
        Cmd::Swarm {
            runs,
            seed,
            jobs,
            timeout,
            out,
            keep,
            shard,
        } => cmd::swarm::run(runs, seed, jobs, timeout, &out, keep, shard),
        Cmd::Profiles { schema: false } => cmd::profiles::run(),
        Cmd::Profiles { schema: true } => cmd::profiles::schema(),
        Cmd::Calibrate {
            real: true,
            out,
            repeats,
            quick,
            ..
        } => cmd::bench::calibrate(&out, repeats as usize, quick),
        Cmd::Calibrate {
            profile,
            check: true,
            jobs,
            ..
        } => cmd::calibrate::check(&profile.unwrap_or_default(), jobs),
        Cmd::Calibrate {
            profile,
            write,
            jobs,
            ..
        } => cmd::calibrate::run(&profile.unwrap_or_default(), write, jobs),
        Cmd::Lab { cmd } => done(cmd::real::lab_cmd(cmd)),
        Cmd::Gen(a) => done(cmd::real::gen(a)),
        Cmd::Sink(a) => done(cmd::real::sink(a)),
        Cmd::Route(a) => done(cmd::real::route(*a)),
        Cmd::Capture(a) => done(cmd::real::capture(a)),
        Cmd::XdpFwd { ports, duration } => done(cmd::real::xdp_fwd(&ports, duration)),
        Cmd::Bench {
            what: BenchWhat::Real { which },
        } => {
            let (bench, args, minutes) = which.bench();
            cmd::bench::real(
                args.quick,
                minutes,
                &args.out,
                args.predict.as_deref(),
                bench,
            )
        }
        Cmd::Bench {
            what: BenchWhat::Predict { files, profile },
        } => cmd::bench::predict(&files, &profile),
        Cmd::Screend(a) => done(cmd::real::screend(a)),
        Cmd::Serve(a) => done(cmd::real::serve(a)),
        Cmd::Guard(a) => done(cmd::real::guard(a)),
        Cmd::Onoff {
            cpu,
            on_ms,
            off_ms,
            duration,
        } => done(cmd::real::onoff(cpu, on_ms, off_ms, duration)),
        Cmd::UdpRecv {
            port,
            rcvbuf,
            cpu,
            duration,
        } => done(cmd::real::udp_recv(port, rcvbuf, cpu, duration)),
        Cmd::Consume { stage, cpu } => done(cmd::real::consume(&stage, cpu)),
        Cmd::Spin { cpu, duration } => done(cmd::real::spin(cpu, duration)),
    }
}
