//! `rxsched capture`: the packet monitor of Mogul & Ramakrishnan §8 on real
//! frames. A polling thread (the core's [`PollLoop`], as in the router)
//! takes frames off the interface, an optional rule set picks them, and
//! they go onto a bounded packet-filter queue that a writer thread drains
//! into a pcap file. With feedback (M3 in the monitor's form) input stops
//! while fewer than `min_free` slots are free, so the writer gets the CPU
//! under overload, and starts again when the writer has drained the queue
//! to `resume_at` (it kicks the polling thread awake) or, at the latest,
//! when a timeout expires. Without `resume_at` only the timeout ends an
//! inhibit, as in Mogul & Ramakrishnan's monitor (§8.2).
//!
//! A monitor copies: by default the host's stack keeps every frame it
//! gets ([`crate::backend::copy`] on XDP, a plain packet socket on
//! AF_PACKET), and input control acts on the copies (an inhibit stops
//! reading them, not the host's receive work). With `take` (a dedicated monitor
//! port, such as a switch's mirror port) the monitor takes the frames
//! instead, and its input control holds off the device's receive work.
//!
//! Every frame read is written, dropped at the packet-filter queue
//! (`filter_queue`), refused by the filter (counted by rule), or in
//! flight; the drops before it (`nic_rx_ring`, `xsk_rx_ring`, and for
//! copies `copy_ring`) are read back from the kernel.

mod save;
mod writer;

pub use save::{files, CaptureFile, Format, Opener, Rotation, Stats};

use crate::backend::{Feed, RxBackend, Wait};
use crate::bpf::CopyOutcome;
use crate::pcap_filter::{Filter, Node, Placement};
use crate::rules::{Action, Flow, Rules};
use crate::runtime::{App, Poller, RunConfig};
use crate::stage::StageQueue;
use crate::sys::{self, SysError, SysResult};
use rxsched_core::{Clock, DropPoint, InhibitCause, Nanos, PollLoop, QueueFeedback};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;
use writer::{spawn_writer, Shared};

/// A monitor's configuration.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    /// Backend, quota, M4, CPU (both threads), duration, live counters.
    pub run: RunConfig,
    /// The interface watched.
    pub iface: String,
    /// The capture file (`/dev/null` works), or the first of a rotation.
    pub out: PathBuf,
    /// pcap or pcapng.
    pub format: Format,
    /// tcpdump's `-C`, `-G`, `-W`.
    pub rotation: Rotation,
    /// `-c`: stop once this many frames are written.
    pub count: Option<u64>,
    /// `--per-queue`: one file per receive queue (`x-q0.pcap`, ...)
    /// instead of one with every queue's frames in time order.
    pub per_queue: bool,
    /// Bytes of each frame kept (like tcpdump's `-s`).
    pub snaplen: u32,
    /// Frames the rules deny are not captured.
    pub filter: Option<Rules>,
    /// tcpdump's filter expression: frames it refuses are not captured.
    /// On XDP copies, what fits runs in the XDP program (a refused frame
    /// is never copied); the rest runs in the polling thread.
    pub expression: Option<Filter>,
    /// The packet-filter queue's length.
    pub queue: usize,
    /// M3: inhibit input while fewer than this many slots are free; `None`: off.
    pub min_free: Option<u32>,
    /// M3: the inhibit ends when the writer has drained the queue to this
    /// many frames; `None`: only by the timeout (the paper's form).
    pub resume_at: Option<u32>,
    /// M3: an inhibit ends after this long at the latest.
    pub timeout_ns: u64,
    /// Take the frames (the host's stack does not see them) instead of
    /// copying them.
    pub take: bool,
    /// `--metrics`: where the polling thread publishes its counters.
    pub metrics: Option<crate::metrics::Publisher>,
}

