//! `rxsched bench real protect`: a protected stream under a flood,
//! `real-protect`. The generator floods the DUT's receive queue 0 from its
//! CPU, from nothing to its top rate, while `ping` (a client nobody here
//! wrote) sends 100 echo requests a second through the router to the sink
//! and 100 to the router itself, from the generator's own stack, steered to
//! queue 1, the sink's replies too ([`Lab::steer_gen_stack`],
//! [`Lab::steer_sink_stack`]: the lab's stand-in for a NIC's flow rule).
//! Each point says what the protected stream lost and its round
//! trips' median and p99, beside the flood forwarded; through the polling
//! router with queue 1 protected, the polling router that steers the
//! stream sharing the flood's queue 0 (`--protect-rules default`), the
//! same without protection, the interrupt-driven router and the kernel's
//! own forwarding. Beside ping, a TCP connection to the router itself
//! writing 100 bytes every 100 ms (`iperf3`, another client nobody here
//! wrote: a keepalive, [`super::keepalive`]) says whether TCP had to
//! retransmit, and its round-trip estimate. Its server is the router's
//! control plane, as an operator runs a routing daemon: on the DUT's CPU at
//! a real-time priority above the router's threads
//! ([`super::keepalive::CONTROL_PLANE_PRIO`]). Last, pairs of runs of the
//! polling router with and without protection, flood only, at the top
//! rate, each pair's order the other way from the last's (ABBA): the
//! median of each pair's ratio, so that a 5% cost of protection can be
//! told from this machine's noise (single runs here move by 10-15%, with
//! the machine's speed over minutes, which a pair of adjacent runs
//! shares).

use super::counters::{self, Counters};
use super::forward;
use super::keepalive::Keepalive;
use super::proc::{run, start, Gen, Route, Running, Sink};
use super::sweep::{at_rate, median, median_of, Sweep, TOP_RATE};
use super::{result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{Lab, Role, D0, DUT_CPU, GEN_CPU, S0};
use rxsched_linux::loadgen::{GenReport, SinkReport};
use rxsched_linux::router::{Mode, RouterReport};
use rxsched_linux::sys::StallWatch;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What serves the DUT, in the order of the series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `route --mode polling --protect-queue 1`.
    Protected,
    /// `route --mode polling --protect-rules default`, no protected queue:
    /// the stream shares the flood's queue and the router's program steers
    /// it ([`Variant::stream_queue`]).
    Steered,
    /// `route --mode polling`.
    Polling,
    /// `route --mode interrupt`.
    Interrupt,
    /// The kernel's own forwarding.
    Kernel,
}

const VARIANTS: [Variant; 5] = [
    Variant::Protected,
    Variant::Steered,
    Variant::Polling,
    Variant::Interrupt,
    Variant::Kernel,
];

/// The receive queue the protected stream is steered to.
const PROTECTED_QUEUE: u32 = 1;

/// Echo requests per second to each address of the protected stream.
const PING_RATE: f64 = 100.0;

/// Where the protected stream goes: through the router, and to it.
const TARGETS: [[u8; 4]; 2] = [S0.ip, D0.ip];

/// Pairs of runs of the two polling routers in the comparison of their
/// forwarding, and each run's seconds.
const PAIRS: usize = 8;
const PAIR_SECS: f64 = 3.0;

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Protected => "polling-protected",
            Variant::Steered => "polling-steered",
            Variant::Polling => "polling",
            Variant::Interrupt => "interrupt",
            Variant::Kernel => "kernel",
        }
    }

    /// Our router for `secs`, if one of ours serves.
    fn route(self, secs: f64) -> Option<Route> {
        let mode = match self {
            Variant::Protected | Variant::Steered | Variant::Polling => Mode::Polling,
            Variant::Interrupt => Mode::Interrupt,
            Variant::Kernel => return None,
        };
        Some(Route {
            protect_queue: (self == Variant::Protected).then_some(PROTECTED_QUEUE),
            protect_rules: (self == Variant::Steered).then_some("default"),
            ..Route::new(mode, secs)
        })
    }

    /// The DUT's receive queue the protected stream arrives on: the
    /// flood's own (0) where the router steers it, else its own.
    fn stream_queue(self) -> u32 {
        match self {
            Variant::Steered => 0,
            _ => PROTECTED_QUEUE,
        }
    }
}

