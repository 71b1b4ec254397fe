//! `rxsched bench real srp`: isolation between consumers on real frames.
//! One consumer is flooded at a rising offered rate while a second gets a
//! modest stream (20,000 pkts/s), both on the DUT: `rxsched serve` (SRP's
//! early demultiplexing into per-consumer queues, each consumer a process
//! doing its own protocol work) against two ordinary Linux UDP sockets
//! (`rxsched udp-recv`), whose protocol work the kernel does in its
//! receive path for every datagram before it knows whose it is.

use super::trial::{f, finish, spawn, strings as s, BenchError};
use super::{judged, rates, steady};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{self, Lab, Role, D0, DUT_CPU, GEN_CPU};
use std::time::Duration;

/// The modest consumer's offered rate.
const MODEST_PPS: f64 = 20_000.0;
/// The consumers' UDP ports.
const FLOODED: u16 = 7001;
const MODEST: u16 = 7002;

/// Who receives: SRP's server or the kernel's sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Receiver {
    Srp,
    Linux,
}

impl Receiver {
    fn prefix(self) -> &'static str {
        match self {
            Receiver::Srp => "srp",
            Receiver::Linux => "linux",
        }
    }
}

/// The two generators, flooded and modest, at once on the generator CPU.
fn offer(
    l: &Lab,
    rate: f64,
    secs: f64,
    to_kernel: bool,
) -> Result<(serde_json::Value, serde_json::Value), BenchError> {
    let gen = |r: f64, port: u16| {
        let mut a = s(&[
            "gen",
            "--cpu",
            &GEN_CPU.to_string(),
            "--rate",
            &r.to_string(),
            "--duration",
            &secs.to_string(),
            "--dport",
            &port.to_string(),
        ]);
        if to_kernel {
            a.extend(s(&[
                "--dst-ip",
                "198.18.0.2",
                "--dst-mac",
                &D0.mac.to_string(),
            ]));
        } else {
            a.extend(s(&["--dst-mac", &lab::ROUTER_MAC.to_string()]));
        }
        spawn(l, Role::Gen, &a)
    };
    let flood = gen(rate, FLOODED)?;
    let modest = gen(MODEST_PPS, MODEST)?;
    Ok((finish(flood, "gen")?, finish(modest, "gen")?))
}

/// One point for both consumers: (flooded, modest).
fn run(l: &Lab, who: Receiver, rate: f64, secs: f64) -> Result<(Point, Point), BenchError> {
    l.reset_dut_receive()
        .map_err(|e| BenchError(e.to_string()))?;
    let cpu = DUT_CPU.to_string();
    let dur = (secs + 8.0).to_string();
    let (g, received) = match who {
        Receiver::Srp => {
            let srv = spawn(
                l,
                Role::Dut,
                &s(&[
                    "serve",
                    "-i",
                    D0.iface,
                    "--consumer",
                    &format!("{FLOODED}:flooded"),
                    "--consumer",
                    &format!("{MODEST}:modest"),
                    "--cpu",
                    &cpu,
                    "--duration",
                    &dur,
                ]),
            )?;
            std::thread::sleep(Duration::from_millis(800));
            let g = offer(l, rate, secs, false)?;
            std::thread::sleep(Duration::from_millis(300));
            // SAFETY: signalling a process this benchmark started, by its pid.
            unsafe { libc::kill(srv.id() as i32, libc::SIGINT) };
            let r = finish(srv, "serve")?;
            let got = |i: usize| f(&r["consumers"][i], "received");
            (g, (got(0), got(1)))
        }
        Receiver::Linux => {
            let recv = |port: u16| {
                spawn(
                    l,
                    Role::Dut,
                    &s(&[
                        "udp-recv",
                        "--port",
                        &port.to_string(),
                        "--cpu",
                        &cpu,
                        "--duration",
                        &(secs + 2.0).to_string(),
                    ]),
                )
            };
            let (a, b) = (recv(FLOODED)?, recv(MODEST)?);
            std::thread::sleep(Duration::from_millis(500));
            let g = offer(l, rate, secs, true)?;
            let (a, b) = (finish(a, "udp-recv")?, finish(b, "udp-recv")?);
            (g, (f(&a, "received"), f(&b, "received")))
        }
    };
    let (gf, gm) = g;
    let point = |gen: &serde_json::Value, got: f64| {
        let d = f(gen, "duration_s").max(1e-9);
        let sent = f(gen, "sent");
        let mut p = Point::xy(
            "offered_pps",
            f(&gf, "achieved_pps"),
            "delivered_pps",
            got / d,
        );
        p.set("sent", sent);
        p.set("received", got);
        p.set("kept", if sent > 0.0 { got / sent } else { 0.0 });
        p.set("arrived", sent);
        p.0.insert(
            "drops".into(),
            serde_json::json!({ "not_received": (sent - got).max(0.0) }),
        );
        p
    };
    Ok((point(&gf, received.0), point(&gm, received.1)))
}

/// Runs the isolation benchmark: `real-srp`.
pub fn srp(
    opts: &super::BenchOpts,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-srp")?;
    let l = &opts.lab;
    let (rates, secs) = rates(opts.quick);
    let mut series = Vec::new();
    let total = 2 * rates.len();
    for (i, who) in [Receiver::Srp, Receiver::Linux].into_iter().enumerate() {
        let (mut flooded, mut modest) = (
            Series::new(&format!("{}-flooded", who.prefix())),
            Series::new(&format!("{}-modest", who.prefix())),
        );
        for (j, &r) in rates.iter().enumerate() {
            progress(&format!(
                "[{}/{total}] {} with one consumer flooded at {r:.0} pkts/s",
                i * rates.len() + j + 1,
                who.prefix()
            ));
            let mut pair = None;
            let p = steady(
                || {
                    let (a, b) = run(l, who, r, secs)?;
                    pair = Some(a);
                    Ok(b)
                },
                progress,
            )?;
            modest.points.push(p);
            flooded.points.extend(pair);
        }
        series.push(flooded);
        series.push(modest);
    }
    let a = judged(&file, series);
    Ok(vec![a, reservation(opts, progress)?])
}

