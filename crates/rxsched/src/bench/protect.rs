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
//! own forwarding. Beside ping, a
//! TCP connection to the router itself (`iperf3`, another client nobody
//! here wrote, paced to 100 bytes every 100 ms: a keepalive) says whether
//! TCP had to retransmit, and its round-trip estimate. Its server is the
//! router's control plane, as an operator runs a routing daemon: on the
//! DUT's CPU at a real-time priority above the router's threads
//! ([`CONTROL_PLANE_PRIO`]). Last, alternating runs of the polling router
//! with and without protection, flood only, at the top rate: the median of
//! each, so that a 5% cost of protection can be told from this machine's
//! noise (single runs here move by about 15%).

use super::forward::{self, Counters};
use super::proc::{run, start, Gen, Route, Running, Sink};
use super::sweep::{at_rate, median, Sweep, TOP_RATE};
use super::{result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{Lab, Role, D0, DUT_CPU, GEN_CPU, S0};
use rxsched_linux::loadgen::{GenReport, SinkReport};
use rxsched_linux::router::{Mode, RouterReport};
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

/// The keepalive's pacing, in bits per second, and its writes, in bytes:
/// one write every 100 ms.
/// The keepalive server's real-time priority (SCHED_FIFO): above the
/// router's polling thread (50) and its protected receive thread (51). A
/// process in the normal class on the router's CPU waits while the
/// router's real-time threads work, up to what the kernel's real-time
/// budget leaves (a tenth of each period): by hand, under a top-rate flood,
/// its round-trip estimate averaged 1.6-2.1 ms there against 0.13-0.22 ms
/// on the other CPU, and M4 (`--cycle-limit 50`) did not cure it. A routing
/// daemon is run this way for the same reason.
const CONTROL_PLANE_PRIO: u32 = 60;

/// Alternating runs of each of the two polling routers in the comparison
/// of their forwarding, and each run's seconds.
const PAIRS: usize = 5;
const PAIR_SECS: f64 = 3.0;

const KEEPALIVE_BPS: &str = "8k";
const KEEPALIVE_WRITE: &str = "100";

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
fn quantile(v: &mut [f64], q: f64) -> f64 {
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
/// rate, [`PAIRS`] runs of each in turn: series `<label>-paired`, each the
/// median run by forwarded rate (with the lowest and highest).
fn forwarding_pairs(lab: &Lab, progress: &dyn Fn(&str)) -> Result<Vec<Series>, BenchError> {
    let pair = PAIRED;
    let mut runs: [Vec<Point>; 2] = Default::default();
    for i in 0..PAIRS {
        for (v, got) in pair.iter().zip(runs.iter_mut()) {
            progress(&format!(
                "{}: forwarding only, {}, run {}/{PAIRS}",
                v.label(),
                at_rate(TOP_RATE),
                i + 1
            ));
            got.push(flood_only(lab, *v, TOP_RATE)?);
        }
    }
    let y = |p: &Point| p.get("delivered_pps").unwrap_or(0.0);
    Ok(pair
        .iter()
        .zip(runs)
        .map(|(v, got)| {
            let mut s = Series::new(&paired(*v));
            s.points
                .push(median(got, y, "delivered_lowest", "delivered_highest"));
            s
        })
        .collect())
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
    forward::dut_drops(&mut m, around.0, around.1, ours);
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
        forward::kernel_forwarded(&before, &after) as f64,
    );
    stream(&mut p, &pinged);
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

/// A TCP connection from the generator's stack to the router itself,
/// `iperf3` at both ends, writing 100 bytes every 100 ms.
struct Keepalive {
    server: std::process::Child,
    /// Taken when its output is read.
    client: Option<std::process::Child>,
}

/// What the keepalive's sender said (`iperf3 -J`): bytes sent, TCP's
/// retransmissions, and its smoothed round-trip estimate (sampled once a
/// second), mean and largest, in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Kept {
    /// Bytes the client sent.
    pub bytes: f64,
    /// Segments TCP retransmitted.
    pub retransmits: f64,
    /// The mean of the round-trip estimate's samples, in µs.
    pub rtt_mean_us: f64,
    /// The largest sample, in µs.
    pub rtt_max_us: f64,
}

impl Keepalive {
    /// Starts the server in the DUT's namespace and, once it listens, the
    /// client in the generator's, on its CPU, for `secs`.
    fn start(lab: &Lab, secs: f64) -> Result<Keepalive, BenchError> {
        let addr = std::net::Ipv4Addr::from(D0.ip).to_string();
        let missing = |e: std::io::Error| {
            BenchError(format!("iperf3: {e} (install it: apt-get install iperf3)"))
        };
        let (prio, cpu) = (CONTROL_PLANE_PRIO.to_string(), DUT_CPU.to_string());
        let server = Command::new("ip")
            .args(["netns", "exec", &lab.ns(Role::Dut)])
            .args(["chrt", "-f", &prio, "taskset", "-c", &cpu])
            .args(["iperf3", "-s", "-1", "-B", &addr])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(missing)?;
        std::thread::sleep(Duration::from_millis(300));
        let client = Command::new("ip")
            .args(["netns", "exec", &lab.ns(Role::Gen), "taskset", "-c"])
            .arg(GEN_CPU.to_string())
            .args([
                "iperf3",
                "-J",
                "-c",
                &addr,
                "-b",
                KEEPALIVE_BPS,
                "-l",
                KEEPALIVE_WRITE,
                "-t",
            ])
            .arg(format!("{:.0}", secs.max(1.0)))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(missing)?;
        Ok(Keepalive {
            server,
            client: Some(client),
        })
    }

    /// Waits for the client, stops the server if it has not ended, and
    /// reads what the client said: `None` when the connection never carried
    /// anything (under a flood its handshake may die with the flood's
    /// frames, a measured outcome, said on one line, not a failed bench).
    fn finish(mut self) -> Result<Option<Kept>, BenchError> {
        let client = self.client.take().expect("taken once");
        let out = client
            .wait_with_output()
            .map_err(|e| BenchError(format!("iperf3: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let kept = parse_iperf(&text);
        if kept.is_none() {
            let why = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
                .unwrap_or_else(|| "no report".into());
            eprintln!("bench: the keepalive connection carried nothing: iperf3: {why}");
        }
        Ok(kept)
    }
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        for c in self.client.iter_mut().chain([&mut self.server]) {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// Reads `iperf3 -J`'s sender's end.
pub fn parse_iperf(json: &str) -> Option<Kept> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let s = v.get("end")?.get("streams")?.get(0)?.get("sender")?;
    let f = |k: &str| s.get(k).and_then(serde_json::Value::as_f64);
    Some(Kept {
        bytes: f("bytes")?,
        retransmits: f("retransmits").unwrap_or(0.0),
        rtt_mean_us: f("mean_rtt")?,
        rtt_max_us: f("max_rtt")?,
    })
}

impl Kept {
    fn set(&self, p: &mut Point) {
        p.set("tcp_keepalive_bytes", self.bytes);
        p.set("tcp_retransmits", self.retransmits);
        p.set("tcp_rtt_mean_us", self.rtt_mean_us);
        p.set("tcp_rtt_max_us", self.rtt_max_us);
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

    /// iperf3's JSON, as 3.12 prints it (the parts read).
    #[test]
    fn reads_what_iperf3_said() {
        let j = r#"{"start":{},"intervals":[],"end":{"streams":[{"sender":{"socket":5,"bytes":3000,"retransmits":2,"max_rtt":149,"min_rtt":92,"mean_rtt":127}}],"sum_sent":{"retransmits":2}}}"#;
        let k = parse_iperf(j).unwrap();
        assert_eq!(
            (k.bytes, k.retransmits, k.rtt_mean_us, k.rtt_max_us),
            (3000.0, 2.0, 127.0, 149.0)
        );
        assert_eq!(parse_iperf(r#"{"error":"unable to connect"}"#), None);
        let mut p = Point::default();
        k.set(&mut p);
        assert_eq!(p.get("tcp_retransmits"), Some(2.0));
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
