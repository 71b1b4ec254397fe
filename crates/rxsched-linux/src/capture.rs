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
//! Every frame taken off the ring is written, dropped at the packet-filter
//! queue (`filter_queue`), refused by the filter (counted by rule), or in
//! flight; the ring's own drops are read back from the kernel.

use crate::backend::{RxBackend, Wait};
use crate::rules::{Action, Flow, Rules};
use crate::runtime::{App, Gate, Poller, RunConfig, Servicing};
use crate::stage::StageQueue;
use crate::sys::{self, SysError, SysResult};
use rxsched_core::{Clock, DropPoint, InhibitCause, Nanos, PollLoop, QueueFeedback};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A monitor's configuration.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    /// Backend, quota, M4, CPU (both threads), duration, live counters.
    pub run: RunConfig,
    /// The interface watched.
    pub iface: String,
    /// The pcap file (`/dev/null` works).
    pub out: PathBuf,
    /// Bytes of each frame kept (like tcpdump's `-s`).
    pub snaplen: u32,
    /// Frames the rules deny are not captured.
    pub filter: Option<Rules>,
    /// The packet-filter queue's length.
    pub queue: usize,
    /// M3: inhibit input while fewer than this many slots are free; `None`: off.
    pub min_free: Option<u32>,
    /// M3: the inhibit ends when the writer has drained the queue to this
    /// many frames; `None`: only by the timeout (the paper's form).
    pub resume_at: Option<u32>,
    /// M3: an inhibit ends after this long at the latest.
    pub timeout_ns: u64,
}

/// What a capture did, printed as JSON at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaptureReport {
    /// The file written.
    pub file: String,
    /// Seconds it ran.
    pub duration_s: f64,
    /// Frames that reached the interface's ring: taken off it or dropped there.
    pub arrived: u64,
    /// Frames taken off the ring.
    pub rx: u64,
    /// Frames written to the file.
    pub written: u64,
    /// Bytes of frame data written (after the snap length).
    pub bytes_written: u64,
    /// Drops by point: `nic_rx_ring`, `xsk_rx_ring`, `filter_queue`.
    pub drops: BTreeMap<DropPoint, u64>,
    /// Frames the filter refused, by the rule that refused them.
    pub filtered: BTreeMap<String, u64>,
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

/// Writer counter: frames written.
const WRITTEN: usize = 0;
/// Writer counter: bytes of frame data written.
const BYTES: usize = 1;
/// Frames the writer takes off the queue at a time.
const WRITE_BATCH: u32 = 64;

/// The monitor's stage: the filter, then the packet-filter queue.
pub struct CaptureStage {
    queue: Arc<StageQueue>,
    filter: Option<Rules>,
    filtered: BTreeMap<String, u64>,
    snaplen: usize,
    queue_drops: u64,
    feedback: bool,
}

