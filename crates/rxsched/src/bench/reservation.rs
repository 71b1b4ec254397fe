//! Part (b) of `bench real srp`: forwarding as a time-shared process
//! beside onoff processes, with a CPU reservation and without, SRP's
//! figure 6 on this machine. `real-srp-reservation` offers a fixed UDP
//! load from the generator; `real-srp-tcp` runs a TCP transfer through the
//! router with `iperf3`, as the paper's netperf did.

use super::counters::{dut_drops, Counters};
use super::keepalive::missing;
use super::proc::{run, start, Gen, Proc, Route, Running, Sink};
use super::sweep::Sweep;
use super::{result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{Lab, Role, D0, D1, DUT_CPU, GEN_CPU, S0};
use rxsched_linux::loadgen::{GenReport, SinkReport};
use rxsched_linux::router::{Mode, RouterReport};
use rxsched_linux::spin::SpinReport;
use rxsched_linux::sys::StallWatch;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The forwarding load of the reservation experiment: well under what
/// the router forwards with the CPU to itself. Neither side of the
/// experiment is sure at any load here: at 200,000 pkts/s the router and
/// its receive threads, starved to 9% of the CPU beside 8 onoff processes
/// without a reservation, still forwarded 0.82 of it in larger batches;
/// at 300,000 they fell to 0.60 without one, but kept only 0.78 with one,
/// the onoff processes still taking 0.65-0.70 of the CPU: a group's weight
/// gives it its share, not the wake-up latency veth's 256-frame ring needs
/// (0.85 ms of arrivals at 300,000 pkts/s) while an onoff process runs.
/// Those runs gave the reservation the kernel's default slice.
const FORWARD_PPS: f64 = 200_000.0;
/// The slice a reserved forwarder's threads ask for (`route --slice-us`),
/// the least the kernel keeps: the latency half of a reservation, the
/// group's weight being its share. Beside one onoff process (the worst
/// case) the reservation kept 0.80-0.82 of what it was offered with the
/// default slice (1.4 ms here) and 0.90-0.93 with this one, six trials
/// each; without a reservation 0.94-0.95 either way (2026-11-29).
const RESERVED_SLICE_US: u64 = 100;
/// The groups: the forwarder's, and everyone else's.
const FWD_GROUP: &str = "rxsched-forward";
const LOAD_GROUP: &str = "rxsched-load";
/// Every group's weight: equal, so a group of its own reserves the
/// forwarding half the CPU against any number of onoff processes.
const GROUP_WEIGHT: u64 = 1024;

/// Puts the router, and its receive work (the DUT's NAPI threads, the
/// forwarding's too), in `group`, and the onoff processes in theirs.
fn group(l: &Lab, group: &str, route: &Running, onoffs: &[Running]) -> Result<(), BenchError> {
    rxsched_linux::cgroup::attach(group, GROUP_WEIGHT, route.pid())?;
    let tids = l.in_netns(Role::Dut, || {
        let mut v = rxsched_linux::napi_threads::thread_ids(D0.iface)?;
        v.extend(rxsched_linux::napi_threads::thread_ids(D1.iface)?);
        Ok(v)
    })?;
    for t in tids {
        rxsched_linux::cgroup::attach_thread(group, GROUP_WEIGHT, t)?;
    }
    for o in onoffs {
        rxsched_linux::cgroup::attach(LOAD_GROUP, GROUP_WEIGHT, o.pid())?;
    }
    Ok(())
}

/// Forwarding through the DUT while `n` onoff processes run there: the
/// router time-shared, in a group of its own (`reserved`) or in the onoff
/// processes' group.
/// The router, time-shared, and `n` onoff processes for `secs`, the router
/// in a group of its own (`reserved`, with its slice) or in theirs.
fn beside_onoffs(
    l: &Lab,
    n: usize,
    reserved: bool,
    secs: f64,
) -> Result<(Running, Vec<Running>), BenchError> {
    l.reset_dut_receive()?;
    let route = Route {
        time_shared: true,
        slice_us: reserved.then_some(RESERVED_SLICE_US),
        ..Route::new(Mode::Polling, secs + 6.0)
    };
    let route = start(l, route)?;
    let onoffs = (0..n)
        .map(|_| start(l, Proc::Onoff { secs: secs + 1.0 }))
        .collect::<Result<Vec<_>, _>>()?;
    group(
        l,
        if reserved { FWD_GROUP } else { LOAD_GROUP },
        &route,
        &onoffs,
    )?;
    Ok((route, onoffs))
}

/// The onoff processes' CPU share, summed, once they are done.
fn onoff_share(onoffs: Vec<Running>) -> Result<f64, BenchError> {
    let mut share = 0.0;
    for o in onoffs {
        share += o.finish::<SpinReport>()?.cpu_share;
    }
    Ok(share)
}

fn forward_with_onoffs(l: &Lab, n: usize, reserved: bool, secs: f64) -> Result<Point, BenchError> {
    let sink = start(l, Sink::new(secs + 5.0, 0.5))?;
    let (route, onoffs) = beside_onoffs(l, n, reserved, secs)?;
    std::thread::sleep(Duration::from_millis(700));
    // The host stalling the DUT's CPU takes forwarding with it whatever the
    // groups: such a trial is measured again (the sweep's retry).
    let watch = StallWatch::start(DUT_CPU, GEN_CPU).map_err(|e| BenchError(e.to_string()))?;
    let before = Counters::read(l, Some(&route))?;
    let g: GenReport = run(l, Gen::new(FORWARD_PPS, secs))?;
    let stalls = watch.stop().map_err(|e| BenchError(e.to_string()))?;
    let onoff_cpu = onoff_share(onoffs)?;
    let sk: SinkReport = sink.finish()?;
    let after = Counters::read(l, Some(&route))?;
    route.stop();
    let rt: RouterReport = route.finish()?;
    // Every frame sent is delivered or dropped at a named point: the
    // router's own (its rings, its socket) and the links'.
    let mut m = super::forward::metrics(&g, &sk, Some(&rt));
    dut_drops(&mut m, &before, &after, true);
    let mut p = Point::xy(
        "onoff_processes",
        n as f64,
        "delivered_pps",
        m.delivered_pps,
    );
    p.set("offered_pps", m.offered_pps);
    p.set("arrived", m.arrived as f64);
    p.set("onoff_cpu_share", onoff_cpu);
    p.set("router_cpu_s", rt.cpu_s);
    p.set("dut_stalls", f64::from(stalls.count));
    p.set("dut_steal_share", stalls.share());
    p.0.insert("drops".into(), serde_json::json!(m.drops));
    Ok(p)
}

/// The TCP transfer's rate: about 30% of what the router forwards with
/// the CPU to itself here (iperf3 uncapped through `route --time-shared`:
/// 4.8-4.9 Gb/s), so that half the CPU carries it, as the paper's
/// gateway carried its 100 Mb/s Ethernet's worth; without a reservation,
/// beside 8 onoff processes the router gets about a ninth of the CPU
/// (uncapped, it carried 0.96 Gb/s there, 2026-11-29).
const TCP_RATE: &str = "1.5G";

/// Kills a helper process of ours if it is still running when dropped.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// `cmd` in `role`'s namespace on the generator's CPU.
fn iperf3(l: &Lab, role: Role, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &l.ns(role), "taskset", "-c"])
        .arg(GEN_CPU.to_string())
        .arg("iperf3")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// What `iperf3 -J`'s client said: the receiver's rate in Mb/s and TCP's
