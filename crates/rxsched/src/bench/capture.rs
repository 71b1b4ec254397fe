//! `rxsched bench real capture`: the monitor (`rxsched capture`, with and
//! without queue feedback) against `tcpdump -w`, `tshark -w`, `xdpdump -w`
//! (xdp-tools: an XDP program of its own, frames copied out at its entry
//! through a perf ring) and `netsniff-ng` (a TPACKET_V3 ring) on the DUT,
//! each pinned to the DUT CPU beside the compute process, each writing to
//! /dev/null and to a file on disk, swept over offered load.
//!
//! Our monitor is passive by default, as tcpdump and tshark are: the DUT's
//! stack gets every frame too. Each of its series has a `-take` twin, which
//! takes the frames instead (a dedicated monitor port's mode).
//!
//! The generator addresses the frames to a MAC that is not d0's (the bench
//! sets up no host that owns it), so the DUT's kernel throws them away
//! after its packet taps: what the capturers see is nearly all the work
//! there is, and what passing frames on costs is the kernel's receive work
//! up to that discard (on XDP, building each frame's socket buffer).

use super::counters::Counters;
use super::forward::Dut;
use super::proc::{run, start, Capture, CaptureForm, CycleLimit, Gen, Peer, Proc, Running};
use super::sweep::{rates, Sweep};
use super::{out_dir, result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile};
use rxsched_linux::capture::CaptureReport;
use rxsched_linux::lab::Lab;
use rxsched_linux::loadgen::GenReport;
use rxsched_linux::spin::SpinReport;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Who captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    /// `rxsched capture` in a form, optionally with `--cycle-limit 50`,
    /// copying or (`take`) taking the frames.
    Ours {
        form: CaptureForm,
        limit: bool,
        take: bool,
    },
    /// `tcpdump -w`.
    Tcpdump,
    /// `tshark -w`.
    Tshark,
    /// `xdpdump -w`.
    Xdpdump,
    /// `netsniff-ng --out`.
    Netsniff,
}

impl Tool {
    /// The process that captures to `out` (for at most `secs`, if ours);
    /// M4 charges `wake_cost_ns` per wake-up.
    fn proc(self, out: String, secs: f64, wake_cost_ns: u64) -> Proc {
        match self {
            Tool::Ours { form, limit, take } => Proc::Capture(Capture {
                out,
                secs,
                form,
                cycle_limit: limit.then_some(CycleLimit {
                    percent: 50,
                    wake_cost_ns,
                }),
                take,
            }),
            Tool::Tcpdump => Proc::Peer(Peer::Tcpdump { out }),
            Tool::Tshark => Proc::Peer(Peer::Tshark { out }),
            Tool::Xdpdump => Proc::Peer(Peer::Xdpdump { out }),
            Tool::Netsniff => Proc::Peer(Peer::Netsniff { out }),
        }
    }

    /// How long it takes to start capturing (tshark starts slowly).
    fn settle(self) -> Duration {
        Duration::from_millis(match self {
            Tool::Ours { .. } => 500,
            Tool::Tcpdump | Tool::Xdpdump | Tool::Netsniff => 1000,
            Tool::Tshark => 3000,
        })
    }

    /// What it wrote and, for ours, the drops it counted and its inhibits,
    /// once it has stopped.
    fn captured(self, c: Running, label: &str) -> Result<Captured, BenchError> {
        if let Tool::Ours { .. } = self {
            let r: CaptureReport = c.finish()?;
            let drops = r.drops.into_iter().filter(|(_, n)| *n > 0);
            return Ok(Captured {
                written: r.written as f64,
                drops: drops
                    .map(|(p, n)| (p.name().to_string(), Value::from(n)))
                    .collect(),
                inhibits: Some(r.inhibits.values().sum::<u64>() as f64),
                threads: None,
            });
        }
        let o = c.output()?;
        // netsniff-ng says it on standard output, the others on error.
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let n = captured(&said).ok_or_else(|| {
            BenchError(format!("{label} printed no capture count: {}", said.trim()))
        })?;
        Ok(Captured {
            written: n as f64,
            drops: Map::new(),
            inhibits: None,
            threads: None,
        })
    }
}

/// One series: a tool and where it writes.
#[derive(Debug, Clone)]
struct Variant {
    label: String,
    tool: Tool,
    file: bool,
}

