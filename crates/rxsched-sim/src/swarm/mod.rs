//! Swarm testing: random *valid* scenarios, each run twice and checked.
//!
//! A case is drawn from one seed. The generator spreads its choices over
//! every kernel kind, process kind, traffic kind and mechanism switch, with
//! bounded virtual time and rates, and writes the case as a scenario file,
//! so that a failure is reproduced by `rxsched sim` on the file or by
//! drawing the same seed again. The case is read through the same loader
//! and validation as a user's file; a case the validator refuses is drawn
//! again from a derived seed (and counted), since only valid input must run.
//!
//! [`check`] runs a case and demands what every run owes: it finishes
//! (the caller bounds the wall time), it conserves packets, its CPU
//! accounting covers the measured interval exactly, and a second run from
//! the same seed gives the same record, byte for byte.

use crate::error::SimError;
use crate::metrics::Metrics;
use crate::scenario::{Loaded, VARIANTS};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use toml::{Table, Value};

/// The longest measured interval a case runs, in ms.
pub const MAX_DURATION_MS: f64 = 2000.0;

/// Kernel kinds, process kinds, traffic kinds and switches, as the labels
/// a case's coverage is told in.
pub const KERNELS: &[&str] = &["bsd", "emulated", "polling", "linux", "srp", "lrp", "nt"];
/// Process kinds.
pub const PROCESSES: &[&str] = &[
    "screend",
    "reader",
    "compute",
    "tcpdump",
    "onoff",
    "forwarder",
];
/// Traffic kinds.
pub const TRAFFIC: &[&str] = &["constant", "poisson", "burst", "jittered", "bursty"];

/// One drawn case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The seed it was drawn from.
    pub seed: u64,
    /// Draws the validator refused before this one.
    pub redraws: u32,
    /// The scenario file's text.
    pub toml: String,
    /// The loaded, validated scenario.
    pub loaded: Loaded,
    /// What it exercises: `kernel:srp`, `process:reader`, `traffic:burst`,
    /// `switch:feedback`, ...
    pub covers: BTreeSet<String>,
}

/// What a passing case simulated.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// Packets that arrived (each run once; the replay is not counted).
    pub packets: u64,
    /// Events the model handled.
    pub events: u64,
}

/// Draws the case for `seed`: the first draw the validator accepts.
pub fn case(seed: u64) -> Case {
    let mut redraws = 0;
    loop {
        let sub = seed.wrapping_add(u64::from(redraws).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (tree, covers) = draw(sub);
        let toml = format!(
            "# rxsched swarm case, seed {seed}{}\n{}",
            if redraws > 0 {
                format!(" (draw {})", redraws + 1)
            } else {
                String::new()
            },
            toml::to_string(&tree).expect("a drawn tree serializes")
        );
        match Loaded::parse(&format!("swarm-{seed}.toml"), toml.clone(), None) {
            Ok(loaded) => {
                return Case {
                    seed,
                    redraws,
                    toml,
                    loaded,
                    covers,
                }
            }
            Err(_) if redraws < 1000 => redraws += 1,
            Err(e) => panic!("the swarm generator drew 1000 invalid cases in a row: {e}"),
        }
    }
}

/// Runs a case twice and checks the record. `Err` says what went wrong.
pub fn check(case: &Case) -> Result<Outcome, String> {
    let s = &case.loaded.scenario;
    let once = || -> Result<(Metrics, String), String> {
        let (m, _) = crate::run(s, None).map_err(|e| match e {
            SimError::Input(e) => format!("a valid scenario was refused: {e}"),
            e => e.to_string(),
        })?;
        let json = serde_json::to_string(&m).map_err(|e| e.to_string())?;
        Ok((m, json))
    };
    let (m, first) = once()?;
    let dropped: u64 = m.drops.values().sum();
    if m.arrived != m.delivered + dropped + m.in_flight {
        return Err(format!(
            "conservation: arrived {} != delivered {} + dropped {} + in flight {}",
            m.arrived, m.delivered, dropped, m.in_flight
        ));
    }
    if m.drops.keys().any(|k| k.is_empty()) {
        return Err("a drop without a named drop point".into());
    }
    let cpu: f64 = m.cpu.values().sum();
    if (cpu - 1.0).abs() > 1e-9 || m.cpu.values().any(|v| !(0.0..=1.0 + 1e-12).contains(v)) {
        return Err(format!(
            "CPU accounting: shares add up to {cpu}, not 1: {:?}",
            m.cpu
        ));
    }
    let (_, second) = once()?;
    if first != second {
        return Err("replay: the same seed gave a different record".into());
    }
    Ok(Outcome {
        packets: m.arrived,
        events: m.events,
    })
}

/// Log-uniform in [lo, hi].
fn log_uniform(r: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    (r.gen_range(lo.ln()..=hi.ln())).exp()
}

/// A number rounded to three significant digits, so files read easily.
fn round3(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let p = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * p).round() / p
}

