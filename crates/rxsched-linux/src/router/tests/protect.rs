//! A protected receive side (`route --protect-queue`): its frames go first.

use super::*;

/// A frame from the sink's side, arriving on port 1, from `src` to `dst`.
fn port1_frame(src: [u8; 4], dst: [u8; 4], seq: u64) -> Vec<u8> {
    UdpProbe {
        src_mac: SINK_MAC,
        dst_mac: PORT_MACS[1],
        src_ip: src,
        dst_ip: dst,
        ports: (1, 2),
        ttl: 64,
        seq,
        ..UdpProbe::default()
    }
    .to_vec()
}

/// A frame from the sink's side back to the generator, arriving on port 1.
fn back_frame(seq: u64) -> Vec<u8> {
    port1_frame([198, 19, 0, 1], [198, 18, 0, 1], seq)
}

/// Port 0 holds a backlog for the sink, port 1 a few frames back to the
/// generator. Round robin starts with port 0's batch; with port 1's side
/// protected, its frames are forwarded before any of port 0's.
fn first_forwarded(protect: bool) -> (usize, usize) {
    let c = cfg(Mode::Polling, Quota::Limited(8), None);
    let (mut r, net, clock) = polling(&c, 256);
    if protect {
        r.protect(Some(1), &[1], Quota::Limited(4));
    }
    for i in 0..100 {
        net.feed.push(frame(64, [198, 19, 0, 1], i));
    }
    for i in 0..3 {
        net.feed1.push(back_frame(i));
    }
    // Turn until something has been forwarded, then count both ways.
    for _ in 0..1000 {
        r.turn(clock.now() + MS_NS).unwrap();
        let (o, b) = (net.out.take().len(), net.back.take().len());
        if o + b > 0 {
            return (o, b);
        }
    }
    panic!("nothing was forwarded");
}

/// Port 0's backlog is being served when port 1's frames arrive: with port
/// 1 protected they go out before port 0's backlog is done, though the
/// thread never sleeps in between.
#[test]
fn protected_frames_arriving_mid_backlog_are_heard_between_callbacks() {
    let c = cfg(Mode::Polling, Quota::Limited(8), None);
    let (mut r, net, clock) = polling(&c, 256);
    r.protect(Some(1), &[1], Quota::Limited(4));
    for i in 0..100 {
        net.feed.push(frame(64, [198, 19, 0, 1], i));
    }
    let mut out = 0;
    while out < 16 {
        r.turn(clock.now() + MS_NS).unwrap();
        out += net.out.take().len();
    }
    for i in 0..3 {
        net.feed1.push(back_frame(i));
    }
    let mut back = 0;
    for _ in 0..1000 {
        r.turn(clock.now() + MS_NS).unwrap();
        out += net.out.take().len();
        back += net.back.take().len();
        if back == 3 {
            break;
        }
    }
    assert_eq!(back, 3);
    let rep = r.report().unwrap();
    assert_eq!(
        rep.protected,
        Some(ProtectedReport {
            queue: Some(1),
            taken: 3,
            steered: 0,
            unsteered: 0,
            rt_guard: None
        }),
        "{rep:?}"
    );
    assert!(
        out <= 16 + 8,
        "port 0 forwarded {out} of 100 before the protected frames went out"
    );
}

#[test]
fn a_protected_side_is_served_before_the_round_robin() {
    assert_eq!(
        first_forwarded(true),
        (0, 3),
        "protected: its 3 frames first"
    );
    let (o, b) = first_forwarded(false);
    assert!(
        o > 0 && b == 0,
        "round robin: port 0's batch first ({o}, {b})"
    );
}

/// A frame arriving on port 1 for the sink's side, back out of port 1.
fn hairpin_frame(seq: u64) -> Vec<u8> {
    port1_frame([198, 19, 0, 7], [198, 19, 0, 1], seq)
}

/// The order port 1's device sends in: 20 ordinary frames from port 0
/// queue for it while the device is full, 3 frames arriving on port 1 for
/// the same port among them; then the device takes frames again.
fn sent_order(protect: bool) -> Vec<u64> {
    let c = cfg(Mode::Polling, Quota::Limited(8), None);
    let (mut r, net, clock) = polling(&c, 256);
    if protect {
        r.protect(None, &[1], Quota::Limited(4));
    }
    net.out.set_room(0);
    for i in 0..20 {
        net.feed.push(frame(64, [198, 19, 0, 1], i));
    }
    // One callback's batch queued, then port 1's frames arrive while port
    // 0's backlog is being taken; the thread keeps trying the full device,
    // so it runs a fixed number of turns.
    while r.in_flight() == 0 {
        r.turn(clock.now() + MS_NS).unwrap();
    }
    for i in 100..103 {
        net.feed1.push(hairpin_frame(i));
    }
    for _ in 0..500 {
        r.turn(clock.now() + MS_NS).unwrap();
    }
    if protect {
        // Heard between callbacks, as a protected side is.
        assert_eq!(r.in_flight(), 23, "all wait on the output queue");
    }
    net.out.set_room(usize::MAX);
    settle(&mut r, &clock);
    net.out
        .take()
        .iter()
        .map(|f| crate::wire::parse_probe(f).expect("a probe").0)
        .collect()
}

/// A protected side's frames go out ahead of the ordinary frames already
/// waiting on their output port (the protected transmit queue); without
/// protection the port sends in arrival order.
#[test]
fn protected_frames_go_out_ahead_of_an_output_backlog() {
    let ordinary: Vec<u64> = (0..20).collect();
    let protected: Vec<u64> = (100..103).collect();
    let with = sent_order(true);
    assert_eq!(with[..3], protected[..], "{with:?}");
    assert_eq!(with[3..], ordinary[..], "{with:?}");
    let without = sent_order(false);
    assert_eq!(without[..20], ordinary[..], "{without:?}");
    assert_eq!(without[20..], protected[..], "{without:?}");
}
