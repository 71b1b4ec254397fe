//! `rxsched calibrate --real`: the lab's per-frame costs, each measured in
//! isolation on the DUT CPU and never fitted to an overload curve. A cost
//! is the CPU time of the thread that does the work (the device's NAPI
//! thread, or our router's forwarding thread) over the frames forwarded,
//! in a trial at a rate low enough that nothing queues; the wake-up cost
//! is `wakecost`'s. Each is the median of its repeats, with their spread.

use super::error::BenchError;
use super::forward::{self, Forwarder};
use super::BenchOpts;
use crate::result::Point;
use std::collections::BTreeMap;

/// One measured cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    /// Its key in the profile's `[lab]` table.
    pub key: &'static str,
    /// How it was measured, for the profile's comment.
    pub how: String,
    /// Each repeat's value, in ns.
    pub samples: Vec<f64>,
}

impl Cost {
    /// The median of the repeats.
    pub fn median(&self) -> f64 {
        let mut v = self.samples.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }

    /// (largest - smallest) / median.
    pub fn spread(&self) -> f64 {
        let lo = self.samples.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.samples.iter().copied().fold(0.0, f64::max);
        let m = self.median();
        if m > 0.0 {
            (hi - lo) / m
        } else {
            0.0
        }
    }
}

/// The low trial rate: low enough that the slowest forwarder here (the
/// interrupt-mode router) keeps up with room to spare, and about one frame
/// a NAPI run.
pub const RATE: f64 = 20_000.0;

/// The second rate of the receive work's trials: more frames a run, so
/// that its cost per frame and per run can be told apart. (The NAPI
/// threads run about as often at both rates here, some 12,000 times a
/// second, as the generator's paced batches arrive: 1.7 frames a run at
/// the low rate, 20 at this one.)
pub const RATE_HIGH: f64 = 250_000.0;

/// The interrupt-mode router's second rate: more frames a wake-up than
/// at [`RATE`], and still well under its peak.
pub const RATE_MID: f64 = 100_000.0;

/// Every value `measure` gives, in the order the profile lists them.
pub const KEYS: [&str; 11] = [
    "napi_kernel_forward",
    "napi_xdp_forward",
    "napi_xdp_route",
    "napi_xsk_redirect",
    "napi_run",
    "router_polling",
    "router_polling_run",
    "router_interrupt",
    "router_interrupt_run",
    "wake",
    "gen_batches_per_s",
];

/// The device's receive work of each forwarder: (key, forwarder, what).
const NAPI: &[(&str, Forwarder, &str)] = &[
    ("napi_kernel_forward", Forwarder::Kernel, "Linux forwarding"),
    ("napi_xdp_forward", Forwarder::XdpFwd, "xdp-fwd forwarding"),
    (
        "napi_xdp_route",
        Forwarder::PollingInXdp,
        "route --forward-in xdp forwarding",
    ),
    (
        "napi_xsk_redirect",
        Forwarder::Polling,
        "redirecting to the polling router's socket",
    ),
];

/// The rates a point forwarded, its NAPI threads' runs, and their CPU
/// time, each per second.
fn napi_rates(p: &Point, rate: f64) -> Result<(f64, f64, f64), BenchError> {
    let delivered = delivered(p, rate)?;
    let runs = p.get("napi_runs_per_s").unwrap_or(0.0);
    let cpu = p.get("napi_cpu_share").unwrap_or(0.0) * 1e9;
    Ok((delivered, runs, cpu))
}

/// What a point forwarded, refused when far below what was offered.
fn delivered(p: &Point, rate: f64) -> Result<f64, BenchError> {
    let delivered = p.get("delivered_pps").unwrap_or(0.0);
    if delivered < rate / 2.0 {
        return Err(BenchError(format!(
            "calibrate --real: only {delivered:.0} of {rate:.0} pkts/s were forwarded; \
             the lab is not forwarding (is another load running?)"
        )));
    }
    Ok(delivered)
}

/// The rates our router forwarded at a point offered `rate`, its thread's
/// runs, and its CPU time, each per second.
fn router_rates(p: &Point, rate: f64) -> Result<(f64, f64, f64), BenchError> {
    let delivered = delivered(p, rate)?;
    let runs = p.get("router_runs_per_s").unwrap_or(0.0);
    let cpu = p.get("cpu.router").unwrap_or(0.0) * 1e9;
    Ok((delivered, runs, cpu))
}