fn int(v: u64) -> Value {
    Value::Integer(v as i64)
}

fn float(v: f64) -> Value {
    Value::Float(round3(v))
}

/// Draws one scenario tree and what it covers.
fn draw(seed: u64) -> (Table, BTreeSet<String>) {
    let r = &mut ChaCha8Rng::seed_from_u64(seed);
    let mut covers = BTreeSet::new();
    let kind = *KERNELS.choose(r).expect("kernels");
    covers.insert(format!("kernel:{kind}"));
    if kind == "nt" {
        return (draw_nt(r, &mut covers), covers);
    }
    let profiles: Vec<&str> = crate::profile::BUILTIN.iter().map(|(n, _)| *n).collect();
    let profile = match kind {
        "linux" => "mpc8250-linux",
        "srp" | "lrp" if r.gen_bool(0.7) => "p2-266-freebsd",
        _ => profiles.choose(r).expect("profiles"),
    };
    covers.insert(format!("profile:{profile}"));
    let mut top = Table::new();
    top.insert("profile".into(), Value::String(profile.into()));

    // The consumer of received packets, and the rest of the processes.
    let receiving = matches!(kind, "srp" | "lrp");
    let consumer = match kind {
        "srp" => *["reader", "reader", "forwarder"].choose(r).expect("c"),
        "lrp" => "reader",
        "linux" => *["none", "none", "screend"].choose(r).expect("c"),
        _ => *["none", "screend", "reader", "tcpdump"]
            .choose(r)
            .expect("c"),
    };
    let reader = matches!(consumer, "reader" | "tcpdump");
    let proportional = r.gen_bool(0.3);
    let mut procs = Vec::new();
    let mut reserved = 0.0f64;
    let mut process = |kind: &str, r: &mut ChaCha8Rng, covers: &mut BTreeSet<String>| {
        covers.insert(format!("process:{kind}"));
        let mut p = Table::new();
        p.insert("kind".into(), Value::String(kind.into()));
        if r.gen_bool(0.2) {
            p.insert("priority".into(), int(r.gen_range(0..4)));
        }
        if proportional && r.gen_bool(0.4) && reserved < 0.8 {
            let share = round3(r.gen_range(0.05..(0.95 - reserved).min(0.6)));
            reserved += share;
            p.insert("reservation".into(), Value::Float(share));
            covers.insert("switch:reservation".into());
        }
        p
    };
    if consumer != "none" {
        let mut p = process(consumer, r, &mut covers);
        if consumer == "tcpdump" {
            let out = *["null", "file"].choose(r).expect("o");
            p.insert("output".into(), Value::String(out.into()));
        }
        if consumer == "reader" && kind == "srp" {
            let d = *["default", "catch", "catch-defer", "block", "ignore"]
                .choose(r)
                .expect("d");
            p.insert("disposition".into(), Value::String(d.into()));
            covers.insert(format!("disposition:{d}"));
        }
        procs.push(Value::Table(p));
    }
    if r.gen_bool(0.4) {
        let mut p = process("compute", r, &mut covers);
        if r.gen_bool(0.3) {
            p.insert("count".into(), int(r.gen_range(1..5)));
        }
        procs.push(Value::Table(p));
    }
    if r.gen_bool(0.3) {
        let mut p = process("onoff", r, &mut covers);
        p.insert("on_ms".into(), float(log_uniform(r, 0.5, 50.0)));
        p.insert("off_ms".into(), float(log_uniform(r, 0.5, 50.0)));
        if r.gen_bool(0.5) {
            p.insert("count".into(), int(r.gen_range(1..9)));
        }
        procs.push(Value::Table(p));
    }
    if !procs.is_empty() {
        top.insert("process".into(), Value::Array(procs));
    }

    top.insert("kernel".into(), Value::Table(kernel(r, kind, &mut covers)));

    let duration_ms = round3(log_uniform(r, 10.0, MAX_DURATION_MS));
    let mut traffic = Vec::new();
    let sources = *[0, 1, 1, 1, 2, 3].choose(r).expect("n");
    for _ in 0..sources {
        traffic.push(Value::Table(source(r, reader, duration_ms, &mut covers)));
    }
    if !traffic.is_empty() {
        top.insert("traffic".into(), Value::Array(traffic));
    }

    if r.gen_bool(if receiving || kind == "linux" {
        0.15
    } else {
        0.25
    }) {
        covers.insert("switch:tcp".into());
        let mut t = Table::new();
        let mss = r.gen_range(100..=1460u64);
        t.insert("mss".into(), int(mss));
        t.insert(
            "window_bytes".into(),
            int(r.gen_range(mss..=mss.max(262_144))),
        );
        t.insert(
            "receiver".into(),
            Value::String(if reader { "host" } else { "endpoint" }.into()),
        );
        if r.gen_bool(0.3) {
            t.insert("half_duplex".into(), Value::Boolean(true));
            covers.insert("switch:half_duplex".into());
        }
        if r.gen_bool(0.3) {
            t.insert("bytes".into(), int(r.gen_range(1..2_000_000)));
        }
        t.insert("rto_min_ms".into(), float(log_uniform(r, 1.0, 500.0)));
        top.insert("tcp".into(), Value::Table(t));
    }
    if reader && r.gen_bool(0.25) {
        top.insert("echo".into(), echo(r, 60..=1518, &mut covers));
    }

    let mut run = run_table(r, duration_ms, 20.0);
    if proportional {
        covers.insert("switch:proportional".into());
        run.insert("scheduler".into(), Value::String("proportional".into()));
    }
    top.insert("run".into(), Value::Table(run));
    (top, covers)
}

