//! The checks of the real benches as they were built in Rust, before they
//! moved into `experiments/real-*.toml`, kept verbatim to show that the
//! files judge the same points the same way.

use super::fixed_points;
use super::{judged, soak, LAB_TRIALS, LATENCY_TRIALS, LOSS_TOLERANCE};
use crate::checks::{Bounded, Check, Compare, CompareAt, Rule};
use crate::experiments::{BenchFile, BENCHES};
use crate::result::{Axis, Meta, ResultFile, Series};

fn named(name: &str, rule: Rule) -> Check {
    Check {
        name: name.into(),
        metric: None,
        until: None,
        claim: None,
        known_miss: None,
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
    let x = Axis::new(
        "offered_pps",
        "Offered rate (achieved by the generator)",
        "pkts/s",
    );
    result_x(id, title, x, y, series, checks)
}

/// [`result`] with another x than the offered rate.
fn result_x(
    id: &str,
    title: &str,
    x: Axis,
    y: Axis,
    series: Vec<Series>,
    checks: Vec<Check>,
) -> ResultFile {
    let meta = Meta {
        id: id.into(),
        title: title.into(),
        source: "rxsched real dataplane in the XDP lab (REAL.md)".into(),
        profile: "linux-veth".into(),
        seed: 0,
        quick: false,
    };
    let mut r = ResultFile::new(meta, x, y, series, Vec::new());
    r.mlfrr_loss = LOSS_TOLERANCE;
    r.checks = checks.iter().map(|c| c.evaluate(&r)).collect();
    r
}

fn router_result(series: Vec<Series>) -> ResultFile {
    result(
        "real-router",
        "Real forwarding through the DUT: kernel, XDP, interrupt-driven and polling receive",
        Axis::new("delivered_pps", "Delivered rate (at the sink)", "pkts/s"),
        series,
        vec![
            named(
                "the sweep reaches at least 3 times polling's MLFRR",
                Rule::RangeOverMlfrr(bounded("polling", Some(3.0), None)),
            ),
            named(
                "polling at the highest offered rate delivers at least 95% of its MLFRR",
                Rule::LastOverMlfrr(bounded("polling", Some(0.95), None)),
            ),
            named(
                "interrupt-driven receive livelocks: at most 10% of its peak at the highest rate",
                Rule::Collapses {
                    series: labels(&["interrupt"]),
                    max: 0.1,
                },
            ),
            named(
                "polling's MLFRR is at least the kernel's",
                Rule::MlfrrRatio(compare("polling", "kernel", Some(1.0), None)),
            ),
            on(
                "router_cpu_share",
                named(
                    "with no traffic the polling router and its receive threads use under 1% of a CPU",
                    Rule::Below {
                        series: labels(&["polling-idle"]),
                        max: 0.01,
                        at: None,
                    },
                ),
            ),
        ],
    )
}

fn cpu_limit_result(series: Vec<Series>) -> ResultFile {
    let above = |min: f64| Rule::Above {
        series: labels(&["polling-cycle-limit-50"]),
        min,
        at: None,
    };
    result(
        "real-cpu-limit",
        "The CPU-cycle limit on real forwarding: the compute process's progress",
        Axis::new(
            "cpu.user:compute",
            "Progress of the compute process (against an idle DUT)",
            "fraction",
        ),
        series,
        vec![
            named(
                "with --cycle-limit 50 the compute process keeps at least 45% of its idle-DUT progress at every rate",
                above(0.45),
            ),
            on(
                "delivered_pps",
                named("with --cycle-limit 50 forwarding goes on at every rate", above(1000.0)),
            ),
        ],
    )
}

/// `real-latency` as `latency_result` built it.
fn latency_result(series: Vec<Series>) -> ResultFile {
    let mut r = result(
        "real-latency",
        "Latency at a tenth of polling's MLFRR: polling against the interrupt-driven baseline",
        Axis::new(
            "latency_us.p99",
            &format!("p99 latency, generator to sink (median of {LATENCY_TRIALS} trials)"),
            "µs",
        ),
        series,
        vec![named(
            &format!("polling's p99 latency is within 10% of the interrupt baseline's (median of {LATENCY_TRIALS} trials each)"),
            Rule::FirstRatio(compare("polling", "interrupt", None, Some(1.1))),
        )],
    );
    r.table = vec![
        "offered_pps".into(),
        "latency_us.p50".into(),
        "latency_us.p99".into(),
        "p99_lowest".into(),
        "p99_highest".into(),
        "dut_steal_share".into(),
    ];
    r
}

/// `real-lab` as `lab` built it.
fn lab_result(series: Vec<Series>) -> ResultFile {
    let mut r = result(
        "real-lab",
        "The lab's own capacity: XDP generator and sink, one core each",
        Axis::new(
            "delivered_pps",
            &format!("Counted by the sink (median of {LAB_TRIALS} trials)"),
            "pkts/s",
        ),
        series,
        vec![
            on(
                "offered_pps",
                named(
                    "the generator offers at least 3 Mpps from one core",
                    Rule::Above {
                        series: labels(&["sink-every-probe", "sink-1-in-8"]),
                        min: 3e6,
                        at: None,
                    },
                ),
            ),
            named(
                "the sink counts at least 3 Mpps on one core (timing one probe in eight)",
                Rule::Above {
                    series: labels(&["sink-1-in-8"]),
                    min: 3e6,
                    at: None,
                },
            ),
        ],
    );
    r.table = vec![
        "offered_pps".into(),
        "delivered_pps".into(),
        "delivered_lowest".into(),
        "delivered_highest".into(),
        "latency_samples".into(),
    ];
    r
}

fn capture_result(series: Vec<Series>) -> ResultFile {
    let mut checks: Vec<Check> = vec![
        named(
            "with feedback, frames written at the highest rate are at least 90% of its loss-free rate",
            Rule::LastOverMlfrr(bounded("rxsched-capture", Some(0.9), None)),
        ),
        named(
            "without feedback the capture collapses: at most 20% of its peak at the highest rate",
            Rule::Collapses { series: labels(&["rxsched-capture-nofeedback"]), max: 0.2 },
        ),
        on(
            "compute_progress",
            named(
                "with --cycle-limit 50 the compute process keeps at least 40% progress at every rate",
                Rule::Above { series: labels(&["rxsched-capture-cycle-limit-50"]), min: 0.4, at: None },
            ),
        ),
    ];
    for peer in ["tcpdump-w", "tshark-w"] {
        for tail in ["", "-file"] {
            let (ours, theirs) = (format!("rxsched-capture{tail}"), format!("{peer}{tail}"));
            checks.push(named(
                &format!(
                    "with feedback we write at least what {theirs} writes at the highest rate"
                ),
                Rule::LastRatio(compare(&ours, &theirs, Some(1.0), None)),
            ));
            // Both write everything at low rates; 2 points of the offered
            // rate is what a host stall costs either (veth's ring overflows).
            checks.push(named(
                &format!("with feedback we write at least the share {theirs} writes at every offered rate (less 2 points)"),
                Rule::AtEveryRate {
                    series: labels(&[&ours]),
                    other: labels(&[&theirs]),
                    tolerance: 0.02,
                },
            ));
        }
    }
    result(
        "real-capture",
        "Capturing everything on the DUT: rxsched capture with and without feedback, tcpdump and tshark",
        Axis::new("delivered_pps", "Frames written to the capture file", "pkts/s"),
        series,
        checks,
    )
}

fn screen_result(series: Vec<Series>) -> ResultFile {
    let checks: Vec<Check> = vec![
        named(
            "with feedback, screened forwarding at the highest rate delivers at least 90% of its MLFRR",
            Rule::LastOverMlfrr(bounded("polling-screend-feedback", Some(0.9), None)),
        ),
        named(
            "interrupt-driven screened forwarding livelocks: at most 20% of its peak at the highest rate",
            Rule::Collapses {
                series: labels(&["interrupt-screend"]),
                max: 0.2,
            },
        ),
        named(
            "polling without feedback livelocks at the screening queue: at most 20% of its peak at the highest rate",
            Rule::Collapses {
                series: labels(&["polling-screend"]),
                max: 0.2,
            },
        ),
    ];
    result(
        "real-screen",
        "Forwarding through a screening process on the DUT: interrupt, polling, polling with feedback, and the kernel with nftables",
        Axis::new("delivered_pps", "Delivered rate (at the sink)", "pkts/s"),
        series,
        checks,
    )
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
                Rule::LastRatio(compare("srp-modest", "linux-modest", Some(1.0), None)),
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

fn reservation_result(series: Vec<Series>) -> ResultFile {
    let checks = vec![
        named(
            "with a reservation forwarding keeps at least 90% of its rate beside any number of onoff processes",
            Rule::Flat {
                series: labels(&["reservation-50"]),
                min: 0.9,
            },
        ),
        named(
            "without one it falls: under 80% of its peak beside the most onoff processes",
            Rule::Collapses {
                series: labels(&["no-reservation"]),
                max: 0.8,
            },
        ),
    ];
    result_x(
        "real-srp-reservation",
        "Forwarding 200,000 pkts/s as a time-shared process beside onoff processes, with and without a CPU reservation (CFS group weights)",
        Axis::new("onoff_processes", "onoff processes on the DUT CPU", ""),
        Axis::new("delivered_pps", "Forwarded (at the sink)", "pkts/s"),
        series,
        checks,
    )
}

fn below(metric: &str, name: &str, max: f64) -> Check {
    on(
        metric,
        named(
            name,
            Rule::Below {
                series: labels(&["polling"]),
                max,
                at: None,
            },
        ),
    )
}

fn soak_result(series: Series, minutes: f64) -> ResultFile {
    // Memory is judged once the router has settled (the first 5% of the run).
    let settled = minutes * 0.05;
    let checks: Vec<Check> = vec![
        named(
            "the router's resident memory stays flat: within 10% of its mean once settled",
            Rule::Stable {
                series: labels(&["polling"]),
                max: 0.10,
                at: Some(settled),
                relative: true,
            },
        ),
        on(
            "offered_over_forwarded",
            named(
                "the generator offers at least 3x what the router forwards (so at least 3x its MLFRR)",
                Rule::Above {
                    series: labels(&["polling"]),
                    min: 3.0,
                    at: None,
                },
            ),
        ),
        below(
            "router_unaccounted",
            "every frame the router took is forwarded, dropped at a named point or in flight",
            0.0,
        ),
        below(
            "unattributed_share",
            "at most 0.1% of the frames sent are lost where no counter says",
            0.001,
        ),
        below(
            "leftover_processes",
            "no process is left in the lab's namespaces",
            0.0,
        ),
        below(
            "leftover_xdp_programs",
            "no XDP program is left on the lab's devices",
            0.0,
        ),
        below("lab_problems", "the lab is whole afterwards", 0.0),
    ];
    result_x(
        "real-soak",
        "Soak: the polling router flooded at the generator's top rate",
        Axis::new("minutes", "Time", "min"),
        Axis::new("rss_kib", "Router resident memory", "KiB"),
        vec![series],
        checks,
    )
}

fn cmp(series: &str, other: &str, min: f64, max: Option<f64>) -> Compare {
    Compare {
        series: labels(&[series]),
        other: labels(&[other]),
        min: Some(min),
        max,
    }
}

fn two_level_result(series: Vec<Series>) -> ResultFile {
    let checks: Vec<Check> = vec![
        on(
            "latency_p50_us",
            named(
                "at low load (first step) two-level's median latency is within 10% of interrupt mode's",
                Rule::FirstRatio(cmp("two-level", "interrupt", 0.0, Some(1.1))),
            ),
        ),
        named(
            "at high load, once switched, two-level forwards within 5% of polling mode",
            Rule::PointRatio(CompareAt {
                series: labels(&["two-level"]),
                other: labels(&["polling"]),
                at: 1.0,
                min: Some(0.95),
                max: None,
            }),
        ),
        on(
            "two_level_switches",
            named(
                "two-level switches once each way: up to polling and back",
                Rule::Below {
                    series: labels(&["two-level"]),
                    max: 2.0,
                    at: None,
                },
            ),
        ),
        on(
            "two_level_switches",
            named(
                "two-level switches once each way (at least two switches)",
                Rule::Above {
                    series: labels(&["two-level"]),
                    min: 2.0,
                    at: None,
                },
            ),
        ),
    ];
    result_x(
        "real-two-level",
        "Load stepping up and down through the two-level router, against interrupt and polling",
        Axis::new("step", "Load step (low, top rate, low)", ""),
        Axis::new(
            "delivered_pps",
            "Delivered (at the sink, end of each step)",
            "pkts/s",
        ),
        series,
        checks,
    )
}

/// The result the Rust-built checks made of `series`.
fn old(id: &str, series: Vec<Series>, minutes: f64) -> ResultFile {
    match id {
        "real-router" => router_result(series),
        "real-cpu-limit" => cpu_limit_result(series),
        "real-latency" => latency_result(series),
        "real-lab" => lab_result(series),
        "real-capture" => capture_result(series),
        "real-screen" => screen_result(series),
        "real-srp" => srp_result(series),
        "real-srp-reservation" => reservation_result(series),
        "real-soak" => soak_result(series.into_iter().next().expect("one series"), minutes),
        "real-two-level" => two_level_result(series),
        _ => panic!("{id}: no Rust-built checks"),
    }
}

/// The result the check file makes of `series`, as the bench makes it.
fn new(id: &str, series: Vec<Series>, minutes: f64) -> ResultFile {
    let mut file = BenchFile::load(id).unwrap();
    if id == "real-soak" {
        soak::settle_at(&mut file, minutes);
    }
    judged(&file, series)
}

/// On the same points, the checks in `experiments/real-*.toml` give
/// exactly the result (title, axes, table, every verdict and its numbers)
/// the checks built in Rust gave.
#[test]
fn the_check_files_judge_as_the_rust_checks_did() {
    let mut verdicts = (0, 0);
    for (id, _) in BENCHES {
        let file = BenchFile::load(id).unwrap();
        for seed in 0..40u64 {
            let minutes = [0.5, 3.0, 10.0][seed as usize % 3];
            let series = fixed_points::series(&file, seed);
            let a = serde_json::to_string_pretty(&old(id, series.clone(), minutes)).unwrap();
            let b = new(id, series, minutes);
            verdicts.0 += b.checks.iter().filter(|c| c.pass).count();
            verdicts.1 += b.checks.iter().filter(|c| !c.pass).count();
            assert_eq!(
                a,
                serde_json::to_string_pretty(&b).unwrap(),
                "{id}, seed {seed}"
            );
        }
    }
    // The points made both verdicts, plenty of each.
    assert!(verdicts.0 > 300 && verdicts.1 > 300, "{verdicts:?}");
}
