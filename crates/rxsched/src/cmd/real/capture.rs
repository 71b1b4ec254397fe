//! `rxsched capture`: the monitor's flags and their checks.

use super::{faulted, interfaces_exist, json, timeout_ms, RunArgs};
use clap::Args;
use rxsched::error::{Error, Result};
use rxsched_linux::rules::Rules;

/// `rxsched capture`
#[derive(Args)]
pub struct CaptureArgs {
    /// The interface to watch.
    #[arg(short = 'i', long = "interface")]
    pub iface: String,
    /// The pcap file to write (`/dev/null` to discard).
    #[arg(short = 'w', long = "write")]
    pub out: std::path::PathBuf,
    /// Bytes kept of each frame, like tcpdump's `-s`.
    #[arg(short = 's', long, default_value_t = 262_144)]
    pub snaplen: u32,
    /// A rule file (the `route --screen` language): frames it denies are
    /// not captured, and are counted by rule.
    #[arg(long)]
    pub filter: Option<String>,
    /// The packet-filter queue's length, in frames. The paper's monitor
    /// had 32 (with `--resume-at timeout`); here a writer empties 32
    /// slots in microseconds, and a longer queue lets each wake-up of it
    /// write more.
    #[arg(long, default_value_t = 1024)]
    pub queue: usize,
    /// M3: inhibit input while fewer than this many queue slots are free.
    #[arg(long, default_value_t = 8)]
    pub min_free: u32,
    /// M3: input resumes when the writer has drained the queue to this
    /// many frames (default: a quarter of the queue), or `timeout`: only
    /// the timeout ends an inhibit, as in the paper's monitor.
    #[arg(long)]
    pub resume_at: Option<String>,
    /// M3: an inhibit ends after this long at the latest, in ms.
    #[arg(long, default_value_t = 1.0)]
    pub timeout_ms: f64,
    /// Turn queue-state feedback off: the queue overflows instead.
    #[arg(long)]
    pub no_feedback: bool,
    /// Take the frames instead of copying them: the host's stack does not
    /// see them. For a dedicated monitor port (a switch's mirror port),
    /// where the host has nothing to lose; by default the monitor is
    /// passive, as tcpdump is.
    #[arg(long)]
    pub take: bool,
    /// Serve the monitor's counters in Prometheus' format at
    /// http://ADDR/metrics (as `route --metrics`).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// The runtime's flags.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The monitor's configuration from its flags.
pub fn capture_config(a: &CaptureArgs) -> Result<rxsched_linux::capture::CaptureConfig> {
    let run = a.run.config()?;
    if !(1..=1 << 20).contains(&a.queue) {
        return Err(Error::flag("queue", "must be from 1 to 1048576 frames"));
    }
    if a.min_free as usize >= a.queue {
        return Err(Error::flag(
            "min-free",
            format!("must be below the queue length {}", a.queue),
        ));
    }
    timeout_ms("timeout-ms", a.timeout_ms)?;
    let inhibit_at = a.queue - a.min_free as usize;
    let resume_at = match a.resume_at.as_deref() {
        None => Some((a.queue / 4).min(inhibit_at) as u32),
        Some("timeout") => None,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if n < inhibit_at => Some(n as u32),
            _ => {
                return Err(Error::flag(
                    "resume-at",
                    format!(
                        "{n:?} is neither `timeout` nor a count of frames below the inhibit level {inhibit_at}"
                    ),
                ))
            }
        },
    };
    if a.snaplen == 0 {
        return Err(Error::flag("snaplen", "must be at least 1"));
    }
    let filter = match &a.filter {
        None => None,
        Some(f) => Some(Rules::load(f).map_err(|e| Error::Input(e.to_string()))?),
    };
    Ok(rxsched_linux::capture::CaptureConfig {
        run,
        iface: a.iface.clone(),
        out: a.out.clone(),
        snaplen: a.snaplen,
        filter,
        queue: a.queue,
        min_free: (!a.no_feedback).then_some(a.min_free),
        resume_at,
        timeout_ns: (a.timeout_ms * 1e6) as u64,
        take: a.take,
        metrics: None,
    })
}

/// `rxsched capture`
pub fn capture(a: CaptureArgs) -> Result<()> {
    let mut cfg = capture_config(&a)?;
    interfaces_exist("interface", std::slice::from_ref(&cfg.iface))?;
    let exporter = super::metrics("capture", a.metrics)?;
    cfg.metrics = exporter.as_ref().map(|e| e.publisher());
    let r = rxsched_linux::capture::run(&cfg)?;
    drop(exporter);
    json(&r)?;
    faulted(r.fault)
}