/// The forwarding load of the reservation experiment: well under what
/// the router forwards with the CPU to itself.
const FORWARD_PPS: f64 = 200_000.0;
/// The groups: the forwarder's, and everyone else's.
const FWD_GROUP: &str = "rxsched-forward";
const LOAD_GROUP: &str = "rxsched-load";

/// Forwarding through the DUT while `n` onoff processes run there: the
/// router time-shared, in a group of its own (`reserved`) or in the onoff
/// processes' group. Returns the sink's rate.
fn forward_with_onoffs(l: &Lab, n: usize, reserved: bool, secs: f64) -> Result<Point, BenchError> {
    l.reset_dut_receive()
        .map_err(|e| BenchError(e.to_string()))?;
    let cpu = DUT_CPU.to_string();
    let group = if reserved { FWD_GROUP } else { LOAD_GROUP };
    let route = spawn(
        l,
        Role::Dut,
        &s(&[
            "route",
            "--mode",
            "polling",
            "--time-shared",
            "--cpu",
            &cpu,
            "--duration",
            &(secs + 6.0).to_string(),
        ]),
    )?;
    let sink = spawn(
        l,
        Role::Sink,
        &s(&[
            "sink",
            "--cpu",
            &GEN_CPU.to_string(),
            "--duration",
            &(secs + 5.0).to_string(),
            "--idle",
            "0.5",
        ]),
    )?;
    let onoffs = (0..n)
        .map(|_| {
            spawn(
                l,
                Role::Dut,
                &s(&[
                    "onoff",
                    "--cpu",
                    &cpu,
                    "--duration",
                    &(secs + 1.0).to_string(),
                ]),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    // `ip netns exec` execs the program: the children's pids are theirs.
    let join = |name: &str, pid: u32| {
        rxsched_linux::cgroup::attach(name, 1024, pid).map_err(|e| BenchError(e.to_string()))
    };
    join(group, route.id())?;
    // The router's receive work (the DUT's NAPI threads) is the
    // forwarding's too: it goes where the router goes.
    let tids = l
        .in_netns(Role::Dut, || {
            let mut v = rxsched_linux::napi::thread_ids(D0.iface)?;
            v.extend(rxsched_linux::napi::thread_ids(lab::D1.iface)?);
            Ok(v)
        })
        .map_err(|e| BenchError(e.to_string()))?;
    for t in tids {
        rxsched_linux::cgroup::attach_thread(group, 1024, t)
            .map_err(|e| BenchError(e.to_string()))?;
    }
    for o in &onoffs {
        join(LOAD_GROUP, o.id())?;
    }
    std::thread::sleep(Duration::from_millis(700));
    let g = finish(
        spawn(
            l,
            Role::Gen,
            &s(&[
                "gen",
                "--cpu",
                &GEN_CPU.to_string(),
                "--rate",
                &FORWARD_PPS.to_string(),
                "--duration",
                &secs.to_string(),
            ]),
        )?,
        "gen",
    )?;
    let mut onoff_cpu = 0.0;
    for o in onoffs {
        onoff_cpu += f(&finish(o, "onoff")?, "cpu_share");
    }
    let sk = finish(sink, "sink")?;
    super::trial::stop(&route);
    let rt = finish(route, "route")?;
    let dur = f(&g, "duration_s").max(1e-9);
    let sent = f(&g, "sent");
    let got = f(&sk, "received").min(sent);
    let mut p = Point::xy("onoff_processes", n as f64, "delivered_pps", got / dur);
    p.set("offered_pps", f(&g, "achieved_pps"));
    p.set("arrived", sent);
    p.set("onoff_cpu_share", onoff_cpu);
    p.set("router_cpu_s", f(&rt, "cpu_s"));
    p.0.insert(
        "drops".into(),
        serde_json::json!({ "not_delivered": (sent - got).max(0.0) }),
    );
    Ok(p)
}

/// Forwarding as a time-shared process against onoff processes, with a
/// reservation (a CPU group of equal weight to theirs) and without:
/// `real-srp-reservation`.
pub fn reservation(
    opts: &super::BenchOpts,
    progress: &dyn Fn(&str),
) -> Result<ResultFile, BenchError> {
    let file = BenchFile::load("real-srp-reservation")?;
    let counts: Vec<usize> = if opts.quick {
        vec![0, 2, 6]
    } else {
        vec![0, 1, 2, 3, 4, 6, 8]
    };
    let secs = if opts.quick { 2.0 } else { 3.0 };
    let mut series = Vec::new();
    for (label, reserved) in [("reservation-50", true), ("no-reservation", false)] {
        let mut s = Series::new(label);
        for &n in &counts {
            progress(&format!(
                "{label}: forwarding {FORWARD_PPS:.0} pkts/s beside {n} onoff processes"
            ));
            s.points.push(steady(
                || forward_with_onoffs(&opts.lab, n, reserved, secs),
                progress,
            )?);
        }
        series.push(s);
    }
    rxsched_linux::cgroup::remove(FWD_GROUP);
    rxsched_linux::cgroup::remove(LOAD_GROUP);
    Ok(judged(&file, series))
}
