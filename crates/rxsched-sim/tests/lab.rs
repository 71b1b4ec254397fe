//! The lab host (`kernel.kind = "lab"`): conservation, determinism, and
//! the mechanisms its predictions rest on: where each forwarder's frames
//! die under overload, the polling thread holding its receive work off,
//! and M4 leaving the compute process its share.

use proptest::prelude::*;
use rxsched_sim::scenario::Loaded;
use rxsched_sim::{run, Metrics};

const BASE: &str = "profile = \"linux-veth-lab\"\n\
    [kernel]\nkind = \"lab\"\nquota = 32\n\
    [[traffic]]\nrate_pps = 100000\n\
    [[process]]\nkind = \"compute\"\n\
    [run]\nduration_ms = 200\nwarmup_ms = 20\n";

fn lab(sets: &[(&str, String)]) -> Metrics {
    let l = Loaded::parse("test.toml", BASE.to_string(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| rxsched_sim::scenario::parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    run(&l.with(&sets).unwrap(), None).unwrap().0
}

fn at(fwd: &str, rate: f64) -> Metrics {
    lab(&[
        ("lab.forwarder", format!("\"{fwd}\"")),
        ("traffic.rate_pps", rate.to_string()),
    ])
}

fn drops(m: &Metrics, point: &str) -> u64 {
    m.drops.get(point).copied().unwrap_or(0)
}

const FORWARDERS: [&str; 5] = [
    "kernel",
    "xdp-fwd",
    "interrupt",
    "polling",
    "polling-in-xdp",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Every frame is delivered, on a ring, in a batch under way, or
    /// dropped at a named point; CPU shares sum to one.
    #[test]
    fn conservation(
        fwd in prop::sample::select(FORWARDERS.to_vec()),
        rate in 0.0f64..4e6,
        limit in any::<bool>(),
    ) {
        let m = lab(&[
            ("lab.forwarder", format!("\"{fwd}\"")),
            ("traffic.rate_pps", rate.to_string()),
            ("kernel.cycle_limit.enabled", limit.to_string()),
        ]);
        prop_assert_eq!(m.arrived, m.delivered + m.drops.values().sum::<u64>() + m.in_flight);
        let cpu: f64 = m.cpu.values().sum();
        prop_assert!((cpu - 1.0).abs() < 1e-6, "CPU shares sum to {}", cpu);
    }
}

#[test]
fn the_same_scenario_gives_the_same_record() {
    for fwd in FORWARDERS {
        let (a, b) = (at(fwd, 700e3), at(fwd, 700e3));
        assert_eq!(a, b, "{fwd}");
    }
}

/// Polling: under overload frames die on the device's ring, before any
/// work, never on the socket's ring; the interrupt mode's die on the
/// socket's ring after the receive work was spent on them, and its
/// forwarding collapses.
#[test]
fn overload_drops_before_work_under_polling_and_after_it_under_interrupts() {
    let p = at("polling", 4e6);
    assert!(drops(&p, "nic_rx_ring") > 0, "{:?}", p.drops);
    assert_eq!(drops(&p, "xsk_rx_ring"), 0, "{:?}", p.drops);
    let i = at("interrupt", 4e6);
    assert!(drops(&i, "xsk_rx_ring") > 0, "{:?}", i.drops);
    let peak = [50e3, 100e3, 200e3]
        .map(|r| at("interrupt", r).delivered_pps)
        .into_iter()
        .fold(0.0, f64::max);
    assert!(
        i.delivered_pps < 0.5 * peak && p.delivered_pps > 2.0 * i.delivered_pps,
        "interrupt {:.0} at 4 Mpps against its peak {peak:.0}; polling {:.0}",
        i.delivered_pps,
        p.delivered_pps
    );
}

/// At a low rate every forwarder keeps up, and its receive work runs about
/// as often as the generator's batches arrive.
#[test]
fn at_a_low_rate_everything_is_forwarded() {
    for fwd in FORWARDERS {
        let m = at(fwd, 20e3);
        let ratio = m.delivered_pps / m.offered_pps;
        assert!(ratio > 0.99, "{fwd}: {ratio}");
        let runs = m.extra["napi_runs_per_s"];
        assert!((5e3..2e4).contains(&runs), "{fwd}: {runs} NAPI runs/s");
    }
}

/// M4 at 50%: the compute process keeps about half the CPU however hard
/// the flood, where without it the router and its receive work take it.
#[test]
fn the_cycle_limit_leaves_the_compute_process_its_share() {
    for fwd in ["polling", "polling-in-xdp"] {
        let with = lab(&[
            ("lab.forwarder", format!("\"{fwd}\"")),
            ("traffic.rate_pps", "4e6".into()),
            ("kernel.cycle_limit.enabled", "true".into()),
        ]);
        let compute = with.cpu["user:compute"];
        assert!((0.4..0.65).contains(&compute), "{fwd}: compute {compute}");
        assert!(with.delivered_pps > 1e4, "{fwd}: {}", with.delivered_pps);
        assert!(
            with.inhibits.values().sum::<u64>() > 0,
            "{fwd}: {:?}",
            with.inhibits
        );
    }
    let without = at("polling", 4e6).cpu["user:compute"];
    assert!(without < 0.2, "compute without the limit {without}");
}

/// A profile without the costs the chosen forwarder reads is refused,
/// naming them.
#[test]
fn a_profile_without_the_lab_costs_is_refused() {
    let src = BASE.replace("linux-veth-lab", "dec3000-300");
    let e = match Loaded::parse("test.toml", src, None).and_then(|l| l.with(&[])) {
        Ok(s) => run(&s, None).unwrap_err().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("[lab]"), "{e}");
}
