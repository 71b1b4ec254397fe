//! The monitor on an in-memory ring with a fake clock and a file in
//! memory: what it writes, what its filter refuses, and its feedback.

use super::*;
use crate::backend::mem::{self, FakeClock, FakeWait};
use crate::wire::UdpProbe;
use rxsched_core::MS;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

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
        snaplen: 96,
        filter,
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
            vec![rx],
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
        vec![rx],
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