/// What a capture did, printed as JSON at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaptureReport {
    /// The file written (the `-w` name).
    pub file: String,
    /// Every file written, in order (more than one when rotating).
    #[serde(default)]
    pub files: Vec<String>,
    /// `copy` (the host keeps its frames) or `take`.
    #[serde(default)]
    pub mode: String,
    /// Seconds it ran.
    pub duration_s: f64,
    /// Frames that reached the interface: read, or dropped before.
    pub arrived: u64,
    /// Frames (or copies) read off the ring.
    pub rx: u64,
    /// Frames written to the file.
    pub written: u64,
    /// Bytes of frame data written (after the snap length).
    pub bytes_written: u64,
    /// Drops by point: `nic_rx_ring`, `xsk_rx_ring`, `copy_ring`,
    /// `filter_queue`.
    pub drops: BTreeMap<DropPoint, u64>,
    /// Frames the filter refused, by the rule that refused them, or by
    /// where the expression refused them (`expression in xdp`,
    /// `expression in polling thread`).
    pub filtered: BTreeMap<String, u64>,
    /// The filter expression, and where each part of it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<ExpressionReport>,
    /// Frames neither written nor dropped when it stopped.
    pub in_flight: u64,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<InhibitCause, u64>,
    /// Interrupt/poll mode switches.
    pub mode_switches: u64,
    /// CPU time of the polling thread, in seconds.
    pub cpu_s: f64,
    /// Why the capture ended early, if it did (the interface disappeared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
}

/// A filter expression, and where each part of it ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExpressionReport {
    /// The expression as given.
    pub text: String,
    /// The part the XDP program ran (a refused frame was never copied).
    pub in_xdp: Option<String>,
    /// The part the polling thread ran.
    pub in_polling_thread: Option<String>,
}

/// What `filtered` counts the XDP program's refusals under.
pub const FILTERED_IN_XDP: &str = "expression in xdp";
/// What `filtered` counts the polling thread's refusals under.
pub const FILTERED_IN_POLLING: &str = "expression in polling thread";

impl CaptureConfig {
    /// Where each part of the filter expression runs: what fits in the
    /// XDP program when it copies frames, the rest in the polling thread.
    pub fn placement(&self) -> Option<Placement> {
        let in_xdp = self.run.backend == crate::runtime::Backend::Xdp;
        self.expression.as_ref().map(|f| f.place(in_xdp))
    }
}

/// Writer counter: frames written.
pub(crate) const WRITTEN: usize = 0;
/// Writer counter: bytes of frame data written.
pub(crate) const BYTES: usize = 1;

/// The monitor's stage: the filter, then the packet-filter queue.
pub struct CaptureStage {
    queue: Arc<StageQueue>,
    filter: Option<Rules>,
    /// The part of the filter expression the polling thread runs.
    expression: Option<Node>,
    /// Where each part of the expression runs, for the report.
    placed: Option<ExpressionReport>,
    filtered: BTreeMap<String, u64>,
    snaplen: usize,
    queue_drops: u64,
    feedback: bool,
}

impl App for CaptureStage {
    fn frame(&mut self, port: usize, f: &[u8], lp: &mut PollLoop, now: Nanos) {
        self.frame_on(port, None, f, lp, now)
    }

    /// A frame of receive queue `queue` (one copy ring holds every
    /// queue's), or of the queue of port `port` (a socket per queue).
    fn frame_on(
        &mut self,
        port: usize,
        queue: Option<u32>,
        f: &[u8],
        _lp: &mut PollLoop,
        _now: Nanos,
    ) {
        if let Some(e) = &self.expression {
            if !e.accepts(f, f.len() as u32) {
                *self.filtered.entry(FILTERED_IN_POLLING.into()).or_default() += 1;
                return;
            }
        }
        if let Some(rules) = &self.filter {
            let (action, by) = rules.verdict(&Flow::of_frame(f));
            if action == Action::Deny {
                *self.filtered.entry(rules.label(by)).or_default() += 1;
                return;
            }
        }
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        let q = queue.unwrap_or(port as u32);
        if !self.queue.push(f, self.snaplen, q, ts) {
            self.queue_drops += 1;
        }
    }

