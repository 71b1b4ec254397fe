//! `rxsched bench real lab`: the lab's own capacity, `real-lab`. How fast
//! the generator offers from one core, and how fast the sink counts on the
//! other (on d0, in XDP, alone), timing every probe or one in eight.
//! Nothing forwards.

use super::proc::{run, start, Gen, Sink, SinkAt};
use super::sweep::{median, TOP_RATE};
use super::{result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{Lab, D0};
use rxsched_linux::loadgen::{GenReport, SinkReport};

/// Trials of each lab measurement; the median (by delivered rate) is kept.
pub const LAB_TRIALS: usize = 3;

/// The series: how often the sink times a probe.
const SINKS: [(&str, u64); 2] = [("sink-every-probe", 1), ("sink-1-in-8", 8)];

/// Runs the lab benchmark, `real-lab`.
pub fn lab(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-lab")?;
    let secs = if opts.quick { 1.0 } else { 3.0 };
    let mut series = Vec::new();
    for (label, every) in SINKS {
        let mut trials = Vec::new();
        for t in 0..LAB_TRIALS {
            progress(&format!("{label}: trial {}/{LAB_TRIALS}", t + 1));
            trials.push(capacity(&opts.lab, every, secs)?);
        }
        let y = |p: &Point| p.get("delivered_pps").unwrap_or(0.0);
        let mut s = Series::new(label);
        s.points
            .push(median(trials, y, "delivered_lowest", "delivered_highest"));
        series.push(s);
    }
    Ok(vec![result(&file, series)])
}

/// One measurement of the lab itself: the generator as fast as it goes
/// from `g0` to d0's own MAC, the sink counting on `d0` in XDP (on the DUT
/// CPU, alone), timing one probe in `latency_every`.
fn capacity(lab: &Lab, latency_every: u64, secs: f64) -> Result<Point, BenchError> {
    let sink = Sink {
        at: SinkAt::Dut { latency_every },
        ..Sink::new(secs + 5.0, 0.5)
    };
    let sink = start(lab, sink)?;
    let g: GenReport = run(lab, Gen::new(TOP_RATE, secs).to_mac(D0.mac))?;
    let sk: SinkReport = sink.finish()?;
    let dur = g.duration_s.max(1e-9);
    let mut p = Point::xy(
        "offered_pps",
        g.achieved_pps,
        "delivered_pps",
        sk.received as f64 / dur,
    );
    p.set("latency_samples", sk.latency_samples as f64);
    p.set("sink_lost", sk.lost as f64);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check file names the series measured, and the trials a median is of.
    #[test]
    fn the_check_file_matches_the_bench() {
        let file = BenchFile::load("real-lab").unwrap();
        let labels: Vec<&str> = SINKS.iter().map(|s| s.0).collect();
        assert_eq!(file.bench.series, labels);
        let n = format!("median of {LAB_TRIALS} trials");
        assert!(file.bench.y.label.contains(&n));
    }
}