fn variants() -> Vec<Variant> {
    let ours = |form, limit| Tool::Ours {
        form,
        limit,
        take: false,
    };
    let mut v = Vec::new();
    for file in [false, true] {
        let tail = if file { "-file" } else { "" };
        for (name, tool) in [
            ("rxsched-capture", ours(CaptureForm::Feedback, false)),
            (
                "rxsched-capture-nofeedback",
                ours(CaptureForm::NoFeedback, false),
            ),
            ("tcpdump-w", Tool::Tcpdump),
            ("tshark-w", Tool::Tshark),
            ("xdpdump-w", Tool::Xdpdump),
            ("netsniff-ng", Tool::Netsniff),
        ] {
            v.push(Variant {
                label: format!("{name}{tail}"),
                tool,
                file,
            });
        }
    }
    for (label, tool) in [
        ("rxsched-capture-paper", ours(CaptureForm::Paper, false)),
        (
            "rxsched-capture-cycle-limit-50",
            ours(CaptureForm::Feedback, true),
        ),
    ] {
        v.push(Variant {
            label: label.into(),
            tool,
            file: false,
        });
    }
    // Each of ours has a twin that takes the frames.
    let twins: Vec<Variant> = v
        .iter()
        .filter_map(|x| match x.tool {
            Tool::Ours { form, limit, .. } => Some(Variant {
                label: format!("{}-take", x.label),
                tool: Tool::Ours {
                    form,
                    limit,
                    take: true,
                },
                file: x.file,
            }),
            _ => None,
        })
        .collect();
    v.extend(twins);
    v
}

/// What a peer wrote, from its closing lines: "N packets captured"
/// (tcpdump, tshark, xdpdump), or netsniff-ng's "N packets passed filter"
/// less the "(U unread on exit)" of its incoming line.
fn captured(said: &str) -> Option<u64> {
    let num = |s: &str| s.trim().parse::<u64>().ok();
    if let Some(n) = said
        .lines()
        .find_map(|l| num(l.trim().strip_suffix("packets captured")?))
    {
        return Some(n);
    }
    let passed = said
        .lines()
        .find_map(|l| num(l.trim().strip_suffix("packets passed filter")?))?;
    let unread = said
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once("packets incoming (")?;
            num(rest.strip_suffix("unread on exit)")?)
        })
        .unwrap_or(0);
    Some(passed.saturating_sub(unread))
}

/// CPU time and runs of our monitor's threads and the DUT's receive
/// threads, read together.
#[derive(Debug, Clone, Copy, Default)]
struct Threads {
    /// The receive threads (Counters' NAPI part).
    napi: (u64, u64),
    /// The polling thread (the process's first thread).
    reader: (u64, u64),
    /// The writer thread (`rxsched-pcap`).
    writer: (u64, u64),
}

impl Threads {
    fn read(l: &Lab, pid: u32) -> Result<Threads, BenchError> {
        use rxsched_linux::napi_threads::{runs, schedstat_ns};
        let c = Counters::read(l, None)?;
        let of = |tid: i32| (schedstat_ns(tid).unwrap_or(0), runs(tid).unwrap_or(0));
        let writer = named_thread(pid, "rxsched-pcap").map_or((0, 0), of);
        Ok(Threads {
            napi: (c.napi_ns, c.napi_runs),
            reader: of(pid as i32),
            writer,
        })
    }
}

/// The thread of process `pid` named `comm`, if any.
fn named_thread(pid: u32, comm: &str) -> Option<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .find(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == comm))
        .and_then(|t| t.file_name().to_str()?.parse().ok())
}

/// What a capturer got down.
#[derive(Debug, Clone, Default)]
struct Captured {
    /// Frames written.
    written: f64,
    /// Drops it counted, by point (ours only).
    drops: Map<String, Value>,
    /// Its input-inhibit episodes (ours only).
    inhibits: Option<f64>,
    /// Ours: its threads' and the receive threads' CPU time and runs,
    /// before and after the load.
    threads: Option<(Threads, Threads)>,
}

