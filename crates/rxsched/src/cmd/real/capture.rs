//! `rxsched capture`: the monitor's flags and their checks.

use super::{faulted, interfaces_exist, json, timeout_ms, RunArgs};
use clap::Args;
use rxsched::error::{Error, Result};
use rxsched_linux::capture::{CaptureReport, Format, Rotation};
use rxsched_linux::pcap_filter::Filter;
use rxsched_linux::rules::Rules;

/// `rxsched capture`
#[derive(Args)]
pub struct CaptureArgs {
    /// A filter in tcpdump's language (pcap-filter), e.g. `udp and dst
    /// port 53`: frames it refuses are not captured. What fits runs in the
    /// XDP program, so a refused frame never reaches user space; the
    /// report says where each part ran.
    #[arg(value_name = "EXPRESSION", trailing_var_arg = true)]
    pub expression: Vec<String>,
    /// Read the filter expression from this file (as tcpdump's `-F`).
    #[arg(short = 'F', value_name = "FILE")]
    pub expression_file: Option<std::path::PathBuf>,
    /// The interface to watch (every receive queue of it).
    #[arg(short = 'i', long = "interface")]
    pub iface: Option<String>,
    /// The file to write (`/dev/null` to discard): pcapng if it ends in
    /// `.pcapng`, else pcap (see `--format`).
    #[arg(short = 'w', long = "write")]
    pub out: Option<std::path::PathBuf>,
    /// The file format, instead of the one the name implies.
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Bytes kept of each frame, like tcpdump's `-s` (0: the whole frame).
    #[arg(short = 's', long, default_value_t = 262_144)]
    pub snaplen: u32,
    /// Stop once this many frames are written (tcpdump's `-c`).
    #[arg(short = 'c', value_name = "COUNT")]
    pub count: Option<u64>,
    /// Start a new file once this one is larger than this many millions
    /// of bytes (tcpdump's `-C`): `x.pcap`, `x.pcap1`, `x.pcap2`, ...
    #[arg(short = 'C', value_name = "MB")]
    pub file_size: Option<f64>,
    /// Start a new file every this many seconds (tcpdump's `-G`), named by
    /// `strftime` of the `-w` name (`cap-%H%M%S.pcap`).
    #[arg(short = 'G', value_name = "SECONDS")]
    pub rotate_seconds: Option<u64>,
    /// With `-C`: at most this many files, reused in a ring and numbered
    /// with leading zeros; with `-G`: stop after this many (tcpdump's `-W`).
    #[arg(short = 'W', value_name = "FILES")]
    pub file_count: Option<u32>,
    /// One file per receive queue (`x-q0.pcap`, `x-q1.pcap`, ...) instead
    /// of one file with every queue's frames in time order.
    #[arg(long)]
    pub per_queue: bool,
    /// List the interfaces a capture can watch, and stop (tcpdump's `-D`).
    #[arg(short = 'D', long = "list-interfaces")]
    pub list: bool,
    /// No summary on standard error at the end (the JSON report stays).
    #[arg(short = 'q')]
    pub quiet: bool,
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

/// `--format`
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Classic pcap, microsecond timestamps.
    Pcap,
    /// pcapng: nanosecond timestamps, the interface, and its drops.
    Pcapng,
}

/// The filter expression from the words after the flags or from `-F`.
fn expression(a: &CaptureArgs) -> Result<Option<Filter>> {
    let text = match (&a.expression_file, a.expression.is_empty()) {
        (Some(_), false) => {
            return Err(Error::Input(
                "give the filter expression either after the flags or in -F FILE, not both".into(),
            ))
        }
        (Some(f), true) => std::fs::read_to_string(f)
            .map_err(|e| Error::Input(format!("-F {}: {e}", f.display())))?
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" "),
        (None, _) => a.expression.join(" "),
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    Filter::parse(&text)
        .map(Some)
        .map_err(|e| Error::Input(e.to_string()))
}