/// retransmissions, or iperf3's error.
fn tcp_outcome(json: &str) -> Result<(f64, f64), String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("no report ({e})"))?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(e.to_string());
    }
    let end = v.get("end").ok_or("no end")?;
    let bps = end
        .pointer("/sum_received/bits_per_second")
        .and_then(serde_json::Value::as_f64)
        .ok_or("no receiver's rate")?;
    let retransmits = end
        .pointer("/sum_sent/retransmits")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    Ok((bps / 1e6, retransmits))
}

/// A TCP transfer from the generator's host to the sink's, through the
/// router, while `n` onoff processes run on the DUT.
fn tcp_with_onoffs(l: &Lab, n: usize, reserved: bool, secs: f64) -> Result<Point, BenchError> {
    let addr = std::net::Ipv4Addr::from(S0.ip).to_string();
    let (route, onoffs) = beside_onoffs(l, n, reserved, secs + 1.0)?;
    let _server = Reaped(
        iperf3(l, Role::Sink, &["-s", "-1", "-B", &addr])
            .stdout(Stdio::null())
            .spawn()
            .map_err(missing)?,
    );
    std::thread::sleep(Duration::from_millis(700));
    let t = format!("{secs:.0}");
    let out = iperf3(l, Role::Gen, &["-J", "-c", &addr, "-b", TCP_RATE, "-t", &t])
        .stdout(Stdio::piped())
        .output()
        .map_err(missing)?;
    let onoff_cpu = onoff_share(onoffs)?;
    route.stop();
    let rt: RouterReport = route.finish()?;
    let (mbps, retransmits) = tcp_outcome(&String::from_utf8_lossy(&out.stdout)).map_err(|e| {
        BenchError(format!(
            "iperf3 through the router beside {n} onoff processes: {e}"
        ))
    })?;
    let mut p = Point::xy("onoff_processes", n as f64, "tcp_mbps", mbps);
    p.set("tcp_retransmits", retransmits);
    p.set("onoff_cpu_share", onoff_cpu);
    p.set("router_cpu_s", rt.cpu_s);
    Ok(p)
}

