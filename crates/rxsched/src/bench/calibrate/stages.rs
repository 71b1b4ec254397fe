//! `calibrate --real`'s stages behind the forwarders: the screening
//! process and the rules in the receive work (`bench real screen`'s
//! forms), and the monitor (`rxsched capture`).

use super::{
    list, napi_rates, napi_split, napi_taken, per_frame_given, per_frame_loaded, per_second,
    push_split, router_rates, split, BenchError, Forwarder, Point, Screen, LOADED_RATE, RATE,
    RATES,
};
use crate::bench::calibrate::INTERRUPT_RATES;
use crate::bench::capture::calibration_trial;
use crate::bench::forward;
use std::collections::BTreeMap;
use std::path::Path;

/// The screening bench's rules and the two ways a screening process runs
/// behind the router in the trials.
pub(super) struct Screens<'a> {
    /// The rules, as the nftables ruleset is written from them.
    pub rules: &'a rxsched_linux::rules::Rules,
    /// Where the ruleset file goes.
    pub dir: &'a Path,
    /// On route's default queue with feedback (the polling router's).
    pub with_feedback: Screen,
    /// Without feedback (the interrupt router's; the rules in XDP).
    pub plain: Screen,
}

/// A forwarding trial: forwarder, screening behind it, rate, what it is.
type Trial<'a> = dyn Fn(Forwarder, Option<&Screen>, f64, &str) -> Result<Point, BenchError> + 'a;

/// The screening process at a point where it sent `frames` a second (those
/// forwarded): the frames, its runs and CPU time.
fn screen_rates(p: &Point, frames: f64) -> Result<(f64, f64, f64), BenchError> {
    if p.get("cpu.screen").is_none() {
        return Err(BenchError(
            "calibrate --real: the screening process's CPU time could not be read \
             (no child of the router in /proc/PID/task/*/children)"
                .into(),
        ));
    }
    Ok(per_second(p, frames, "screen_runs_per_s", "cpu.screen"))
}

