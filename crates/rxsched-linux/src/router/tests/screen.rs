//! The screening stage behind the router, in both modes, with and
//! without queue-state feedback.

use super::*;

/// Frames to the sink's network on UDP port `dport`.
fn to_port(dport: u16, seq: u64) -> Vec<u8> {
    UdpProbe {
        src_mac: GEN_MAC,
        dst_mac: PORT_MACS[0],
        ports: (1, dport),
        seq,
        ..UdpProbe::default()
    }
    .to_vec()
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
