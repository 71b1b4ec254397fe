//! The Linux dataplane commands, one module each: the lab and its traffic
//! ([`lab`]: `lab`, `gen`, `sink`), the router ([`route`]), the monitor
//! ([`capture`]), SRP's server ([`serve`]: `serve`, `consume`), early
//! discard for unmodified UDP servers ([`guard`]), and the
//! benches' helper processes and peers ([`helpers`]). What route, capture
//! and serve share (their runtime's flags, [`RunArgs`]) and the checks
//! every command uses live here.

pub mod capture;
pub mod guard;
pub mod helpers;
pub mod lab;
pub mod route;
pub mod serve;

pub use capture::{capture, CaptureArgs};
pub use guard::{guard, GuardArgs};
pub use helpers::{onoff, screend, spin, udp_recv, xdp_fwd, ScreendArgs};
pub use lab::{gen, lab_cmd, sink, GenArgs, LabCmd, SinkArgs};
pub use route::{route, RouteArgs};
pub use serve::{consume, serve, ServeArgs};

use clap::{Args, ValueEnum};
use rxsched::error::{Error, Result};
use rxsched_core::Quota;
use rxsched_linux::runtime::{Backend, RunConfig};

/// How route, capture and serve reach the devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// AF_XDP sockets fed by an XDP program, receive work in threaded NAPI.
    Xdp,
    /// AF_PACKET rings and sendmmsg (devices without XDP).
    Packet,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Backend {
        match b {
            BackendArg::Xdp => Backend::Xdp,
            BackendArg::Packet => Backend::Packet,
        }
    }
}

/// `--quota`: a positive count or `unlimited`.
fn quota(q: &str) -> Result<Quota> {
    Quota::parse(q).ok_or_else(|| {
        Error::flag(
            "quota",
            format!("{q:?} is not a positive count or unlimited"),
        )
    })
}

/// `--cycle-limit`: a percentage, as the share M4 takes.
fn cycle_limit(p: Option<f64>) -> Result<Option<f64>> {
    match p {
        Some(p) if !(p > 0.0 && p <= 100.0) => Err(Error::flag(
            "cycle-limit",
            format!("{p} is not a percentage in (0, 100]"),
        )),
        p => Ok(p.map(|p| p / 100.0)),
    }
}

/// The flags of the runtime that `route`, `capture` and `serve` share.
#[derive(Args)]
pub struct RunArgs {
    /// How to reach the devices.
    #[arg(long, value_enum, default_value = "xdp")]
    pub backend: BackendArg,
    /// Polling: frames per callback, or `unlimited`.
    #[arg(long, default_value = "32")]
    pub quota: String,
    /// Polling, M4: percentage of each 10 ms that input may use.
    #[arg(long)]
    pub cycle_limit: Option<f64>,
    /// Polling, M4: what one wake-up of the polling thread costs the task
    /// it interrupts, beyond CPU time, in ns (default: measured at start).
    #[arg(long)]
    pub wake_cost_ns: Option<u64>,
    /// Pin every thread, and every helper process, to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Stop after this many seconds (or at SIGINT/SIGTERM; the report, and
    /// any file written, are complete either way).
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Print live counters this often, in seconds (0: only on SIGUSR1).
    #[arg(long, default_value_t = 0.0)]
    pub stats_every: f64,
    /// AF_XDP: entries of each socket's receive ring, a power of two from
    /// 64 to 32768 (twice as many 2 KiB frames are lent to the kernel per
    /// socket: 16 MiB at the default). Frames the receive work hands a
    /// full ring die after that work (`xsk_rx_ring`); a ring that outlasts
    /// the receive work's runs while input is held off keeps them.
    #[arg(long, default_value_t = rxsched_linux::backend::xdp::RX_RING)]
    pub rx_ring: u32,
}

impl RunArgs {
    /// The runtime's configuration, each flag checked.
    pub fn config(&self) -> Result<RunConfig> {
        positive("duration", self.duration)?;
        stats_every(self.stats_every)?;
        if !(64..=32_768).contains(&self.rx_ring) || !self.rx_ring.is_power_of_two() {
            return Err(Error::flag(
                "rx-ring",
                format!("{} is not a power of two from 64 to 32768", self.rx_ring),
            ));
        }
        Ok(RunConfig {
            backend: self.backend.into(),
            quota: quota(&self.quota)?,
            cycle_limit: cycle_limit(self.cycle_limit)?,
            wake_cost_ns: self.wake_cost_ns,
            cpu: self.cpu,
            duration_s: self.duration,
            stats_every_s: self.stats_every,
            slo: None,
            rx_ring: self.rx_ring,
        })
    }
}

fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    rxsched::out::line(&serde_json::to_string(v).map_err(|e| Error::Run(e.to_string()))?)
}

fn positive(name: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "--{name}: must be a positive number of seconds (at most a day), got {v}"
        )))
    }
}

/// `--stats-every`: 0 (only on SIGUSR1), or a period of at least 10 ms.
fn stats_every(s: f64) -> Result<()> {
    if s.is_finite() && (s == 0.0 || (0.01..=86_400.0).contains(&s)) {
        Ok(())
    } else {
        Err(Error::flag(
            "stats-every",
            format!("{s} is neither 0 nor a period of 0.01 s to a day"),
        ))
    }
}

/// Every interface named exists here (in this network namespace).
fn interfaces_exist(flag: &str, names: &[String]) -> Result<()> {
    for n in names {
        rxsched_linux::sys::ifindex(n)
            .map_err(|_| Error::flag(flag, format!("{n}: no such interface here")))?;
    }
    Ok(())
}

/// An inhibit's timeout flag: a positive time of at most 10 s.
fn timeout_ms(flag: &str, ms: f64) -> Result<()> {
    if ms.is_finite() && ms > 0.0 && ms <= 10_000.0 {
        Ok(())
    } else {
        Err(Error::flag(flag, "must be a positive time of at most 10 s"))
    }
}

/// After the report: a run that ended early on a fault fails (exit 1).
fn faulted(fault: Option<String>) -> Result<()> {
    match fault {
        Some(f) => Err(Error::Run(f)),
        None => Ok(()),
    }
}

/// `--metrics ADDR`: the exporter `cmd` serves its counters from, started
/// (it says where on stderr); `None` without the flag.
fn metrics(
    cmd: &str,
    addr: Option<std::net::SocketAddr>,
) -> Result<Option<rxsched_linux::metrics::Exporter>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let e = rxsched_linux::metrics::Exporter::start(addr)?;
    eprintln!("rxsched {cmd}: metrics at http://{}/metrics", e.addr());
    Ok(Some(e))
}
