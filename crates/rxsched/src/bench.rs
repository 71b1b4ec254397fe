//! `rxsched bench real router`: the real dataplane in the lab, swept over
//! offered load, written in the same result format as the simulator's
//! figures (profile `linux-veth`).

use crate::checks::{Bounded, Check, Compare, Rule};
use crate::result::{Axis, Meta, Point, ResultFile, Series};
use rxsched_linux::lab::{self, Lab, Role, D0, DUT_CPU, GEN_CPU};
use rxsched_sim::Metrics;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How to run the benchmark.
#[derive(Debug, Clone)]
pub struct BenchOpts {
    /// Fewer points and shorter trials.
    pub quick: bool,
    /// Where results go.
    pub out: PathBuf,
    /// The lab to use.
    pub lab: Lab,
}

/// The three ways of forwarding compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarder {
    /// Linux's own `ip_forward` in the DUT namespace.
    Kernel,
    /// `rxsched route --mode interrupt`.
    Interrupt,
    /// `rxsched route --mode polling`.
    Polling,
    /// `rxsched route --mode polling --cycle-limit 50`.
    PollingLimit50,
}

impl Forwarder {
    /// The series label in the result files.
    pub fn label(self) -> &'static str {
        match self {
            Forwarder::Kernel => "kernel",
            Forwarder::Interrupt => "interrupt",
            Forwarder::Polling => "polling",
            Forwarder::PollingLimit50 => "polling-cycle-limit-50",
        }
    }
}

/// Something went wrong running a process of the benchmark.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

fn spawn(lab: &Lab, role: Role, args: &[String]) -> Result<Child, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError(format!("cannot find own executable: {e}")))?;
    Command::new("ip")
        .args(["netns", "exec", &lab.ns(role)])
        .arg(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError(format!("ip netns exec {}: {e}", lab.ns(role))))
}

