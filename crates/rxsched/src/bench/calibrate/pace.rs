//! The machine's pace through a calibration: whether it held still.

use super::{forward, napi_taken, BenchError, Forwarder, LOADED_RATE};
use crate::result::{Pace, ResultFile};

/// How far the machine's pace may move during a calibration before
/// `calibrate --real` says its costs mix states: about the spread of a
/// repeated trial when the pace holds (4-17% on the loaded costs here).
pub const PACE_MOVED: f64 = 0.2;

/// The machine's pace: one trial, the same every time (the polling router
/// stopped, [`LOADED_RATE`] offered, the receive work refusing every frame
/// at its socket), read as the NAPI threads' CPU per frame, runs included.
/// This guest's costs move by tens of percent within an hour (the same
/// trial by hand: 500 ns a frame one minute, 800 another); a calibration
/// whose pace moved mixes two states, and a bench in another state than
/// its calibration's may miss by as much. The two states are two ways
/// the receive work runs, not a faster and a slower CPU: by hand, 500 ns
/// a frame came with 9,700 NAPI runs a second and 800 with 3,800 (longer
/// runs, each frame dearer), and the polling router's loaded costs did
/// not follow the pace. Returns (ns a frame, NAPI runs a second).
pub(super) fn pace(
    lab: &rxsched_linux::lab::Lab,
    secs: f64,
    dut: &forward::Dut,
) -> Result<(f64, f64), BenchError> {
    let p = forward::run_trial_paused(lab, Forwarder::Polling, LOADED_RATE, secs, dut)?;
    let (taken, runs, cpu) = napi_taken(&p);
    Ok((cpu / taken.max(1.0), runs))
}

/// A pace reading as the progress line gives it.
pub(super) fn said((ns, runs): (f64, f64)) -> String {
    format!("{ns:.0} ns a frame ({runs:.0} NAPI runs a second)")
}

/// How far a calibration's pace moved: (largest - smallest) / smallest.
pub fn pace_moved(pace: &[f64]) -> f64 {
    let lo = pace.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = pace.iter().copied().fold(0.0, f64::max);
    if lo.is_finite() && lo > 0.0 {
        (hi - lo) / lo
    } else {
        0.0
    }
}

/// Runs a bench the lab host predicts between two readings of the
/// machine's pace, and records both in each of its results: `--predict`
/// then says whether the bench ran in its calibration's state. `bench`
/// gets the compute process's measurement alone, which the pace's trial
/// needs too.
pub fn with_pace(
    opts: &super::super::BenchOpts,
    progress: &dyn Fn(&str),
    bench: impl FnOnce(&forward::Dut) -> Result<Vec<ResultFile>, BenchError>,
) -> Result<Vec<ResultFile>, BenchError> {
    let secs = if opts.quick { 1.0 } else { 3.0 };
    progress("measuring the compute process alone");
    let dut = forward::measure_dut(&opts.lab, 1.0)?;
    progress("reading the machine's pace");
    let start = pace(&opts.lab, secs, &dut)?;
    progress(&format!("the machine's pace at the start: {}", said(start)));
    let mut results = bench(&dut)?;
    progress("reading the machine's pace again");
    let end = pace(&opts.lab, secs, &dut)?;
    progress(&format!("the machine's pace at the end: {}", said(end)));
    let (start, end) = (start.0, end.0);
    for r in &mut results {
        r.pace = Some(Pace {
            bench: vec![start, end],
            profile: Vec::new(),
        });
    }
    Ok(results)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Pace readings as the profile and the verdict give them: "503, 837".
pub(super) fn readings(v: &[f64]) -> String {
    let s: Vec<String> = v.iter().map(|p| format!("{p:.0}")).collect();
    s.join(", ")
}

/// In words, how the bench's pace stood against its calibration's.
pub fn verdict(p: &Pace) -> String {
    let bench = format!("the bench's pace {} ns a frame", readings(&p.bench));
    let moved = pace_moved(&p.bench);
    let during = if moved > PACE_MOVED {
        format!(
            "; it moved {:.0}% during the bench, whose points mix two states",
            100.0 * moved
        )
    } else {
        String::new()
    };
    if p.profile.is_empty() {
        return format!("{bench}; the profile records none (calibrate --real reads it){during}");
    }
    let apart = mean(&p.bench) / mean(&p.profile) - 1.0;
    let cal = format!("its calibration's {}", readings(&p.profile));
    if apart.abs() <= PACE_MOVED {
        format!(
            "{bench}, {cal}: the same state ({:+.0}%){during}",
            100.0 * apart
        )
    } else {
        format!(
            "{bench}, {cal}: a frame cost {:.0}% {} than when calibrated, and the \
             receive work's costs may not be the bench's (a miss of the prediction there \
             is the machine's, not the model's){during}",
            100.0 * apart.abs(),
            if apart > 0.0 { "more" } else { "less" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(bench: &[f64], profile: &[f64]) -> String {
        verdict(&Pace {
            bench: bench.to_vec(),
            profile: profile.to_vec(),
        })
    }

    #[test]
    fn the_verdict_says_whether_the_bench_ran_in_its_calibration_s_state() {
        let same = words(&[510.0, 530.0], &[500.0, 505.0, 520.0]);
        assert!(same.contains("the same state (+2%)"), "{same}");
        assert!(!same.contains("moved"), "{same}");
        let faster = words(&[400.0, 410.0], &[800.0, 820.0]);
        assert!(faster.contains("50% less"), "{faster}");
        let moved = words(&[500.0, 800.0], &[500.0]);
        assert!(
            moved.contains("30% more") && moved.contains("moved 60% during the bench"),
            "{moved}"
        );
        let none = words(&[500.0, 510.0], &[]);
        assert!(none.contains("records none"), "{none}");
    }
}
