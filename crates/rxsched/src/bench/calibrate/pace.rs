//! The machine's pace through a calibration: whether it held still.

use super::{forward, napi_taken, BenchError, Forwarder, LOADED_RATE};

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
/// its calibration's misses by about as much.
pub(super) fn pace(
    lab: &rxsched_linux::lab::Lab,
    secs: f64,
    dut: &forward::Dut,
) -> Result<f64, BenchError> {
    let p = forward::run_trial_paused(lab, Forwarder::Polling, LOADED_RATE, secs, dut)?;
    let (taken, _, cpu) = napi_taken(&p);
    Ok(cpu / taken.max(1.0))
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
