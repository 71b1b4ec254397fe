//! The monitor on an in-memory ring with a fake clock and a file in
//! memory: what it writes, what its filter refuses, and its feedback.

use super::*;
use crate::backend::mem::{self, FakeClock, FakeWait};
use crate::wire::UdpProbe;
use rxsched_core::MS;
use std::io::Write;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// A file in memory; writes wait while `hold` is set.
#[derive(Clone, Default)]
struct MemFile {
    data: Arc<Mutex<Vec<u8>>>,
    pos: Arc<Mutex<usize>>,
    hold: Arc<(Mutex<bool>, Condvar)>,
}

impl std::io::Seek for MemFile {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let len = self.data.lock().unwrap().len() as i64;
        let mut pos = self.pos.lock().unwrap();
        *pos = match to {
            std::io::SeekFrom::Start(n) => n as i64,
            std::io::SeekFrom::End(d) => len + d,
            std::io::SeekFrom::Current(d) => *pos as i64 + d,
        } as usize;
        Ok(*pos as u64)
    }
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
        let mut d = self.data.lock().unwrap();
        let mut pos = self.pos.lock().unwrap();
        let end = *pos + b.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[*pos..end].copy_from_slice(b);
        *pos = end;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Opens `f` for every file.
fn opener(f: &MemFile) -> Opener {
    let f = f.clone();
    Arc::new(move |_| Ok(Box::new(f.clone()) as Box<dyn save::CaptureFile>))
}