/// The monitor's configuration from its flags.
pub fn capture_config(a: &CaptureArgs) -> Result<rxsched_linux::capture::CaptureConfig> {
    let run = a.run.config()?;
    let Some(iface) = a.iface.clone() else {
        return Err(Error::Input(
            "capture needs -i INTERFACE (rxsched capture -D lists them)".into(),
        ));
    };
    if iface == "any" {
        return Err(Error::flag(
            "interface",
            "`any` is not supported: a monitor binds one device's receive queues; \
             name one interface (rxsched capture -D lists them), or run one capture per interface",
        ));
    }
    let Some(out) = a.out.clone() else {
        return Err(Error::Input(
            "capture needs -w FILE (a .pcap or .pcapng file, or /dev/null): it does not print frames".into(),
        ));
    };
    let format = match a.format {
        Some(FormatArg::Pcap) => Format::Pcap,
        Some(FormatArg::Pcapng) => Format::Pcapng,
        None => Format::of_path(&out),
    };
    let size_bytes = match a.file_size {
        None => None,
        Some(mb) if mb.is_finite() && mb > 0.0 => Some((mb * 1e6) as u64),
        Some(_) => {
            return Err(Error::Input(
                "-C: must be a positive size in millions of bytes".into(),
            ))
        }
    };
    if a.rotate_seconds == Some(0) {
        return Err(Error::Input("-G: must be at least 1 second".into()));
    }
    if let Some(w) = a.file_count {
        if w == 0 || (size_bytes.is_none() && a.rotate_seconds.is_none()) {
            return Err(Error::Input(
                "-W: a count of 1 or more files, with -C or -G".into(),
            ));
        }
    }
    if a.count == Some(0) {
        return Err(Error::Input("-c: must be at least 1 frame".into()));
    }
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
    // tcpdump's `-s 0`: the whole frame.
    let snaplen = if a.snaplen == 0 { 262_144 } else { a.snaplen };
    let filter = match &a.filter {
        None => None,
        Some(f) => Some(Rules::load(f).map_err(|e| Error::Input(e.to_string()))?),
    };
    Ok(rxsched_linux::capture::CaptureConfig {
        run,
        iface,
        out,
        format,
        rotation: Rotation {
            size_bytes,
            every_s: a.rotate_seconds,
            files: a.file_count,
        },
        count: a.count,
        per_queue: a.per_queue,
        snaplen,
        filter,
        expression: expression(a)?,
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
    if a.list {
        print!("{}", list_interfaces()?);
        return Ok(());
    }
    let mut cfg = capture_config(&a)?;
    interfaces_exist("interface", std::slice::from_ref(&cfg.iface))?;
    let exporter = super::metrics("capture", a.metrics)?;
    cfg.metrics = exporter.as_ref().map(|e| e.publisher());
    let r = rxsched_linux::capture::run(&cfg)?;
    drop(exporter);
    if !a.quiet {
        eprint!("{}", summary(&r));
    }
    json(&r)?;
    faulted(r.fault)
}

/// The exit summary, in tcpdump's words, with a line for each place
/// frames were lost.
pub fn summary(r: &CaptureReport) -> String {
    use rxsched_core::DropPoint;
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let mut s = format!("{} packet{} captured\n", r.written, plural(r.written));
    let refused: u64 = r.filtered.values().sum();
    let ring = r.drops.get(&DropPoint::NicRxRing).copied().unwrap_or(0);
    let seen = r.arrived.saturating_sub(ring);
    s += &format!("{seen} packet{} received by filter\n", plural(seen));
    if refused > 0 {
        s += &format!(
            "{refused} packet{} refused by the filter\n",
            plural(refused)
        );
    }
    for (p, n) in &r.drops {
        let place = match p {
            DropPoint::NicRxRing => "the interface ring".to_string(),
            DropPoint::CopyRing => "the copy ring (before the copy)".to_string(),
            DropPoint::XskRxRing => "the socket ring".to_string(),
            DropPoint::FilterQueue => "the packet-filter queue (before the writer)".to_string(),
            p => p.name().to_string(),
        };
        s += &format!("{n} packet{} dropped by {place}\n", plural(*n));
    }
    if r.in_flight > 0 {
        s += &format!(
            "{} packet{} not written when it stopped\n",
            r.in_flight,
            plural(r.in_flight)
        );
    }
    if r.files.len() > 1 {
        s += &format!(
            "{} files: {} .. {}\n",
            r.files.len(),
            r.files[0],
            r.files[r.files.len() - 1]
        );
    }
    s
}

/// tcpdump's `-D`: the interfaces, numbered, with their state and
/// receive queues.
fn list_interfaces() -> Result<String> {
    let dir = std::path::Path::new("/sys/class/net");
    let mut names: Vec<(u32, String)> = std::fs::read_dir(dir)
        .map_err(|e| Error::Run(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let idx = std::fs::read_to_string(e.path().join("ifindex")).ok()?;
            Some((idx.trim().parse().ok()?, name))
        })
        .collect();
    names.sort();
    let mut out = String::new();
    for (i, (_, name)) in names.iter().enumerate() {
        let p = dir.join(name);
        let flags = std::fs::read_to_string(p.join("flags"))
            .ok()
            .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
            .unwrap_or(0);
        let mut tags = vec![];
        if flags & libc::IFF_UP as u32 != 0 {
            tags.push("Up");
        }
        let oper = std::fs::read_to_string(p.join("operstate")).unwrap_or_default();
        if oper.trim() == "up" || flags & libc::IFF_RUNNING as u32 != 0 {
            tags.push("Running");
        }
        if flags & libc::IFF_LOOPBACK as u32 != 0 {
            tags.push("Loopback");
        }
        let queues = std::fs::read_dir(p.join("queues"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count()
            })
            .unwrap_or(0);
        out += &format!(
            "{}.{name} [{}] ({queues} receive queue{})\n",
            i + 1,
            tags.join(", "),
            if queues == 1 { "" } else { "s" }
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rxsched_core::DropPoint;

    /// The exit summary reads as tcpdump's does, with a line for every
    /// place frames were lost.
    #[test]
    fn the_summary_speaks_tcpdump() {
        let r: CaptureReport = serde_json::from_value(serde_json::json!({
            "file": "x.pcap", "files": ["x.pcap"], "mode": "copy", "duration_s": 1.0,
            "arrived": 1000, "rx": 900, "written": 880,
            "bytes_written": 0,
            "drops": {"nic_rx_ring": 100, "filter_queue": 10},
            "filtered": {"expression in xdp": 0, "expression in polling thread": 10},
            "in_flight": 0, "inhibits": {}, "mode_switches": 0, "cpu_s": 0.1
        }))
        .unwrap();
        assert_eq!(r.drops[&DropPoint::NicRxRing], 100);
        assert_eq!(
            summary(&r),
            "880 packets captured\n900 packets received by filter\n10 packets refused by the filter\n\
             100 packets dropped by the interface ring\n\
             10 packets dropped by the packet-filter queue (before the writer)\n"
        );
    }
}
