//! Conservation through faults, and the baseline's livelock.

use super::*;

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
