//! `rxsched bench real two-level`: the two-level switch (M11) on real
//! frames. The offered load steps from low to high and back while one
//! router runs, in each mode: `interrupt`, `polling` and `two-level`. At
//! low load the two-level router should be as fast as the interrupt-driven
//! one (latency), at high load, once it has switched, as productive as the
//! polling one (throughput), and it should switch once each way.

use super::judged;
use super::trial::{f, finish, spawn, stop, strings as s, BenchError};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{Lab, Role, DUT_CPU, GEN_CPU};
use std::time::Duration;

/// A load step: offered rate, seconds offered, and seconds at its end the
/// sink measures (a high step leaves the switch its hold time first).
#[derive(Debug, Clone, Copy)]
struct Step {
    rate: f64,
    secs: f64,
    measure: f64,
}

fn steps(quick: bool) -> Vec<Step> {
    let (low, high) = (25_000.0, 1e9);
    let m = if quick { 2.0 } else { 3.0 };
    vec![
        Step {
            rate: low,
            secs: m + 0.5,
            measure: m,
        },
        // The hold time is 2 s: the switch has happened before the sink starts.
        Step {
            rate: high,
            secs: 3.0 + m,
            measure: m,
        },
        Step {
            rate: low,
            secs: m + 1.5,
            measure: m,
        },
    ]
}

/// One mode through every step: a point per step.
fn run(l: &Lab, mode: &str, steps: &[Step]) -> Result<(Vec<Point>, f64), BenchError> {
    l.reset_dut_receive()
        .map_err(|e| BenchError(e.to_string()))?;
    let total: f64 = steps.iter().map(|s| s.secs + 1.0).sum::<f64>() + 4.0;
    let route = spawn(
        l,
        Role::Dut,
        &s(&[
            "route",
            "--mode",
            mode,
            "--cpu",
            &DUT_CPU.to_string(),
            "--duration",
            &total.to_string(),
        ]),
    )?;
    std::thread::sleep(Duration::from_millis(700));
    let mut points = Vec::new();
    for (i, st) in steps.iter().enumerate() {
        let gen = spawn(
            l,
            Role::Gen,
            &s(&[
                "gen",
                "--cpu",
                &GEN_CPU.to_string(),
                "--rate",
                &st.rate.to_string(),
                "--duration",
                &st.secs.to_string(),
            ]),
        )?;
        std::thread::sleep(Duration::from_secs_f64(st.secs - st.measure));
        let sink = spawn(
            l,
            Role::Sink,
            &s(&[
                "sink",
                "--cpu",
                &GEN_CPU.to_string(),
                "--duration",
                &st.measure.to_string(),
                "--idle",
                &st.measure.to_string(),
            ]),
        )?;
        let sk = finish(sink, "sink")?;
        let g = finish(gen, "gen")?;
        let mut p = Point::xy(
            "step",
            i as f64,
            "delivered_pps",
            f(&sk, "received") / st.measure,
        );
        p.set("offered_pps", f(&g, "achieved_pps"));
        p.set("latency_p50_us", f(&sk["latency_us"], "p50"));
        p.set("latency_p99_us", f(&sk["latency_us"], "p99"));
        points.push(p);
        std::thread::sleep(Duration::from_millis(500));
    }
    stop(&route);
    let r = finish(route, mode)?;
    let switches = r["two_level"]["switches"].as_f64().unwrap_or(0.0);
    Ok((points, switches))
}

/// Runs the benchmark: `real-two-level`.
pub fn two_level(
    opts: &super::BenchOpts,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-two-level")?;
    let st = steps(opts.quick);
    let mut series = Vec::new();
    for mode in ["interrupt", "polling", "two-level"] {
        progress(&format!(
            "{mode}: 25,000 pkts/s, then the generator's top rate, then 25,000"
        ));
        let (points, switches) = run(&opts.lab, mode, &st)?;
        let mut s = Series::new(mode);
        s.points = points;
        if mode == "two-level" {
            for p in &mut s.points {
                p.set("two_level_switches", switches);
            }
        }
        series.push(s);
    }
    Ok(vec![judged(&file, series)])
}