fn frame(size: usize, dport: u16, seq: u64) -> Vec<u8> {
    UdpProbe {
        frame_len: size,
        ports: (4000, dport),
        seq,
        ..UdpProbe::default()
    }
    .to_vec()
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
        format: Format::Pcap,
        rotation: Rotation::default(),
        count: None,
        per_queue: false,
        snaplen: 96,
        filter,
        expression: None,
        queue,
        min_free,
        resume_at: None,
        take: true,
        timeout_ns: MS,
        metrics: None,
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
        vec![rx],
        opener(&file),
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
            vec![rx],
            opener(&file),
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
        vec![rx],
        opener(&file),
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

/// Files in memory, by name, for rotation.
#[derive(Clone, Default)]
struct MemDir(Arc<Mutex<BTreeMap<PathBuf, MemFile>>>);

impl MemDir {
    fn opener(&self) -> Opener {
        let d = self.clone();
        Arc::new(move |p| {
            let f = MemFile::default();
            d.0.lock().unwrap().insert(p.to_path_buf(), f.clone());
            Ok(Box::new(f) as Box<dyn save::CaptureFile>)
        })
    }
    fn file(&self, p: &str) -> MemFile {
        self.0.lock().unwrap()[&PathBuf::from(p)].clone()
    }
}

/// Runs a monitor over `frames` with `cfg` until it has taken them all
/// (or the writer stopped), and reports.
fn capture_all(frames: Vec<Vec<u8>>, open: Opener, cfg: &CaptureConfig) -> CaptureReport {
    capture_queues(vec![frames], open, cfg)
}

/// [`capture_all`] over one ring per receive queue.
fn capture_queues(queues: Vec<Vec<Vec<u8>>>, open: Opener, cfg: &CaptureConfig) -> CaptureReport {
    let n: u64 = queues.iter().map(|q| q.len() as u64).sum();
    let rxs = queues
        .into_iter()
        .map(|frames| {
            let (rx, feed) = mem::ring(frames.len() + 1);
            for f in frames {
                assert!(feed.push(f));
            }
            rx
        })
        .collect();
    let clock = FakeClock::default();
    let mut c = Capture::new(rxs, open, cfg, clock.clone(), FakeWait(clock.clone())).unwrap();
    let wait = std::time::Instant::now();
    while c.taken() < n && wait.elapsed() < Duration::from_secs(10) {
        turns(&mut c, &clock, 10);
        let refused = |c: &Cap| c.poll.app.filtered.values().sum::<u64>();
        while c.written() + c.queue_drops() + refused(&c) < c.taken()
            && wait.elapsed() < Duration::from_secs(10)
        {
            if c.writer.as_ref().is_some_and(|w| w.is_finished()) {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if c.writer.as_ref().is_some_and(|w| w.is_finished()) {
            break;
        }
    }
    c.finish(cfg, 1.0, 0.0).unwrap()
}

/// A tcpdump expression on the packet backend runs in the polling
/// thread, says so, and counts what it refused there.
#[test]
fn an_expression_runs_in_the_polling_thread_where_xdp_cannot() {
    let frames: Vec<Vec<u8>> = (0..100)
        .map(|i| frame(64, if i % 4 == 0 { 53 } else { 9000 }, i))
        .collect();
    let file = MemFile::default();
    let cfg = CaptureConfig {
        expression: Some(crate::pcap_filter::Filter::parse("udp and dst port 53").unwrap()),
        ..cfg(1024, None, None)
    };
    let r = capture_all(frames, opener(&file), &cfg);
    assert_eq!(r.written, 25);
    assert_eq!(r.filtered.get(FILTERED_IN_POLLING), Some(&75));
    let e = r.expression.expect("the report names the expression");
    assert_eq!(e.in_xdp, None);
    assert_eq!(e.in_polling_thread.as_deref(), Some("udp and dst port 53"));
    assert_eq!(read_back(&file).1.len(), 25);
}

/// `-c`: exactly COUNT frames are written; the rest are accounted.
#[test]
fn count_stops_after_that_many_frames() {
    let frames: Vec<Vec<u8>> = (0..500).map(|i| frame(64, 9000, i)).collect();
    let file = MemFile::default();
    let cfg = CaptureConfig {
        count: Some(37),
        ..cfg(1024, None, None)
    };
    let r = capture_all(frames, opener(&file), &cfg);
    assert_eq!(r.written, 37);
    assert_eq!(read_back(&file).1.len(), 37);
    let drops: u64 = r.drops.values().sum();
    assert_eq!(r.arrived, r.written + drops + r.in_flight);
}

/// `-C` with `-W`: the files follow tcpdump's names, and the sequence
/// numbers run on from one file to the next with none missing.
#[test]
fn rotation_loses_no_frame() {
    let frames: Vec<Vec<u8>> = (0..400).map(|i| frame(200, 9000, i)).collect();
    let dir = MemDir::default();
    let cfg = CaptureConfig {
        snaplen: 65_535,
        rotation: Rotation {
            size_bytes: Some(10_000),
            every_s: None,
            files: Some(100),
        },
        ..cfg(1024, None, None)
    };
    let r = capture_all(frames, dir.opener(), &cfg);
    assert_eq!(r.written, 400);
    assert!(r.files.len() >= 8, "{:?}", r.files);
    assert_eq!(r.files[0], "mem.pcap00");
    assert_eq!(r.files[1], "mem.pcap01");
    let mut seqs = vec![];
    for name in &r.files {
        let (_, recs) = read_back(&dir.file(name));
        assert!(!recs.is_empty(), "{name} is empty");
        seqs.extend(
            recs.iter()
                .map(|(_, d)| crate::wire::parse_probe(d).unwrap().0),
        );
    }
    assert_eq!(seqs, (0..400).collect::<Vec<u64>>());
}

/// pcapng: the interface's name and nanosecond resolution, every frame,
/// and a last statistics block with the counts of the report.
#[test]
fn pcapng_carries_the_interface_and_its_drops() {
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption as Idb;
    use pcap_file::pcapng::blocks::interface_statistics::InterfaceStatisticsOption as Isb;
    use pcap_file::pcapng::Block;
    let frames: Vec<Vec<u8>> = (0..200).map(|i| frame(64, 9000, i)).collect();
    let file = MemFile::held();
    let cfg = CaptureConfig {
        format: Format::Pcapng,
        ..cfg(16, None, None)
    };
    // The writer is stuck at first: the 16-frame queue overflows.
    let f2 = file.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        f2.release();
    });
    let r = capture_all(frames, opener(&file), &cfg);
    let qd = r.drops[&DropPoint::FilterQueue];
    assert!(qd > 0, "no queue drops: {r:?}");
    let data = file.data.lock().unwrap().clone();
    let mut rd = pcap_file::pcapng::PcapNgReader::new(&data[..]).unwrap();
    // The section's comment, written in place at the end, has the counts.
    use pcap_file::pcapng::blocks::section_header::SectionHeaderOption as Shb;
    let said = rd.section().options.iter().find_map(|o| match o {
        Shb::Comment(c) => Some(c.trim().to_string()),
        _ => None,
    });
    let said = said.expect("a section comment");
    assert!(
        said.contains(&format!(
            "{} packets written of {} received",
            r.written, r.arrived
        )) && said.contains(&format!("filter_queue {qd}")),
        "{said}"
    );
    let (mut packets, mut last_isb) = (0, None);
    let mut idb = None;
    while let Some(b) = rd.next_block() {
        match b.unwrap() {
            Block::InterfaceDescription(d) => idb = Some(d.into_owned()),
            Block::EnhancedPacket(_) => packets += 1,
            Block::InterfaceStatistics(s) => last_isb = Some(s.into_owned()),
            _ => {}
        }
    }
    let idb = idb.expect("an interface description");
    assert!(idb.options.contains(&Idb::IfName("mem0".into())));
    assert!(idb.options.contains(&Idb::IfTsResol(9)));
    assert_eq!(packets, r.written);
    let isb = last_isb.expect("a statistics block at the end");
    assert!(isb.options.contains(&Isb::IsbIfRecv(r.arrived)));
    assert!(isb.options.contains(&Isb::IsbUsrDeliv(r.written)));
    assert!(isb.options.contains(&Isb::IsbOsDrop(qd)));
    assert!(isb.options.contains(&Isb::Comment(
        format!("dropped at filter_queue: {qd}").into()
    )));
}

/// `--per-queue`: each receive queue's frames in a file of its own, named
/// after the queue; without it, one file holds both queues' frames.
#[test]
fn per_queue_writes_a_file_for_each_queue() {
    let q0: Vec<Vec<u8>> = (0..50).map(|i| frame(64, 9000, i)).collect();
    let q1: Vec<Vec<u8>> = (100..130).map(|i| frame(64, 9000, i)).collect();
    let dir = MemDir::default();
    let pq = CaptureConfig {
        per_queue: true,
        ..cfg(1024, None, None)
    };
    let r = capture_queues(vec![q0.clone(), q1.clone()], dir.opener(), &pq);
    assert_eq!(r.files, ["mem-q0.pcap", "mem-q1.pcap"]);
    let seqs = |name: &str| -> Vec<u64> {
        read_back(&dir.file(name))
            .1
            .iter()
            .map(|(_, d)| crate::wire::parse_probe(d).unwrap().0)
            .collect()
    };
    assert_eq!(seqs("mem-q0.pcap"), (0..50).collect::<Vec<_>>());
    assert_eq!(seqs("mem-q1.pcap"), (100..130).collect::<Vec<_>>());
    let dir = MemDir::default();
    let r = capture_queues(vec![q0, q1], dir.opener(), &cfg(1024, None, None));
    assert_eq!(r.files, ["mem.pcap"]);
    assert_eq!(read_back(&dir.file("mem.pcap")).1.len(), 80);
}