impl App for CaptureStage {
    fn frame(&mut self, _port: usize, f: &[u8], _lp: &mut PollLoop, _now: Nanos) {
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
        if !self.queue.push(f, self.snaplen, 0, ts) {
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
    writer: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl<R: RxBackend, C: Clock, W: Wait> Capture<R, C, W> {
    /// A monitor reading `rx` and writing pcap to `out` from a writer
    /// thread (pinned to `cfg.cpu`, normal priority).
    pub fn new(
        rx: R,
        out: impl Write + Send + 'static,
        cfg: &CaptureConfig,
        clock: C,
        wait: W,
    ) -> SysResult<Self> {
        let mut fac = cfg.run.facility();
        let cap = cfg.queue.clamp(1, 1 << 20) as u32;
        if let Some(free) = cfg.min_free {
            let mut fb = QueueFeedback::min_free(cap, free, cfg.timeout_ns);
            if let Some(low) = cfg.resume_at {
                fb = fb.resume_at_len(low);
            }
            fac = fac.with_feedback(fb);
        }
        let queue = Arc::new(StageQueue::create("rxsched-capture", cap, 2)?);
        let writer = spawn_writer(queue.clone(), out, cfg)?;
        let stage = CaptureStage {
            queue,
            filter: cfg.filter.clone(),
            filtered: BTreeMap::new(),
            snaplen: cfg.snaplen.max(1) as usize,
            queue_drops: 0,
            feedback: cfg.min_free.is_some(),
        };
        let poll = cfg.run.poller(vec![rx], fac, stage, clock, wait)?;
        Ok(Capture {
            poll,
            writer: Some(writer),
        })
    }

    /// Drives `gate` with the loop's inhibits (threaded NAPI with XDP).
    pub fn with_gate(mut self, gate: Box<dyn Gate>) -> SysResult<Self> {
        self.poll = self.poll.with_gate(gate)?;
        Ok(self)
    }

    /// Watches the interface's link: reported when it goes down or comes
    /// back, and the capture ends (with its file complete) if it disappears.
    pub fn with_links(mut self, links: crate::links::LinkWatch) -> Self {
        self.poll = self.poll.with_links(links);
        self
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
        let (duration_s, cpu_s) = self.poll.run_for(
            cfg.run.duration_s,
            cfg.run.stats_every_s,
            &mut |p, now| eprintln!("{}", live_line(p, &mut prev, now)),
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
        let written_ok = {
            let queue = &self.poll.app.queue;
            queue.stop();
            match self.writer.take() {
                Some(h) => h.join().unwrap_or_else(|_| {
                    Err(std::io::Error::other("the pcap writer thread panicked"))
                }),
                None => Ok(()),
            }
        };
        written_ok.map_err(|e| SysError {
            what: cfg.out.display().to_string(),
            syscall: "write",
            source: e,
        })?;
        let written = self.written();
        let p = &mut self.poll;
        let (ring, sock) = p.ring_drops()?;
        let mut drops = BTreeMap::new();
        drops.insert(DropPoint::NicRxRing, ring);
        if sock > 0 {
            drops.insert(DropPoint::XskRxRing, sock);
        }
        drops.insert(DropPoint::FilterQueue, p.app.queue_drops);
        let inhibits = p.lp.inhibits().into_iter().collect();
        Ok(CaptureReport {
            file: cfg.out.display().to_string(),
            duration_s,
            arrived: p.taken + ring + sock,
            rx: p.taken,
            written,
            bytes_written: p.app.queue.counter(BYTES),
            drops,
            filtered: std::mem::take(&mut p.app.filtered),
            in_flight: p.app.queue.len() as u64,
            inhibits,
            mode_switches: p.lp.mode_switches(),
            cpu_s,
            fault: p.fault().map(str::to_string),
        })
    }
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

/// The writer thread: pcap header, then every queued frame; when the
/// polling thread says stop, it writes what is queued and flushes.
fn spawn_writer(
    queue: Arc<StageQueue>,
    out: impl Write + Send + 'static,
    cfg: &CaptureConfig,
) -> SysResult<std::thread::JoinHandle<std::io::Result<()>>> {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let header = PcapHeader {
        snaplen: cfg.snaplen,
        ..PcapHeader::default()
    };
    let cpu = cfg.run.cpu;
    let io = |e: pcap_file::PcapError| std::io::Error::other(e.to_string());
    std::thread::Builder::new()
        .name("rxsched-pcap".into())
        .spawn(move || {
            if let Some(c) = cpu {
                sys::pin_to_cpu(c).map_err(|e| e.source)?;
            }
            let mut w =
                PcapWriter::with_header(std::io::BufWriter::new(out), header).map_err(io)?;
            loop {
                let n = queue.len().min(WRITE_BATCH);
                if n == 0 {
                    if queue.stopping() {
                        break;
                    }
                    queue.wait_for_work(100).map_err(|e| e.source)?;
                    continue;
                }
                for k in 0..n {
                    let Some(f) = queue.peek_at(k) else { break };
                    let ts = Duration::from_nanos(f.ts_ns);
                    w.write_packet(&PcapPacket::new(ts, f.orig_len, f.data))
                        .map_err(io)?;
                    queue.count(WRITTEN, 1);
                    queue.count(BYTES, f.data.len() as u64);
                }
                queue.pop(n);
            }
            w.into_writer().flush()
        })
        .map_err(|e| SysError {
            what: "pcap writer".into(),
            syscall: "clone",
            source: e,
        })
}

/// Opens the output file, naming it in the error.
fn create(path: &Path) -> SysResult<std::fs::File> {
    std::fs::File::create(path).map_err(|e| SysError {
        what: path.display().to_string(),
        syscall: "open",
        source: e,
    })
}

/// Runs the monitor on a real interface until its duration is over, a
/// stop signal arrives or the interface disappears.
pub fn run(cfg: &CaptureConfig) -> SysResult<CaptureReport> {
    let out = create(&cfg.out)?;
    let cfg = &CaptureConfig {
        run: cfg.run.launch()?,
        ..cfg.clone()
    };
    let ifaces = std::slice::from_ref(&cfg.iface);
    let (mut ports, gate, prio) = {
        let o = cfg.run.backend.open(ifaces, Servicing::Polling)?;
        (o.ports, o.gate, o.thread_prio)
    };
    let rx = ports.remove(0).rx;
    let links = crate::links::LinkWatch::new("capture", ifaces, sys::mono_ns())?;
    let wait = crate::backend::packet::EpollWait::new()?;
    // The writer thread starts in `new`, before this thread's priority.
    let cap = Capture::new(rx, out, cfg, sys::MonoClock, wait)?
        .with_gate(gate)?
        .with_links(links);
    crate::runtime::take_priority(prio)?;
    cap.run(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::mem::{self, FakeClock, FakeWait};
    use crate::wire::{build_udp_frame, Mac};
    use rxsched_core::MS;
    use std::sync::{Condvar, Mutex};

    /// A file in memory; writes wait while `hold` is set.
    #[derive(Clone, Default)]
    struct MemFile {
        data: Arc<Mutex<Vec<u8>>>,
        hold: Arc<(Mutex<bool>, Condvar)>,
    }

    impl MemFile {
        fn held() -> MemFile {
            let f = MemFile::default();
            *f.hold.0.lock().unwrap() = true;
            f
        }
        fn release(&self) {
            *self.hold.0.lock().unwrap() = false;
            self.hold.1.notify_all();
        }
    }

    impl Write for MemFile {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let (m, cv) = &*self.hold;
            let _g = cv.wait_while(m.lock().unwrap(), |held| *held).unwrap();
            self.data.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn frame(size: usize, dport: u16, seq: u64) -> Vec<u8> {
        let mut b = vec![0u8; 2048];
        let n = build_udp_frame(
            &mut b,
            size,
            Mac([2, 0, 0, 0, 0, 1]),
            Mac([2, 0, 0, 0, 0, 2]),
            [198, 18, 0, 1],
            [198, 19, 0, 1],
            (4000, dport),
            seq,
            0,
        );
        b.truncate(n);
        b
    }

    fn cfg(queue: usize, min_free: Option<u32>, filter: Option<Rules>) -> CaptureConfig {
        CaptureConfig {
            run: RunConfig {
                backend: crate::runtime::Backend::Packet,
                quota: rxsched_core::Quota::Limited(8),
                duration_s: 1.0,
                ..RunConfig::default()
            },
            iface: "mem0".into(),
            out: "mem.pcap".into(),
            snaplen: 96,
            filter,
            queue,
            min_free,
            resume_at: None,
            timeout_ns: MS,
        }
    }

    type Cap = Capture<mem::MemRx, FakeClock, FakeWait>;

    fn turns(c: &mut Cap, clock: &FakeClock, n: usize) {
        for _ in 0..n {
            clock.advance(1_000);
            c.turn(clock.now() + MS / 4).unwrap();
        }
    }

    /// The file's snap length and its records (original length, data).
    fn read_back(f: &MemFile) -> (u32, Vec<(u32, Vec<u8>)>) {
        let data = f.data.lock().unwrap().clone();
        let mut r = pcap_file::pcap::PcapReader::new(&data[..]).unwrap();
        let snaplen = r.header().snaplen;
        let mut v = Vec::new();
        // Raw records: the crate's checked reader refuses a record whose
        // original length exceeds the snap length, which pcap allows.
        while let Some(p) = r.next_raw_packet() {
            let p = p.unwrap();
            assert_eq!(p.incl_len as usize, p.data.len());
            v.push((p.orig_len, p.data.to_vec()));
        }
        (snaplen, v)
    }

    /// Every accepted frame is in the file, byte for byte up to the snap
    /// length with its original length kept; denied frames are counted
    /// under the rule that denied them.
    #[test]
    fn writes_every_accepted_frame_and_counts_denials_by_rule() {
        let rules = Rules::parse(
            "t",
            "accept proto udp dport 9000\ndeny proto udp dport 80\n",
        )
        .unwrap();
        let (rx, feed) = mem::ring(4096);
        let mut sent = Vec::new();
        for i in 0..300u64 {
            let (size, port) = match i % 3 {
                0 => (64, 9000),
                1 => (200, 9000),
                _ => (64, if i % 2 == 0 { 80 } else { 443 }),
            };
            let f = frame(size, port, i);
            if port == 9000 {
                sent.push(f.clone());
            }
            assert!(feed.push(f));
        }
        let file = MemFile::default();
        let clock = FakeClock::default();
        let mut c = Capture::new(
            rx,
            file.clone(),
            &cfg(1024, None, Some(rules)),
            clock.clone(),
            FakeWait(clock.clone()),
        )
        .unwrap();
        turns(&mut c, &clock, 2000);
        let r = c.finish(&cfg(1024, None, None), 1.0, 0.0).unwrap();
        assert_eq!(r.rx, 300);
        assert_eq!(r.written, 200);
        assert_eq!(r.filtered.get("rule2_line2"), Some(&50));
        assert_eq!(r.filtered.get("default"), Some(&50));
        assert_eq!(r.drops[&DropPoint::FilterQueue], 0);
        assert_eq!(r.in_flight, 0);
        let (snaplen, got) = read_back(&file);
        assert_eq!(snaplen, 96);
        assert_eq!(got.len() as u64, r.written);
        for ((orig, data), want) in got.iter().zip(&sent) {
            assert_eq!(*orig as usize, want.len());
            assert_eq!(data[..], want[..want.len().min(96)]);
        }
        assert_eq!(
            r.bytes_written,
            got.iter().map(|g| g.1.len() as u64).sum::<u64>()
        );
    }

    /// With the writer stuck, the queue fills: without feedback the frames
    /// taken off the ring die at the packet-filter queue; with feedback
    /// input stops while fewer than 8 slots are free and the frames wait on
    /// the ring. Either way, once the writer runs, everything is accounted.
    #[test]
    fn a_full_filter_queue_drops_there_unless_feedback_stops_input() {
        for feedback in [false, true] {
            let (rx, feed) = mem::ring(512);
            for i in 0..200 {
                assert!(feed.push(frame(1400, 9000, i)));
            }
            let file = MemFile::held();
            let clock = FakeClock::default();
            // Whole frames, so that the writer's 8 KB buffer holds at most
            // five before its first write to the stuck file blocks it.
            let cfg = CaptureConfig {
                snaplen: 65_535,
                ..cfg(32, feedback.then_some(8), None)
            };
            let mut c = Capture::new(
                rx,
                file.clone(),
                &cfg,
                clock.clone(),
                FakeWait(clock.clone()),
            )
            .unwrap();
            turns(&mut c, &clock, if feedback { 60 } else { 400 });
            if feedback {
                assert_eq!(c.queue_drops(), 0);
                assert!(c.inhibits() >= 1);
                assert!(c.taken() <= 40, "took {} with the writer stuck", c.taken());
            } else {
                assert_eq!(c.taken(), 200);
                assert!(c.queue_drops() >= 160, "{} queue drops", c.queue_drops());
            }
            file.release();
            // The writer is a real thread: let it drain before each stretch
            // of fake time, so that the outcome does not depend on how the
            // two threads happen to be scheduled.
            for _ in 0..2_000 {
                let wait = std::time::Instant::now();
                while c.written() + c.queue_drops() < c.taken()
                    && wait.elapsed() < Duration::from_secs(5)
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
                if c.taken() == 200 {
                    break;
                }
                turns(&mut c, &clock, 50);
            }
            let r = c.finish(&cfg, 1.0, 0.0).unwrap();
            let drops: u64 = r.drops.values().sum();
            assert_eq!(r.arrived, 200);
            assert_eq!(r.arrived, r.written + drops + r.in_flight);
            let (snaplen, got) = read_back(&file);
            assert_eq!(snaplen, cfg.snaplen);
            assert_eq!(got.len() as u64, r.written);
            if feedback {
                assert!(r.written > 100, "feedback: wrote {}", r.written);
            }
        }
    }

    /// Feedback that resumes at a low watermark: with the writer stuck,
    /// input stops when fewer than 8 slots are free; once the writer has
    /// drained the queue, its kick wakes the polling thread and input
    /// resumes at once, not when the 1 ms timeout expires.
    #[test]
    fn the_writer_kick_resumes_input_before_the_timeout() {
        let (rx, feed) = mem::ring(512);
        for i in 0..200 {
            assert!(feed.push(frame(1400, 9000, i)));
        }
        let file = MemFile::held();
        let clock = FakeClock::default();
        let cfg = CaptureConfig {
            snaplen: 65_535,
            resume_at: Some(8),
            ..cfg(32, Some(8), None)
        };
        let mut c = Capture::new(
            rx,
            file.clone(),
            &cfg,
            clock.clone(),
            FakeWait(clock.clone()),
        )
        .unwrap();
        // Sleeps end at once (deadline now): the inhibit cannot time out.
        for _ in 0..200 {
            c.turn(clock.now()).unwrap();
        }
        let taken = c.taken();
        assert!(c.inhibits() >= 1, "no inhibit with the writer stuck");
        assert!((25..=40).contains(&taken), "took {taken}");
        assert_eq!(c.queue_drops(), 0);
        file.release();
        let wait = std::time::Instant::now();
        while c.written() < taken && wait.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(c.written(), taken, "the writer did not drain the queue");
        let t0 = clock.now();
        for _ in 0..100 {
            if c.taken() > taken {
                break;
            }
            c.turn(clock.now() + 10 * MS).unwrap();
        }
        assert!(c.taken() > taken, "input never resumed");
        assert!(
            clock.now() - t0 < MS,
            "resumed only by the timeout, after {} ns",
            clock.now() - t0
        );
    }
}
