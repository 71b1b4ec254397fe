//! `rxsched bench real soak`: the polling router flooded at the lab
//! generator's top rate for minutes on end. It must not crash, its memory
//! must stay flat, every frame must be accounted for, and the lab must be
//! clean afterwards (no process left in its namespaces, no XDP program
//! left on its devices).

use super::counters::{dut_drops, Counters};
use super::forward::metrics;
use super::proc::{start, Gen, Route, Sink};
use super::sweep::TOP_RATE;
use super::{result, BenchError, BenchOpts};
use crate::checks::Rule;
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_core::DropPoint;
use rxsched_linux::lab::{Lab, Role, D0, D1, S0};
use rxsched_linux::loadgen::{GenReport, SinkReport};
use rxsched_linux::router::{Mode, RouterReport};
use std::time::{Duration, Instant};

/// The resident set of process `pid`, in KiB, if it still runs.
fn rss_kib(pid: u32) -> Option<f64> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    st.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Frames the router's own counters do not account for:
/// `rx - forwarded - refused by the devices - drops inside it - in flight`
/// (its ring drops happen before `rx`).
fn unaccounted(r: &RouterReport) -> f64 {
    let inside: f64 = r
        .drops
        .iter()
        .filter(|(p, _)| !matches!(p, DropPoint::NicRxRing | DropPoint::XskRxRing))
        .map(|(_, &n)| n as f64)
        .sum();
    let refused = r.refused_by_device_total() as f64;
    (r.rx as f64 - r.forwarded as f64 - refused - inside - r.in_flight as f64).abs()
}

/// Processes left in the lab's namespaces, and XDP programs left on its devices.
fn leftovers(l: &Lab) -> (f64, f64) {
    let mut procs = 0;
    let mut progs = 0;
    for r in [Role::Gen, Role::Dut, Role::Sink] {
        let out = rxsched_linux::lab::run("ip", &["netns", "pids", &l.ns(r)]).unwrap_or_default();
        procs += out.split_whitespace().count();
    }
    for e in [D0, D1, S0] {
        let out = l
            .exec(e.role, "ip", &["-d", "link", "show", e.iface])
            .unwrap_or_default();
        progs += usize::from(out.contains("prog/xdp"));
    }
    (procs as f64, progs as f64)
}

/// What a soak saw: the router's resident memory over time (minutes,
/// KiB), the reports, and the counters around the flood.
struct Soaked {
    samples: Vec<(f64, f64)>,
    gen: GenReport,
    sink: SinkReport,
    router: RouterReport,
    before: Counters,
    after: Counters,
}

/// The polling router flooded at the top rate for `minutes`, its memory
/// sampled as it runs.
fn flood(l: &Lab, minutes: f64, progress: &dyn Fn(&str)) -> Result<Soaked, BenchError> {
    let secs = minutes * 60.0;
    l.reset_dut_receive()?;
    let route = start(l, Route::new(Mode::Polling, secs + 30.0))?;
    let sink = start(l, Sink::new(secs + 20.0, 2.0))?;
    let before = Counters::read(l, Some(&route))?;
    let gen = start(l, Gen::new(TOP_RATE, secs))?;
    let t0 = Instant::now();
    let every = (secs / 60.0).clamp(1.0, 10.0);
    let mut samples: Vec<(f64, f64)> = Vec::new();
    while t0.elapsed().as_secs_f64() < secs {
        let left = secs - t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs_f64(every.min(left.max(0.0))));
        let t = t0.elapsed().as_secs_f64() / 60.0;
        let Some(rss) = rss_kib(route.pid()) else {
            break;
        };
        samples.push((t, rss));
        progress(&format!(
            "soak: {t:.1} of {minutes} min at the top rate; router resident {rss:.0} KiB"
        ));
    }
    let gen = gen.finish()?;
    std::thread::sleep(Duration::from_secs(1));
    let after = Counters::read(l, Some(&route))?;
    route.stop();
    let router = route.finish()?;
    let sink = sink.finish()?;
    Ok(Soaked {
        samples,
        gen,
        sink,
        router,
        before,
        after,
    })
}

