//! From a trial's point to a thread's frames, runs and CPU time a second,
//! and from several trials to a cost per frame and per run.

use super::{list, BenchError};
use crate::result::Point;

/// A thread's trial, a second: `frames`, the thread's runs and its CPU
/// time in ns, read from the point's metrics `runs` and `cpu` (a share).
pub(super) fn per_second(p: &Point, frames: f64, runs: &str, cpu: &str) -> (f64, f64, f64) {
    let runs = p.get(runs).unwrap_or(0.0);
    let cpu = p.get(cpu).unwrap_or(0.0) * 1e9;
    (frames, runs, cpu)
}

/// The router's thread at a loaded point: the frames it forwarded (what
/// it could, not what was offered), its runs and its CPU time.
pub(super) fn router_loaded(p: &Point) -> (f64, f64, f64) {
    let fwd = p.get("delivered_pps").unwrap_or(0.0);
    per_second(p, fwd, "router_runs_per_s", "cpu.router")
}

/// The NAPI threads at a point offered `rate`, over the frames forwarded.
pub(super) fn napi_rates(p: &Point, rate: f64) -> Result<(f64, f64, f64), BenchError> {
    Ok(per_second(p, delivered(p, rate)?, NAPI_RUNS, NAPI_CPU))
}

const NAPI_RUNS: &str = "napi_runs_per_s";
const NAPI_CPU: &str = "napi_cpu_share";

/// What a point forwarded, refused when far below what was offered.
pub(super) fn delivered(p: &Point, rate: f64) -> Result<f64, BenchError> {
    let delivered = p.get("delivered_pps").unwrap_or(0.0);
    if delivered < rate / 2.0 {
        return Err(BenchError(format!(
            "calibrate --real: only {delivered:.0} of {rate:.0} pkts/s were forwarded; \
             the lab is not forwarding (is another load running?)"
        )));
    }
    Ok(delivered)
}

/// The NAPI threads at a point, over the frames they took (offered less
/// what veth's ring dropped), whether forwarded or not.
pub(super) fn napi_taken(p: &Point) -> (f64, f64, f64) {
    let offered = p.get("offered_pps").unwrap_or(0.0);
    let arrived = p.get("arrived").unwrap_or(0.0).max(1.0);
    let ring = p.get("drops.nic_rx_ring").unwrap_or(0.0);
    let taken = offered * (1.0 - ring / arrived).max(0.0);
    per_second(p, taken, NAPI_RUNS, NAPI_CPU)
}

/// The NAPI threads at a point where some frames were refused at a full
/// ring (`ring`, a drop point: the socket's `xsk_rx_ring`, the monitor's
/// `copy_ring`): (frames put on the ring, frames refused there, runs, CPU
/// time), a second.
pub(super) fn napi_split(p: &Point, ring: &str) -> (f64, f64, f64, f64) {
    let (taken, runs, cpu) = napi_taken(p);
    let offered = p.get("offered_pps").unwrap_or(0.0);
    let arrived = p.get("arrived").unwrap_or(0.0).max(1.0);
    let refused = offered * p.get(&format!("drops.{ring}")).unwrap_or(0.0) / arrived;
    ((taken - refused).max(0.0), refused, runs, cpu)
}

/// A cost per frame at a loaded point, the costs per run and per refused
/// frame known: `(CPU - runs × run - refused × full) / frames`, where
/// `(frames, refused, runs, CPU)` is [`napi_split`]'s.
pub(super) fn per_frame_loaded(t: (f64, f64, f64, f64), run: f64, full: f64) -> f64 {
    let (frames, refused, runs, cpu) = t;
    ((cpu - runs * run - refused * full) / frames.max(1.0)).max(0.0)
}

/// Our router's thread at a point offered `rate`, over the frames forwarded.
pub(super) fn router_rates(p: &Point, rate: f64) -> Result<(f64, f64, f64), BenchError> {
    Ok(per_second(
        p,
        delivered(p, rate)?,
        "router_runs_per_s",
        "cpu.router",
    ))
}