/// The flood's offered rates (0: none, the protected stream's unloaded
/// values) and echo requests per address at each.
fn plan(quick: bool) -> (Vec<f64>, u32) {
    if quick {
        (vec![0.0, 200e3, 800e3, TOP_RATE], 200)
    } else {
        let r = vec![0.0, 50e3, 200e3, 400e3, 800e3, 1.3e6, 2e6, TOP_RATE];
        (r, 1000)
    }
}

fn describe(rate: f64) -> String {
    if rate == 0.0 {
        "with no flood".into()
    } else {
        at_rate(rate)
    }
}

/// What one `ping` run said: requests sent, replies, round trips (ms).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Pinged {
    /// Echo requests sent.
    pub sent: u64,
    /// Replies received.
    pub received: u64,
    /// Each reply's round trip, in milliseconds.
    pub rtt_ms: Vec<f64>,
}

/// Reads `ping -n`'s output: a line per reply ("64 bytes from A:
/// icmp_seq=1 ttl=63 time=0.084 ms") and the summary ("200 packets
/// transmitted, 198 received, ...").
pub fn parse_ping(out: &str) -> Pinged {
    let mut p = Pinged::default();
    for l in out.lines() {
        if let Some(t) = l.split("time=").nth(1) {
            if let Some(v) = t.split_whitespace().next().and_then(|v| v.parse().ok()) {
                p.rtt_ms.push(v);
            }
        }
        if l.contains("packets transmitted") {
            let n = |i: usize| {
                l.split(", ")
                    .nth(i)
                    .and_then(|s| s.split_whitespace().next())
                    .and_then(|v| v.parse().ok())
            };
            p.sent = n(0).unwrap_or(0);
            p.received = n(1).unwrap_or(0);
        }
    }
    p
}

impl Pinged {
    /// The `q` quantile of the round trips, in ms (nearest rank; 0 with
    /// no reply).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        quantile(&mut self.rtt_ms.clone(), q)
    }
}

/// The `q` quantile of `v` (sorted here), nearest rank; 0 if empty.
pub(super) fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Puts the generator's and the sink's own traffic back as `lab up` left
/// it, however the bench ends.
struct Unsteer<'a>(&'a Lab);

impl Drop for Unsteer<'_> {
    fn drop(&mut self) {
        let _ = self.0.steer_gen_stack(None);
        let _ = self.0.steer_sink_stack(None);
    }
}

/// The DUT's receive queues on d0.
pub(super) fn dut_queues(lab: &Lab) -> Result<u32, BenchError> {
    let path = format!("/sys/class/net/{}/queues", D0.iface);
    let ls = lab.exec(Role::Dut, "ls", &[&path])?;
    Ok(ls.lines().filter(|l| l.starts_with("rx-")).count() as u32)
}

/// The protected stream is ping's and an iperf3 keepalive's, its round
/// trips read from tcpdump's capture; the keepalive's server runs at a
/// real-time priority (`chrt`) on the DUT CPU.
pub const TOOLS: super::Tools = &[
    ("ping", "iputils-ping"),
    ("iperf3", "iperf3"),
    ("tcpdump", "tcpdump"),
    ("chrt", "util-linux"),
    super::TASKSET,
];

/// Runs the benchmark: `real-protect`.
pub fn protect(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-protect")?;
    let queues = dut_queues(&opts.lab)?;
    if queues <= PROTECTED_QUEUE {
        return Err(BenchError(format!(
            "bench real protect steers its protected stream to receive queue {PROTECTED_QUEUE}, and the lab's d0 has {queues}: rxsched lab down && rxsched lab up --queues 2"
        )));
    }
    let lab = opts.lab.clone().with_queues(queues);
    lab.steer_gen_stack(Some(PROTECTED_QUEUE))?;
    let _unsteer = Unsteer(&lab);
    let (rates, count) = plan(opts.quick);
    let mut sweep = Sweep::over(VARIANTS.len(), &rates, describe, progress);
    let mut series = Vec::new();
    for v in VARIANTS {
        series.push(sweep.series(v.label(), |r| trial(&lab, v, r, count))?);
    }
    series.extend(forwarding_pairs(&lab, progress)?);
    Ok(vec![result(&file, series)])
}