    fn watched(&self) -> Option<&StageQueue> {
        self.feedback.then_some(&*self.queue)
    }
}

/// The monitor over a receive backend `R`, clock `C` and way of waiting
/// `W`: its polling thread and its writer thread.
pub struct Capture<R, C, W> {
    poll: Poller<R, C, W, CaptureStage>,
    writer: Option<std::thread::JoinHandle<std::io::Result<save::Savers>>>,
    shared: Arc<Shared>,
    start_ns: u64,
}

fn epoch_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64
}

impl<R: RxBackend, C: Clock, W: Wait> Capture<R, C, W> {
    /// A monitor reading `rx` (a device's receive queues) and writing
    /// the files `open` opens from a writer thread (pinned to `cfg.cpu`,
    /// normal priority). The first file is opened here.
    pub fn new(
        rx: Vec<R>,
        open: Opener,
        cfg: &CaptureConfig,
        clock: C,
        wait: W,
    ) -> SysResult<Self> {
        let start_ns = epoch_ns();
        let saver = save::Savers::new(
            &cfg.out,
            cfg.format,
            cfg.snaplen,
            &cfg.iface,
            cfg.per_queue,
            cfg.rotation,
            open,
            start_ns / 1_000_000_000,
        )
        .map_err(|e| SysError {
            what: cfg.out.display().to_string(),
            syscall: "open",
            source: e,
        })?;
        let mut fac = cfg.run.facility(1)?;
        let cap = cfg.queue.clamp(1, 1 << 20) as u32;
        if let Some(free) = cfg.min_free {
            let mut fb = QueueFeedback::min_free(cap, free, cfg.timeout_ns);
            if let Some(low) = cfg.resume_at {
                fb = fb.resume_at_len(low);
            }
            fac = fac.with_feedback(fb);
        }
        let queue = Arc::new(StageQueue::create("rxsched-capture", cap, 2)?);
        let shared = Arc::new(Shared::default());
        let writer = spawn_writer(queue.clone(), saver, shared.clone(), cfg.count, cfg.run.cpu)?;
        let placement = cfg.placement();
        let stage = CaptureStage {
            queue,
            filter: cfg.filter.clone(),
            expression: placement
                .as_ref()
                .and_then(|p| p.polling.clone())
                .map(|(n, _)| n),
            placed: placement.map(|pl| ExpressionReport {
                text: cfg
                    .expression
                    .as_ref()
                    .map_or(String::new(), |f| f.text().to_string()),
                in_xdp: pl.xdp.map(|(_, t)| t),
                in_polling_thread: pl.polling.map(|(_, t)| t),
            }),
            filtered: BTreeMap::new(),
            snaplen: cfg.snaplen.max(1) as usize,
            queue_drops: 0,
            feedback: cfg.min_free.is_some(),
        };
        let poll = cfg.run.poller(rx, fac, stage, clock, wait)?;
        Ok(Capture {
            poll,
            writer: Some(writer),
            shared,
            start_ns,
        })
    }

    /// The polling thread (to attach the real device's gate and link
    /// watch: the capture ends, with its file complete, if it disappears).
    pub fn poller_mut(&mut self) -> &mut Poller<R, C, W, CaptureStage> {
        &mut self.poll
    }

    /// Frames written so far.
    pub fn written(&self) -> u64 {
        self.poll.app.queue.counter(WRITTEN)
    }

    /// Frames taken off the ring so far.
    pub fn taken(&self) -> u64 {
        self.poll.taken
    }

    /// Frames dropped at the packet-filter queue so far.
    pub fn queue_drops(&self) -> u64 {
        self.poll.app.queue_drops
    }

    /// Input-inhibit episodes so far.
    pub fn inhibits(&self) -> u64 {
        self.poll.inhibits()
    }

    /// Carries out one unit of work, or sleeps once (until input, the end
    /// of an inhibit, or `deadline`). Returns true if it slept.
    pub fn turn(&mut self, deadline: Nanos) -> SysResult<bool> {
        self.poll.turn(deadline)
    }

