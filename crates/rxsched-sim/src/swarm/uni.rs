//! A case for the uniprocessor host: a kernel kind and a profile it runs
//! on, the processes (a consumer of received packets, compute and on-off
//! processes, reservations under the proportional scheduler), the
//! kernel's mechanisms, traffic, a TCP connection and an echo client.

use super::parts::{echo, float, int, log_uniform, round3, run_table, source, MAX_DURATION_MS};
use crate::scenario::VARIANTS;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use toml::{Table, Value};

/// Draws a scenario tree for kernel `kind` (not `nt`), noting what it covers.
pub(super) fn draw(r: &mut ChaCha8Rng, kind: &str, covers: &mut BTreeSet<String>) -> Table {
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
    let procs = processes(r, kind, consumer, proportional, covers);
    if !procs.is_empty() {
        top.insert("process".into(), Value::Array(procs));
    }

    top.insert("kernel".into(), Value::Table(kernel(r, kind, covers)));

    let duration_ms = round3(log_uniform(r, 10.0, MAX_DURATION_MS));
    let mut traffic = Vec::new();
    let sources = *[0, 1, 1, 1, 2, 3].choose(r).expect("n");
    for _ in 0..sources {
        traffic.push(Value::Table(source(r, reader, duration_ms, covers)));
    }
    if matches!(kind, "bsd" | "emulated" | "polling") && !traffic.is_empty() && r.gen_bool(0.25) {
        // A protected source, with or without a ring of its own.
        covers.insert("switch:protected".into());
        let last = traffic.len() - 1;
        if let Some(t) = traffic[last].as_table_mut() {
            t.insert("protected".into(), Value::Boolean(true));
        }
        if r.gen_bool(0.7) {
            covers.insert("switch:protect_ring".into());
            let mut p = Table::new();
            p.insert("enabled".into(), Value::Boolean(true));
            p.insert("ring".into(), int(r.gen_range(1..=64)));
            p.insert("quota".into(), int(r.gen_range(1..=16)));
            if let Some(k) = top.get_mut("kernel").and_then(Value::as_table_mut) {
                k.insert("protect".into(), Value::Table(p));
            }
        }
    }
    if kind == "linux" && !traffic.is_empty() && r.gen_bool(0.3) {
        // A source of a few flows, each keeping to one receive queue.
        covers.insert("linux:flows".into());
        if let Some(t) = traffic[0].as_table_mut() {
            t.insert("flows".into(), int(r.gen_range(1..=4)));
        }
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
        top.insert("tcp".into(), Value::Table(tcp(r, reader, covers)));
    }
    if reader && r.gen_bool(0.25) {
        top.insert("echo".into(), echo(r, 60..=1518, covers));
    }

    let mut run = run_table(r, duration_ms, 20.0);
    if proportional {
        covers.insert("switch:proportional".into());
        run.insert("scheduler".into(), Value::String("proportional".into()));
    }
    top.insert("run".into(), Value::Table(run));
    top
}

/// The `consumer` of received packets (unless `none`), then perhaps a
/// compute and an on-off process (each perhaps several); under the
/// `proportional` scheduler, some hold reservations.
fn processes(
    r: &mut ChaCha8Rng,
    kind: &str,
    consumer: &str,
    proportional: bool,
    covers: &mut BTreeSet<String>,
) -> Vec<Value> {
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
        let mut p = process(consumer, r, covers);
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
        let mut p = process("compute", r, covers);
        if r.gen_bool(0.3) {
            p.insert("count".into(), int(r.gen_range(1..5)));
        }
        procs.push(Value::Table(p));
    }
    if r.gen_bool(0.3) {
        let mut p = process("onoff", r, covers);
        p.insert("on_ms".into(), float(log_uniform(r, 0.5, 50.0)));
        p.insert("off_ms".into(), float(log_uniform(r, 0.5, 50.0)));
        if r.gen_bool(0.5) {
            p.insert("count".into(), int(r.gen_range(1..9)));
        }
        procs.push(Value::Table(p));
    }
    procs
}

