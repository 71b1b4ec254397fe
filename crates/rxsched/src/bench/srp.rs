//! `rxsched bench real srp`: isolation between consumers on real frames.
//! One consumer is flooded at a rising offered rate while a second gets a
//! modest stream (20,000 pkts/s), both on the DUT: `rxsched serve` (SRP's
//! early demultiplexing into per-consumer queues, each consumer a process
//! doing its own protocol work) against two ordinary Linux UDP sockets
//! (`rxsched udp-recv`), whose protocol work the kernel does in its
//! receive path for every datagram before it knows whose it is.

use super::trial::{f, finish, spawn, strings as s, BenchError};
use super::{labels, named, on, rates, result, steady};
use crate::checks::{Check, Rule};
use crate::result::{Axis, Point, ResultFile, Series};
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
    Ok(vec![srp_result(series)])
}

fn srp_result(series: Vec<Series>) -> ResultFile {
    let checks: Vec<Check> = vec![
        on(
            "kept",
            named(
                "with SRP the modest consumer keeps at least 95% of its datagrams at every flood rate",
                Rule::Above {
                    series: labels(&["srp-modest"]),
                    min: 0.95,
                    at: None,
                },
            ),
        ),
        named(
            "with SRP the flooded consumer keeps a plateau: at least half its peak past it",
            Rule::Flat {
                series: labels(&["srp-flooded"]),
                min: 0.5,
            },
        ),
        on(
            "kept",
            named(
                "at the highest flood rate the modest consumer keeps at least what the kernel's sockets leave it",
                Rule::LastRatio(super::compare("srp-modest", "linux-modest", Some(1.0), None)),
            ),
        ),
    ];
    result(
        "real-srp",
        "One consumer flooded, one modest (20,000 pkts/s): SRP's early demultiplexing against Linux's UDP sockets",
        Axis::new("delivered_pps", "Datagrams the consumer took", "pkts/s"),
        series,
        checks,
    )
}