    /// Runs until `cfg.duration_s` has passed or a stop signal arrives,
    /// then lets the writer finish the file and reports.
    pub fn run(mut self, cfg: &CaptureConfig) -> SysResult<CaptureReport> {
        let mut prev = (0u64, 0u64, self.poll.clock.now());
        let writer = self.writer.take();
        // A writer that stopped early (a write error) ends the run;
        // `finish` reports its error.
        let gone = || writer.as_ref().is_some_and(|w| w.is_finished());
        // pcapng's statistics blocks need the counts as they go.
        let ng = cfg.format == Format::Pcapng;
        let mut cadence = crate::metrics::Cadence::new(
            cfg.run.stats_every_s,
            cfg.metrics.is_some() || ng,
            prev.2,
        );
        let (shared, start_ns) = (self.shared.clone(), self.start_ns);
        let (duration_s, cpu_s) = self.poll.run_for(
            cfg.run.duration_s,
            cadence.every_s(),
            &mut |p, now| {
                if cfg.metrics.is_some() || ng {
                    let cpu_s = sys::thread_cpu_ns() as f64 / 1e9;
                    if let Ok(r) = report_of(p, cfg, 0.0, cpu_s) {
                        if let Some(m) = &cfg.metrics {
                            m.publish(crate::metrics::capture_page(&r, &cfg.iface));
                        }
                        if ng {
                            let s = stats_of(&r, start_ns);
                            *shared.stats.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
                        }
                    }
                }
                if cadence.line_due(now) {
                    eprintln!("{}", live_line(p, &mut prev, now))
                }
            },
            &|_| gone(),
        )?;
        self.writer = writer;
        self.finish(cfg, duration_s, cpu_s)
    }

    /// Closes the queue, waits for the writer to drain it and flush the
    /// file, and reports.
    pub fn finish(
        mut self,
        cfg: &CaptureConfig,
        duration_s: f64,
        cpu_s: f64,
    ) -> SysResult<CaptureReport> {
        self.poll.app.queue.stop();
        let saver = match self.writer.take() {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the pcap writer thread panicked"))),
            None => Err(std::io::Error::other("the pcap writer was already joined")),
        };
        let failed = |e| SysError {
            what: cfg.out.display().to_string(),
            syscall: "write",
            source: e,
        };
        let saver = saver.map_err(failed)?;
        let mut r = report_of(&mut self.poll, cfg, duration_s, cpu_s)?;
        let names = saver
            .finish(Some(&stats_of(&r, self.start_ns)))
            .map_err(failed)?;
        r.files = names.iter().map(|p| p.display().to_string()).collect();
        Ok(r)
    }
}

/// A statistics block's counts from a report.
fn stats_of(r: &CaptureReport, start_ns: u64) -> Stats {
    let if_drop = r.drops.get(&DropPoint::NicRxRing).copied().unwrap_or(0);
    let all: u64 = r.drops.values().sum();
    Stats {
        start_ns,
        now_ns: epoch_ns(),
        received: r.arrived,
        if_drop,
        os_drop: all - if_drop,
        filter_accept: r
            .arrived
            .saturating_sub(if_drop + r.filtered.values().sum::<u64>()),
        delivered: r.written,
        by_point: r
            .drops
            .iter()
            .map(|(p, n)| (p.name().to_string(), *n))
            .collect(),
    }
}

