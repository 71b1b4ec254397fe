//! `rxsched calibrate --real`: the lab's per-frame costs, each measured in
//! isolation on the DUT CPU and never fitted to an overload curve. A cost
//! is the CPU time of the thread that does the work (the device's NAPI
//! thread, or our router's forwarding thread) over the frames forwarded:
//! a cost per run from trials at rates low enough that nothing queues, a
//! cost per frame from the same trials or, where runs fill a thread's time
//! there, from one loaded trial beside those runs; the wake-up cost is
//! `wakecost`'s. Each is the median of its repeats, with their spread.

use super::error::BenchError;
use super::forward::{self, Forwarder, Screen};

mod fit;
mod host;
mod pace;
mod plan;
mod stages;
mod write;

use super::BenchOpts;
use crate::result::Point;
use fit::{
    delivered, napi_rates, napi_split, napi_taken, per_frame_given, per_frame_loaded, per_second,
    push_polling_router, push_split, router_loaded, router_rates, split,
};
pub use host::kernel_hz;
use pace::{pace, said};
pub use pace::{pace_moved, verdict, with_pace, PACE_MOVED};
use plan::NAPI;
pub use plan::{
    CHARGE_RATES, INTERRUPT_LOADED_RATE, INTERRUPT_RATES, KEYS, LOADED_RATE, RATE, RATES,
};
use std::collections::BTreeMap;
pub use write::profile;

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
        crate::bench::sweep::median_of(&mut self.samples.clone()).unwrap_or(0.0)
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

/// What a calibration measured: the costs, and the machine's pace at its
/// start and after each repeat ([`pace::pace`], ns a frame).
pub type Measured = (Vec<Cost>, Vec<f64>);

