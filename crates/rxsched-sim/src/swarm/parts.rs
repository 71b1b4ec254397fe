//! The pieces both kinds of case are drawn from: a traffic source, an
//! `[echo]` client, a `[run]` table, and numbers that read easily.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use toml::{Table, Value};

/// The longest measured interval a case runs, in ms.
pub const MAX_DURATION_MS: f64 = 2000.0;

/// Traffic kinds, as the labels a case's coverage is told in.
pub const TRAFFIC: &[&str] = &["constant", "poisson", "burst", "jittered", "bursty"];

/// Log-uniform in [lo, hi].
pub(super) fn log_uniform(r: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    (r.gen_range(lo.ln()..=hi.ln())).exp()
}

/// A number rounded to three significant digits, so files read easily.
pub(super) fn round3(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let p = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * p).round() / p
}

/// A TOML integer.
pub(super) fn int(v: u64) -> Value {
    Value::Integer(v as i64)
}

/// A TOML float of three significant digits.
pub(super) fn float(v: f64) -> Value {
    Value::Float(round3(v))
}

/// An `[echo]` client with frames drawn from `frames`.
pub(super) fn echo(
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
pub(super) fn run_table(r: &mut ChaCha8Rng, duration_ms: f64, quantum_hi: f64) -> Table {
    let mut run = Table::new();
    run.insert("duration_ms".into(), Value::Float(duration_ms));
    run.insert("warmup_ms".into(), float(r.gen_range(0.0..50.0)));
    run.insert("seed".into(), int(r.gen_range(0..=i64::MAX as u64)));
    run.insert("quantum_ms".into(), float(log_uniform(r, 0.5, quantum_hi)));
    run
}

/// A `[[traffic]]` source of any kind, rate and frame size, starting
/// within the first half of a run of `duration_ms`; on port 1 at times
/// unless the host has a `reader` (one port).
pub(super) fn source(
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