/// The routers whose forwarding is compared in alternating runs.
const PAIRED: [Variant; 2] = [Variant::Protected, Variant::Polling];

/// The series of `v`'s runs in the comparison.
fn paired(v: Variant) -> String {
    format!("{}-paired", v.label())
}

/// The polling router with protection and without, flood only at the top
/// rate, [`PAIRS`] pairs of runs, the second pair in the other order from
/// the first and so on: series `<label>-paired`, each the median run by
/// forwarded rate (with the lowest and highest); the first also carries
/// the median over pairs of protected over unprotected forwarding
/// (`paired_ratio`, with the lowest and highest).
fn forwarding_pairs(lab: &Lab, progress: &dyn Fn(&str)) -> Result<Vec<Series>, BenchError> {
    let pair = PAIRED;
    let mut runs: [Vec<Point>; 2] = Default::default();
    for i in 0..PAIRS {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            progress(&format!(
                "{}: forwarding only, {}, pair {}/{PAIRS}",
                pair[k].label(),
                at_rate(TOP_RATE),
                i + 1
            ));
            runs[k].push(flood_only(lab, pair[k], TOP_RATE)?);
        }
    }
    let y = |p: &Point| p.get("delivered_pps").unwrap_or(0.0);
    let ratios = paired_ratios(&runs[0], &runs[1], y);
    let mut series: Vec<Series> = pair
        .iter()
        .zip(runs)
        .map(|(v, got)| {
            let mut s = Series::new(&paired(*v));
            s.points
                .push(median(got, y, "delivered_lowest", "delivered_highest"));
            s
        })
        .collect();
    if let Some((lo, mid, hi)) = ratios {
        let p = &mut series[0].points[0];
        p.set("paired_ratio", mid);
        p.set("paired_ratio_lowest", lo);
        p.set("paired_ratio_highest", hi);
    }
    Ok(series)
}

/// Each pair's `a` over `b` by `y`: the lowest, the median and the highest.
fn paired_ratios(a: &[Point], b: &[Point], y: impl Fn(&Point) -> f64) -> Option<(f64, f64, f64)> {
    let mut r: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, b)| y(b) > 0.0)
        .map(|(a, b)| y(a) / y(b))
        .collect();
    let mid = median_of(&mut r)?;
    Some((r[0], mid, r[r.len() - 1]))
}

/// One run of `v` forwarding the generator's flood at `rate` for
/// [`PAIR_SECS`], nothing else sent.
fn flood_only(lab: &Lab, v: Variant, rate: f64) -> Result<Point, BenchError> {
    lab.reset_dut_receive()?;
    let router = v
        .route(PAIR_SECS + 6.0)
        .map(|r| start(lab, r))
        .transpose()?;
    let sink = start(lab, Sink::new(PAIR_SECS + 5.0, 0.5))?;
    let before = Counters::read(lab, router.as_ref())?;
    let g: GenReport = run(lab, Gen::new(rate, PAIR_SECS))?;
    let sk: SinkReport = sink.finish()?;
    let after = Counters::read(lab, router.as_ref())?;
    let ours = router.is_some();
    let rt = finish_router(router)?;
    let mut p = flood_point(&g, &sk, rt.as_ref(), (&before, &after), ours);
    p.set("requested_pps", rate);
    Ok(p)
}

/// Stops our router, if one served, and reads its report.
fn finish_router(router: Option<Running>) -> Result<Option<RouterReport>, BenchError> {
    router
        .map(|r| {
            r.stop();
            r.finish()
        })
        .transpose()
}

/// The flood's part of a point: offered, forwarded, and where the DUT
/// dropped between the counters `around` it (before, after).
fn flood_point(
    g: &GenReport,
    sk: &SinkReport,
    rt: Option<&RouterReport>,
    around: (&Counters, &Counters),
    ours: bool,
) -> Point {
    let mut m = forward::metrics(g, sk, rt);
    counters::dut_drops(&mut m, around.0, around.1, ours);
    Point::of(&m)
}

