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
use crate::wire::build_udp_frame;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rxsched_core::Clock;
use rxsched_core::Quota;
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
        two_level: Default::default(),
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
    let mut r = PollingRouter::new(p, c, None, clock.clone(), FakeWait(clock.clone())).unwrap();
    let mut fed = 0;
    for _ in 0..200 {
        fed += traffic(rng, net, fed);
        for _ in 0..rng.gen_range(0..60) {
            r.turn(clock.now() + MS_NS / 4).unwrap();
        }
    }
    let rep = r.report().unwrap();
    let queued = r.rx_queued();
    let k = r.counters();
    (
        fed,
        (
            k.forwarded.load(Relaxed),
            k.dropped(),
            rep.in_flight,
            rep.drops[&DropPoint::NicRxRing],
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
            // Two-level's loop is the polling one (its switch moves thread
            // priorities, which an in-memory run does not have).
            let (fed, t) = match mode {
                Mode::Polling | Mode::TwoLevel => run_polling(&c, p, &net, &mut rng),
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

/// Frames to the sink's network on UDP port `dport`.
fn to_port(dport: u16, seq: u64) -> Vec<u8> {
    let mut b = vec![0u8; 128];
    let n = build_udp_frame(
        &mut b,
        64,
        GEN_MAC,
        PORT_MACS[0],
        [198, 18, 0, 1],
        [198, 19, 0, 1],
        (1, dport),
        seq,
        0,
    );
    b.truncate(n);
    b
}

const SCREEN_RULES: &str = "accept proto udp dport 9000\ndeny proto udp dport 80\n";

/// A screening stage of `queue` frames and its transmit sides (port 1's
/// sink is what it sent).
fn screen_stage(queue: u32) -> (ScreenEnd, Vec<mem::MemTx>, Sink) {
    let rules = Rules::parse("screen.rules", SCREEN_RULES).unwrap();
    let sc = crate::screen::ScreenConfig {
        rules_path: "screen.rules".into(),
        rules,
        queue,
        exe: "rxsched".into(),
    };
    let (t0, _) = mem::sink(usize::MAX);
    let (t1, out) = mem::sink(usize::MAX);
    (ScreenEnd::new(&sc).unwrap(), vec![t0, t1], out)
}

fn with_screen_cfg(mode: Mode, feedback: Option<(f64, f64)>, queue: u32) -> RouterConfig {
    let mut c = cfg(mode, Quota::Limited(10), feedback);
    c.screen = Some(crate::screen::ScreenConfig {
        rules_path: "screen.rules".into(),
        rules: Rules::parse("screen.rules", SCREEN_RULES).unwrap(),
        queue,
        exe: "rxsched".into(),
    });
    c
}

/// Routed frames go to the screening stage, which sends what its rules
/// accept on the routed port and counts denials by rule; malformed frames
/// are refused before screening; every frame is accounted for.
#[test]
fn screened_forwarding_sends_accepted_and_counts_denials_by_rule() {
    let c = with_screen_cfg(Mode::Polling, None, 32);
    let (p, net) = ports(1024, plain);
    let clock = FakeClock::default();
    let (end, mut tx, out) = screen_stage(32);
    let mut r = PollingRouter::new(
        p,
        &c,
        Some(end.clone()),
        clock.clone(),
        FakeWait(clock.clone()),
    )
    .unwrap();
    let rules = end.rules.clone();
    let mut accepted = Vec::new();
    for i in 0..300u64 {
        let f = match i % 4 {
            0 | 1 => to_port(9000, i),
            2 => to_port(80, i),
            _ => to_port(443, i),
        };
        if i % 4 < 2 {
            accepted.push(f.clone());
        }
        net.feed.push(f);
        if i % 10 == 9 {
            // The stage keeps up: it runs between bursts of ten.
            settle(&mut r, &clock);
            crate::screen::screen_batch(&end.queue, &rules, &mut tx).unwrap();
        }
    }
    let bad = malformed();
    for (_, f) in &bad {
        net.feed.push(f.clone());
    }
    settle(&mut r, &clock);
    while crate::screen::screen_batch(&end.queue, &rules, &mut tx).unwrap() > 0 {}
    let mut rep = r.report().unwrap();
    rep.add_screen(&end, 0, Some(0));
    let s = rep.screen.clone().unwrap();
    assert_eq!(s.counts.denied.get("rule2_line2"), Some(&75));
    assert_eq!(s.counts.denied.get("default"), Some(&75));
    assert_eq!(s.counts.accepted, 150);
    assert_eq!(rep.forwarded, 150);
    let sent = out.take();
    assert_eq!(sent.len(), 150);
    for (got, want) in sent.iter().zip(&accepted) {
        let ip = Ipv4Packet::new_checked(&got[14..]).unwrap();
        assert_eq!(ip.ttl(), want[ETH_TTL] - 1);
        assert!(ip.verify_checksum());
        assert_eq!(got[..6], SINK_MAC.0);
        assert_eq!(got[14 + 20..], want[14 + 20..], "payload unchanged");
    }
    assert!(net.out.take().is_empty(), "the router itself sends nothing");
    let drops: u64 = rep.drops.values().sum();
    assert_eq!(rep.rx, 300 + bad.len() as u64);
    assert_eq!(rep.rx, rep.forwarded + drops + rep.in_flight, "{rep:?}");
    assert_eq!(rep.dropped(DropPoint::ScreenQueue), 0);
    assert_eq!(rep.dropped(DropPoint::ScreenDenied), 150);
}

/// The stage does not run: without feedback the polling thread takes
/// every frame and all but a queueful die at `screen_queue`, after their
/// forwarding work (the livelock of figure 6-4); with feedback input stops
/// at 75% of the queue, the frames wait on the ring, and when the stage
/// has drained the queue to 25% its kick ends the inhibit before the
/// timeout.
#[test]
fn screen_feedback_stops_input_and_the_stage_kick_resumes_it() {
    for feedback in [false, true] {
        let c = with_screen_cfg(Mode::Polling, feedback.then_some((0.75, 0.25)), 32);
        let (p, net) = ports(1024, plain);
        let clock = FakeClock::default();
        let (end, mut tx, out) = screen_stage(32);
        let mut r = PollingRouter::new(
            p,
            &c,
            Some(end.clone()),
            clock.clone(),
            FakeWait(clock.clone()),
        )
        .unwrap();
        for i in 0..200 {
            net.feed.push(to_port(9000, i));
        }
        // Sleeps end at once (deadline now): the inhibit cannot time out.
        for _ in 0..300 {
            r.turn(clock.now()).unwrap();
        }
        let k = r.counters();
        if !feedback {
            settle(&mut r, &clock);
            let k = r.counters();
            assert_eq!(k.rx.load(Relaxed), 200);
            assert_eq!(k.screen_queue.load(Relaxed), 168);
            assert_eq!(end.queue.len(), 32);
            continue;
        }
        let taken = k.rx.load(Relaxed);
        assert!(
            (24..=34).contains(&taken),
            "took {taken} with the stage stuck"
        );
        assert_eq!(k.screen_queue.load(Relaxed), 0);
        assert!(r.poller().lp.clone().input_inhibited(clock.now()).is_some());
        // The stage drains the queue; its kick wakes the thread at once.
        while crate::screen::screen_batch(&end.queue, &end.rules, &mut tx).unwrap() > 0 {}
        let t0 = clock.now();
        let mut turns = 0;
        while k_rx(&r) == taken && turns < 100 {
            r.turn(clock.now() + 10 * MS_NS).unwrap();
            turns += 1;
        }
        assert!(k_rx(&r) > taken, "input never resumed");
        assert!(
            clock.now() - t0 < MS_NS,
            "resumed only by the timeout ({} ns)",
            clock.now() - t0
        );
        // Everything gets through in the end, and nothing is lost.
        for _ in 0..200 {
            settle(&mut r, &clock);
            while crate::screen::screen_batch(&end.queue, &end.rules, &mut tx).unwrap() > 0 {}
        }
        let mut rep = r.report().unwrap();
        rep.add_screen(&end, 0, Some(0));
        assert_eq!(out.take().len(), 200);
        assert_eq!(rep.forwarded, 200, "{rep:?}");
        assert_eq!(rep.drops.values().sum::<u64>(), 0, "{rep:?}");
    }
}

fn k_rx<R: RxBackend, T: TxBackend>(r: &PollingRouter<R, T, FakeClock, FakeWait>) -> u64 {
    r.counters().rx.load(Relaxed)
}

/// The interrupt-driven baseline hands frames to the stage the same way;
/// a stage that cannot keep up overflows the queue, and conservation holds.
#[test]
fn interrupt_mode_screens_and_overflows_the_queue() {
    let c = with_screen_cfg(Mode::Interrupt, None, 32);
    let (p, net) = ports(1024, plain);
    let (end, mut tx, out) = screen_stage(32);
    let (mut rxs, fwd, k) = sides(p, &c);
    let mut fwd = fwd.with_screen(Some(end.clone()));
    let mut fed = 0;
    for round in 0..40 {
        for _ in 0..20 {
            net.feed
                .push(to_port(if fed % 3 == 0 { 80 } else { 9000 }, fed));
            fed += 1;
        }
        rxs.turn();
        fwd.turn(Duration::ZERO).unwrap();
        if round % 4 == 0 {
            crate::screen::screen_batch(&end.queue, &end.rules, &mut tx).unwrap();
        }
    }
    let mut rep = RouterReport::new(Mode::Interrupt, &k, rxs.ring_drops().unwrap(), 0);
    rep.in_flight = fwd.queued() + rxs.queued();
    rep.add_screen(&end, 0, None);
    assert!(rep.dropped(DropPoint::ScreenQueue) > 0, "{rep:?}");
    assert!(rep.dropped(DropPoint::ScreenDenied) > 0, "{rep:?}");
    assert_eq!(out.take().len() as u64, rep.forwarded);
    let drops: u64 = rep.drops.values().sum();
    assert_eq!(fed, rep.forwarded + drops + rep.in_flight, "{rep:?}");
}
