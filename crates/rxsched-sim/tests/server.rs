//! An SRP server computing between its receive calls (Brustoloni et al.
//! 2000, table 2): TCP's flow control keeps its socket buffer from
//! overflowing while it computes, and where the protocol work runs decides
//! what its computation finds in the cache.

use rxsched_sim::scenario::{parse_set, Loaded};
use rxsched_sim::{run, Metrics};

const SERVER: &str = r#"profile = "p2-266-freebsd"
[kernel]
kind = "srp"
ip_layer = "softirq"
socket_bytes = 524288
socket_packets = 1000
[[traffic]]
rate_pps = 0
[[process]]
kind = "reader"
disposition = "default"
request_kb = 512
compute = "select"
compute_ns_per_byte = 9.4
[tcp]
receiver = "host"
half_duplex = true
window_bytes = 524288
flow_control = true
sender_segment_us = 168.4
sender_ack_us = 0
[run]
duration_ms = 1500
warmup_ms = 300
"#;

fn at(sets: &[(&str, &str)]) -> Result<Metrics, String> {
    let l = Loaded::parse("server.toml", SERVER.into(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    let s = l.with(&sets).map_err(|e| e.to_string())?;
    Ok(run(&s, None).unwrap().0)
}

fn extra(m: &Metrics, k: &str) -> f64 {
    *m.extra
        .get(k)
        .unwrap_or_else(|| panic!("no {k} in {:?}", m.extra))
}

#[test]
fn flow_control_keeps_a_computing_server_from_losing_segments() {
    // A computation long enough (about 100 ms) for more than a request to
    // arrive while it runs.
    let slow = ("process.0.compute_ns_per_byte", "100");
    for disposition in ["default", "ignore"] {
        let m = at(&[("process.0.disposition", disposition), slow]).unwrap();
        let dropped: u64 = m.drops.values().sum();
        assert_eq!(
            m.arrived,
            m.delivered + dropped + m.in_flight,
            "{disposition}: conservation"
        );
        assert_eq!(dropped, 0, "{disposition}: drops {:?}", m.drops);
        assert_eq!(extra(&m, "tcp_retransmits"), 0.0, "{disposition}");
        assert!(
            extra(&m, "transaction_ms") > 0.0,
            "{disposition}: no transaction measured"
        );
    }
    // Without it, the sender fills the buffer while the server computes
    // (its default action acknowledges what it has not read) and segments
    // die at the early demultiplexer.
    let m = at(&[("tcp.flow_control", "false"), slow]).unwrap();
    let dropped: u64 = m.drops.values().sum();
    assert!(dropped > 0, "no drops without flow control: {:?}", m.drops);
}

#[test]
fn protocol_work_during_the_computation_costs_it_cache_misses() {
    let d = at(&[]).unwrap();
    let i = at(&[("process.0.disposition", "ignore")]).unwrap();
    let (cd, ci) = (extra(&d, "compute_ms"), extra(&i, "compute_ms"));
    assert!(
        ci < 0.9 * cd,
        "computing takes {ci} ms with SIGUIQ ignored, {cd} ms by default"
    );
    assert!(extra(&i, "cache_miss_share") < extra(&d, "cache_miss_share"));
    // The default action did the protocol work as segments came.
    assert!(extra(&d, "srp_deliveries") > 0.0);
    assert_eq!(extra(&i, "srp_deliveries"), 0.0);
}

#[test]
fn a_server_is_a_tcp_reader_under_srp_with_all_its_keys() {
    let e = at(&[("process.0.compute_ns_per_byte", "-1")]).unwrap_err();
    assert!(e.contains("process.0.compute_ns_per_byte"), "{e}");
    let e = at(&[("kernel.kind", "bsd"), ("process.0.disposition", "default")]).unwrap_err();
    assert!(e.contains("process.0"), "{e}");
    let l = Loaded::parse(
        "server.toml",
        SERVER.replace("compute = \"select\"\n", ""),
        None,
    );
    let e = l.and_then(|l| l.with(&[])).unwrap_err().to_string();
    assert!(e.contains("process.0.request_kb"), "{e}");
}