/// A calibration trial (`calibrate --real`): our monitor with feedback,
/// copying or (`take`) taking, to /dev/null, at `rate`; `paused`: stopped
/// (SIGSTOP) once attached, so that its ring fills and stays full.
pub fn calibration_trial(
    l: &Lab,
    take: bool,
    paused: bool,
    rate: f64,
    secs: f64,
    dut: &Dut,
) -> Result<Point, BenchError> {
    let v = Variant {
        label: "rxsched-capture".into(),
        tool: Tool::Ours {
            form: CaptureForm::Feedback,
            limit: false,
            take,
        },
        file: false,
    };
    trial(l, &v, rate, secs, dut, Path::new("/dev/null"), paused)
}

/// One point: `v` capturing while the generator offers `rate` for `secs`
/// (`paused`: see [`calibration_trial`]).
fn trial(
    l: &Lab,
    v: &Variant,
    rate: f64,
    secs: f64,
    dut: &Dut,
    dir: &Path,
    paused: bool,
) -> Result<Point, BenchError> {
    l.reset_dut_receive()?;
    let out: PathBuf = if v.file {
        dir.join(format!("{}.pcap", v.label))
    } else {
        PathBuf::from("/dev/null")
    };
    let capturer = v
        .tool
        .proc(out.display().to_string(), secs + 8.0, dut.wake_cost_ns);
    let capturer = start(l, capturer)?;
    std::thread::sleep(v.tool.settle());
    let ours = matches!(v.tool, Tool::Ours { .. });
    if paused {
        capturer.pause();
    }
    let before = ours.then(|| Threads::read(l, capturer.pid())).transpose()?;
    let spin = start(l, Proc::Spin { secs })?;
    let g: GenReport = run(l, Gen::new(rate, secs).to_mac(super::proc::NOBODY_MAC))?;
    let sp: SpinReport = spin.finish()?;
    let after = ours.then(|| Threads::read(l, capturer.pid())).transpose()?;
    if paused {
        capturer.resume();
    }
    std::thread::sleep(Duration::from_millis(300));
    capturer.interrupt();
    let mut c = v.tool.captured(capturer, &v.label)?;
    c.threads = before.zip(after);
    if v.file {
        std::fs::remove_file(&out).ok();
    }
    Ok(point(&g, &sp, c, dut.idle))
}

/// The point of a capture trial; `idle` is the compute process's progress
/// rate on an idle DUT.
fn point(g: &GenReport, sp: &SpinReport, c: Captured, idle: f64) -> Point {
    let dur = g.duration_s.max(1e-9);
    let mut p = Point::xy(
        "offered_pps",
        g.achieved_pps,
        "delivered_pps",
        c.written / dur,
    );
    // What the loss-free rate (MLFRR) is computed from: every frame sent
    // and not written counts as lost, at the drop point our monitor names,
    // and the rest (a peer's losses, frames lost before the monitor saw
    // them) as `not_written`.
    let sent = g.sent as f64;
    p.set("arrived", sent);
    let mut drops = c.drops;
    let named: f64 = drops.values().filter_map(Value::as_f64).sum();
    let rest = (sent - c.written - named).max(0.0);
    if rest > 0.0 {
        drops.insert("not_written".into(), rest.into());
    }
    p.0.insert("drops".into(), Value::Object(drops));
    p.set("written", c.written);
    if let Some(n) = c.inhibits {
        p.set("inhibits", n);
    }
    p.set(
        "compute_progress",
        (sp.progress_rate / idle).clamp(0.0, 1.0),
    );
    p.set("dut_steal_share", sp.steal_s / sp.duration_s.max(1e-9));
    if let Some((a, b)) = c.threads {
        let share = |x: (u64, u64), y: (u64, u64)| y.0.saturating_sub(x.0) as f64 / 1e9 / dur;
        let per_s = |x: (u64, u64), y: (u64, u64)| y.1.saturating_sub(x.1) as f64 / dur;
        p.set("napi_cpu_share", share(a.napi, b.napi));
        p.set("napi_runs_per_s", per_s(a.napi, b.napi));
        p.set("router_runs_per_s", per_s(a.reader, b.reader));
        p.set("writer_runs_per_s", per_s(a.writer, b.writer));
        let mut cpu = Map::new();
        let compute = (sp.progress_rate / idle).clamp(0.0, 1.0);
        let parts = [
            ("user:compute", compute),
            ("napi", share(a.napi, b.napi)),
            ("router", share(a.reader, b.reader)),
            ("writer", share(a.writer, b.writer)),
        ];
        let threads: f64 = parts.iter().skip(1).map(|(_, v)| v).sum();
        for (k, v) in
            parts
                .into_iter()
                .chain(super::forward::remainder(compute, sp.cpu_share, threads))
        {
            cpu.insert(k.into(), v.into());
        }
        p.0.insert("cpu".into(), Value::Object(cpu));
    }
    p
}