/// A `[tcp]` connection, received by the host if it has a `reader`.
fn tcp(r: &mut ChaCha8Rng, reader: bool, covers: &mut BTreeSet<String>) -> Table {
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
    t
}

/// A queue's limit, log-uniform from 1 to 512 packets.
fn queue(r: &mut ChaCha8Rng) -> Value {
    int(log_uniform(r, 1.0, 512.0).round() as u64)
}

/// A `[kernel]` table of kind `kind`: where IP runs, the quota, queue
/// limits, and the mechanisms switched on.
fn kernel(r: &mut ChaCha8Rng, kind: &str, covers: &mut BTreeSet<String>) -> Table {
    let mut k = Table::new();
    k.insert("kind".into(), Value::String(kind.into()));
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
        let f = feedback(r, &k, covers);
        k.insert("feedback".into(), Value::Table(f));
    }
    if r.gen_bool(0.3) {
        covers.insert("switch:cycle_limit".into());
        let mut c = Table::new();
        c.insert("enabled".into(), Value::Boolean(true));
        c.insert("percent".into(), float(r.gen_range(1.0..=100.0)));
        c.insert("period_us".into(), float(log_uniform(r, 100.0, 50_000.0)));
        k.insert("cycle_limit".into(), Value::Table(c));
    } else if kind == "polling" && r.gen_bool(0.4) {
        // An objective instead of the quota and the cycle limit.
        covers.insert("switch:slo".into());
        k.remove("quota");
        let latency_ms = round3(log_uniform(r, 2.0, 200.0));
        let cpu = r.gen_range(5..=100);
        k.insert(
            "slo".into(),
            Value::String(format!("latency={latency_ms}ms,cpu={cpu}%")),
        );
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
    if kind == "polling" && r.gen_bool(0.3) {
        covers.insert("switch:gp_quantum".into());
        k.insert(
            "gp_quantum_us".into(),
            float(log_uniform(r, 50.0, 20_000.0)),
        );
    }
    if kind == "linux" {
        linux(r, &mut k, covers);
    }
    k
}

/// A `[kernel.feedback]` table: watermarks, perhaps the monitor form
/// (fewer free slots than the smaller of `k`'s watched queues), a timeout.
fn feedback(r: &mut ChaCha8Rng, k: &Table, covers: &mut BTreeSet<String>) -> Table {
    let mut f = Table::new();
    f.insert("enabled".into(), Value::Boolean(true));
    let high = r.gen_range(1.0..=100.0f64).round();
    f.insert("high_pct".into(), Value::Float(high));
    f.insert(
        "low_pct".into(),
        Value::Float((high * r.gen_range(0.0..0.99)).floor()),
    );
    if r.gen_bool(0.3) {
        let limit = |key: &str| k.get(key).and_then(Value::as_integer).unwrap_or(32);
        let room = limit("screen_queue_limit").min(limit("filter_queue_limit"));
        if room > 1 {
            f.insert("min_free".into(), int(r.gen_range(1..room as u64)));
            covers.insert("switch:feedback_min_free".into());
        }
    }
    f.insert("timeout_us".into(), float(log_uniform(r, 10.0, 20_000.0)));
    f
}

/// Linux's keys in `k`: a driver variant, or NAPI and a reclaim mode;
/// perhaps NAPI's weight and budgets, and the backlog.
fn linux(r: &mut ChaCha8Rng, k: &mut Table, covers: &mut BTreeSet<String>) {
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
    if r.gen_bool(0.2) {
        covers.insert("linux:no-throttle".into());
        k.insert("backlog_throttle".into(), Value::Boolean(false));
    }
    if r.gen_bool(0.3) {
        covers.insert("linux:queues".into());
        k.insert("rx_queues".into(), int(r.gen_range(2..=8)));
    }
    if r.gen_bool(0.3) {
        covers.insert("linux:coalesce".into());
        k.insert("rx_usecs".into(), float(log_uniform(r, 1.0, 2000.0)));
        k.insert("rx_frames".into(), int(r.gen_range(0..=64)));
    }
}