/// A case for the multiprocessor host: CPUs, interrupt affinity, servicing
/// and detector, a reader with threads and a lock, compute and on-off
/// threads with priorities and affinities, UDP or echo traffic.
fn draw_nt(r: &mut ChaCha8Rng, covers: &mut BTreeSet<String>) -> Table {
    let mut top = Table::new();
    top.insert("profile".into(), Value::String("dual-p133-nt4".into()));
    covers.insert("profile:dual-p133-nt4".into());
    let cpus = *[1u64, 2, 2, 2, 3, 4].choose(r).expect("cpus");
    let mut k = Table::new();
    k.insert("kind".into(), Value::String("nt".into()));
    if r.gen_bool(0.5) {
        k.insert("socket_packets".into(), int(r.gen_range(1..=1024)));
    }
    top.insert("kernel".into(), Value::Table(k));
    let mut smp = Table::new();
    smp.insert("cpus".into(), int(cpus));
    smp.insert("interrupt_cpu".into(), int(r.gen_range(0..cpus)));
    let service = *["interrupt", "polling", "two-level"].choose(r).expect("s");
    covers.insert(format!("smp:{service}"));
    smp.insert("service".into(), Value::String(service.into()));
    if service == "two-level" {
        let detector = *["cpu", "queue", "rate"].choose(r).expect("d");
        covers.insert(format!("smp:detector-{detector}"));
        smp.insert("detector".into(), Value::String(detector.into()));
        let threshold = match detector {
            "cpu" => r.gen_range(0.05..=1.0),
            "queue" => log_uniform(r, 0.5, 64.0),
            _ => log_uniform(r, 10.0, 100_000.0),
        };
        smp.insert("threshold".into(), float(threshold));
        smp.insert("hold_ms".into(), float(log_uniform(r, 0.1, 500.0)));
        smp.insert("window_ms".into(), float(log_uniform(r, 0.5, 100.0)));
        if r.gen_bool(0.3) {
            smp.insert("idle_grace_ms".into(), float(log_uniform(r, 0.1, 50.0)));
        }
        if r.gen_bool(0.3) {
            covers.insert("smp:return-below".into());
            smp.insert("return_below".into(), float(r.gen_range(0.01..=1.0)));
        }
    }
    if service != "interrupt" {
        smp.insert("poll_quota".into(), int(r.gen_range(1..=64)));
        if r.gen_bool(0.3) {
            smp.insert("poll_realtime".into(), Value::Boolean(r.gen_bool(0.5)));
        }
    }
    top.insert("smp".into(), Value::Table(smp));

    let mut procs = Vec::new();
    let thread = |kind: &str, r: &mut ChaCha8Rng, covers: &mut BTreeSet<String>| {
        covers.insert(format!("process:{kind}"));
        let mut p = Table::new();
        p.insert("kind".into(), Value::String(kind.into()));
        match r.gen_range(0..4) {
            0 => {
                p.insert("realtime".into(), Value::Boolean(true));
            }
            1 => {
                p.insert("nt_priority".into(), int(r.gen_range(1..=31)));
            }
            _ => {}
        }
        if r.gen_bool(0.3) {
            p.insert("cpu".into(), int(r.gen_range(0..cpus)));
        }
        if r.gen_bool(0.2) {
            let mut a: Vec<Value> = (0..cpus).filter(|_| r.gen_bool(0.6)).map(int).collect();
            if a.is_empty() {
                a.push(int(0));
            }
            covers.insert("switch:affinity".into());
            p.insert("affinity".into(), Value::Array(a));
            p.remove("cpu");
        }
        p
    };
    let reader = r.gen_bool(0.8);
    if reader {
        let mut p = thread("reader", r, covers);
        p.insert("threads".into(), int(r.gen_range(1..=4)));
        if r.gen_bool(0.4) {
            covers.insert("switch:lock".into());
            p.insert("lock_us".into(), float(log_uniform(r, 0.1, 500.0)));
        }
        if r.gen_bool(0.4) {
            p.insert("work_us".into(), float(log_uniform(r, 0.1, 500.0)));
        }
        procs.push(Value::Table(p));
    }
    for _ in 0..r.gen_range(0..3) {
        let kind = *["compute", "onoff"].choose(r).expect("k");
        let mut p = thread(kind, r, covers);
        if kind == "onoff" {
            p.insert("on_ms".into(), float(log_uniform(r, 0.05, 20.0)));
            p.insert("off_ms".into(), float(log_uniform(r, 0.05, 20.0)));
        }
        procs.push(Value::Table(p));
    }
    if !procs.is_empty() {
        top.insert("process".into(), Value::Array(procs));
    }

    let duration_ms = round3(log_uniform(r, 10.0, MAX_DURATION_MS));
    let mut traffic = Vec::new();
    for _ in 0..*[0, 1, 1, 1, 2, 3].choose(r).expect("n") {
        let mut t = source(r, true, duration_ms, covers);
        // One adapter; Classical IP datagrams of up to 9,188 bytes.
        t.remove("port");
        if r.gen_bool(0.2) {
            t.insert("frame_bytes".into(), int(r.gen_range(36..=9188)));
        }
        traffic.push(Value::Table(t));
    }
    if !traffic.is_empty() {
        top.insert("traffic".into(), Value::Array(traffic));
    }
    if reader && r.gen_bool(0.25) {
        top.insert("echo".into(), echo(r, 36..=9188, covers));
    }
    top.insert("run".into(), Value::Table(run_table(r, duration_ms, 40.0)));
    top
}

