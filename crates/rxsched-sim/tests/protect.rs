//! Protected traffic (`[[traffic]] protected`, `[kernel.protect]`): the
//! device steers a protected source onto a ring of its own, the polling
//! kernel serves it first with its own quota and a cap, and every protected
//! frame is accounted for (delivered, in flight, or lost at a named point).

use rxsched_sim::scenario::{parse_set, Loaded};
use rxsched_sim::{run, Metrics};

/// The router of Mogul & Ramakrishnan's figure 6-3, flooded on port 0 far
/// past its MLFRR, with a protected stream of 200 frames a second.
const ROUTER: &str = "profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\nquota = 10\nprotect = { enabled = true }\n[[traffic]]\nrate_pps = 12000\n[[traffic]]\nkind = \"poisson\"\nrate_pps = 200\nprotected = true\n[run]\nduration_ms = 500\nwarmup_ms = 50\n";

fn at(sets: &[(&str, &str)]) -> Metrics {
    let l = Loaded::parse("protect.toml", ROUTER.into(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    run(&l.with(&sets).unwrap(), None).unwrap().0
}

fn get(m: &Metrics, k: &str) -> f64 {
    *m.extra.get(k).unwrap_or_else(|| panic!("no {k} in {m:?}"))
}

/// Every protected frame is delivered, lost, or still in the host (a few at most).
fn protected_conserved(m: &Metrics) {
    let (sent, delivered, lost) = (
        get(m, "protected_sent"),
        get(m, "protected_delivered"),
        get(m, "protected_lost"),
    );
    assert!(sent > 50.0, "only {sent} protected frames sent");
    let held = sent - delivered - lost;
    assert!(
        (0.0..=m.in_flight as f64).contains(&held),
        "protected: sent {sent}, delivered {delivered}, lost {lost}, host holds {}",
        m.in_flight
    );
    assert_eq!(
        m.arrived,
        m.delivered + m.drops.values().sum::<u64>() + m.in_flight
    );
}

#[test]
fn a_ring_of_its_own_served_first_loses_nothing_under_a_flood() {
    let prot = at(&[]);
    let shared = at(&[("kernel.protect.enabled", "false")]);
    let unmodified = at(&[("kernel.kind", "\"bsd\"")]);
    for m in [&prot, &shared, &unmodified] {
        protected_conserved(m);
    }
    assert_eq!(
        get(&prot, "protected_lost"),
        0.0,
        "served first on its own ring: {prot:?}"
    );
    // Sharing the flood's ring, the protected stream dies with the flood,
    // about in the flood's proportion.
    let lost = get(&shared, "protected_lost") / get(&shared, "protected_sent");
    assert!(
        lost > 0.2,
        "shared ring: {lost:.2} of protected frames lost"
    );
    // The unmodified kernel takes its protected ring first, into ipintrq,
    // where livelock drops them after the receive work.
    assert!(
        get(&unmodified, "protected_lost") > 0.0,
        "unmodified: {unmodified:?}"
    );
    assert!(unmodified.drops.get("ipintrq").copied().unwrap_or(0) > 0);
    // The protected class costs forwarding almost nothing.
    assert!(
        prot.delivered_pps >= 0.95 * shared.delivered_pps,
        "forwarding {} with the protected ring, {} without",
        prot.delivered_pps,
        shared.delivered_pps
    );
}

#[test]
fn a_flood_of_protected_frames_cannot_starve_forwarding() {
    // Both streams flood: the cap owes the ordinary ring as many frames as
    // each protected callback took, so forwarding keeps half the frames.
    let m = at(&[
        ("traffic.1.kind", "\"constant\""),
        ("traffic.1.rate_pps", "12000"),
    ]);
    protected_conserved(&m);
    let protected = get(&m, "protected_delivered");
    let ordinary = m.delivered as f64 - protected;
    assert!(ordinary > 0.0 && protected > 0.0, "{m:?}");
    let share = protected / (protected + ordinary);
    assert!(
        share <= 0.52,
        "protected frames took {share:.3} of what was forwarded"
    );
}

#[test]
fn protected_traffic_is_refused_where_it_is_not_modelled() {
    let l = Loaded::parse("protect.toml", ROUTER.into(), None).unwrap();
    let e = l
        .with(&[parse_set("kernel.kind=\"linux\"").unwrap()])
        .unwrap_err();
    assert!(e.key.as_deref().unwrap_or("").contains("protect"), "{e}");
    let e = l
        .with(&[parse_set("traffic.1.protected=false").unwrap()])
        .unwrap_err();
    assert_eq!(e.key.as_deref(), Some("kernel.protect.enabled"), "{e}");
    let e = l
        .with(&[parse_set("kernel.protect.ring=0").unwrap()])
        .unwrap_err();
    assert_eq!(e.key.as_deref(), Some("kernel.protect.ring"), "{e}");
}