/// Measures every cost `repeats` times, each trial `secs` long, and the
/// machine's pace at the start and after each repeat.
pub fn measure(
    opts: &BenchOpts,
    repeats: usize,
    secs: f64,
    progress: &dyn Fn(&str),
) -> Result<Measured, BenchError> {
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
    // The screening bench's rules, where the screening process and the
    // routers' programs read them.
    let dir = std::env::temp_dir().join(format!("rxsched-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| BenchError(format!("{}: {e}", dir.display())))?;
    let rules_path = dir.join("screen.rules");
    std::fs::write(&rules_path, super::screen::RULES)
        .map_err(|e| BenchError(format!("{}: {e}", rules_path.display())))?;
    let rules = rxsched_linux::rules::Rules::parse(
        &rules_path.display().to_string(),
        super::screen::RULES,
    )?;
    let screen = |feedback| Screen {
        rules: rules_path.display().to_string(),
        feedback,
        queue: None,
    };
    let mut paces = Vec::new();
    for r in 0..repeats {
        progress(&format!(
            "repeat {}/{repeats}: the compute process alone and the wake-up cost",
            r + 1
        ));
        let dut = forward::measure_dut(lab, 0.5)?;
        if r == 0 {
            let now = pace(lab, secs, &dut)?;
            progress(&format!("the machine's pace at the start: {}", said(now)));
            paces.push(now.0);
        }
        push(
            "wake",
            "wakecost: a thread woken on the DUT CPU, the time the task it interrupts loses".into(),
            dut.wake_cost_ns as f64,
        );
        // Each trial once per repeat, so that a disturbance of the machine
        // spreads over the costs rather than biasing one.
        // One trial, whatever it forwards (a loaded one forwards less
        // than it is offered).
        let once = |fwd: Forwarder, screen: Option<&Screen>, rate: f64, what: &str| {
            progress(&format!(
                "repeat {}/{repeats}: {}{what} at {rate:.0} pkts/s",
                r + 1,
                fwd.label()
            ));
            forward::run_trial(lab, fwd, screen, rate, secs, &dut)
        };
        let screened = |fwd: Forwarder, screen: Option<&Screen>, rate: f64, what: &str| {
            // A trial that forwarded almost nothing (a router that did not
            // attach in time, a stalled virtual CPU) is run again, twice at most.
            let mut p = once(fwd, screen, rate, what)?;
            for _ in 0..2 {
                if delivered(&p, rate).is_ok() {
                    break;
                }
                progress(&format!("{} forwarded too little; again", fwd.label()));
                p = forward::run_trial(lab, fwd, screen, rate, secs, &dut)?;
            }
            Ok::<Point, BenchError>(p)
        };
        let trial = |fwd: Forwarder, rate: f64| screened(fwd, None, rate, "");
        let rates = format!("trials at {}", list(&RATES));
        // This repeat's costs per run, which the screening trials need.
        let mut run_cost: BTreeMap<&str, f64> = BTreeMap::new();
        let mut polling_router = (0.0, 0.0);
        for &(key, run_key, fwd, what) in NAPI {
            let mut napi = Vec::new();
            let mut router = Vec::new();
            for &rate in &RATES {
                let p = trial(fwd, rate)?;
                napi.push(napi_rates(&p, rate)?);
                if fwd == Forwarder::Polling {
                    router.push(router_rates(&p, rate)?);
                }
            }
            if fwd == Forwarder::PollingInXdp {
                // A batch wakes the NAPI thread only if it sleeps; its
                // batches come at random (`lab`'s model), so the share of
                // them that find it asleep is the share of time it sleeps.
                // Taken where the thread is real-time and alone with the
                // frames, so that it sleeps whenever it is not running.
                let (_, runs, cpu) = napi[0];
                push(
                    "gen_batches_per_s",
                    format!(
                        "the generator's transmit batches a second: the NAPI threads' runs a \
                         second at {RATE:.0} pkts/s under route --forward-in xdp, over the \
                         share of the time they were not running (a batch that finds them \
                         awake does not wake them)"
                    ),
                    runs / (1.0 - cpu / 1e9).max(0.05),
                );
            }
            let (f, b) = split(&napi);
            run_cost.insert(run_key, b.unwrap_or(0.0));
            // The polling router's cost per frame comes from the loaded
            // trial below; these trials fix its cost per run.
            if fwd != Forwarder::Polling {
                push(
                    key,
                    format!(
                        "the NAPI threads' CPU per frame, {what}: {rates}, \
                         CPU = frames x this + runs x {run_key} (least squares)"
                    ),
                    f,
                );
            }
            push(
                run_key,
                format!(
                    "a NAPI thread's run beside its frames (woken, polls, flushes what it \
                     sent, sleeps), {what}: {rates} (0: not told apart)"
                ),
                b.unwrap_or(0.0),
            );
            if fwd == Forwarder::Polling {
                polling_router = push_polling_router(&mut push, &RATES, &router);
            }
        }
        // The full ring and the loaded socket: per frame given this
        // repeat's cost per run, so that the trial where frames dominate
        // fixes it.
        let xsk_run = run_cost.get("napi_xsk_run").copied().unwrap_or(0.0);
        let mut full = Vec::new();
        for &rate in RATES.iter().chain([&LOADED_RATE]) {
            progress(&format!(
                "repeat {}/{repeats}: the polling router stopped, its socket's ring full, at {rate:.0} pkts/s",
                r + 1
            ));
            let p = forward::run_trial_paused(lab, Forwarder::Polling, rate, secs, &dut)?;
            full.push(napi_taken(&p));
        }
        // With the router stopped, a NAPI run costs more than beside the
        // running router (12.9 against 7.6 us at 20,000 pkts/s, measured
        // by hand on one machine), so the stopped runs get a cost of their
        // own rather than `napi_xsk_run`.
        let (full_ns, _) = split(&full);
        push(
            "napi_xsk_full",
            format!(
                "the NAPI threads' CPU per frame redirected to a socket whose ring is full \
                 (the polling router stopped): trials at {}, \
                 CPU = frames x this + runs x a cost per run of their own (least squares)",
                list(&[RATES[0], RATES[1], RATES[2], LOADED_RATE])
            ),
            full_ns,
        );
        // M4's accounting: the polling router with the cycle limit where
        // it forwards everything, over its costs without it, per wake-up.
        let (per_frame, per_run) = polling_router;
        let mut charged = Vec::new();
        for &rate in &CHARGE_RATES {
            let p = trial(Forwarder::PollingLimit50, rate)?;
            let (frames, runs, cpu) = router_rates(&p, rate)?;
            charged.push((runs, 0.0, cpu - frames * per_frame - runs * per_run));
        }
        push(
            "router_charge",
            format!(
                "the polling router's CPU per wake-up with --cycle-limit 50 (reading the clocks \
                 it charges) over its costs without: trials at {}, CPU - frames x \
                 the low rates' cost per frame - runs x router_polling_run = runs x this \
                 (least squares)",
                list(&CHARGE_RATES)
            ),
            per_frame_given(&charged, 0.0),
        );
        progress(&format!(
            "repeat {}/{repeats}: the polling router loaded, at {LOADED_RATE:.0} pkts/s",
            r + 1
        ));
        let p = forward::run_trial(lab, Forwarder::Polling, None, LOADED_RATE, secs, &dut)?;
        let loaded = napi_split(&p, "xsk_rx_ring");
        let into = loaded.0;
        if into < RATE {
            return Err(BenchError(format!(
                "calibrate --real: the polling router took only {into:.0} frames a second at \
                 {LOADED_RATE:.0} offered; the lab is not forwarding (is another load running?)"
            )));
        }
        let redirect = per_frame_loaded(loaded, xsk_run, full_ns);
        // The router's own cost per frame, in the same trial: its polls
        // are full here, as under overload (at the low rates they hold a
        // few frames each, and the fit there puts 1.4 times as much on a
        // frame as the router spent at 964,000 pkts/s in a bench).
        let (fwd, router_runs, router_cpu) = router_loaded(&p);
        push(
            "router_polling",
            format!(
                "the polling router's CPU per frame forwarded, loaded: one trial at \
                 {LOADED_RATE:.0} pkts/s, CPU - runs x router_polling_run, over the frames \
                 forwarded"
            ),
            per_frame_loaded((fwd, 0.0, router_runs, router_cpu), polling_router.1, 0.0),
        );
        push(
            "napi_xsk_redirect",
            format!(
                "the NAPI threads' CPU per frame redirected into the polling router's socket, \
                 the router busy: one trial at {LOADED_RATE:.0} pkts/s, CPU - runs x \
                 napi_xsk_run - frames refused at the full ring x napi_xsk_full, over the \
                 frames redirected"
            ),
            redirect,
        );
        let mut router = Vec::new();
        let mut woken = Vec::new();
        for &rate in &INTERRUPT_RATES {
            let p = trial(Forwarder::Interrupt, rate)?;
            let (frames, napi_runs, napi_cpu) = napi_rates(&p, rate)?;
            let r = router_rates(&p, rate)?;
            // What the receive work spent beyond its costs beside the
            // polling router, against the router's wake-ups (its runs).
            woken.push((r.1, 0.0, napi_cpu - frames * redirect - napi_runs * xsk_run));
            router.push(r);
        }
        let rates_i = format!("trials at {}", list(&INTERRUPT_RATES));
        let wake = per_frame_given(&woken, 0.0);
        push(
            "napi_xsk_wake",
            format!(
                "the NAPI threads' CPU beside the interrupt router per wake-up of its thread, \
                 over their costs beside the polling router: {rates_i}, CPU - frames x \
                 napi_xsk_redirect - runs x napi_xsk_run = router runs x this (least squares)"
            ),
            wake,
        );
        let (_, run) = split(&router);
        let run = run.unwrap_or(0.0);
        push(
            "router_interrupt_run",
            format!(
                "a run of the interrupt router's thread beside its frames (woken, polls, \
                 sleeps): {rates_i}, CPU = frames x router_interrupt + runs x this (least squares)"
            ),
            run,
        );
        // Its cost per frame where frames fill its time: at the low rates
        // its runs take most of it.
        progress(&format!(
            "repeat {}/{repeats}: the interrupt router loaded, at {INTERRUPT_LOADED_RATE:.0} pkts/s",
            r + 1
        ));
        let p = forward::run_trial(
            lab,
            Forwarder::Interrupt,
            None,
            INTERRUPT_LOADED_RATE,
            secs,
            &dut,
        )?;
        let (fwd_frames, router_runs, router_cpu) = router_loaded(&p);
        if fwd_frames < RATE {
            return Err(BenchError(format!(
                "calibrate --real: the interrupt router forwarded only {fwd_frames:.0} frames a \
                 second at {INTERRUPT_LOADED_RATE:.0} offered; the lab is not forwarding (is \
                 another load running?)"
            )));
        }
        push(
            "router_interrupt",
            format!(
                "the interrupt router's CPU per frame forwarded, loaded: one trial at \
                 {INTERRUPT_LOADED_RATE:.0} pkts/s, CPU - runs x router_interrupt_run, over the \
                 frames forwarded"
            ),
            per_frame_loaded((fwd_frames, 0.0, router_runs, router_cpu), run, 0.0),
        );
        // The receive work's cost per frame beside it, in the same trial:
        // beyond its runs, the router's wake-ups and the refused frames.
        let (into, refused, napi_runs, napi_cpu) = napi_split(&p, "xsk_rx_ring");
        push(
            "napi_xsk_interrupt",
            format!(
                "the NAPI threads' CPU per frame redirected into the interrupt router's \
                 socket, loaded: one trial at {INTERRUPT_LOADED_RATE:.0} pkts/s, CPU - runs x \
                 napi_xsk_run - the router's runs x napi_xsk_wake - frames refused at the \
                 full ring x napi_xsk_full, over the frames redirected"
            ),
            per_frame_loaded(
                (into, refused, napi_runs, napi_cpu - router_runs * wake),
                xsk_run,
                full_ns,
            ),
        );
        let stage_trial =
            |fwd, screen: Option<&Screen>, rate, what: &str| screened(fwd, screen, rate, what);
        let screens = stages::Screens {
            rules: &rules,
            dir: &dir,
            with_feedback: screen(Some("0.75,0.25")),
            plain: screen(None),
        };
        stages::measure_screen(
            lab,
            &stage_trial,
            &once,
            &screens,
            &run_cost,
            &rates,
            &mut push,
        )?;
        stages::measure_capture(
            lab,
            &dut,
            secs,
            &rates,
            &mut push,
            &|rate: f64, what: &str| {
                progress(&format!(
                    "repeat {}/{repeats}: the monitor {what} at {rate:.0} pkts/s",
                    r + 1
                ))
            },
        )?;
        let now = pace(lab, secs, &dut)?;
        progress(&format!(
            "the machine's pace after repeat {}: {}",
            r + 1,
            said(now)
        ));
        paces.push(now.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((KEYS.iter().filter_map(|k| costs.remove(k)).collect(), paces))
}

/// Rates as a list for a comment: `20000, 100000 and 250000 pkts/s`.
pub(super) fn list(rates: &[f64]) -> String {
    let v: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    match v.split_last() {
        Some((last, [])) => format!("{last} pkts/s"),
        Some((last, rest)) => format!("{} and {last} pkts/s", rest.join(", ")),
        None => String::new(),
    }
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
        let text = profile(
            "linux-veth-lab",
            &costs,
            &[500.0, 520.0, 800.0],
            2,
            "a test host",
            250,
        );
        assert!(
            text.contains("pace = [500, 520, 800]") && text.contains("moved 60%"),
            "the pace in the profile: {text}"
        );
        let p = rxsched_sim::Profile::parse("lab.toml", &text).unwrap();
        let lab = p.lab.unwrap();
        assert_eq!(lab.napi_kernel_forward, 1100);
        assert_eq!(lab.wake, 1100);
        assert_eq!(
            lab.xsk_rx_ring,
            u64::from(rxsched_linux::backend::xdp::RX_RING)
        );
        assert_eq!(lab.tick_hz, 250);
        assert_eq!(lab.pace, [500.0, 520.0, 800.0]);
        assert!((lab.spread["router_polling"] - 200.0 / 1100.0).abs() < 1e-3);
    }

    #[test]
    fn trials_split_a_cost_per_frame_from_one_per_run() {
        // 2 µs a frame, 5 µs a run: one run a frame at 20k, fewer above.
        let at = |r: f64, w: f64| (r, w, r * 2000.0 + w * 5000.0);
        let (f, b) = split(&[at(20_000.0, 20_000.0), at(100_000.0, 25_000.0)]);
        assert!((f - 2000.0).abs() < 1e-6 && (b.unwrap() - 5000.0).abs() < 1e-6);
        // Three trials, one 5% high: the fit lies between, not on it.
        let mut noisy = [
            at(20_000.0, 12_000.0),
            at(100_000.0, 12_500.0),
            at(250_000.0, 12_000.0),
        ];
        noisy[1].2 *= 1.05;
        let (f, b) = split(&noisy);
        assert!((1900.0..2200.0).contains(&f), "{f}");
        assert!((3000.0..7000.0).contains(&b.unwrap()), "{b:?}");
        // As many runs as frames at every rate: no telling them apart.
        let (f, b) = split(&[at(20_000.0, 20_000.0), at(100_000.0, 100_000.0)]);
        assert_eq!((f, b), (7000.0, None));
    }
}
