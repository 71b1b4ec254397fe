//! The Linux model's receive side beyond the papers' drivers: `netif_rx`'s
//! throttle (`kernel.backlog_throttle`: as in Linux 2.6.9, once the per-CPU
//! backlog overflows, every frame is dropped until the backlog has emptied,
//! so under overload it swings between full and empty instead of standing
//! full), and several receive queues per port (`kernel.rx_queues`, RSS:
//! each queue a ring, an interrupt vector and a NAPI instance of its own,
//! frames spread over them at random).

use rxsched_sim::scenario::{parse_set, Loaded};
use rxsched_sim::{run, Metrics};

/// One port of the MPC8250 router, driver without NAPI.
const ORIGINAL: &str = "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\nvariant = \"ORIGINAL\"\n[[traffic]]\nport = 0\nrate_pps = 25000\n[run]\nduration_ms = 200\nwarmup_ms = 10\n";

/// The same port with NAPI (its rings hold 128 frames).
const NAPI: &str = "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\nvariant = \"NAPI\"\n[[traffic]]\nport = 0\nrate_pps = 20000\n[run]\nduration_ms = 200\nwarmup_ms = 10\n";

/// `base` with `sets`, run once; every frame accounted for.
fn at(base: &str, sets: &[(&str, &str)]) -> Metrics {
    let l = Loaded::parse("linux.toml", base.into(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    let m = run(&l.with(&sets).unwrap(), None).unwrap().0;
    assert_eq!(
        m.arrived,
        m.delivered + m.drops.values().sum::<u64>() + m.in_flight,
        "every frame delivered, in flight or dropped at a named point: {m:?}"
    );
    m
}

fn extra(m: &Metrics, k: &str) -> f64 {
    m.extra.get(k).copied().unwrap_or_else(|| panic!("no {k}"))
}

fn backlog_drops(m: &Metrics) -> u64 {
    m.drops.get("backlog").copied().unwrap_or(0)
}

#[test]
fn an_overflow_throttles_the_backlog_until_it_has_emptied() {
    // 40,000 frames/s is past what this router forwards (about 25,000).
    let on = at(ORIGINAL, &[("traffic.0.rate_pps", "40000")]);
    let off = at(
        ORIGINAL,
        &[
            ("traffic.0.rate_pps", "40000"),
            ("kernel.backlog_throttle", "false"),
        ],
    );
    assert!(
        extra(&on, "backlog_throttles") >= 1.0,
        "throttled {} times",
        extra(&on, "backlog_throttles")
    );
    // Nearly every backlog drop is a throttled one: after the first
    // overflow of each episode the frames are dropped while there is room.
    let throttled = extra(&on, "backlog_throttled_drops");
    assert!(
        throttled > 0.9 * backlog_drops(&on) as f64,
        "{throttled} of {} backlog drops throttled",
        backlog_drops(&on)
    );
    assert_eq!(extra(&off, "backlog_throttles"), 0.0);
    assert_eq!(extra(&off, "backlog_throttled_drops"), 0.0);
    // The softirq forwards as fast either way; what changes is how long
    // a forwarded frame waited: a backlog that drains to empty before it
    // takes frames again holds them about half as long on average as one
    // that stands full.
    let (a, b) = (on.delivered as f64, off.delivered as f64);
    assert!(
        (a / b - 1.0).abs() < 0.03,
        "delivered {a} with, {b} without"
    );
    let (p_on, p_off) = (on.latency_us.p50, off.latency_us.p50);
    assert!(
        p_on < 0.75 * p_off,
        "median latency {p_on} µs throttled, {p_off} µs not"
    );
}

#[test]
fn no_throttle_below_overload_nor_under_napi() {
    let light = at(ORIGINAL, &[]);
    assert_eq!(backlog_drops(&light), 0, "{light:?}");
    assert_eq!(extra(&light, "backlog_throttles"), 0.0);
    let napi = at(
        ORIGINAL,
        &[("traffic.0.rate_pps", "100000"), ("kernel.variant", "NAPI")],
    );
    assert_eq!(backlog_drops(&napi), 0, "{napi:?}");
    assert_eq!(extra(&napi, "backlog_throttles"), 0.0);
}

fn ring_drops(m: &Metrics) -> u64 {
    m.drops.get("nic_rx_ring").copied().unwrap_or(0)
}

/// 300 frames back to back: more than one 128-frame ring holds before the
/// first poll has drained it, less than four.
const BURST: [(&str, &str); 4] = [
    ("traffic.0.kind", "burst"),
    ("traffic.0.burst", "300"),
    ("traffic.0.count", "300"),
    ("traffic.0.rate_pps", "1"),
];

#[test]
fn a_burst_one_ring_cannot_hold_is_spread_over_four() {
    let one = at(NAPI, &BURST);
    let four = at(
        NAPI,
        &[BURST.as_slice(), &[("kernel.rx_queues", "4")]].concat(),
    );
    assert!(ring_drops(&one) > 0, "one queue: {one:?}");
    assert_eq!(ring_drops(&four), 0, "four queues: {four:?}");
    assert_eq!(four.delivered, 300);
    // Each queue that got frames interrupted on its own vector.
    assert!(
        four.interrupts.rx >= 4 && four.interrupts.rx > one.interrupts.rx,
        "receive interrupts: {} with four queues, {} with one",
        four.interrupts.rx,
        one.interrupts.rx
    );
}

/// Under overload one CPU forwards as much through four queues as
/// through one, but four rings hold four times the frames, and a frame
/// waits about four times as long.
#[test]
fn under_overload_more_rings_forward_no_more_and_hold_frames_longer() {
    let one = at(NAPI, &[("traffic.0.rate_pps", "100000")]);
    let four = at(
        NAPI,
        &[("traffic.0.rate_pps", "100000"), ("kernel.rx_queues", "4")],
    );
    let (a, b) = (one.delivered as f64, four.delivered as f64);
    assert!(
        (b / a - 1.0).abs() < 0.02,
        "delivered {a} with one queue, {b} with four"
    );
    let ratio = four.latency_us.p50 / one.latency_us.p50;
    assert!(
        (3.0..=5.0).contains(&ratio),
        "median latency {} µs with four queues, {} with one",
        four.latency_us.p50,
        one.latency_us.p50
    );
}

#[test]
fn receive_queues_are_refused_outside_linux_and_out_of_range() {
    let l = Loaded::parse("linux.toml", NAPI.into(), None).unwrap();
    for v in ["0", "65"] {
        let e = l
            .with(&[parse_set(&format!("kernel.rx_queues={v}")).unwrap()])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("kernel.rx_queues"), "{e}");
    }
    let bsd = "profile = \"dec3000-300\"\n[kernel]\nkind = \"bsd\"\nrx_queues = 2\n[[traffic]]\nrate_pps = 100\n";
    let e = Loaded::parse("bsd.toml", bsd.into(), None).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("kernel.rx_queues"), "{e}");
}