/// The receive work's cost per frame and per run, from two trials:
/// `cpu = frames × per_frame + runs × per_run` at each. When the two
/// trials cannot tell them apart (as many runs as frames at both, or a
/// negative part from noise), the cost per frame at the higher rate with
/// no part per run.
fn split(lo: (f64, f64, f64), hi: (f64, f64, f64)) -> (f64, Option<f64>) {
    let (r1, w1, s1) = lo;
    let (r2, w2, s2) = hi;
    let det = r1 * w2 - r2 * w1;
    if det.abs() > 1e-3 * r1 * w2 {
        let f = (s1 * w2 - s2 * w1) / det;
        let b = (r1 * s2 - r2 * s1) / det;
        if f > 0.0 && b >= 0.0 {
            return (f, Some(b));
        }
    }
    (s2 / r2.max(1.0), None)
}

/// Measures every cost `repeats` times, each trial `secs` long.
pub fn measure(
    opts: &BenchOpts,
    repeats: usize,
    secs: f64,
    progress: &dyn Fn(&str),
) -> Result<Vec<Cost>, BenchError> {
    let lab = &opts.lab;
    let mut costs: BTreeMap<&'static str, Cost> = BTreeMap::new();
    let mut push = |key: &'static str, how: String, v: f64| {
        costs
            .entry(key)
            .or_insert_with(|| Cost {
                key,
                how,
                samples: Vec::new(),
            })
            .samples
            .push(v);
    };
    for r in 0..repeats {
        progress(&format!(
            "repeat {}/{repeats}: the compute process alone and the wake-up cost",
            r + 1
        ));
        let dut = forward::measure_dut(lab, 0.5)?;
        push(
            "wake",
            "wakecost: a thread woken on the DUT CPU, the time the task it interrupts loses".into(),
            dut.wake_cost_ns as f64,
        );
        // Each trial once per repeat, so that a disturbance of the machine
        // spreads over the costs rather than biasing one.
        let trial = |fwd: Forwarder, rate: f64| {
            progress(&format!(
                "repeat {}/{repeats}: {} at {rate:.0} pkts/s",
                r + 1,
                fwd.label()
            ));
            // A trial that forwarded almost nothing (a router that did not
            // attach in time, a stalled virtual CPU) is run again, twice at most.
            let mut p = forward::run_trial(lab, fwd, None, rate, secs, &dut)?;
            for _ in 0..2 {
                if delivered(&p, rate).is_ok() {
                    break;
                }
                progress(&format!("{} forwarded too little; again", fwd.label()));
                p = forward::run_trial(lab, fwd, None, rate, secs, &dut)?;
            }
            Ok::<Point, BenchError>(p)
        };
        for &(key, fwd, what) in NAPI {
            let lo = trial(fwd, RATE)?;
            let hi = trial(fwd, RATE_HIGH)?;
            let (a_lo, a_hi) = (napi_rates(&lo, RATE)?, napi_rates(&hi, RATE_HIGH)?);
            push(
                "gen_batches_per_s",
                format!(
                    "the generator's transmit batches a second, as the NAPI threads' runs \
                     a second at {RATE:.0} pkts/s (each batch wakes them once)"
                ),
                a_lo.1,
            );
            let (f, b) = split(a_lo, a_hi);
            push(
                key,
                format!(
                    "the NAPI threads' CPU per frame, {what}: trials at {RATE:.0} and \
                     {RATE_HIGH:.0} pkts/s, CPU = frames x this + runs x napi_run"
                ),
                f,
            );
            if let Some(b) = b {
                push(
                    "napi_run",
                    "a NAPI thread's run beside its frames (woken, polls, sleeps): \
                     each forwarder's two trials"
                        .into(),
                    b,
                );
            }
            if fwd == Forwarder::Polling {
                let lo = router_rates(&lo, RATE)?;
                let hi = router_rates(&hi, RATE_HIGH)?;
                push_router(&mut push, "polling", RATE_HIGH, lo, hi);
            }
        }
        let lo = router_rates(&trial(Forwarder::Interrupt, RATE)?, RATE)?;
        let hi = router_rates(&trial(Forwarder::Interrupt, RATE_MID)?, RATE_MID)?;
        push_router(&mut push, "interrupt", RATE_MID, lo, hi);
    }
    Ok(KEYS.iter().filter_map(|k| costs.remove(k)).collect())
}