/// One point: `v` serving while the generator offers `rate` (none at 0)
/// and the protected stream sends `count` echo requests to each target.
fn trial(lab: &Lab, v: Variant, rate: f64, count: u32) -> Result<Point, BenchError> {
    lab.reset_dut_receive()?;
    // The stream's queue both ways: the requests from the generator's
    // stack, the replies from the sink's.
    lab.steer_gen_stack(Some(v.stream_queue()))?;
    lab.steer_sink_stack(Some(v.stream_queue()))?;
    let secs = f64::from(count) / PING_RATE + 1.5;
    let router = v.route(secs + 6.0).map(|r| start(lab, r)).transpose()?;
    let flood = rate > 0.0;
    let sink = flood
        .then(|| start(lab, Sink::new(secs + 5.0, 0.5)))
        .transpose()?;
    // Neighbours resolved before the measured stream: its first round
    // trips would otherwise wait for ARP on both sides of the router.
    for ip in TARGETS {
        let _ = ping(lab, ip, 2)?.wait();
    }
    let before = Counters::read(lab, router.as_ref())?;
    let gen = flood
        .then(|| start(lab, Gen::new(rate, secs)))
        .transpose()?;
    std::thread::sleep(Duration::from_millis(300));
    let watch = StallWatch::start(DUT_CPU, GEN_CPU).map_err(|e| BenchError(e.to_string()))?;
    let tcp = Keepalive::start(lab, secs - 1.0)?;
    let pings = TARGETS
        .iter()
        .map(|ip| ping(lab, *ip, count))
        .collect::<Result<Vec<_>, _>>()?;
    let mut pinged = Vec::new();
    for p in pings {
        let out = p
            .wait_with_output()
            .map_err(|e| BenchError(format!("ping: {e}")))?;
        pinged.push(parse_ping(&String::from_utf8_lossy(&out.stdout)));
    }
    let kept = tcp.finish()?;
    let stalls = watch.stop().map_err(|e| BenchError(e.to_string()))?;
    let g: Option<GenReport> = gen.map(|g| g.finish()).transpose()?;
    let sk: Option<SinkReport> = sink.map(|s| s.finish()).transpose()?;
    let after = Counters::read(lab, router.as_ref())?;
    let ours = router.is_some();
    let rt = finish_router(router)?;
    let mut p = match (g, sk) {
        (Some(g), Some(sk)) => flood_point(&g, &sk, rt.as_ref(), (&before, &after), ours),
        _ => Point::xy("offered_pps", 0.0, "delivered_pps", 0.0),
    };
    p.set("requested_pps", rate);
    // Our routers' frames that reached the DUT's stack around them (on
    // veth, some of what a sender's stack sends when the DUT's CPU is
    // full); the kernel's own series forwards everything this way.
    p.set(
        "dut_kernel_forwarded",
        counters::kernel_forwarded(&before, &after) as f64,
    );
    stream(&mut p, &pinged);
    p.set("dut_stalls", f64::from(stalls.count));
    p.set("dut_stall_longest_ms", stalls.longest_ns as f64 / 1e6);
    p.set("dut_steal_share", stalls.share());
    p.set("tcp_connected", f64::from(u8::from(kept.is_some())));
    if let Some(k) = kept {
        k.set(&mut p);
    }
    if let Some(taken) = rt.and_then(|r| r.protected).map(|p| p.taken) {
        p.set("protected_taken", taken as f64);
    }
    Ok(p)
}

/// The protected stream's part of a point: sent, lost, and the round
/// trips (pooled over the targets, and each target's p99).
fn stream(p: &mut Point, pinged: &[Pinged]) {
    let sent: u64 = pinged.iter().map(|x| x.sent).sum();
    let received: u64 = pinged.iter().map(|x| x.received).sum();
    p.set("protected_sent", sent as f64);
    p.set("protected_lost", sent.saturating_sub(received) as f64);
    let mut all: Vec<f64> = pinged.iter().flat_map(|x| x.rtt_ms.clone()).collect();
    p.set("protected_latency_p50_us", 1e3 * quantile(&mut all, 0.5));
    p.set("protected_latency_p99_us", 1e3 * quantile(&mut all, 0.99));
    for (x, name) in pinged.iter().zip(["through", "to_router"]) {
        p.set(&format!("ping_{name}_p99_us"), 1e3 * x.quantile_ms(0.99));
    }
}

