//! The router's loops on in-memory ports with a fake clock: forwarding,
//! every malformed class, quota, feedback, and conservation under faults,
//! in both modes. No root, no network.

use super::interrupt::sides;
use super::polling::PollingRouter;
use super::*;
use crate::backend::fault::{FaultHandle, FaultInjector, Faults};
use crate::backend::mem::{self, FakeClock, FakeWait, Feed, Sink};
use crate::wire::build_udp_frame;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rxsched_core::Clock;
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
        backend: Backend::Packet,
        ports,
        routes,
        mode,
        quota,
        feedback,
        cycle_limit: None,
        wake_cost_ns: None,
        cpu: None,
        duration_s: 1.0,
        stats_every_s: 0.0,
        input_queue: 50,
        out_queue: 32,
    }
}

fn frame(ttl: u8, dst: [u8; 4], seq: u64) -> Vec<u8> {
    let mut b = vec![0u8; 128];
    let n = build_udp_frame(
        &mut b,
        64,
        GEN_MAC,
        PORT_MACS[0],
        [198, 18, 0, 1],
        dst,
        (1, 2),
        seq,
        0,
    );
    b.truncate(n);
    b[ETH_TTL] = ttl;
    let mut ip = Ipv4Packet::new_checked(&mut b[14..]).unwrap();
    ip.fill_checksum();
    b
}

/// Two in-memory ports: the test feeds port 0 and reads port 1's sink.
struct Net {
    feed: Feed,
    out: Sink,
    back: Sink,
}

fn ports(ring: usize, rx0: impl FnOnce(mem::MemRx) -> Rx) -> (Vec<Port<Rx, mem::MemTx>>, Net) {
    let (r0, feed) = mem::ring(ring);
    let (r1, _) = mem::ring(ring);
    let (t0, back) = mem::sink(usize::MAX);
    let (t1, out) = mem::sink(usize::MAX);
    let p = vec![
        Port {
            name: "p0".into(),
            rx: rx0(r0),
            tx: t0,
            mac: PORT_MACS[0],
        },
        Port {
            name: "p1".into(),
            rx: Box::new(r1) as Rx,
            tx: t1,
            mac: PORT_MACS[1],
        },
    ];
    (p, Net { feed, out, back })
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
    let r = PollingRouter::new(p, c, clock.clone(), FakeWait(clock.clone())).unwrap();
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
    assert!(r.poll_loop().mode_switches() >= 2);
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
        let k = r.counters();
        assert_eq!(k.largest_callback.load(Relaxed), q as u64);
        assert!(k.callbacks.load(Relaxed) >= 200 / q as u64, "{q}");
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
    assert_eq!(r.poll_loop().inhibits()[0].1, 1);
    // The device takes frames again: the queue drains and input resumes.
    net.out.set_room(usize::MAX);
    settle(&mut r, &clock);
    assert_eq!(
        net.out.take().len() as u64 + r.counters().output_queue.load(Relaxed),
        500
    );
}

/// Feeds a random mix of good and bad frames and closes or opens the
/// output device at random; returns how many frames it fed.
fn traffic(rng: &mut ChaCha8Rng, net: &Net, seq: u64) -> u64 {
    let bad = malformed();
    let n = rng.gen_range(0..40);
    for i in 0..n {
        let f = if rng.gen_bool(0.2) {
            bad[rng.gen_range(0..bad.len())].1.clone()
        } else {
            frame(64, [198, 19, 0, rng.gen()], seq + i)
        };
        net.feed.push(f);
    }
    net.out.set_room(rng.gen_range(0..20));
    n
}

/// What a run did: forwarded, dropped inside the router, still inside it,
/// dropped on the rings (or by the faults), still on the rings.
type Tally = (u64, u64, u64, u64, u64);