/// Forwarding as a time-shared process against onoff processes, with a
/// reservation (a CPU group of equal weight to theirs) and without: a
/// fixed UDP load (`real-srp-reservation`) and a TCP transfer
/// (`real-srp-tcp`).
pub fn reservation(
    opts: &BenchOpts,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let udp = BenchFile::load("real-srp-reservation")?;
    let tcp = BenchFile::load("real-srp-tcp")?;
    let counts: Vec<f64> = if opts.quick {
        vec![0.0, 2.0, 6.0]
    } else {
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
    };
    let secs = if opts.quick { 2.0 } else { 3.0 };
    // The reservation: the forwarder's group of equal weight to the onoff
    // processes', and its threads' short slice.
    let variants = [("reservation-50", true), ("no-reservation", false)];
    let beside = |n: f64| format!("beside {n} onoff processes");
    let mut sweep = Sweep::over(2 * variants.len(), &counts, beside, progress);
    let (mut udp_series, mut tcp_series) = (Vec::new(), Vec::new());
    for (label, reserved) in variants {
        let what = format!("{label}: forwarding {FORWARD_PPS:.0} pkts/s");
        let trial = |n: f64| forward_with_onoffs(&opts.lab, n as usize, reserved, secs);
        let mut s = Series::new(label);
        s.points = sweep.points(&what, trial)?;
        udp_series.push(s);
        let what = format!("{label}: TCP at {TCP_RATE}b/s (iperf3)");
        let trial = |n: f64| tcp_with_onoffs(&opts.lab, n as usize, reserved, secs);
        let mut s = Series::new(&format!("tcp-{label}"));
        s.points = sweep.points(&what, trial)?;
        tcp_series.push(s);
    }
    rxsched_linux::cgroup::remove(FWD_GROUP);
    rxsched_linux::cgroup::remove(LOAD_GROUP);
    Ok(vec![result(&udp, udp_series), result(&tcp, tcp_series)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check files name the series these benches measure.
    #[test]
    fn the_check_files_name_the_series_measured() {
        let udp = BenchFile::load("real-srp-reservation").unwrap();
        assert_eq!(udp.bench.series, ["reservation-50", "no-reservation"]);
        let tcp = BenchFile::load("real-srp-tcp").unwrap();
        assert_eq!(
            tcp.bench.series,
            ["tcp-reservation-50", "tcp-no-reservation"]
        );
    }

    /// iperf3's report is read for the receiver's rate, and its error said.
    #[test]
    fn iperf3_s_report_and_error_are_read() {
        let ok =
            r#"{"end":{"sum_sent":{"retransmits":3},"sum_received":{"bits_per_second":1.5e9}}}"#;
        assert_eq!(tcp_outcome(ok), Ok((1500.0, 3.0)));
        let err = r#"{"start":{},"error":"unable to connect to server"}"#;
        assert_eq!(tcp_outcome(err), Err("unable to connect to server".into()));
        assert!(tcp_outcome("").is_err());
    }
}
