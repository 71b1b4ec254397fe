//! `rxsched bench real soak`: the polling router flooded at the lab
//! generator's top rate for minutes on end. It must not crash, its memory
//! must stay flat, every frame must be accounted for, and the lab must be
//! clean afterwards (no process left in its namespaces, no XDP program
//! left on its devices).

use super::judged;
use super::trial::{
    counters, dut_drops, f, finish, lab_counter, metrics, spawn, stop, strings as s, BenchError,
};
use crate::checks::Rule;
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{Lab, Role, D0, D1, DUT_CPU, GEN_CPU, S0};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The resident set of process `pid`, in KiB, if it still runs.
fn rss_kib(pid: u32) -> Option<f64> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    st.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Frames the router's own counters do not account for:
/// `rx - forwarded - drops inside it - in flight` (its ring drops happen
/// before `rx`).
fn unaccounted(r: &Value) -> f64 {
    let inside: f64 = r["drops"]
        .as_object()
        .map(|d| {
            d.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "nic_rx_ring" | "xsk_rx_ring"))
                .filter_map(|(_, v)| v.as_f64())
                .sum()
        })
        .unwrap_or(0.0);
    (f(r, "rx") - f(r, "forwarded") - inside - f(r, "in_flight")).abs()
}

/// Processes left in the lab's namespaces, and XDP programs left on its devices.
fn leftovers(l: &Lab) -> (f64, f64) {
    let mut procs = 0;
    let mut progs = 0;
    for r in [Role::Gen, Role::Dut, Role::Sink] {
        let out = rxsched_linux::lab::run("ip", &["netns", "pids", &l.ns(r)]).unwrap_or_default();
        procs += out.split_whitespace().count();
    }
    for e in [D0, D1, S0] {
        let out = l
            .exec(e.role, "ip", &["-d", "link", "show", e.iface])
            .unwrap_or_default();
        progs += usize::from(out.contains("prog/xdp"));
    }
    (procs as f64, progs as f64)
}

/// Runs the benchmark: `real-soak`.
pub fn soak(
    opts: &super::BenchOpts,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let mut file = BenchFile::load("real-soak")?;
    let minutes = match opts.minutes {
        Some(m) => m,
        None if opts.quick => 0.5,
        None => 10.0,
    };
    let secs = minutes * 60.0;
    let l = &opts.lab;
    let io = |e: rxsched_linux::lab::LabError| BenchError(e.to_string());
    l.reset_dut_receive().map_err(io)?;
    l.set_kernel_forwarding(false).map_err(io)?;
    let (dut, gen_cpu) = (DUT_CPU.to_string(), GEN_CPU.to_string());
    let route = spawn(
        l,
        Role::Dut,
        &s(&[
            "route",
            "--mode",
            "polling",
            "--backend",
            "xdp",
            "--cpu",
            &dut,
            "--duration",
            &(secs + 30.0).to_string(),
        ]),
    )?;
    let sink = spawn(
        l,
        Role::Sink,
        &s(&[
            "sink",
            "--cpu",
            &gen_cpu,
            "--duration",
            &(secs + 20.0).to_string(),
            "--idle",
            "2",
        ]),
    )?;
    std::thread::sleep(Duration::from_millis(700));
    let c0 = counters(l, Some(&route))?;
    let s0_drops0 = lab_counter(l, Role::Sink, S0.iface, "rx_dropped");
    let gen = spawn(
        l,
        Role::Gen,
        &s(&[
            "gen",
            "--cpu",
            &gen_cpu,
            "--rate",
            "1e9",
            "--duration",
            &secs.to_string(),
        ]),
    )?;
    let pid = route.id();
    let t0 = Instant::now();
    let every = (secs / 60.0).clamp(1.0, 10.0);
    let mut samples: Vec<(f64, f64)> = Vec::new();
    while t0.elapsed().as_secs_f64() < secs {
        let left = secs - t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs_f64(every.min(left.max(0.0))));
        let t = t0.elapsed().as_secs_f64() / 60.0;
        let Some(rss) = rss_kib(pid) else { break };
        samples.push((t, rss));
        progress(&format!(
            "soak: {t:.1} of {minutes} min at the top rate; router resident {rss:.0} KiB"
        ));
    }
    let g = finish(gen, "gen")?;
    std::thread::sleep(Duration::from_secs(1));
    let c1 = counters(l, Some(&route))?;
    let s0_drops = lab_counter(l, Role::Sink, S0.iface, "rx_dropped").saturating_sub(s0_drops0);
    stop(&route);
    let rt = finish(route, "route")?;
    let sk = finish(sink, "sink")?;
    std::thread::sleep(Duration::from_millis(500));
    let (procs, progs) = leftovers(l);
    let problems = l.problems().len() as f64;

    let mut m = metrics(&g, &sk, Some(&rt));
    dut_drops(&mut m, &c0, &c1, s0_drops, true);
    let unattributed = m.drops.get("unattributed").copied().unwrap_or(0) as f64;
    let dur = f(&g, "duration_s").max(1e-9);
    let offered = f(&g, "achieved_pps");
    let forwarded = f(&rt, "forwarded") / dur;
    let mut series = Series::new("polling");
    for (t, rss) in &samples {
        let mut p = Point::xy("minutes", *t, "rss_kib", *rss);
        p.set("offered_pps", offered);
        p.set("forwarded_pps", forwarded);
        p.set("offered_over_forwarded", offered / forwarded.max(1.0));
        p.set("router_unaccounted", unaccounted(&rt));
        p.set(
            "unattributed_share",
            unattributed / (m.arrived.max(1) as f64),
        );
        p.set("sent", m.arrived as f64);
        p.set("delivered", m.delivered as f64);
        p.set("leftover_processes", procs);
        p.set("leftover_xdp_programs", progs);
        p.set("lab_problems", problems);
        series.points.push(p);
    }
    if samples.is_empty() {
        return Err(BenchError(
            "the router was gone before the first sample".into(),
        ));
    }
    progress(&format!(
        "soak done: {} frames sent, {} delivered, router forwarded {forwarded:.0}/s",
        m.arrived, m.delivered
    ));
    settle_at(&mut file, minutes);
    Ok(vec![judged(&file, vec![series])])
}

/// The share of the run after which the router has settled: its memory is
/// judged from then on.
const SETTLE_SHARE: f64 = 0.05;

/// Sets the memory check's `at` to the time the router has settled in a
/// run of `minutes`, which the check file cannot know.
pub(super) fn settle_at(file: &mut BenchFile, minutes: f64) {
    for c in &mut file.check {
        if let Rule::Stable { at, .. } = &mut c.rule {
            *at = Some(minutes * SETTLE_SHARE);
        }
    }
}