/// An `[echo]` client with frames drawn from `frames`.
fn echo(
    r: &mut ChaCha8Rng,
    frames: std::ops::RangeInclusive<u64>,
    covers: &mut BTreeSet<String>,
) -> Value {
    covers.insert("switch:echo".into());
    let mut e = Table::new();
    e.insert("frame_bytes".into(), int(r.gen_range(frames)));
    e.insert("client_us".into(), float(log_uniform(r, 1.0, 1000.0)));
    Value::Table(e)
}

/// A `[run]` table: the duration, a warm-up, a seed and a quantum of up
/// to `quantum_hi` ms.
fn run_table(r: &mut ChaCha8Rng, duration_ms: f64, quantum_hi: f64) -> Table {
    let mut run = Table::new();
    run.insert("duration_ms".into(), Value::Float(duration_ms));
    run.insert("warmup_ms".into(), float(r.gen_range(0.0..50.0)));
    run.insert("seed".into(), int(r.gen_range(0..=i64::MAX as u64)));
    run.insert("quantum_ms".into(), float(log_uniform(r, 0.5, quantum_hi)));
    run
}

fn kernel(r: &mut ChaCha8Rng, kind: &str, covers: &mut BTreeSet<String>) -> Table {
    let mut k = Table::new();
    k.insert("kind".into(), Value::String(kind.into()));
    let queue = |r: &mut ChaCha8Rng| int(log_uniform(r, 1.0, 512.0).round() as u64);
    if r.gen_bool(0.5) {
        let l = *["softirq", "thread"].choose(r).expect("l");
        k.insert("ip_layer".into(), Value::String(l.into()));
    }
    if r.gen_bool(0.5) {
        let q = if r.gen_bool(0.15) {
            Value::String("unlimited".into())
        } else {
            queue(r)
        };
        k.insert("quota".into(), q);
    }
    for key in [
        "ipintrq_limit",
        "output_queue_limit",
        "screen_queue_limit",
        "filter_queue_limit",
        "socket_packets",
    ] {
        if r.gen_bool(0.3) {
            k.insert(key.into(), queue(r));
        }
    }
    if r.gen_bool(0.3) {
        k.insert(
            "socket_bytes".into(),
            int(log_uniform(r, 64.0, 262_144.0) as u64),
        );
    }
    if r.gen_bool(0.5) {
        covers.insert("switch:feedback".into());
        let mut f = Table::new();
        f.insert("enabled".into(), Value::Boolean(true));
        let high = r.gen_range(1.0..=100.0f64).round();
        f.insert("high_pct".into(), Value::Float(high));
        f.insert(
            "low_pct".into(),
            Value::Float((high * r.gen_range(0.0..0.99)).floor()),
        );
        if r.gen_bool(0.3) {
            let room = k
                .get("screen_queue_limit")
                .and_then(Value::as_integer)
                .unwrap_or(32)
                .min(
                    k.get("filter_queue_limit")
                        .and_then(Value::as_integer)
                        .unwrap_or(32),
                );
            if room > 1 {
                f.insert("min_free".into(), int(r.gen_range(1..room as u64)));
                covers.insert("switch:feedback_min_free".into());
            }
        }
        f.insert("timeout_us".into(), float(log_uniform(r, 10.0, 20_000.0)));
        k.insert("feedback".into(), Value::Table(f));
    }
    if r.gen_bool(0.3) {
        covers.insert("switch:cycle_limit".into());
        let mut c = Table::new();
        c.insert("enabled".into(), Value::Boolean(true));
        c.insert("percent".into(), float(r.gen_range(1.0..=100.0)));
        c.insert("period_us".into(), float(log_uniform(r, 100.0, 50_000.0)));
        k.insert("cycle_limit".into(), Value::Table(c));
    }
    if r.gen_bool(0.2) {
        covers.insert("switch:breaker".into());
        let mut b = Table::new();
        b.insert("enabled".into(), Value::Boolean(true));
        b.insert("batch".into(), int(r.gen_range(1..500)));
        b.insert("off_us".into(), float(log_uniform(r, 10.0, 5000.0)));
        k.insert("breaker".into(), Value::Table(b));
    }
    if r.gen_bool(0.3) {
        covers.insert("switch:inhibit_check_callback".into());
        k.insert("inhibit_check".into(), Value::String("callback".into()));
    }
    if kind == "linux" {
        if r.gen_bool(0.5) {
            let (v, _, _) = VARIANTS.choose(r).expect("v");
            k.insert("variant".into(), Value::String((*v).into()));
            covers.insert(format!("variant:{v}"));
        } else {
            let napi = r.gen_bool(0.5);
            k.insert("napi".into(), Value::Boolean(napi));
            let reclaim = match r.gen_range(0..3) {
                0 => "per-packet".to_string(),
                1 => format!("every-{}", r.gen_range(1..=256)),
                _ => "before-send".to_string(),
            };
            covers.insert(format!(
                "linux:napi={napi},reclaim={}",
                reclaim.split('-').next().unwrap_or("")
            ));
            k.insert("tx_reclaim".into(), Value::String(reclaim));
        }
        if r.gen_bool(0.3) {
            k.insert("napi_weight".into(), int(r.gen_range(1..=64)));
            k.insert("napi_budget".into(), int(r.gen_range(1..=600)));
            k.insert("napi_budget_us".into(), float(log_uniform(r, 1.0, 5000.0)));
        }
        if r.gen_bool(0.3) {
            k.insert("backlog_limit".into(), queue(r));
        }
    }
    k
}