/// `ping` from the generator's namespace, on the generator's CPU, to `ip`:
/// `count` requests at [`PING_RATE`], a second's wait for the last reply.
fn ping(lab: &Lab, ip: [u8; 4], count: u32) -> Result<std::process::Child, BenchError> {
    let addr = std::net::Ipv4Addr::from(ip).to_string();
    let interval = format!("{}", 1.0 / PING_RATE);
    Command::new("ip")
        .args(["netns", "exec", &lab.ns(Role::Gen), "taskset", "-c"])
        .arg(GEN_CPU.to_string())
        .args(["ping", "-n", "-W", "1", "-i", &interval, "-c"])
        .arg(count.to_string())
        .arg(&addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            BenchError(format!(
                "ping {addr}: {e} (install it: apt-get install iputils-ping)"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check file names the series this bench measures.
    #[test]
    fn the_check_file_names_the_series_measured() {
        let file = BenchFile::load("real-protect").unwrap();
        let mut labels: Vec<String> = VARIANTS.iter().map(|v| v.label().to_string()).collect();
        labels.extend(PAIRED.iter().map(|v| paired(*v)));
        assert_eq!(file.bench.series, labels);
        assert_eq!(plan(true).0[0], 0.0, "the first point is unloaded");
    }

    /// ping's lines, as iputils prints them.
    #[test]
    fn reads_what_ping_printed() {
        let out = "PING 198.19.0.1 (198.19.0.1) 56(84) bytes of data.\n\
            64 bytes from 198.19.0.1: icmp_seq=1 ttl=63 time=0.084 ms\n\
            64 bytes from 198.19.0.1: icmp_seq=2 ttl=63 time=36.5 ms\n\
            \n--- 198.19.0.1 ping statistics ---\n\
            3 packets transmitted, 2 received, 33.3333% packet loss, time 20ms\n\
            rtt min/avg/max/mdev = 0.084/18.292/36.500/18.208 ms\n";
        let p = parse_ping(out);
        assert_eq!((p.sent, p.received), (3, 2));
        assert_eq!(p.rtt_ms, [0.084, 36.5]);
        let mut pt = Point::default();
        stream(&mut pt, &[p, Pinged::default()]);
        assert_eq!(pt.get("protected_lost"), Some(1.0));
        assert_eq!(pt.get("protected_latency_p99_us"), Some(36_500.0));
        assert_eq!(pt.get("protected_latency_p50_us"), Some(84.0));
        assert_eq!(pt.get("ping_to_router_p99_us"), Some(0.0));
    }

    #[test]
    fn pairs_are_judged_by_the_median_of_their_ratios() {
        let pts = |v: &[f64]| -> Vec<Point> {
            v.iter()
                .map(|&d| Point::xy("offered_pps", 1.0, "delivered_pps", d))
                .collect()
        };
        let y = |p: &Point| p.get("delivered_pps").unwrap_or(0.0);
        // The machine's speed drifts from pair to pair; each pair's ratio
        // is 0.9, 1.0, 1.1 or 1.2, whatever the drift.
        let a = pts(&[90.0, 200.0, 110.0, 360.0]);
        let b = pts(&[100.0, 200.0, 100.0, 300.0]);
        let (lo, mid, hi) = paired_ratios(&a, &b, y).unwrap();
        assert!((lo - 0.9).abs() < 1e-9 && (hi - 1.2).abs() < 1e-9);
        assert!((mid - 1.05).abs() < 1e-9, "median of four: {mid}");
        assert!(paired_ratios(&a[..1], &pts(&[0.0]), y).is_none());
    }

    /// The nearest-rank quantile.
    #[test]
    fn quantiles_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        assert_eq!(quantile(&mut v, 0.5), 100.0);
        assert_eq!(quantile(&mut v, 0.99), 198.0);
        assert_eq!(quantile(&mut [], 0.99), 0.0);
    }
}
