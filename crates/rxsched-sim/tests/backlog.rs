//! `netif_rx`'s throttle in the Linux model (`kernel.backlog_throttle`):
//! as in Linux 2.6.9, once the per-CPU backlog overflows, every frame is
//! dropped until the backlog has emptied, so under overload the backlog
//! swings between full and empty instead of standing full.

use rxsched_sim::scenario::{parse_set, Loaded};
use rxsched_sim::{run, Metrics};

/// One port of the MPC8250 router, driver without NAPI.
const ORIGINAL: &str = "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\nvariant = \"ORIGINAL\"\n[[traffic]]\nport = 0\nrate_pps = 25000\n[run]\nduration_ms = 200\nwarmup_ms = 10\n";

fn at(sets: &[(&str, &str)]) -> Metrics {
    let l = Loaded::parse("backlog.toml", ORIGINAL.into(), None).unwrap();
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
    let on = at(&[("traffic.0.rate_pps", "40000")]);
    let off = at(&[
        ("traffic.0.rate_pps", "40000"),
        ("kernel.backlog_throttle", "false"),
    ]);
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
    let light = at(&[]);
    assert_eq!(backlog_drops(&light), 0, "{light:?}");
    assert_eq!(extra(&light, "backlog_throttles"), 0.0);
    let napi = at(&[("traffic.0.rate_pps", "100000"), ("kernel.variant", "NAPI")]);
    assert_eq!(backlog_drops(&napi), 0, "{napi:?}");
    assert_eq!(extra(&napi, "backlog_throttles"), 0.0);
}
