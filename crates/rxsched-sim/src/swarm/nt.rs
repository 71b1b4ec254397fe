//! A case for the multiprocessor host (`kernel.kind = "nt"`): CPUs,
//! interrupt affinity, servicing and detector, a reader with threads and a
//! lock, compute and on-off threads with priorities and affinities, UDP
//! or echo traffic.

use super::parts::{echo, float, int, log_uniform, round3, run_table, source, MAX_DURATION_MS};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use toml::{Table, Value};

/// Draws a scenario tree for the `nt` host, noting what it covers.
pub(super) fn draw(r: &mut ChaCha8Rng, covers: &mut BTreeSet<String>) -> Table {
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
    top.insert("smp".into(), Value::Table(smp(r, cpus, covers)));

    let (procs, reader) = threads(r, cpus, covers);
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

/// The `[smp]` table of a host of `cpus` CPUs: where the adapter
/// interrupts, how it is serviced, the two-level switch's detector.
fn smp(r: &mut ChaCha8Rng, cpus: u64, covers: &mut BTreeSet<String>) -> Table {
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
    smp
}

/// The processes: perhaps a reader (with threads, a lock, work outside
/// it), and up to two compute or on-off threads; and whether there is a
/// reader.
fn threads(r: &mut ChaCha8Rng, cpus: u64, covers: &mut BTreeSet<String>) -> (Vec<Value>, bool) {
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
    (procs, reader)
}