/// A source of one flow lands on one queue, whatever the number of
/// queues: the 300-frame burst overflows its ring as with one queue; of
/// many flows, four rings hold it.
#[test]
fn a_single_flow_lands_on_one_queue() {
    let four = [BURST.as_slice(), &[("kernel.rx_queues", "4")]].concat();
    let many = at(NAPI, &four);
    let one = at(
        NAPI,
        &[four.as_slice(), &[("traffic.0.flows", "1")]].concat(),
    );
    let single_queue = at(NAPI, &BURST);
    assert_eq!(ring_drops(&many), 0, "{many:?}");
    assert_eq!(
        ring_drops(&one),
        ring_drops(&single_queue),
        "one flow over four queues: {one:?}"
    );
    assert!(ring_drops(&one) > 0);
    let l = Loaded::parse("bsd.toml", "profile = \"dec3000-300\"\n[kernel]\nkind = \"bsd\"\n[[traffic]]\nrate_pps = 100\nflows = 2\n".into(), None).unwrap_err();
    assert_eq!(l.key.as_deref(), Some("traffic.0.flows"), "{l}");
}

/// RSS keeps a flow on one queue: the TCP connection through the router is
/// not reordered by four queues (spread frame by frame, as the sources'
/// many flows are, it was: 93 segments sent again, none lost).
#[test]
fn a_connection_keeps_to_one_queue_and_is_not_reordered() {
    const TCP: &str = "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\nvariant = \"NAPI\"\nrx_queues = 4\n[[traffic]]\nkind = \"poisson\"\nport = 0\nrate_pps = 15000\n[tcp]\nsender_segment_us = 20\nreceiver_segment_us = 20\n[run]\nduration_ms = 1500\nwarmup_ms = 100\n";
    let m = at(TCP, &[]);
    assert!(m.drops.is_empty(), "{m:?}");
    let retx = m.extra.get("tcp_retransmits").copied().unwrap_or(f64::NAN);
    assert_eq!(retx, 0.0, "segments sent again with nothing lost: {m:?}");
    let mbps = m.extra.get("tcp_mbps").copied().unwrap_or(0.0);
    assert!(mbps > 50.0, "the connection ran: {mbps} Mb/s");
}