fn finish(child: Child, what: &str) -> Result<Value, BenchError> {
    let out = child
        .wait_with_output()
        .map_err(|e| BenchError(format!("{what}: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).map_err(|_| {
        BenchError(format!(
            "{what} gave no report (exit {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    })
}

fn stop(child: &Child) {
    // SAFETY: signalling a child process this benchmark started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

fn counter(lab: &Lab, role: Role, iface: &str, name: &str) -> u64 {
    lab.exec(
        role,
        "cat",
        &[&format!("/sys/class/net/{iface}/statistics/{name}")],
    )
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0)
}

fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The compute process's progress rate with the DUT idle: its full share.
fn baseline(lab: &Lab, secs: f64) -> Result<f64, BenchError> {
    let c = spawn(
        lab,
        Role::Dut,
        &s(&[
            "spin",
            "--cpu",
            &DUT_CPU.to_string(),
            "--duration",
            &secs.to_string(),
        ]),
    )?;
    let r = finish(c, "spin")?;
    Ok(f(&r, "iterations") / f(&r, "duration_s").max(1e-9))
}

fn s(a: &[&str]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

/// One trial: offered `rate` for `secs`, with the compute process on the DUT CPU.
fn point(
    lab: &Lab,
    series: Forwarder,
    rate: f64,
    secs: f64,
    with_sink: bool,
    base: f64,
) -> Result<Point, BenchError> {
    let io = |e: lab::LabError| BenchError(e.to_string());
    lab.set_kernel_forwarding(series == Forwarder::Kernel)
        .map_err(io)?;
    let dut = DUT_CPU.to_string();
    let mode: &[&str] = match series {
        Forwarder::Kernel => &[],
        Forwarder::Interrupt => &["--mode", "interrupt"],
        Forwarder::Polling => &["--mode", "polling"],
        Forwarder::PollingLimit50 => &["--mode", "polling", "--cycle-limit", "50"],
    };
    let router = if mode.is_empty() {
        None
    } else {
        let mut args = s(&[
            "route",
            "--cpu",
            &dut,
            "--duration",
            &(secs + 5.0).to_string(),
        ]);
        args.extend(s(mode));
        Some(spawn(lab, Role::Dut, &args)?)
    };
    let spin = spawn(
        lab,
        Role::Dut,
        &s(&[
            "spin",
            "--cpu",
            &dut,
            "--duration",
            &(secs + 0.2).to_string(),
        ]),
    )?;
    let sink = if with_sink {
        Some(spawn(
            lab,
            Role::Sink,
            &s(&[
                "sink",
                "--cpu",
                &GEN_CPU.to_string(),
                "--duration",
                &(secs + 4.0).to_string(),
                "--idle",
                "0.5",
            ]),
        )?)
    } else {
        None
    };
    std::thread::sleep(Duration::from_millis(300));
    let rx0 = counter(lab, Role::Sink, "s0", "rx_packets");
    let drops0 = counter(lab, Role::Dut, "d1", "tx_dropped");
    let net0 = lab::cpu_net();
    let dst = if series == Forwarder::Kernel {
        D0.mac
    } else {
        lab::ROUTER_MAC
    };
    let gen = spawn(
        lab,
        Role::Gen,
        &s(&[
            "gen",
            "--cpu",
            &GEN_CPU.to_string(),
            "--rate",
            &rate.to_string(),
            "--duration",
            &secs.to_string(),
            "--dst-mac",
            &dst.to_string(),
        ]),
    )?;
    let g = finish(gen, "gen")?;
    std::thread::sleep(Duration::from_millis(300));
    let rx1 = counter(lab, Role::Sink, "s0", "rx_packets");
    let veth_drops = counter(lab, Role::Dut, "d1", "tx_dropped").saturating_sub(drops0);
    let net1 = lab::cpu_net();
    let sp = finish(spin, "spin")?;
    let sk = match sink {
        Some(c) => Some(finish(c, "sink")?),
        None => None,
    };
    let rt = match router {
        Some(c) => {
            stop(&c);
            Some(finish(c, "route")?)
        }
        None => None,
    };
    let sent = f(&g, "sent") as u64;
    // Delivered: the probes the sink read, or what reached s0 if no sink ran.
    let delivered = sk
        .as_ref()
        .map_or(rx1.saturating_sub(rx0), |k| f(k, "received") as u64)
        .min(sent);
    let dur = f(&g, "duration_s").max(1e-9);
    let mut drops: BTreeMap<String, u64> = BTreeMap::new();
    if let Some(r) = &rt {
        if let Some(o) = r.get("drops").and_then(Value::as_object) {
            for (k, v) in o {
                let n = v.as_u64().unwrap_or(0);
                if n > 0 {
                    drops.insert(k.clone(), n);
                }
            }
        }
    }
    let backlog = net1
        .backlog_drops
        .get(DUT_CPU)
        .copied()
        .unwrap_or(0)
        .saturating_sub(net0.backlog_drops.get(DUT_CPU).copied().unwrap_or(0));
    if backlog > 0 {
        drops.insert("backlog".into(), backlog);
    }
    if veth_drops > 0 {
        drops.insert("output_link".into(), veth_drops);
    }
    // What no counter claims (kernel-internal drops, frames still queued when
    // the router stopped) is reported as such, so that conservation holds.
    let named: u64 = drops.values().sum();
    let rest = sent.saturating_sub(delivered).saturating_sub(named);
    if rest > 0 {
        drops.insert("unattributed".into(), rest);
    }
    let over = (delivered + drops.values().sum::<u64>()).saturating_sub(sent);
    if over > 0 {
        // Counters that overlap (a frame counted at two points) are trimmed
        // from the unattributed remainder first, then from the largest.
        if let Some((_, v)) = drops.iter_mut().max_by_key(|(_, v)| **v) {
            *v -= over.min(*v);
        }
    }
    drops.retain(|_, v| *v > 0);
    // The compute process's share is its progress against its progress on
    // an idle DUT: CPU time alone would flatter it, since interrupt and
    // softirq work that lands while it runs is charged to it.
    let compute = (f(&sp, "iterations") / f(&sp, "duration_s").max(1e-9) / base).clamp(0.0, 1.0);
    let mut cpu = BTreeMap::new();
    cpu.insert("user:compute".to_string(), compute);
    if let Some(r) = &rt {
        cpu.insert(
            "router".to_string(),
            (f(r, "cpu_s") / f(r, "duration_s").max(1e-9)).clamp(0.0, 1.0),
        );
    }
    let mut m = Metrics {
        offered_pps: f(&g, "achieved_pps"),
        delivered_pps: delivered as f64 / dur,
        arrived: sent,
        received: sent,
        delivered,
        in_flight: 0,
        drops,
        cpu,
        wall_ms: dur * 1e3,
        ..Metrics::default()
    };
    if let Some(k) = &sk {
        let l = &k["latency_us"];
        m.latency_us = rxsched_sim::metrics::Latency {
            p50: f(l, "p50"),
            p90: f(l, "p90"),
            p99: f(l, "p99"),
            max: f(l, "max"),
        };
        m.extra.insert("sink_reordered".into(), f(k, "reordered"));
    }
    if let Some(r) = &rt {
        m.mode_switches = f(r, "mode_switches") as u64;
        if let Some(o) = r.get("inhibits").and_then(Value::as_object) {
            m.inhibits = o
                .iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect();
        }
    }
    m.extra.insert("requested_pps".into(), rate);
    m.extra
        .insert("compute_cpu_time_share".into(), f(&sp, "cpu_share"));
    m.extra.insert("gen_waits".into(), f(&g, "waits"));
    m.extra
        .insert("latency_measured".into(), sk.is_some() as u8 as f64);
    m.extra.insert(
        "dut_net_rx_softirqs".into(),
        net1.net_rx
            .get(DUT_CPU)
            .copied()
            .unwrap_or(0)
            .saturating_sub(net0.net_rx.get(DUT_CPU).copied().unwrap_or(0)) as f64,
    );
    Ok(Point::of(&m))
}

/// The polling router's CPU use with no traffic at all.
fn idle_cpu(lab: &Lab, secs: f64) -> Result<f64, BenchError> {
    let c = spawn(
        lab,
        Role::Dut,
        &s(&[
            "route",
            "--mode",
            "polling",
            "--cpu",
            &DUT_CPU.to_string(),
            "--duration",
            &secs.to_string(),
        ]),
    )?;
    let r = finish(c, "route")?;
    Ok(f(&r, "cpu_s") / f(&r, "duration_s").max(1e-9))
}

fn named(name: &str, rule: Rule) -> Check {
    Check {
        name: name.into(),
        metric: None,
        until: None,
        rule,
    }
}

fn labels(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn compare(series: &str, other: &str, min: Option<f64>, max: Option<f64>) -> Compare {
    Compare {
        series: labels(&[series]),
        other: labels(&[other]),
        min,
        max,
    }
}

fn bounded(series: &str, min: Option<f64>, max: Option<f64>) -> Bounded {
    Bounded {
        series: labels(&[series]),
        min,
        max,
    }
}

/// The same check, on another metric than the figure's y.
fn on(metric: &str, mut c: Check) -> Check {
    c.metric = Some(metric.into());
    c
}

fn result(id: &str, title: &str, y: Axis, series: Vec<Series>, checks: Vec<Check>) -> ResultFile {
    let meta = Meta {
        id: id.into(),
        title: title.into(),
        source: "rxsched real dataplane in the lab (REAL.md)".into(),
        profile: "linux-veth".into(),
        seed: 0,
        quick: false,
    };
    let x = Axis::new(
        "offered_pps",
        "Offered rate (achieved by the generator)",
        "pkts/s",
    );
    let mut r = ResultFile::new(meta, x, y, series, Vec::new());
    r.checks = checks.iter().map(|c| c.evaluate(&r)).collect();
    r
}

/// Runs the router benchmark and writes `real-router` and `real-cpu-limit`.
pub fn router(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    let lab = &opts.lab;
    let (rates, secs): (Vec<f64>, f64) = if opts.quick {
        (
            vec![20e3, 100e3, 250e3, 400e3, 550e3, 700e3, 900e3, 1.2e6, 2e6],
            1.0,
        )
    } else {
        (
            vec![
                20e3, 50e3, 100e3, 200e3, 300e3, 400e3, 500e3, 600e3, 700e3, 800e3, 1e6, 1.3e6, 2e6,
            ],
            2.0,
        )
    };
    // The sink runs at every rate. Its packet socket on s0 costs the
    // generator's CPU, but without it the DUT's receive softirqs arrive in
    // much smaller batches (many more RPS IPIs) and the measurement would
    // be of that pathology instead of the router.
    let sink_below = f64::INFINITY;
    progress("measuring the compute process alone");
    let base = baseline(lab, 1.0)?;
    let all = [
        Forwarder::Kernel,
        Forwarder::Interrupt,
        Forwarder::Polling,
        Forwarder::PollingLimit50,
    ];
    let mut series: Vec<Series> = Vec::new();
    let total = all.len() * rates.len();
    let mut done = 0;
    for sr in all {
        let mut s = Series::new(sr.label());
        for &r in &rates {
            done += 1;
            progress(&format!(
                "[{done}/{total}] {} at {:.0} pkts/s",
                sr.label(),
                r
            ));
            s.points
                .push(point(lab, sr, r, secs, r <= sink_below, base)?);
        }
        series.push(s);
    }
    lab.set_kernel_forwarding(false)
        .map_err(|e| BenchError(e.to_string()))?;
    progress("measuring the idle polling router");
    let idle = idle_cpu(lab, 2.0)?;
    let (limit, main): (Vec<Series>, Vec<Series>) = series
        .into_iter()
        .partition(|s| s.label == "polling-cycle-limit-50");
    let polling = main.iter().find(|s| s.label == "polling").cloned();
    let mut idle_series = Series::new("polling-idle");
    let mut idle_point = Point::xy("offered_pps", 0.0, "delivered_pps", 0.0);
    idle_point.set("router_cpu_share", idle);
    idle_point.0.insert("drops".into(), json!({}));
    idle_series.points.push(idle_point);
    idle_series.config.insert(
        "note".into(),
        json!("the polling router with no traffic for 2 s"),
    );
    let mut router_series = main;
    router_series.push(idle_series);
    let r1 = result(
        "real-router",
        "Real forwarding through the DUT: kernel, interrupt-driven and polling receive",
        Axis::new("delivered_pps", "Delivered rate (at the sink)", "pkts/s"),
        router_series,
        vec![
            named(
                "polling at the highest offered rate delivers at least 90% of its MLFRR",
                Rule::LastOverMlfrr(bounded("polling", Some(0.9), None)),
            ),
            named(
                "interrupt-driven receive livelocks: below half its peak at the highest rate",
                Rule::Collapses {
                    series: labels(&["interrupt"]),
                    max: 0.5,
                },
            ),
            named(
                "polling's MLFRR is at least half the kernel's",
                Rule::MlfrrRatio(compare("polling", "kernel", Some(0.5), None)),
            ),
            named(
                "the sweep reaches at least 3 times polling's MLFRR",
                Rule::RangeOverMlfrr(bounded("polling", Some(3.0), None)),
            ),
            on(
                "latency_us.p99",
                named(
                    "at the lowest rate, polling's p99 latency is within 20% of interrupt's",
                    Rule::FirstRatio(compare("polling", "interrupt", None, Some(1.2))),
                ),
            ),
            on(
                "router_cpu_share",
                named(
                    "with no traffic the polling router uses under 1% of a CPU",
                    Rule::Below {
                        series: labels(&["polling-idle"]),
                        max: 0.01,
                        at: None,
                    },
                ),
            ),
        ],
    );
    let mut limit_series = limit;
    if let Some(p) = polling {
        limit_series.push(p);
    }
    let above = |min: f64| Rule::Above {
        series: labels(&["polling-cycle-limit-50"]),
        min,
        at: None,
    };
    let r2 = result(
        "real-cpu-limit",
        "The CPU-cycle limit on real forwarding: the compute process's share",
        Axis::new(
            "cpu.user:compute",
            "CPU share of the compute process (progress / progress when idle)",
            "fraction",
        ),
        limit_series,
        vec![
            on(
                "cpu.user:compute",
                named(
                    "with --cycle-limit 50 the compute process keeps at least 40% of its idle-DUT progress at every rate",
                    above(0.4),
                ),
            ),
            on(
                "compute_cpu_time_share",
                named(
                    "with --cycle-limit 50 the compute process gets at least 40% of the DUT CPU's time at every rate",
                    above(0.4),
                ),
            ),
            on(
                "delivered_pps",
                named(
                    "with --cycle-limit 50 forwarding goes on at every rate",
                    above(1000.0),
                ),
            ),
        ],
    );
    Ok(vec![r1, r2])
}

/// Writes a benchmark's results like `reproduce` does.
pub fn write(out: &Path, results: &[ResultFile]) -> std::io::Result<()> {
    for r in results {
        crate::report::write_all(out, r)?;
    }
    crate::report::write_index(out)
}