/// A cost per frame and per run from trials, each (frames, runs, CPU
/// time) a second: the least-squares fit of `cpu = frames × per_frame +
/// runs × per_run`. When the trials cannot tell the two apart (runs in
/// proportion to frames, or a negative part from noise), the cost per
/// frame at the highest rate with no part per run.
pub(super) fn split(trials: &[(f64, f64, f64)]) -> (f64, Option<f64>) {
    let sum = |f: &dyn Fn(&(f64, f64, f64)) -> f64| trials.iter().map(f).sum::<f64>();
    let (rr, ww, rw) = (
        sum(&|t| t.0 * t.0),
        sum(&|t| t.1 * t.1),
        sum(&|t| t.0 * t.1),
    );
    let (rs, ws) = (sum(&|t| t.0 * t.2), sum(&|t| t.1 * t.2));
    let det = rr * ww - rw * rw;
    if det.abs() > 1e-6 * rr * ww {
        let f = (rs * ww - ws * rw) / det;
        let b = (ws * rr - rs * rw) / det;
        if f > 0.0 && b >= 0.0 {
            return (f, Some(b));
        }
    }
    let last = trials.iter().max_by(|a, b| a.0.total_cmp(&b.0)).copied();
    let (r, _, s) = last.unwrap_or((1.0, 0.0, 0.0));
    (s / r.max(1.0), None)
}

/// A cost per frame when the cost per run is known: the least-squares
/// fit of `cpu - runs × run = frames × per_frame`.
pub(super) fn per_frame_given(trials: &[(f64, f64, f64)], run: f64) -> f64 {
    let num: f64 = trials.iter().map(|t| t.0 * (t.2 - t.1 * run)).sum();
    let den: f64 = trials.iter().map(|t| t.0 * t.0).sum();
    (num / den.max(1.0)).max(0.0)
}

/// Records the polling router's cost per run of its thread
/// (`router_polling_run`) from its trials at `rates`, fitted beside a cost
/// per frame there (without a part per run, the run is 0). Returns the
/// two; the loaded trial measures the profile's cost per frame.
pub(super) fn push_polling_router(
    push: &mut impl FnMut(&'static str, String, f64),
    rates: &[f64],
    trials: &[(f64, f64, f64)],
) -> (f64, f64) {
    let (f, b) = split(trials);
    let trials = format!("trials at {}", list(rates));
    push(
        "router_polling_run",
        format!(
            "a run of the polling router's thread beside its frames (woken, polls, sleeps): \
             {trials}, CPU = frames x a cost per frame of their own + runs x this (least squares)"
        ),
        b.unwrap_or(0.0),
    );
    (f, b.unwrap_or(0.0))
}

/// Records a thread's cost per frame and per run (`keys`) from its
/// trials (`rates` says which), split by least squares.
pub(super) fn push_split(
    push: &mut impl FnMut(&'static str, String, f64),
    keys: (&'static str, &'static str),
    what: &str,
    rates: &str,
    trials: &[(f64, f64, f64)],
) {
    let (f, b) = split(trials);
    let (frame, run) = keys;
    push(
        frame,
        format!(
            "{what}, CPU per frame: {rates}, CPU = frames x this + runs x {run} (least squares)"
        ),
        f,
    );
    push(
        run,
        format!("{what}, CPU per run of the thread beside its frames: {rates} (0: not told apart)"),
        b.unwrap_or(0.0),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use rxsched_sim::Metrics;

    #[test]
    fn a_loaded_point_splits_the_frames_the_socket_took_from_those_it_refused() {
        // 2 s at 1 Mpps: 40% die on veth's ring, 10% at the socket's ring.
        let mut m = Metrics {
            offered_pps: 1e6,
            arrived: 2_000_000,
            ..Metrics::default()
        };
        m.drops.insert("nic_rx_ring".into(), 800_000);
        m.drops.insert("xsk_rx_ring".into(), 200_000);
        m.extra.insert("napi_cpu_share".into(), 0.6);
        m.extra.insert("napi_runs_per_s".into(), 5_000.0);
        let (into, refused, runs, cpu) = napi_split(&Point::of(&m), "xsk_rx_ring");
        assert!((into - 500_000.0).abs() < 1e-6, "{into}");
        assert!((refused - 100_000.0).abs() < 1e-6, "{refused}");
        assert_eq!(runs, 5_000.0);
        assert!((cpu - 6e8).abs() < 1e-3, "{cpu}");
        // 6e8 ns less 5,000 runs of 20 us and 100,000 refusals of 1 us,
        // over 500,000 frames: 800 ns a frame.
        let f = per_frame_loaded((into, refused, runs, cpu), 20_000.0, 1_000.0);
        assert!((f - 800.0).abs() < 1e-6, "{f}");
    }
}
