//! The router's loops on in-memory ports with a fake clock: forwarding,
//! every malformed class, quota, feedback, and conservation under faults,
//! in both modes. No root, no network.

use super::interrupt::sides;
use super::polling::PollingRouter;
use super::*;
use crate::backend::fault::{FaultHandle, FaultInjector, Faults};
use crate::backend::mem::{self, FakeClock, FakeWait, Feed, Sink};
use crate::backend::{RxBackend, TxBackend};
use crate::rules::Rules;
use crate::runtime::RunConfig;
use crate::wire::{EthernetFrame, Ipv4Packet, Mac, UdpProbe};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rxsched_core::Clock;
use rxsched_core::DropPoint;
use rxsched_core::Quota;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

const GEN_MAC: Mac = Mac([2, 0, 0, 0, 0, 1]);
const SINK_MAC: Mac = Mac([2, 0, 0, 0, 1, 1]);
const PORT_MACS: [Mac; 2] = [Mac([2, 0, 0, 0, 0, 2]), Mac([2, 0, 0, 0, 1, 2])];
const ETH_TTL: usize = 14 + 8;

type Rx = Box<dyn RxBackend + Send>;

fn cfg(mode: Mode, quota: Quota, feedback: Option<(f64, f64)>) -> RouterConfig {
    let ports = vec!["p0".to_string(), "p1".to_string()];
    let routes = vec![
        Route::parse(&format!("198.19.0.0/24=p1@{SINK_MAC}"), &ports).unwrap(),
        Route::parse(&format!("198.18.0.0/24=p0@{GEN_MAC}"), &ports).unwrap(),
    ];
    RouterConfig {
        run: RunConfig {
            backend: Backend::Packet,
            quota,
            duration_s: 1.0,
            ..RunConfig::default()
        },
        ports,
        routes,
        mode,
        feedback,
        feedback_timeout_ns: MS_NS,
        screen: None,
        time_shared: false,
        slice_ns: None,
        two_level: Default::default(),
        input_queue: 50,
        out_queue: 32,
        in_xdp: false,
        cpus: Vec::new(),
        cycle_limit_total: None,
        protect: None,
        metrics: None,
    }
}

fn frame(ttl: u8, dst: [u8; 4], seq: u64) -> Vec<u8> {
    UdpProbe {
        src_mac: GEN_MAC,
        dst_mac: PORT_MACS[0],
        dst_ip: dst,
        ports: (1, 2),
        ttl,
        seq,
        ..UdpProbe::default()
    }
    .to_vec()
}

/// Two in-memory ports: the test feeds port 0 (and may feed port 1) and
/// reads port 1's sink (and port 0's).
struct Net {
    feed: Feed,
    feed1: Feed,
    out: Sink,
    back: Sink,
}

fn ports(ring: usize, rx0: impl FnOnce(mem::MemRx) -> Rx) -> (Vec<Port<Rx, mem::MemTx>>, Net) {
    let (r0, feed) = mem::ring(ring);
    let (r1, feed1) = mem::ring(ring);
    let (t0, back) = mem::sink(usize::MAX);
    let (t1, out) = mem::sink(usize::MAX);
    let p = vec![
        Port {
            name: "p0".into(),
            rx: rx0(r0),
            tx: t0,
            mac: PORT_MACS[0],
            mtu: 1500,
        },
        Port {
            name: "p1".into(),
            rx: Box::new(r1) as Rx,
            tx: t1,
            mac: PORT_MACS[1],
            mtu: 1500,
        },
    ];
    (
        p,
        Net {
            feed,
            feed1,
            out,
            back,
        },
    )
}

fn plain(r: mem::MemRx) -> Rx {
    Box::new(r)
}

fn polling(
    c: &RouterConfig,
    ring: usize,
) -> (
    PollingRouter<Rx, mem::MemTx, FakeClock, FakeWait>,
    Net,
    FakeClock,
) {
    let (p, net) = ports(ring, plain);
    let clock = FakeClock::default();
    let r = PollingRouter::new(p, c, None, clock.clone(), FakeWait(clock.clone())).unwrap();
    (r, net, clock)
}

/// Turns until the thread has slept a few times with nothing to do.
fn settle<R: RxBackend, T: TxBackend>(
    r: &mut PollingRouter<R, T, FakeClock, FakeWait>,
    clock: &FakeClock,
) {
    let mut idle = 0;
    for _ in 0..1_000_000 {
        if r.turn(clock.now() + MS_NS).unwrap() {
            idle += 1;
            if idle > 3 {
                return;
            }
        }
    }
    panic!("the router never went idle");
}

const MS_NS: u64 = 1_000_000;

mod faults;
mod protect;
mod screen;

#[test]
fn polling_forwards_and_rewrites() {
    let c = cfg(Mode::Polling, Quota::Limited(8), None);
    let (mut r, net, clock) = polling(&c, 256);
    for i in 0..100 {
        net.feed.push(frame(64, [198, 19, 0, 1], i));
    }
    settle(&mut r, &clock);
    let out = net.out.take();
    assert_eq!(out.len(), 100);
    for f in &out {
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!((eth.dst(), eth.src()), (SINK_MAC, PORT_MACS[1]));
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }
    let seqs: Vec<u64> = out
        .iter()
        .map(|f| crate::wire::parse_probe(f).unwrap().0)
        .collect();
    assert_eq!(seqs, (0..100).collect::<Vec<_>>(), "order kept");
    assert!(net.back.take().is_empty());
    assert_eq!(r.counters().forwarded.load(Relaxed), 100);
    assert!(r.poller().lp.mode_switches() >= 2);
}

