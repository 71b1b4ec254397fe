//! `rxsched bench real router`: forwarding through the DUT swept over
//! offered load, each forwarder beside the compute process: `kernel`
//! (Linux `ip_forward`), `xdp-fwd` (forwarding in XDP, the fastest this lab
//! can do), `interrupt` (the M1 baseline: the kernel's receive threads at
//! device priority feed the router's socket rings) and `polling` (M2: the
//! router's polling thread owns the receive work) and `polling-in-xdp`
//! (the device's program forwards, as xdp-fwd does, and the polling
//! thread keeps the policy), in `real-router`; each polling form with
//! `--cycle-limit 50`, and `polling-slo` (`--slo latency=500us,cpu=50%`),
//! in `real-cpu-limit`; latency at a tenth of polling's
//! MLFRR in `real-latency`.

use super::forward::{self, Dut, Forwarder};
use super::sweep::{median, rates, Sweep};
use super::{result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::Lab;

/// The forwarders swept, in the order of the series.
pub const FORWARDERS: [Forwarder; 8] = [
    Forwarder::Kernel,
    Forwarder::XdpFwd,
    Forwarder::Interrupt,
    Forwarder::Polling,
    Forwarder::PollingLimit50,
    Forwarder::PollingInXdp,
    Forwarder::PollingInXdpLimit50,
    Forwarder::PollingSlo,
];

/// Runs the router benchmark: `real-router`, `real-cpu-limit`, `real-latency`.
pub fn router(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    super::calibrate::with_pace(opts, progress, |dut| router_at(opts, dut, progress))
}

/// [`router`] with the compute process measured alone.
fn router_at(
    opts: &BenchOpts,
    dut: &forward::Dut,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let files = [
        BenchFile::load("real-router")?,
        BenchFile::load("real-cpu-limit")?,
        BenchFile::load("real-latency")?,
    ];
    let lab = &opts.lab;
    let (rates, secs) = rates(opts.quick);
    let mut sweep = Sweep::over_rates(FORWARDERS.len(), &rates, progress);
    let mut series = Vec::new();
    for fwd in FORWARDERS {
        let trial = |r| forward::run_trial(lab, fwd, None, r, secs, dut);
        series.push(sweep.series(fwd.label(), trial)?);
    }
    pair_under_overload(lab, &mut series, &rates, secs, dut, progress)?;
    progress("measuring the idle polling router");
    let mut idle = Point::xy("offered_pps", 0.0, "delivered_pps", 0.0);
    idle.set("router_cpu_share", forward::idle_cpu(lab, 2.0)?);
    let mut idle_series = Series::new("polling-idle");
    idle_series.points.push(idle);
    let limited = [
        Forwarder::PollingLimit50,
        Forwarder::PollingInXdpLimit50,
        Forwarder::PollingSlo,
    ]
    .map(|f| f.label());
    let (mut limit, mut main): (Vec<Series>, Vec<Series>) = series
        .into_iter()
        .partition(|s| limited.contains(&s.label.as_str()));
    let unlimited: Vec<Series> = main
        .iter()
        .filter(|s| s.label == "polling" || s.label == "polling-in-xdp")
        .cloned()
        .collect();
    main.push(idle_series);
    let r1 = result(&files[0], main);
    let mlfrr = r1.mlfrr("polling");
    limit.extend(unlimited);
    let r2 = result(&files[1], limit);
    let r3 = latency(&files[2], lab, mlfrr, dut, opts.quick, progress)?;
    Ok(vec![r1, r2, r3])
}

/// Trials of the objective and the hand-set cycle limit at each rate
/// where the limit binds (see [`pair_under_overload`]).
pub const PAIRED_TRIALS: usize = 3;

/// The objective (`polling-slo`) against the hand-set `--cycle-limit 50`
/// where the limit binds (the hand-set router forwarded less than 95% of
/// what was offered): one trial each is not enough to judge "within 5%",
/// as two trials of one setting a minute apart differ by up to 10% on this
/// VM. There, [`PAIRED_TRIALS`] - 1 more trials of the two, alternating,
/// and each point becomes the trial with the median forwarding rate.
fn pair_under_overload(
    lab: &Lab,
    series: &mut [Series],
    rates: &[f64],
    secs: f64,
    dut: &Dut,
    progress: &dyn Fn(&str),
) -> Result<(), BenchError> {
    let pair = [Forwarder::PollingLimit50, Forwarder::PollingSlo];
    let at = |label: &str| series.iter().position(|s| s.label == label);
    let (Some(a), Some(b)) = (at(pair[0].label()), at(pair[1].label())) else {
        return Ok(());
    };
    let delivered = |p: &Point| p.get("delivered_pps").unwrap_or(0.0);
    for (i, &rate) in rates.iter().enumerate() {
        let p = &series[a].points[i];
        let offered = p.get("offered_pps").unwrap_or(rate);
        if delivered(p) >= 0.95 * offered {
            continue;
        }
        let mut trials = [
            vec![series[a].points[i].clone()],
            vec![series[b].points[i].clone()],
        ];
        for rep in 1..PAIRED_TRIALS {
            for (k, fwd) in pair.iter().enumerate() {
                progress(&format!(
                    "{} against {} {} ({}/{PAIRED_TRIALS})",
                    pair[1].label(),
                    pair[0].label(),
                    super::sweep::at_rate(rate),
                    rep + 1
                ));
                trials[k].push(forward::run_trial(lab, *fwd, None, rate, secs, dut)?);
            }
        }
        let [ta, tb] = trials;
        series[a].points[i] = median(ta, delivered, "delivered_lowest", "delivered_highest");
        series[b].points[i] = median(tb, delivered, "delivered_lowest", "delivered_highest");
    }
    Ok(())
}

/// Trials of each router mode in the latency comparison.
pub const LATENCY_TRIALS: usize = 7;

/// Latency of the two router modes at a tenth of polling's MLFRR:
/// [`LATENCY_TRIALS`] trials of each, alternating, and each mode's trial
/// with the median p99 (a single stall of this VM's CPUs can decide one
/// trial's p99).
fn latency(
    file: &BenchFile,
    lab: &Lab,
    mlfrr: f64,
    dut: &Dut,
    quick: bool,
    progress: &dyn Fn(&str),
) -> Result<ResultFile, BenchError> {
    let rate = (mlfrr / 10.0).max(10e3);
    let secs = if quick { 2.0 } else { 4.0 };
    let modes = [Forwarder::Interrupt, Forwarder::Polling];
    let mut trials: Vec<Vec<Point>> = vec![Vec::new(); modes.len()];
    for rep in 0..LATENCY_TRIALS {
        for (i, fwd) in modes.iter().enumerate() {
            progress(&format!(
                "latency of {} at {rate:.0} pkts/s ({}/{LATENCY_TRIALS})",
                fwd.label(),
                rep + 1
            ));
            trials[i].push(forward::run_trial(lab, *fwd, None, rate, secs, dut)?);
        }
    }
    let p99 = |p: &Point| p.get("latency_us.p99").unwrap_or(f64::MAX);
    let series = modes
        .iter()
        .zip(trials)
        .map(|(fwd, pts)| {
            let mut s = Series::new(fwd.label());
            s.points.push(median(pts, p99, "p99_lowest", "p99_highest"));
            s
        })
        .collect();
    Ok(result(file, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check files name the series this bench measures.
    #[test]
    fn the_check_files_name_the_series_measured() {
        let mut labels: Vec<&str> = FORWARDERS.iter().map(|f| f.label()).collect();
        labels.push("polling-idle");
        let mut files: Vec<String> = ["real-router", "real-cpu-limit"]
            .iter()
            .flat_map(|id| BenchFile::load(id).unwrap().bench.series)
            .collect();
        files.sort();
        files.dedup();
        labels.sort();
        assert_eq!(files, labels);
        let latency = BenchFile::load("real-latency").unwrap();
        assert_eq!(latency.bench.series, ["interrupt", "polling"]);
        let n = format!("median of {LATENCY_TRIALS} trials");
        assert!(latency.bench.y.label.contains(&n));
        assert!(latency.check.iter().all(|c| c.name.contains(&n)));
    }
}