/// The report of the monitor around `p` so far.
fn report_of<R: RxBackend, C: Clock, W: Wait>(
    p: &mut Poller<R, C, W, CaptureStage>,
    cfg: &CaptureConfig,
    duration_s: f64,
    cpu_s: f64,
) -> SysResult<CaptureReport> {
    let written = p.app.queue.counter(WRITTEN);
    let (ring, sock) = p.ring_drops()?;
    let mut drops = BTreeMap::new();
    drops.insert(DropPoint::NicRxRing, ring);
    if sock > 0 {
        drops.insert(DropPoint::XskRxRing, sock);
    }
    // Copies: those that went uncopied, and those still in the ring.
    let (mut uncopied, mut left) = (0, 0);
    let mut filtered = p.app.filtered.clone();
    if cfg.take {
        // Refused by the filter in XDP: left to the stack, untaken.
        let c = p.program_counts()?;
        if let Some(&n) = c.get(CopyOutcome::Filtered as usize).filter(|&&n| n > 0) {
            filtered.insert(FILTERED_IN_XDP.into(), n);
            uncopied += n;
        }
    } else {
        let c = p.program_counts()?;
        left = c
            .get(CopyOutcome::Copied as usize)
            .map_or(0, |n| n.saturating_sub(p.taken));
        if let Some(&n) = c.get(CopyOutcome::RingFull as usize) {
            drops.insert(DropPoint::CopyRing, n);
            uncopied += n;
        }
        if let Some(&n) = c.get(CopyOutcome::Filtered as usize).filter(|&&n| n > 0) {
            filtered.insert(FILTERED_IN_XDP.into(), n);
            uncopied += n;
        }
    }
    drops.insert(DropPoint::FilterQueue, p.app.queue_drops);
    let inhibits = p.lp.inhibits().into_iter().collect();
    Ok(CaptureReport {
        file: cfg.out.display().to_string(),
        files: vec![],
        mode: if cfg.take { "take" } else { "copy" }.to_string(),
        duration_s,
        arrived: p.taken + ring + sock + uncopied + left,
        rx: p.taken,
        written,
        bytes_written: p.app.queue.counter(BYTES),
        drops,
        filtered,
        expression: p.app.placed.clone(),
        in_flight: p.app.queue.len() as u64 + left,
        inhibits,
        mode_switches: p.lp.mode_switches(),
        cpu_s,
        fault: p.fault().map(str::to_string),
    })
}

fn live_line<R, C, W>(
    p: &Poller<R, C, W, CaptureStage>,
    prev: &mut (u64, u64, u64),
    now: u64,
) -> String
where
    R: RxBackend,
    C: Clock,
    W: Wait,
{
    let (rx, w) = (p.taken, p.app.queue.counter(WRITTEN));
    let dt = now.saturating_sub(prev.2).max(1) as f64 / 1e9;
    let line = format!(
        "capture: rx {:.0}/s written {:.0}/s; drops filter_queue {}; filtered {}; inhibits {}",
        (rx - prev.0) as f64 / dt,
        (w - prev.1) as f64 / dt,
        p.app.queue_drops,
        p.app.filtered.values().sum::<u64>(),
        p.inhibits(),
    );
    *prev = (rx, w, now);
    line
}

/// Runs the monitor on a real interface until its duration is over, a
/// stop signal arrives or the interface disappears.
pub fn run(cfg: &CaptureConfig) -> SysResult<CaptureReport> {
    let cfg = &CaptureConfig {
        run: cfg.run.launch()?,
        ..cfg.clone()
    };
    let filter = cfg.placement().and_then(|p| p.xdp).map(|(prog, _)| prog);
    let feed = match (cfg.take, filter) {
        (true, Some(filter)) => Feed::Take { filter },
        (true, None) => Feed::All,
        (false, filter) => Feed::Copy { filter },
    };
    let dev = cfg.run.open_one("capture", &cfg.iface, &feed)?;
    // The writer thread starts in `new`, before this thread's priority.
    let mut cap = Capture::new(dev.rx, files(), cfg, sys::MonoClock, dev.wait)?;
    cap.poller_mut().attach(dev.gate, dev.links)?;
    crate::runtime::take_priority(dev.prio)?;
    let how = match (cfg.take, cfg.expression.is_some()) {
        (true, true) => "taking the frames the filter accepts",
        (true, false) => "taking every frame",
        (false, _) => "copies",
    };
    let how = format!("{how}, {}", cfg.run.backend.sockets());
    crate::runtime::listening("capture", std::slice::from_ref(&cfg.iface), &how);
    cap.run(cfg)
}

#[cfg(test)]
mod tests;