/// The screening stage's costs: each router handing frames to the
/// screening process, the process itself over both routers' trials, and
/// the rules in route's XDP program and in nftables, each per frame
/// beside the same repeat's cost per NAPI run (`run_cost`). `loaded` runs
/// a trial that may forward less than it is offered.
pub(super) fn measure_screen(
    lab: &rxsched_linux::lab::Lab,
    trial: &Trial<'_>,
    loaded: &Trial<'_>,
    s: &Screens<'_>,
    run_cost: &BTreeMap<&str, f64>,
    rates: &str,
    push: &mut impl FnMut(&'static str, String, f64),
) -> Result<(), BenchError> {
    let mut by_screend = Vec::new();
    let routers = [
        (
            Forwarder::Polling,
            &s.with_feedback,
            &RATES[..],
            ("router_screen", "router_screen_run"),
            "the polling router handing frames to the screening process (route --screen, \
             feedback on)",
        ),
        (
            Forwarder::Interrupt,
            &s.plain,
            &INTERRUPT_RATES[..],
            ("router_interrupt_screen", "router_interrupt_screen_run"),
            "the interrupt router handing frames to the screening process",
        ),
    ];
    for (fwd, screen, at, keys, what) in routers {
        let mut router = Vec::new();
        for &rate in at {
            let p = trial(fwd, Some(screen), rate, " behind a screening process")?;
            router.push(router_rates(&p, rate)?);
            by_screend.push(screen_rates(&p, super::delivered(&p, rate)?)?);
        }
        let trials = format!("trials at {}", list(at));
        push_split(push, keys, what, &trials, &router);
    }
    // The low rates fix its cost per run; its cost per frame comes from a
    // loaded trial, where frames fill its time (at the low rates its runs
    // do, and the fit there put 1,001 ns on a frame in one calibration
    // where the bench's screening process spent about 840 beside its runs
    // on the default queue from 1.1 M pkts/s up).
    let run = split(&by_screend).1.unwrap_or(0.0);
    let p = loaded(
        Forwarder::Polling,
        Some(&s.with_feedback),
        LOADED_RATE,
        " behind a screening process, loaded",
    )?;
    let sent = p.get("delivered_pps").unwrap_or(0.0);
    if sent < RATE {
        return Err(BenchError(format!(
            "calibrate --real: the screening process sent only {sent:.0} frames a second at \
             {LOADED_RATE:.0} offered; the lab is not forwarding (is another load running?)"
        )));
    }
    let (frames, runs, cpu) = screen_rates(&p, sent)?;
    push(
        "screen_frame",
        format!(
            "per frame: the screening process's CPU (its rules' verdict and the send) \
             behind the polling router with feedback, loaded: one trial at \
             {LOADED_RATE:.0} pkts/s, CPU - runs x screen_run, over the frames it sent"
        ),
        per_frame_loaded((frames, 0.0, runs, cpu), run, 0.0),
    );
    push(
        "screen_run",
        "per run: the screening process's CPU in the polling and interrupt routers' \
         trials above, CPU = frames x a cost per frame of their own + runs x this \
         (least squares)"
            .to_string(),
        run,
    );
    let napi = |fwd, screen, what: &str| -> Result<Vec<(f64, f64, f64)>, BenchError> {
        RATES
            .iter()
            .map(|&rate| napi_rates(&trial(fwd, screen, rate, what)?, rate))
            .collect()
    };
    let in_xdp = napi(
        Forwarder::PollingInXdp,
        Some(&s.plain),
        " with the rules in XDP",
    )?;
    push(
        "napi_xdp_screen",
        format!(
            "the NAPI threads' CPU per frame forwarding in route's XDP program with \
             the screening rules in it: {rates}, least squares beside napi_route_run"
        ),
        per_frame_given(&in_xdp, run_cost["napi_route_run"]),
    );
    let _nft = crate::bench::screen::NftRules::load(lab, s.rules, s.dir)?;
    let nft = napi(Forwarder::Kernel, None, " with the rules in nftables")?;
    push(
        "napi_nft_forward",
        format!(
            "the NAPI threads' CPU per frame, Linux forwarding with the screening rules \
             as an nftables ruleset: {rates}, least squares beside napi_kernel_run"
        ),
        per_frame_given(&nft, run_cost["napi_kernel_run"]),
    );
    Ok(())
}

/// The monitor's costs (`rxsched capture`, feedback on, to /dev/null):
/// copying and taking at each of [`RATES`], copying with the monitor
/// stopped (its ring buffer full), and copying loaded, at [`LOADED_RATE`].
/// The low rates fix the costs per run (and taking's per frame); copying's
/// costs per frame come from the loaded trial, where frames fill the threads' time
/// (at the low rates the runs do, and the fit there put 1,081 ns on a
/// copy in one calibration where the monitor's NAPI threads spent 490-530
/// a frame beside their runs past 1.2 M pkts/s in a bench the same hour).
pub(super) fn measure_capture(
    lab: &rxsched_linux::lab::Lab,
    dut: &forward::Dut,
    secs: f64,
    rates: &str,
    push: &mut impl FnMut(&'static str, String, f64),
    progress: &dyn Fn(f64, &str),
) -> Result<(), BenchError> {
    let (mut napi, mut reader, mut writer, mut taking, mut full) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let wrote = |p: &Point, least: f64, rate: f64, what: &str| -> Result<(), BenchError> {
        let written = p.get("delivered_pps").unwrap_or(0.0);
        if written < least {
            return Err(BenchError(format!(
                "calibrate --real: the monitor {what} wrote {written:.0} of {rate:.0} pkts/s; \
                 the lab is not capturing (is another load running?)"
            )));
        }
        Ok(())
    };
    // The monitor's polling thread and writer at a point, over what it wrote.
    let thread = |p: &Point, runs: &str, cpu: &str| {
        per_second(p, p.get("delivered_pps").unwrap_or(0.0), runs, cpu)
    };
    for &rate in &RATES {
        for take in [false, true] {
            let what = if take { "taking" } else { "copying" };
            progress(rate, what);
            let p = calibration_trial(lab, take, false, rate, secs, dut)?;
            wrote(&p, rate / 2.0, rate, what)?;
            let reads = thread(&p, "router_runs_per_s", "cpu.router");
            if take {
                taking.push(reads);
            } else {
                napi.push(napi_taken(&p));
                reader.push(reads);
            }
            writer.push(thread(&p, "writer_runs_per_s", "cpu.writer"));
        }
        progress(rate, "stopped, copying into a full ring buffer,");
        full.push(napi_taken(&calibration_trial(
            lab, false, true, rate, secs, dut,
        )?));
    }
    // Loaded: past what the monitor writes, so its threads are never
    // short of frames (it must still write more than the low rates offer).
    progress(LOADED_RATE, "copying, loaded,");
    let copying = &calibration_trial(lab, false, false, LOADED_RATE, secs, dut)?;
    wrote(
        copying,
        RATES[RATES.len() - 1],
        LOADED_RATE,
        "copying, loaded,",
    )?;
    let (_, copy_run) = split(&napi);
    let copy_run = copy_run.unwrap_or(0.0);
    let copy_full = per_frame_given(&full, copy_run);
    let at = format!("one trial at {LOADED_RATE:.0} pkts/s");
    push(
        "napi_copy",
        format!(
            "the NAPI threads' CPU per frame with the monitor copying (the copy, and the \
             host's stack taking the frame to its discard), loaded: {at}, CPU - runs x \
             napi_copy_run - frames refused at the full ring buffer x napi_copy_full, over \
             the frames copied"
        ),
        per_frame_loaded(napi_split(copying, "copy_ring"), copy_run, copy_full),
    );
    push(
        "napi_copy_run",
        format!(
            "a NAPI thread's run beside its frames, the monitor copying: {rates}, \
             CPU = frames x a cost per frame of their own + runs x this (least squares)"
        ),
        copy_run,
    );
    push(
        "napi_copy_full",
        format!(
            "the NAPI threads' CPU per frame with the monitor stopped (its ring buffer \
             full: no copy): {rates}, least squares beside napi_copy_run"
        ),
        copy_full,
    );
    // A thread's cost per frame written at a loaded point, beside its runs.
    let per_written = |p: &Point, run: f64| {
        let (w, runs, cpu) = thread(p, "router_runs_per_s", "cpu.router");
        per_frame_loaded((w, 0.0, runs, cpu), run, 0.0)
    };
    let run = split(&reader).1.unwrap_or(0.0);
    push(
        "capture_copy",
        format!(
            "the monitor's polling thread per copy read onto its queue, loaded: {at}, \
             CPU - runs x capture_run, over the frames written"
        ),
        per_written(copying, run),
    );
    push(
        "capture_run",
        format!(
            "a run of the monitor's polling thread beside its frames, copying: {rates}, \
             CPU = frames x a cost per frame of their own + runs x this (least squares)"
        ),
        run,
    );
    // Taking, the monitor's runs at the low rates cost more than its runs
    // loaded (its CPU at 1 Mpps came to less than its runs there at the
    // low rates' cost per run): the low rates fix both its costs.
    push_split(
        push,
        ("capture_take", "capture_take_run"),
        "the monitor's polling thread taking frames off its socket (--take)",
        rates,
        &taking,
    );
    let (f, b) = split(&writer);
    let both = format!(
        "the monitor's writer thread (pcap to /dev/null), copying and taking at {}, \
         CPU = frames x writer_frame + runs x writer_run (least squares)",
        list(&RATES)
    );
    push("writer_frame", format!("per frame: {both}"), f);
    push("writer_run", format!("per run: {both}"), b.unwrap_or(0.0));
    Ok(())
}