/// The captures it compares ours with, each started pinned to the DUT CPU.
pub const TOOLS: super::Tools = &[
    ("tcpdump", "tcpdump"),
    ("tshark", "tshark"),
    ("xdpdump", "xdp-tools"),
    ("netsniff-ng", "netsniff-ng"),
    super::TASKSET,
];

/// Runs the capture benchmark: `real-capture`.
pub fn capture(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    super::calibrate::with_pace(opts, progress, |dut| capture_at(opts, dut, progress))
}

/// [`capture`] with the compute process measured alone.
fn capture_at(
    opts: &BenchOpts,
    dut: &Dut,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-capture")?;
    let l = &opts.lab;
    let (rates, secs) = rates(opts.quick);
    let dir = out_dir(opts)?;
    let all = variants();
    let mut sweep = Sweep::over_rates(all.len(), &rates, progress);
    let mut series = Vec::new();
    for v in &all {
        series.push(sweep.series(&v.label, |r| trial(l, v, r, secs, dut, &dir, false))?);
    }
    Ok(vec![result(&file, series)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_capture_count() {
        let e = "tcpdump: listening on d0\n1234 packets captured\n1300 packets received by filter\n66 packets dropped by kernel\n";
        assert_eq!(captured(e), Some(1234));
        assert_eq!(
            captured("Capturing on 'd0'\n 17 packets captured\n"),
            Some(17)
        );
        assert_eq!(captured("nothing"), None);
        let x = "listening on d0, ingress XDP program ID 7 func xdpdump\n\n2000 packets captured\n0 packets dropped by perf ring\n";
        assert_eq!(captured(x), Some(2000));
        let n = "Running! Hang up with ^C!\n\n        2006  packets incoming (6 unread on exit)\n        2006  packets passed filter\n           0  packets failed filter (out of space)\n";
        assert_eq!(captured(n), Some(2000));
    }

    /// The check file names the series this bench measures, in its order.
    #[test]
    fn the_check_file_names_the_series_measured() {
        let file = BenchFile::load("real-capture").unwrap();
        let labels: Vec<String> = variants().into_iter().map(|v| v.label).collect();
        assert_eq!(file.bench.series, labels);
    }

    /// Our monitor's drops stand as it named them, what else was not
    /// written is `not_written`, and a peer's losses are all that.
    #[test]
    fn every_frame_sent_is_written_or_dropped() {
        let g: GenReport = serde_json::from_value(serde_json::json!({
            "engine": "xdp", "sent": 1000, "duration_s": 2.0,
            "requested_pps": 500.0, "achieved_pps": 500.0, "waits": 0
        }))
        .unwrap();
        let sp: SpinReport = serde_json::from_value(serde_json::json!({
            "duration_s": 2.0, "cpu_s": 1.0, "cpu_share": 0.5,
            "iterations": 1000, "steal_s": 0.2, "progress_rate": 500.0
        }))
        .unwrap();
        let mut drops = Map::new();
        drops.insert("filter_queue".into(), Value::from(300u64));
        let ours = Captured {
            written: 600.0,
            drops,
            inhibits: Some(4.0),
            threads: None,
        };
        let p = point(&g, &sp, ours, 1000.0);
        assert_eq!(p.get("drops.filter_queue"), Some(300.0));
        assert_eq!(p.get("drops.not_written"), Some(100.0));
        assert_eq!(
            p.drops() + p.get("written").unwrap(),
            p.get("arrived").unwrap()
        );
        assert_eq!(
            (p.get("delivered_pps"), p.get("inhibits")),
            (Some(300.0), Some(4.0))
        );
        assert_eq!(
            (p.get("compute_progress"), p.get("dut_steal_share")),
            (Some(0.5), Some(0.1))
        );
        let peer = Captured {
            written: 1000.0,
            ..Captured::default()
        };
        let p = point(&g, &sp, peer, 1000.0);
        assert_eq!((p.drops(), p.get("inhibits")), (0.0, None));
    }
}
