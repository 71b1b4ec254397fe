//! The multiprocessor host (`kernel.kind = "nt"`): conservation and
//! per-CPU accounting closure under every servicing mode, the lock's own
//! account of waiting against the threads' blocked intervals, thread
//! pinning and its cure, and determinism.

use proptest::prelude::*;
use rxsched_sim::scenario::Loaded;
use rxsched_sim::{run, Metrics};

fn scenario(src: &str, sets: &[(&str, String)]) -> rxsched_sim::Scenario {
    let l = Loaded::parse("test.toml", src.to_string(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| rxsched_sim::scenario::parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    l.with(&sets).unwrap()
}

fn sim(src: &str, sets: &[(&str, String)]) -> Metrics {
    run(&scenario(src, sets), None).unwrap().0
}

fn x(m: &Metrics, k: &str) -> f64 {
    m.extra.get(k).copied().unwrap_or(0.0)
}

const NT: &str = r#"
profile = "dual-p133-nt4"
[kernel]
kind = "nt"
socket_packets = 64
socket_bytes = 262144
[smp]
cpus = 2
[[traffic]]
kind = "poisson"
rate_pps = 6000
frame_bytes = 2084
[[process]]
kind = "reader"
name = "consumer"
threads = 2
lock_us = 60
[run]
duration_ms = 400
warmup_ms = 50
quantum_ms = 30
"#;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the CPUs, receive queues, servicing, load and threads: every datagram is
    /// delivered, in flight or dropped at a named point; every CPU's
    /// buckets cover the measured interval (the run fails otherwise); the
    /// lock's account of waiting equals the threads' blocked intervals.
    #[test]
    fn conservation_closure_and_lock_accounting(
        cpus in 1u32..5,
        service in prop::sample::select(vec!["interrupt", "polling", "two-level"]),
        detector in prop::sample::select(vec!["cpu", "queue", "rate"]),
        rate in 0u32..16_000,
        threads in 1u32..5,
        lock_us in prop::sample::select(vec![0.0, 5.0, 60.0, 300.0]),
        realtime in any::<bool>(),
        compute in any::<bool>(),
        queues in 0u32..4,
        seed in 0u64..1000,
    ) {
        let mut src = NT.to_string();
        if compute {
            src = src.replace("[run]", "[[process]]\nkind = \"compute\"\n[run]");
        }
        let threshold = match detector { "cpu" => "0.3", "queue" => "4", _ => "2000" };
        let m = sim(&src, &[
            ("smp.cpus", cpus.to_string()),
            ("smp.interrupt_cpu", (seed as u32 % cpus).to_string()),
            ("smp.queues", queues.min(cpus).to_string()),
            ("smp.service", format!("\"{service}\"")),
            ("smp.detector", format!("\"{detector}\"")),
            ("smp.threshold", threshold.into()),
            ("smp.hold_ms", "20".into()),
            ("smp.window_ms", "5".into()),
            // At most the line rate of 2,084-byte frames (a scenario asking
            // for more is refused).
            ("traffic.rate_pps", rate.min(8_000).to_string()),
            ("process.0.threads", threads.to_string()),
            ("process.0.lock_us", lock_us.to_string()),
            ("process.0.realtime", realtime.to_string()),
            ("run.seed", seed.to_string()),
        ]);
        prop_assert_eq!(m.arrived, m.delivered + m.drops.values().sum::<u64>() + m.in_flight);
        let total: f64 = m.cpu.values().sum();
        prop_assert!((total - 1.0).abs() < 1e-9, "shares add up to {}", total);
        for k in 0..cpus {
            let mine: f64 = m
                .extra
                .iter()
                .filter(|(n, _)| n.starts_with(&format!("cpu{k}.")))
                .map(|(_, v)| v)
                .sum();
            prop_assert!((mine - 1.0).abs() < 1e-9, "CPU {}'s buckets add up to {}", k, mine);
        }
        prop_assert_eq!(x(&m, "lock_wait_ns"), x(&m, "lock_blocked_ns"));
        if lock_us == 0.0 || threads == 1 {
            prop_assert_eq!(x(&m, "lock_wait_ns"), 0.0);
        }
    }
}

#[test]
fn an_interrupted_lock_holder_makes_the_other_cpu_wait_and_the_polling_thread_does_not() {
    let at = |service: &str| {
        sim(
            NT,
            &[
                ("traffic.rate_pps", "8000".into()),
                ("smp.service", format!("\"{service}\"")),
            ],
        )
    };
    let (irq, poll) = (at("interrupt"), at("polling"));
    let locking = |m: &Metrics| m.cpu.get("locking").copied().unwrap_or(0.0);
    assert!(locking(&irq) > 0.1, "interrupts: locking {}", locking(&irq));
    assert!(locking(&poll) < 0.01, "polling: locking {}", locking(&poll));
    assert!(
        poll.delivered_pps > 1.2 * irq.delivered_pps,
        "polling {} against interrupts {}",
        poll.delivered_pps,
        irq.delivered_pps
    );
    assert!(x(&irq, "lock_wait_ns") > 0.0);
}

const PIN: &str = r#"
profile = "dual-p133-nt4"
[kernel]
kind = "nt"
socket_packets = 64
socket_bytes = 131072
[smp]
cpus = 2
interrupt_cpu = 0
[[traffic]]
kind = "poisson"
rate_pps = 13000
frame_bytes = 1060
[[process]]
kind = "reader"
realtime = true
[run]
duration_ms = 300
warmup_ms = 50
quantum_ms = 30
"#;

#[test]
fn a_realtime_consumer_on_the_interrupted_cpu_is_starved_and_on_the_other_is_not() {
    let on = |cpu: u32| sim(PIN, &[("process.0.cpu", cpu.to_string())]);
    let (pinned, free) = (on(0), on(1));
    // NT places a readied thread on its ideal CPU when that CPU holds no
    // thread, even under a DPC: there it stays, as nothing preempts it.
    assert_eq!(x(&pinned, "reader_cpu"), 0.0);
    assert_eq!(x(&free, "reader_cpu"), 1.0);
    assert!(
        pinned.delivered_pps < 0.5 * free.delivered_pps,
        "pinned {} free {}",
        pinned.delivered_pps,
        free.delivered_pps
    );
    // The system's periodic work on each CPU, at a priority between the
    // classes, preempts a normal consumer, which is then made ready and
    // may move to the other CPU; nothing preempts a real-time one.
    let system = (0..2)
        .map(|c| format!("[[process]]\nkind = \"onoff\"\nnt_priority = 13\naffinity = [{c}]\non_ms = 0.2\noff_ms = 10\n"))
        .collect::<String>();
    let src = PIN.replace("[run]", &format!("{system}[run]"));
    let normal = sim(
        &src,
        &[
            ("process.0.cpu", "0".into()),
            ("process.0.realtime", "false".into()),
        ],
    );
    let rt = sim(&src, &[("process.0.cpu", "0".into())]);
    assert!(
        normal.delivered_pps > 2.0 * rt.delivered_pps,
        "normal {} real-time {}",
        normal.delivered_pps,
        rt.delivered_pps
    );
}

#[test]
fn the_polling_thread_runs_where_there_is_room_and_the_dpc_share_falls_to_almost_nothing() {
    let at = |service: &str| {
        sim(
            PIN,
            &[
                ("process.0.cpu", "0".into()),
                ("smp.service", format!("\"{service}\"")),
                ("traffic.rate_pps", "15000".into()),
            ],
        )
    };
    let (irq, poll) = (at("interrupt"), at("polling"));
    assert!(x(&irq, "dpc_share_of_one_cpu") > 0.9);
    assert!(x(&poll, "dpc_share_of_one_cpu") < 0.05);
    assert!(poll.delivered_pps > 5.0 * irq.delivered_pps.max(1.0));
}

#[test]
fn the_two_level_switch_waits_for_the_hold_and_returns_when_polling_runs_dry() {
    let src = r#"
profile = "dual-p133-nt4"
[kernel]
kind = "nt"
[smp]
service = "two-level"
hold_ms = 300
window_ms = 10
[[traffic]]
kind = "poisson"
rate_pps = 1000
frame_bytes = 1060
[[traffic]]
kind = "poisson"
rate_pps = 14360
frame_bytes = 1060
start_us = 100000
count = 7180
[[process]]
kind = "reader"
cpu = 1
[run]
duration_ms = 1000
warmup_ms = 0
"#;
    let at = |ms: u32| sim(src, &[("run.duration_ms", ms.to_string())]);
    // Overload from 100 ms: still interrupts before the 300 ms hold ends.
    assert_eq!(x(&at(350), "polling_now"), 0.0);
    assert_eq!(x(&at(350), "two_level_switches"), 0.0);
    // Polling after it, until the load falls at 600 ms.
    assert_eq!(x(&at(500), "polling_now"), 1.0);
    let end = at(1000);
    assert_eq!(x(&end, "polling_now"), 0.0);
    assert_eq!(x(&end, "two_level_switches"), 2.0);
}

#[test]
fn one_cpu_runs_everything_there_and_the_same_seed_gives_the_same_bytes() {
    let sets = [
        ("smp.cpus", "1".to_string()),
        ("smp.service", "\"two-level\"".to_string()),
        ("smp.hold_ms", "50".to_string()),
        ("traffic.rate_pps", "8000".to_string()),
    ];
    let a = sim(NT, &sets);
    assert_eq!(x(&a, "cpus"), 1.0);
    assert!(a.extra.keys().all(|k| !k.starts_with("cpu1.")));
    let b = sim(NT, &sets);
    let json = |m: &Metrics| {
        let mut m = m.clone();
        m.wall_ms = 0.0;
        serde_json::to_string(&m).unwrap()
    };
    assert_eq!(json(&a), json(&b));
    let c = sim(
        NT,
        &[
            ("smp.cpus", "1".to_string()),
            ("smp.service", "\"two-level\"".to_string()),
            ("smp.hold_ms", "50".to_string()),
            ("traffic.rate_pps", "8000".to_string()),
            ("run.seed", "2".to_string()),
        ],
    );
    assert_ne!(json(&a), json(&c));
}

/// With a receive queue per CPU, each queue's polling thread works on its
/// own CPU and every CPU does receive work; with one queue, one polling
/// thread does it all, and a flood leaves the other CPUs' share of it at
/// nothing while the per-queue host delivers more.
#[test]
fn a_queue_per_cpu_spreads_the_receive_work_and_one_queue_does_not() {
    let flood = [
        ("smp.cpus", "4".to_string()),
        ("smp.service", "\"polling\"".into()),
        ("traffic.rate_pps", "60000".into()),
        ("traffic.frame_bytes", "136".into()),
        ("process.0.threads", "0".into()),
        ("process.0.lock_us", "0".into()),
    ];
    let run = |queues: &str| {
        let mut sets = flood.to_vec();
        sets.push(("smp.queues", queues.into()));
        sim(NT, &sets)
    };
    let (per, one) = (run("0"), run("1"));
    assert_eq!(x(&per, "queues"), 4.0);
    for k in 0..4 {
        assert!(
            x(&per, &format!("cpu{k}.poll")) > 0.05,
            "CPU {k} polls its queue: {:?}",
            per.extra
        );
    }
    let polling_cpus = (0..4)
        .filter(|k| x(&one, &format!("cpu{k}.poll")) > 0.05)
        .count();
    assert!(
        polling_cpus <= 2,
        "one thread polls one queue: {:?}",
        one.extra
    );
    assert!(
        per.delivered > 2 * one.delivered,
        "four queues {} against one {}",
        per.delivered,
        one.delivered
    );
}
