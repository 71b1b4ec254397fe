//! A source offered at its line rate is a sender its link limits: whatever
//! its kind, its frames follow each other back to back, as a constant
//! source's do; below the line rate its kind still shapes the arrivals.

use rxsched_sim::run;
use rxsched_sim::scenario::{parse_set, Loaded};

// 64-byte frames on the 3000/300's 10 Mb/s Ethernet: 14,880.95 a second.
const HOST: &str = "profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\nquota = 10\n[[traffic]]\nframe_bytes = 64\n[run]\nduration_ms = 200\nwarmup_ms = 20\n";

fn record(kind: &str, rate: &str) -> String {
    let l = Loaded::parse("saturated.toml", HOST.into(), None).unwrap();
    let sets: Vec<_> = [("traffic.0.kind", kind), ("traffic.0.rate_pps", rate)]
        .iter()
        .map(|(k, v)| parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    let (mut m, _) = run(&l.with(&sets).unwrap(), None).unwrap();
    m.wall_ms = 0.0;
    serde_json::to_string(&m).unwrap()
}

#[test]
fn at_the_line_rate_every_kind_arrives_back_to_back() {
    let constant = record("constant", "14880");
    for kind in ["poisson", "jittered", "bursty"] {
        assert_eq!(
            record(kind, "14880"),
            constant,
            "a {kind} source at the line rate differs from a constant one"
        );
    }
}

#[test]
fn below_the_line_rate_a_poisson_source_is_still_random() {
    assert_ne!(record("poisson", "13000"), record("constant", "13000"));
}