/// Each malformed class, fed to a router, is refused under its own reason.
fn malformed() -> Vec<(&'static str, Vec<u8>)> {
    let ok = frame(64, [198, 19, 0, 1], 0);
    let mut short = ok.clone();
    short.truncate(20);
    let mut arp = ok.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut ihl = ok.clone();
    ihl[14] = 0x44;
    let mut sum = ok.clone();
    sum[14 + 10] ^= 0xff;
    vec![
        ("truncated", short),
        ("not_ipv4", arp),
        ("bad_ihl", ihl),
        ("bad_checksum", sum),
        ("ttl_expired", frame(1, [198, 19, 0, 1], 0)),
        ("no_route", frame(64, [198, 20, 0, 1], 0)),
        (
            "too_big",
            UdpProbe {
                frame_len: 1600,
                src_mac: GEN_MAC,
                dst_mac: PORT_MACS[0],
                ..UdpProbe::default()
            }
            .to_vec(),
        ),
    ]
}

fn assert_reasons(c: &Counters, n: u64) {
    for (i, name) in REASONS.iter().enumerate() {
        assert_eq!(c.refused[i].load(Relaxed), n, "{name}");
    }
}

#[test]
fn every_malformed_class_is_counted_in_both_modes() {
    let c = cfg(Mode::Polling, Quota::Limited(4), None);
    let (mut r, net, clock) = polling(&c, 256);
    for _ in 0..3 {
        for (_, f) in malformed() {
            net.feed.push(f);
        }
        net.feed.push(frame(64, [198, 19, 0, 1], 0));
    }
    settle(&mut r, &clock);
    assert_reasons(r.counters(), 3);
    assert_eq!(net.out.take().len(), 3);

    let c = cfg(Mode::Interrupt, Quota::Unlimited, None);
    let (p, net) = ports(256, plain);
    let (mut rxs, mut fwd, counters) = sides(p, &c);
    for (_, f) in malformed() {
        net.feed.push(f);
    }
    rxs.turn();
    fwd.turn(Duration::ZERO).unwrap();
    assert_reasons(&counters, 1);
}

#[test]
fn quota_bounds_every_callback() {
    for q in [1, 5, 32] {
        let c = cfg(Mode::Polling, Quota::Limited(q), None);
        let (mut r, net, clock) = polling(&c, 1024);
        for i in 0..200 {
            net.feed.push(frame(64, [198, 19, 0, 1], i));
        }
        settle(&mut r, &clock);
        let (callbacks, largest) = r.poller().callbacks();
        assert_eq!(largest, q);
        assert!(callbacks >= 200 / q as u64, "{q}");
        assert_eq!(net.out.take().len(), 200);
    }
}

#[test]
fn feedback_stops_input_while_the_output_queue_is_full() {
    let c = cfg(Mode::Polling, Quota::Limited(4), Some((0.75, 0.25)));
    let (mut r, net, clock) = polling(&c, 1024);
    net.out.set_room(0); // the output device takes nothing
    for i in 0..500 {
        net.feed.push(frame(64, [198, 19, 0, 1], i));
    }
    // Until the inhibit's 1 ms timeout, input stops at 75% of 32 frames.
    for _ in 0..2000 {
        r.turn(clock.now() + MS_NS / 10).unwrap();
        if clock.now() > MS_NS / 2 {
            break;
        }
    }
    let rx = r.counters().rx.load(Relaxed);
    assert!((24..=27).contains(&rx), "took {rx} frames while inhibited");
    assert!(net.feed.len() > 400, "frames wait on the ring, untouched");
    assert_eq!(r.poller().lp.inhibits()[0].1, 1);
    // The device takes frames again: the queue drains and input resumes.
    net.out.set_room(usize::MAX);
    settle(&mut r, &clock);
    assert_eq!(
        net.out.take().len() as u64 + r.counters().output_queue.load(Relaxed),
        500
    );
}

/// A receive callback takes no more than the output queues have room for:
/// with a quota larger than the output queue (32) and an output device
/// that takes nothing, the frames the queue cannot hold wait on the
/// receive ring, untouched, rather than die at `output_queue` after their
/// forwarding work; once the device takes frames again every one goes out.
#[test]
fn input_waits_for_room_on_the_output_queues() {
    let c = cfg(Mode::Polling, Quota::Limited(100), None);
    let (mut r, net, clock) = polling(&c, 1024);
    net.out.set_room(0);
    for i in 0..500 {
        net.feed.push(frame(64, [198, 19, 0, 1], i));
    }
    for _ in 0..200 {
        r.turn(clock.now() + MS_NS / 10).unwrap();
    }
    let rx = r.counters().rx.load(Relaxed);
    assert_eq!(rx, 32, "took only what the output queue holds");
    assert_eq!(r.counters().output_queue.load(Relaxed), 0);
    assert_eq!(net.feed.len(), 500 - 32, "the rest wait on the ring");
    net.out.set_room(usize::MAX);
    settle(&mut r, &clock);
    assert_eq!(net.out.take().len(), 500);
    assert_eq!(r.counters().output_queue.load(Relaxed), 0);
}
