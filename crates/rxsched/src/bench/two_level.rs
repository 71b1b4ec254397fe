//! `rxsched bench real two-level`: the two-level switch (M11) on real
//! frames. The offered load steps from low to high and back while one
//! router runs, in each mode: `interrupt`, `polling` and `two-level`. At
//! low load the two-level router should be as fast as the interrupt-driven
//! one (latency), at high load, once it has switched, as productive as the
//! polling one (throughput), and it should switch once each way.

use super::proc::{run, start, Gen, Route, Sink};
use super::sweep::TOP_RATE;
use super::{result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::Lab;
use rxsched_linux::loadgen::{GenReport, SinkReport};
use rxsched_linux::router::{Mode, RouterReport};
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
    let (low, high) = (25_000.0, TOP_RATE);
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

/// The modes, in the order of the series.
const MODES: [Mode; 3] = [Mode::Interrupt, Mode::Polling, Mode::TwoLevel];

/// One mode through every step: a point per step, and the router's switches.
fn trial(l: &Lab, mode: Mode, steps: &[Step]) -> Result<(Vec<Point>, u64), BenchError> {
    l.reset_dut_receive()?;
    let total: f64 = steps.iter().map(|s| s.secs + 1.0).sum::<f64>() + 4.0;
    let route = start(l, Route::new(mode, total))?;
    let mut points = Vec::new();
    for (i, st) in steps.iter().enumerate() {
        let gen = start(l, Gen::new(st.rate, st.secs))?;
        // The sink measures the step's end.
        std::thread::sleep(Duration::from_secs_f64(st.secs - st.measure));
        let sk: SinkReport = run(l, Sink::new(st.measure, st.measure))?;
        let g: GenReport = gen.finish()?;
        let mut p = Point::xy(
            "step",
            i as f64,
            "delivered_pps",
            sk.received as f64 / st.measure,
        );
        p.set("offered_pps", g.achieved_pps);
        p.set("latency_p50_us", sk.latency_us.p50);
        p.set("latency_p99_us", sk.latency_us.p99);
        points.push(p);
        std::thread::sleep(Duration::from_millis(500));
    }
    route.stop();
    let r: RouterReport = route.finish()?;
    Ok((points, r.two_level.map_or(0, |t| t.switches)))
}

/// Runs the benchmark: `real-two-level`.
pub fn two_level(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-two-level")?;
    let st = steps(opts.quick);
    let mut series = Vec::new();
    for mode in MODES {
        progress(&format!(
            "{}: 25,000 pkts/s, then the generator's top rate, then 25,000",
            mode.name()
        ));
        let (points, switches) = trial(&opts.lab, mode, &st)?;
        let mut s = Series::new(mode.name());
        s.points = points;
        if mode == Mode::TwoLevel {
            for p in &mut s.points {
                p.set("two_level_switches", switches as f64);
            }
        }
        series.push(s);
    }
    Ok(vec![result(&file, series)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check file names the series this bench measures.
    #[test]
    fn the_check_file_names_the_series_measured() {
        let file = BenchFile::load("real-two-level").unwrap();
        let labels: Vec<&str> = MODES.iter().map(|m| m.name()).collect();
        assert_eq!(file.bench.series, labels);
    }
}