/// Records a router's cost per frame and per run of its thread
/// (`router_MODE`, `router_MODE_run`) from its trials at [`RATE`] and
/// `high`; without a part per run, that key is 0.
fn push_router(
    push: &mut impl FnMut(&'static str, String, f64),
    mode: &str,
    high: f64,
    lo: (f64, f64, f64),
    hi: (f64, f64, f64),
) {
    let (frame, run) = match mode {
        "polling" => ("router_polling", "router_polling_run"),
        _ => ("router_interrupt", "router_interrupt_run"),
    };
    let (f, b) = split(lo, hi);
    let trials = format!("trials at {RATE:.0} and {high:.0} pkts/s");
    push(
        frame,
        format!("the {mode} router's CPU per frame: {trials}, CPU = frames x this + runs x {run}"),
        f,
    );
    push(
        run,
        format!("a run of the {mode} router's thread beside its frames (woken, polls, sleeps): {trials}"),
        b.unwrap_or(0.0),
    );
}

/// The profile text: every cost with how it was measured and its spread.
pub fn profile(name: &str, costs: &[Cost], repeats: usize, host: &str) -> String {
    let mut s = format!(
        "# Written by `rxsched calibrate --real` on {host}: each cost measured in\n\
         # isolation on the DUT CPU ({repeats} repeats, the median), never fitted to an\n\
         # overload curve. Measure your own host the same way (README).\n\
         name = {name:?}\n\
         testbed = \"the XDP lab: three network namespaces joined by veth pairs, the DUT on one CPU ({host})\"\n\
         calibrated_from = [\"rxsched calibrate --real: per-thread CPU time at {RATE:.0} and {RATE_HIGH:.0} pkts/s, and wakecost\"]\n\n\
         [wire]\n\
         bit_rate_bps = 1e11          # veth has no wire: frames move at memory speed, faster than the generator sends\n\
         min_frame_bytes = 60\n\n\
         [nic]\n\
         rx_ring = 256                # veth's receive ring (VETH_RING_SIZE, fixed in the driver)\n\
         tx_ring = 256                # veth transmits into the peer's receive ring\n\n\
         [lab]                        # nanoseconds of the DUT CPU (gen_batches_per_s: a second)\n"
    );
    for c in costs {
        let kv = format!("{} = {}", c.key, c.median().round() as u64);
        s += &format!("{kv:<28} # {}; spread {:.0}%\n", c.how, 100.0 * c.spread());
    }
    s += &format!(
        "veth_ring = 256              # VETH_RING_SIZE\n\
         xsk_rx_ring = {}            # the router's AF_XDP receive ring (XskConfig)\n\
         repeats = {repeats}\n\n[lab.spread]\n",
        rxsched_linux::backend::xdp::XskConfig::default().rx_ring
    );
    for c in costs {
        s += &format!("{} = {:.3}\n", c.key, c.spread());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let c = Cost {
            key: "x",
            how: String::new(),
            samples: vec![110.0, 90.0, 100.0],
        };
        assert_eq!(c.median(), 100.0);
        assert!((c.spread() - 0.2).abs() < 1e-12);
    }

    #[test]
    fn the_profile_written_parses_with_every_cost_given() {
        let costs: Vec<Cost> = KEYS
            .iter()
            .map(|k| Cost {
                key: k,
                how: "test".into(),
                samples: vec![1000.0, 1200.0],
            })
            .collect();
        let text = profile("linux-veth-lab", &costs, 2, "a test host");
        let p = rxsched_sim::Profile::parse("lab.toml", &text).unwrap();
        let lab = p.lab.unwrap();
        assert_eq!(lab.napi_kernel_forward, 1100);
        assert_eq!(lab.wake, 1100);
        assert_eq!(lab.xsk_rx_ring, 512);
        assert!((lab.spread["router_polling"] - 200.0 / 1100.0).abs() < 1e-3);
    }

    #[test]
    fn two_trials_split_a_cost_per_frame_from_one_per_run() {
        // 2 µs a frame, 5 µs a run: one run a frame at 20k, one per 4 at 100k.
        let at = |r: f64, w: f64| (r, w, r * 2000.0 + w * 5000.0);
        let (f, b) = split(at(20_000.0, 20_000.0), at(100_000.0, 25_000.0));
        assert!((f - 2000.0).abs() < 1e-6 && (b.unwrap() - 5000.0).abs() < 1e-6);
        // As many runs as frames at both rates: no telling them apart.
        let (f, b) = split(at(20_000.0, 20_000.0), at(100_000.0, 100_000.0));
        assert_eq!((f, b), (7000.0, None));
    }
}
