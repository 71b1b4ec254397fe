//! Receive interrupt coalescing in the Linux model (`kernel.rx_usecs`,
//! `kernel.rx_frames`, as `ethtool -C` sets them): fewer interrupts, each
//! serving more frames, at the cost of the delay the device holds them.

use rxsched_sim::scenario::{parse_set, Loaded};
use rxsched_sim::{run, Metrics};

const LINUX: &str = "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\nvariant = \"ORIGINAL\"\n[[traffic]]\nport = 0\nrate_pps = 8000\n[run]\nduration_ms = 100\nwarmup_ms = 5\n";

fn at(sets: &[(&str, &str)]) -> Metrics {
    let l = Loaded::parse("coalesce.toml", LINUX.into(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    run(&l.with(&sets).unwrap(), None).unwrap().0
}

#[test]
fn a_delay_gathers_frames_into_fewer_interrupts_and_delays_them() {
    let none = at(&[]);
    let usecs = at(&[("kernel.rx_usecs", "500")]);
    let frames = at(&[("kernel.rx_usecs", "5000"), ("kernel.rx_frames", "8")]);
    for m in [&none, &usecs, &frames] {
        assert_eq!(
            m.arrived,
            m.delivered + m.drops.values().sum::<u64>() + m.in_flight
        );
        assert!(m.delivered as f64 > 0.95 * m.arrived as f64, "{m:?}");
    }
    // 8,000 frames/s is one every 125 µs: a 500 µs hold gathers about four
    // a interrupt, and eight frames fill the count long before 5 ms passes.
    let per = |m: &Metrics| m.received as f64 / m.interrupts.rx as f64;
    assert!(
        per(&none) < 1.2,
        "no coalescing: {} frames an interrupt",
        per(&none)
    );
    assert!(
        (3.0..=5.5).contains(&per(&usecs)),
        "500 µs: {} frames an interrupt",
        per(&usecs)
    );
    assert!(
        (7.0..=8.5).contains(&per(&frames)),
        "8 frames: {} frames an interrupt",
        per(&frames)
    );
    // Held frames wait: the median latency grows by about half the hold.
    let (a, b) = (none.latency_us.p50, usecs.latency_us.p50);
    assert!(
        b > a + 150.0,
        "p50 {a} µs without, {b} µs with a 500 µs hold"
    );
}

#[test]
fn coalescing_is_refused_where_it_is_not_modelled_or_could_hold_frames_forever() {
    let l = Loaded::parse("coalesce.toml", LINUX.into(), None).unwrap();
    for (k, v, key) in [
        ("kernel.rx_frames", "8", "kernel.rx_frames"),
        ("kernel.rx_usecs", "-1", "kernel.rx_usecs"),
    ] {
        let e = l
            .with(&[parse_set(&format!("{k}={v}")).unwrap()])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
    }
    let bsd = "profile = \"dec3000-300\"\n[kernel]\nkind = \"bsd\"\nrx_usecs = 100\n[[traffic]]\nrate_pps = 100\n";
    let e = Loaded::parse("bsd.toml", bsd.into(), None).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("kernel.rx_usecs"), "{e}");
}