/// Runs the benchmark: `real-soak`.
pub fn soak(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    let mut file = BenchFile::load("real-soak")?;
    let minutes = match opts.minutes {
        Some(m) => m,
        None if opts.quick => 0.5,
        None => 10.0,
    };
    let l = &opts.lab;
    let soaked = flood(l, minutes, progress)?;
    std::thread::sleep(Duration::from_millis(500));
    let (procs, progs) = leftovers(l);
    let problems = l.problems().len() as f64;
    let mut m = metrics(&soaked.gen, &soaked.sink, Some(&soaked.router));
    dut_drops(&mut m, &soaked.before, &soaked.after, true);
    let unattributed = m.drops.get("unattributed").copied().unwrap_or(0) as f64;
    let dur = soaked.gen.duration_s.max(1e-9);
    let offered = soaked.gen.achieved_pps;
    let forwarded = soaked.router.forwarded as f64 / dur;
    // The counters are read once, at the end: every sample carries them.
    let mut series = Series::new("polling");
    for (t, rss) in &soaked.samples {
        let mut p = Point::xy("minutes", *t, "rss_kib", *rss);
        p.set("offered_pps", offered);
        p.set("forwarded_pps", forwarded);
        p.set("offered_over_forwarded", offered / forwarded.max(1.0));
        p.set("router_unaccounted", unaccounted(&soaked.router));
        p.set(
            "unattributed_share",
            unattributed / (m.arrived.max(1) as f64),
        );
        p.set("sent", m.arrived as f64);
        p.set("delivered", m.delivered as f64);
        p.set("leftover_processes", procs);
        p.set("leftover_xdp_programs", progs);
        p.set("lab_problems", problems);
        series.points.push(p);
    }
    if soaked.samples.is_empty() {
        return Err(BenchError(
            "the router was gone before the first sample".into(),
        ));
    }
    progress(&format!(
        "soak done: {} frames sent, {} delivered, router forwarded {forwarded:.0}/s",
        m.arrived, m.delivered
    ));
    settle_at(&mut file, minutes);
    Ok(vec![result(&file, vec![series])])
}

/// The share of the run after which the router has settled: its memory is
/// judged from then on.
const SETTLE_SHARE: f64 = 0.05;

/// Sets the memory check's `at` to the time the router has settled in a
/// run of `minutes`, which the check file cannot know.
pub(super) fn settle_at(file: &mut BenchFile, minutes: f64) {
    for c in &mut file.check {
        if let Rule::Stable { at, .. } = &mut c.rule {
            *at = Some(minutes * SETTLE_SHARE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drops at the rings come before `rx`; the rest must add up.
    #[test]
    fn the_routers_own_counters_account_for_its_frames() {
        let mut r: RouterReport = serde_json::from_value(serde_json::json!({
            "mode": "polling", "duration_s": 60.0, "rx": 100, "forwarded": 80,
            "drops": {"nic_rx_ring": 1000, "xsk_rx_ring": 7, "output_queue": 15},
            "inhibits": {}, "mode_switches": 0, "in_flight": 5, "cpu_s": 59.0
        }))
        .unwrap();
        assert_eq!(unaccounted(&r), 0.0);
        r.forwarded = 70;
        assert_eq!(unaccounted(&r), 10.0);
    }

    /// The memory check starts at 5% of the run, whatever its length.
    #[test]
    fn the_memory_check_starts_once_settled() {
        let mut file = BenchFile::load("real-soak").unwrap();
        settle_at(&mut file, 10.0);
        let at: Vec<Option<f64>> = file
            .check
            .iter()
            .filter_map(|c| match c.rule {
                Rule::Stable { at, .. } => Some(at),
                _ => None,
            })
            .collect();
        assert_eq!(at, [Some(0.5)]);
        assert_eq!(file.bench.series, ["polling"]);
    }
}