fn source(
    r: &mut ChaCha8Rng,
    reader: bool,
    duration_ms: f64,
    covers: &mut BTreeSet<String>,
) -> Table {
    let kind = *TRAFFIC.choose(r).expect("t");
    covers.insert(format!("traffic:{kind}"));
    let mut t = Table::new();
    t.insert("kind".into(), Value::String(kind.into()));
    let rate = match r.gen_range(0..100) {
        0..=3 => 0.0,
        4..=6 => log_uniform(r, 0.001, 10.0),
        _ => log_uniform(r, 10.0, 300_000.0),
    };
    t.insert("rate_pps".into(), float(rate));
    let bytes = match r.gen_range(0..100) {
        0..=1 => r.gen_range(14..60),
        2..=3 => r.gen_range(1519..=9018),
        4..=53 => r.gen_range(60..=128),
        _ => r.gen_range(129..=1518),
    };
    t.insert("frame_bytes".into(), int(bytes));
    if matches!(kind, "burst" | "bursty") {
        t.insert("burst".into(), int(r.gen_range(1..=64)));
        if r.gen_bool(0.5) {
            t.insert("spacing_us".into(), float(r.gen_range(0.0..200.0)));
        }
    }
    if kind == "jittered" {
        t.insert("jitter".into(), float(r.gen_range(0.0..=1.0)));
    }
    if r.gen_bool(0.2) {
        t.insert("count".into(), int(r.gen_range(1..5000)));
    }
    if r.gen_bool(0.2) {
        t.insert(
            "start_us".into(),
            float(r.gen_range(0.0..duration_ms * 500.0)),
        );
    }
    if !reader && r.gen_bool(0.3) {
        t.insert("port".into(), int(1));
        covers.insert("switch:port1".into());
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_valid_and_repeatable() {
        for seed in 0..200 {
            let a = case(seed);
            let b = case(seed);
            assert_eq!(a.toml, b.toml, "seed {seed}");
            assert!(a.redraws < 50, "seed {seed}: {} redraws", a.redraws);
        }
    }
}