fn run_polling(
    c: &RouterConfig,
    p: Vec<Port<Rx, mem::MemTx>>,
    net: &Net,
    rng: &mut ChaCha8Rng,
) -> (u64, Tally) {
    let clock = FakeClock::default();
    let mut r = PollingRouter::new(p, c, clock.clone(), FakeWait(clock.clone())).unwrap();
    let mut fed = 0;
    for _ in 0..200 {
        fed += traffic(rng, net, fed);
        for _ in 0..rng.gen_range(0..60) {
            r.turn(clock.now() + MS_NS / 4).unwrap();
        }
    }
    let rep = r.report().unwrap();
    let queued = r.ports_mut().iter().map(|p| p.rx.queued()).sum();
    let k = r.counters();
    (
        fed,
        (
            k.forwarded.load(Relaxed),
            k.dropped(),
            rep.in_flight,
            rep.drops["nic_rx_ring"],
            queued,
        ),
    )
}

fn run_interrupt(
    c: &RouterConfig,
    p: Vec<Port<Rx, mem::MemTx>>,
    net: &Net,
    rng: &mut ChaCha8Rng,
) -> (u64, Tally) {
    let (mut rxs, mut fwd, k) = sides(p, c);
    let mut fed = 0;
    for _ in 0..200 {
        fed += traffic(rng, net, fed);
        for _ in 0..rng.gen_range(0..4) {
            rxs.turn();
        }
        if rng.gen_bool(0.3) {
            fwd.turn(Duration::ZERO).unwrap();
        }
    }
    let drops = rxs.ring_drops().unwrap();
    (
        fed,
        (
            k.forwarded.load(Relaxed),
            k.dropped(),
            fwd.queued(),
            drops,
            rxs.queued(),
        ),
    )
}

/// A random mix of good and bad frames through faults, with the output
/// device filling and draining: every frame fed is forwarded, dropped at a
/// named point (or by the faults), or still inside, in both modes.
#[test]
fn conservation_under_faults_in_both_modes() {
    for mode in [Mode::Polling, Mode::Interrupt] {
        for seed in 0..8u64 {
            let faults = Faults {
                drop: 0.05,
                corrupt: 0.1,
                truncate: 0.05,
                reorder: 0.05,
                delay: 0.05,
                delay_turns: 2,
            };
            let c = cfg(
                mode,
                Quota::Limited(1 + seed as u32 * 3),
                Some((0.75, 0.25)),
            );
            let mut handle = FaultHandle::default();
            let (p, net) = ports(64, |r| {
                let fi = FaultInjector::new(r, faults, seed);
                handle = fi.handle();
                Box::new(fi) as Rx
            });
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let (fed, t) = match mode {
                Mode::Polling => run_polling(&c, p, &net, &mut rng),
                Mode::Interrupt => run_interrupt(&c, p, &net, &mut rng),
            };
            let (forwarded, dropped, inside, ring, queued) = t;
            let lost = handle.stats().dropped;
            assert!(lost > 0, "the faults dropped nothing");
            assert_eq!(
                fed,
                forwarded + dropped + inside + ring + lost + queued,
                "{mode:?} seed {seed}: {t:?}"
            );
            assert_eq!(
                net.out.take().len() as u64,
                forwarded,
                "{mode:?} seed {seed}"
            );
        }
    }
}

#[test]
fn interrupt_mode_drops_after_the_work_when_forwarding_starves() {
    let c = cfg(Mode::Interrupt, Quota::Unlimited, None);
    let (p, net) = ports(1024, plain);
    let (mut rxs, mut fwd, k) = sides(p, &c);
    // The handler runs ten times for every forwarding pass: the input
    // queue overflows, after each dropped frame was taken off the ring.
    let mut fed = 0;
    for round in 0..50 {
        for _ in 0..10 {
            for _ in 0..20 {
                net.feed.push(frame(64, [198, 19, 0, 1], fed));
                fed += 1;
            }
            rxs.turn();
        }
        if round % 5 == 0 {
            fwd.turn(Duration::ZERO).unwrap();
        }
    }
    let ipintrq = k.ipintrq.load(Relaxed);
    assert!(ipintrq > fed / 2, "{ipintrq} of {fed}");
    assert_eq!(
        k.rx.load(Relaxed),
        fed,
        "every frame was taken off the ring first"
    );
    let forwarded = k.forwarded.load(Relaxed);
    assert_eq!(fed, forwarded + k.dropped() + fwd.queued() + rxs.queued());
    assert!(net.back.take().is_empty());
}
