//! The lab host (`kernel.kind = "lab"`): conservation, determinism, and
//! the mechanisms its predictions rest on: where each forwarder's frames
//! die under overload, the polling thread holding its receive work off,
//! and M4 leaving the compute process its share.

use proptest::prelude::*;
use rxsched_sim::scenario::Loaded;
use rxsched_sim::{run, Metrics};

const BASE: &str = "profile = \"linux-veth-lab\"\n\
    [kernel]\nkind = \"lab\"\nquota = 32\n\
    [[traffic]]\nrate_pps = 100000\n\
    [[process]]\nkind = \"compute\"\n\
    [run]\nduration_ms = 200\nwarmup_ms = 20\n";

fn lab(sets: &[(&str, String)]) -> Metrics {
    let l = Loaded::parse("test.toml", BASE.to_string(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| rxsched_sim::scenario::parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    run(&l.with(&sets).unwrap(), None).unwrap().0
}

fn at(fwd: &str, rate: f64) -> Metrics {
    lab(&[
        ("lab.forwarder", format!("\"{fwd}\"")),
        ("traffic.rate_pps", rate.to_string()),
    ])
}

fn drops(m: &Metrics, point: &str) -> u64 {
    m.drops.get(point).copied().unwrap_or(0)
}

const FORWARDERS: [&str; 5] = [
    "kernel",
    "xdp-fwd",
    "interrupt",
    "polling",
    "polling-in-xdp",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Every frame is delivered, on a ring, in a batch under way, or
    /// dropped at a named point; CPU shares sum to one.
    #[test]
    fn conservation(
        fwd in prop::sample::select(FORWARDERS.to_vec()),
        rate in 0.0f64..4e6,
        limit in any::<bool>(),
    ) {
        let m = lab(&[
            ("lab.forwarder", format!("\"{fwd}\"")),
            ("traffic.rate_pps", rate.to_string()),
            ("kernel.cycle_limit.enabled", limit.to_string()),
        ]);
        prop_assert_eq!(m.arrived, m.delivered + m.drops.values().sum::<u64>() + m.in_flight);
        let cpu: f64 = m.cpu.values().sum();
        prop_assert!((cpu - 1.0).abs() < 1e-6, "CPU shares sum to {}", cpu);
    }
}

#[test]
fn the_same_scenario_gives_the_same_record() {
    for fwd in FORWARDERS {
        let (a, b) = (at(fwd, 700e3), at(fwd, 700e3));
        assert_eq!(a, b, "{fwd}");
    }
}

/// Polling: under overload frames die on the device's ring, before any
/// work, never on the socket's ring; the interrupt mode's die on the
/// socket's ring after the receive work was spent on them, and its
/// forwarding collapses.
#[test]
fn overload_drops_before_work_under_polling_and_after_it_under_interrupts() {
    let p = at("polling", 4e6);
    assert!(drops(&p, "nic_rx_ring") > 0, "{:?}", p.drops);
    assert_eq!(drops(&p, "xsk_rx_ring"), 0, "{:?}", p.drops);
    let i = at("interrupt", 4e6);
    assert!(drops(&i, "xsk_rx_ring") > 0, "{:?}", i.drops);
    let peak = [50e3, 100e3, 200e3]
        .map(|r| at("interrupt", r).delivered_pps)
        .into_iter()
        .fold(0.0, f64::max);
    assert!(
        i.delivered_pps < 0.5 * peak && p.delivered_pps > 2.0 * i.delivered_pps,
        "interrupt {:.0} at 4 Mpps against its peak {peak:.0}; polling {:.0}",
        i.delivered_pps,
        p.delivered_pps
    );
}

/// At a low rate every forwarder keeps up, and its receive work runs about
/// as often as the generator's batches arrive.
#[test]
fn at_a_low_rate_everything_is_forwarded() {
    for fwd in FORWARDERS {
        let m = at(fwd, 20e3);
        let ratio = m.delivered_pps / m.offered_pps;
        assert!(ratio > 0.99, "{fwd}: {ratio}");
        let runs = m.extra["napi_runs_per_s"];
        assert!((5e3..2e4).contains(&runs), "{fwd}: {runs} NAPI runs/s");
    }
}

/// The generator's batches come at random, so one that finds the NAPI
/// thread awake does not wake it: the busier the thread, the fewer its
/// runs, about the batches a second times the share of time it sleeps
/// (the interrupt router's NAPI thread: measured 14,700 runs a second at
/// 49,000 pkts/s, 3,900 at 956,000). Evenly spaced batches would wake it
/// once each until it is busy all the time, and this fails.
#[test]
fn a_busier_napi_thread_runs_fewer_times() {
    let batches = rxsched_sim::profile::Profile::load("linux-veth-lab", None)
        .unwrap()
        .lab
        .unwrap()
        .gen_batches_per_s as f64;
    let runs = |rate: f64| {
        let m = at("interrupt", rate);
        (
            m.extra["napi_runs_per_s"],
            m.cpu["napi"] + m.cpu["interrupt"],
        )
    };
    let (low, _) = runs(50e3);
    // The first rate at which the receive work keeps the CPU busy 60% of
    // the time (where depends on the profile's costs).
    let (rate, high, busy) = [0.9e6, 1.2e6, 1.5e6, 2e6]
        .into_iter()
        .map(|r| {
            let (n, b) = runs(r);
            (r, n, b)
        })
        .find(|&(_, _, b)| b >= 0.6)
        .expect("the interrupt baseline's receive work fills 60% of the CPU by 2 Mpps");
    assert!(
        high < 0.75 * low,
        "NAPI runs: {low:.0} at 50k, {high:.0} at {rate:.0} (busy {busy:.2})"
    );
    let expected = batches * (1.0 - busy);
    assert!(
        (high / expected - 1.0).abs() < 0.3,
        "{high:.0} runs at {rate:.0} where {batches:.0} batches a second find the thread \
         asleep {:.2} of the time: {expected:.0}",
        1.0 - busy
    );
}

/// M4 at 50%: the compute process keeps about half the CPU however hard
/// the flood, where without it the router and its receive work take it.
#[test]
fn the_cycle_limit_leaves_the_compute_process_its_share() {
    for fwd in ["polling", "polling-in-xdp"] {
        let with = lab(&[
            ("lab.forwarder", format!("\"{fwd}\"")),
            ("traffic.rate_pps", "4e6".into()),
            ("kernel.cycle_limit.enabled", "true".into()),
        ]);
        let compute = with.cpu["user:compute"];
        assert!((0.4..0.65).contains(&compute), "{fwd}: compute {compute}");
        assert!(with.delivered_pps > 1e4, "{fwd}: {}", with.delivered_pps);
        assert!(
            with.inhibits.values().sum::<u64>() > 0,
            "{fwd}: {:?}",
            with.inhibits
        );
    }
    let without = at("polling", 4e6).cpu["user:compute"];
    assert!(without < 0.2, "compute without the limit {without}");
}

/// What M4 holds to its share is what the real router's input charges:
/// the threads' CPU and `wake` for each wake-up of the router's thread
/// (each follows one of the NAPI thread's, and the pair is charged once);
/// the in-XDP router's thread wakes only to look, so there each NAPI run
/// is charged as well. Where the limit binds (the polling router from the
/// lowest rates, each frame waking both; the in-XDP router, whose frames
/// cost less, from a few hundred thousand a second), the charged share
/// comes to the limit only when counted that way.
#[test]
fn m4_charges_the_wake_ups_the_real_router_charges() {
    let wake = 9003e-9;
    for (fwd, rate, napi_charged) in [
        ("polling", "25000", false),
        ("polling-in-xdp", "400000", true),
    ] {
        let m = lab(&[
            ("lab.forwarder", format!("\"{fwd}\"")),
            ("traffic.rate_pps", rate.into()),
            ("kernel.cycle_limit.enabled", "true".into()),
            ("run.duration_ms", "1000".into()),
        ]);
        let threads = m.cpu["router"] + m.cpu["napi"];
        let (router, napi) = (m.extra["router_runs_per_s"], m.extra["napi_runs_per_s"]);
        let charged =
            |napi_too: bool| threads + wake * (router + if napi_too { napi } else { 0.0 });
        let (as_real, other) = (charged(napi_charged), charged(!napi_charged));
        assert!(
            (0.43..0.53).contains(&as_real),
            "{fwd}: threads {threads:.3}, {router:.0} router and {napi:.0} NAPI runs a second: \
             charged {as_real:.3} (the other count {other:.3})"
        );
        assert!(
            (as_real - other).abs() > 0.05,
            "{fwd}: the two counts differ by {:.3}",
            (as_real - other).abs()
        );
    }
}

/// M4's own accounting (`router_charge`: the router reading the clocks it
/// charges) costs the polling router at each of its runs, with the cycle
/// limit on and only then: its CPU rises by about its runs times the cost.
/// (The limit at 100%, so that it never binds and the runs stay put.)
#[test]
fn the_cycle_limits_accounting_costs_the_router_each_run() {
    let text = rxsched_sim::profile::BUILTIN
        .iter()
        .find(|(n, _)| *n == "linux-veth-lab")
        .map(|(_, src)| src.to_string())
        .unwrap();
    let charge = "router_charge = ";
    let at = text.find(charge).unwrap() + charge.len();
    let end = at + text[at..].find(|c: char| !c.is_ascii_digit()).unwrap();
    let dir = std::env::temp_dir().join(format!("rxsched-charge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let router = |cost: u64, limit: bool| {
        let path = dir.join(format!("p{cost}.toml"));
        std::fs::write(&path, format!("{}{cost}{}", &text[..at], &text[end..])).unwrap();
        let src = BASE.replace(
            "\"linux-veth-lab\"",
            &format!("{:?}", path.display().to_string()),
        );
        let l = Loaded::parse("test.toml", src, None).unwrap();
        let sets = [
            "traffic.rate_pps=20000".to_string(),
            format!("kernel.cycle_limit.enabled={limit}"),
            "kernel.cycle_limit.percent=100".to_string(),
        ]
        .map(|s| rxsched_sim::scenario::parse_set(&s).unwrap());
        let m = run(&l.with(&sets).unwrap(), None).unwrap().0;
        (m.cpu["router"], m.extra["router_runs_per_s"])
    };
    let (base, runs) = router(0, true);
    let (charged, _) = router(20_000, true);
    let added = (charged - base) / (runs * 20e-6);
    assert!(
        (0.8..1.25).contains(&added),
        "router CPU {base:.3} -> {charged:.3} at {runs:.0} runs a second: {added:.2} of 20 us a run"
    );
    let (off0, _) = router(0, false);
    let (off1, _) = router(20_000, false);
    assert_eq!(off0, off1, "without M4 the accounting is not run");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile without the costs the chosen forwarder reads is refused,
/// naming them.
#[test]
fn a_profile_without_the_lab_costs_is_refused() {
    let src = BASE.replace("linux-veth-lab", "dec3000-300");
    let e = match Loaded::parse("test.toml", src, None).and_then(|l| l.with(&[])) {
        Ok(s) => run(&s, None).unwrap_err().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("[lab]"), "{e}");
}

/// The lab host's valid forms with a stage behind the router (the
/// screening process, the monitor's writer) or rules in the receive work:
/// (forwarder, lab.screen, M3).
const SCREENED: [(&str, &str, bool); 10] = [
    ("interrupt", "process", false),
    ("polling", "process", false),
    ("polling", "process", true),
    ("polling-in-xdp", "program", false),
    ("kernel", "program", false),
    ("polling", "none", false),
    ("capture-copy", "none", true),
    ("capture-copy", "none", false),
    ("capture-take", "none", true),
    ("capture-take", "none", false),
];

fn screened(fwd: &str, screen: &str, feedback: bool, queue: u32, rate: f64) -> Metrics {
    lab(&[
        ("lab.forwarder", format!("\"{fwd}\"")),
        ("lab.screen", format!("\"{screen}\"")),
        ("lab.screen_queue", queue.to_string()),
        ("lab.filter_queue", queue.to_string()),
        ("kernel.feedback.enabled", feedback.to_string()),
        ("traffic.rate_pps", rate.to_string()),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// With a screening process or rules in the receive work, every frame
    /// is still delivered, queued somewhere, or dropped at a named point.
    #[test]
    fn conservation_with_screening(
        form in prop::sample::select(SCREENED.to_vec()),
        queue in 1u32..2048,
        rate in 0.0f64..4e6,
    ) {
        let (fwd, screen, feedback) = form;
        let m = screened(fwd, screen, feedback, queue, rate);
        prop_assert_eq!(m.arrived, m.delivered + m.drops.values().sum::<u64>() + m.in_flight);
        let cpu: f64 = m.cpu.values().sum();
        prop_assert!((cpu - 1.0).abs() < 1e-6, "CPU shares sum to {}", cpu);
    }
}

/// Mogul & Ramakrishnan's screend on the lab host: without feedback the
/// polling router fills the screening queue and the process starves, its
/// frames dying at the queue after the router's work; with M3 on the same
/// 32-frame queue the router stops taking input instead, the frames die
/// on the device's ring before any work, and forwarding holds up.
#[test]
fn screening_without_feedback_livelocks_and_feedback_moves_the_drops_before_the_work() {
    let peak = |fb: bool| {
        [50e3, 100e3, 200e3]
            .iter()
            .map(|&r| screened("polling", "process", fb, 32, r).delivered_pps)
            .fold(0.0, f64::max)
    };
    let none = screened("polling", "process", false, 32, 4e6);
    assert!(
        none.delivered_pps < 0.2 * peak(false),
        "without feedback: {} at 4 Mpps, peak {}",
        none.delivered_pps,
        peak(false)
    );
    assert!(
        drops(&none, "screen_queue") > drops(&none, "nic_rx_ring") / 10,
        "{:?}",
        none.drops
    );
    let fb = screened("polling", "process", true, 32, 4e6);
    assert!(
        fb.delivered_pps > 0.8 * peak(true),
        "with feedback: {} at 4 Mpps, peak {}",
        fb.delivered_pps,
        peak(true)
    );
    assert_eq!(drops(&fb, "screen_queue"), 0, "{:?}", fb.drops);
    assert!(fb.inhibits.get("queue_feedback").copied().unwrap_or(0) > 0);
    // The screening process and the compute process share what is left.
    assert!(
        fb.cpu["screen"] > 0.1 && fb.cpu["user:compute"] > 0.1,
        "{:?}",
        fb.cpu
    );
}

/// Screening where the host has nothing to screen with is refused, naming
/// the key.
#[test]
fn a_screen_the_forwarder_cannot_run_is_refused() {
    let l = Loaded::parse("test.toml", BASE.to_string(), None).unwrap();
    for (sets, key) in [
        (
            vec!["lab.forwarder=\"kernel\"", "lab.screen=\"process\""],
            "lab.screen",
        ),
        (
            vec!["lab.forwarder=\"xdp-fwd\"", "lab.screen=\"program\""],
            "lab.screen",
        ),
        (
            vec!["kernel.feedback.enabled=true"],
            "kernel.feedback.enabled",
        ),
    ] {
        let sets: Vec<_> = sets
            .iter()
            .map(|s| rxsched_sim::scenario::parse_set(s).unwrap())
            .collect();
        let e = l.with(&sets).unwrap_err();
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
    }
}

/// The monitor on the lab host: taking the frames without feedback, its
/// polling thread fills the packet-filter queue and the writer starves;
/// with feedback it writes at the highest rate nearly what it writes at
/// its peak. Copying, what it cannot copy dies uncopied (`copy_ring`)
/// before the copy's work, and the queue never overflows.
#[test]
fn the_monitor_needs_feedback_to_write_under_overload() {
    let peak = |fwd: &str, fb: bool| {
        [50e3, 100e3, 200e3, 400e3]
            .iter()
            .map(|&r| screened(fwd, "none", fb, 1024, r).delivered_pps)
            .fold(0.0, f64::max)
    };
    let none = screened("capture-take", "none", false, 1024, 4e6);
    assert!(
        none.delivered_pps < 0.2 * peak("capture-take", false),
        "taking without feedback: {} at 4 Mpps, peak {}",
        none.delivered_pps,
        peak("capture-take", false)
    );
    assert!(drops(&none, "filter_queue") > 0, "{:?}", none.drops);
    let fb = screened("capture-take", "none", true, 1024, 4e6);
    assert!(
        fb.delivered_pps > 0.8 * peak("capture-take", true),
        "taking with feedback: {} at 4 Mpps, peak {}",
        fb.delivered_pps,
        peak("capture-take", true)
    );
    assert_eq!(drops(&fb, "filter_queue"), 0, "{:?}", fb.drops);
    let copy = screened("capture-copy", "none", true, 1024, 4e6);
    assert_eq!(drops(&copy, "filter_queue"), 0, "{:?}", copy.drops);
    assert!(
        copy.delivered_pps > 0.0 && copy.cpu["writer"] > 0.0,
        "{:?}",
        copy.cpu
    );
}

/// A thread pays its run's cost each time it is put on the CPU, woken or
/// coming back after a preemption, as `calibrate --real` reads runs (the
/// thread's runs in `/proc/TID/schedstat`) and fits its costs to them: at
/// a rate where the polling router preempts the receive work at most of
/// its polls, and the receive work the interrupt router, each thread's CPU
/// is its runs times its run plus its frames times its cost per frame.
/// Charged only when it woke from sleep (before 0.42), the receive work
/// beside the polling router came to 0.80 of that at 498,000 pkts/s.
#[test]
fn a_run_is_paid_each_time_the_thread_is_put_on_the_cpu() {
    let lab = rxsched_sim::profile::Profile::load("linux-veth-lab", None)
        .unwrap()
        .lab
        .unwrap();
    // A thread's CPU over its runs times its run plus its frames times
    // its cost per frame.
    let paid = |m: &Metrics, thread: &str, runs: &str, run: u64, frames: f64, per_frame: u64| {
        m.cpu[thread] * 1e9 / (m.extra[runs] * run as f64 + frames * per_frame as f64)
    };
    let p = at("polling", 500e3);
    // Under 1% lost: every frame arrived is a frame the receive work took.
    assert!(p.drops.values().sum::<u64>() * 100 < p.arrived.max(1));
    let i = at("interrupt", 200e3);
    for (what, ratio) in [
        (
            "polling's receive work",
            paid(
                &p,
                "napi",
                "napi_runs_per_s",
                lab.napi_xsk_run,
                p.offered_pps,
                lab.napi_xsk_redirect,
            ),
        ),
        (
            "the interrupt router",
            paid(
                &i,
                "router",
                "router_runs_per_s",
                lab.router_interrupt_run,
                i.delivered_pps,
                lab.router_interrupt,
            ),
        ),
    ] {
        assert!(
            (ratio - 1.0).abs() < 0.03,
            "{what}: {ratio:.3} of runs x run + frames x cost"
        );
    }
}

/// The interrupt router at `rate` on the committed lab profile with
/// `add` ns more on each of the costs named.
fn interrupt_with(rate: f64, add: &[(&str, u64)]) -> Metrics {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/linux-veth-lab.toml"
    );
    let mut text = std::fs::read_to_string(path).unwrap();
    for (key, more) in add {
        let at = text.find(&format!("\n{key} = ")).expect(key) + 1;
        let end = at + text[at..].find('\n').unwrap();
        let line = &text[at..end];
        let value: u64 = line
            .split('=')
            .nth(1)
            .unwrap()
            .split('#')
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        text.replace_range(at..end, &format!("{key} = {}", value + more));
    }
    let dir = std::env::temp_dir().join(format!("rxsched-lab-costs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("p{}.toml", add.len()));
    std::fs::write(&file, text).unwrap();
    let src = BASE.replace(
        "\"linux-veth-lab\"",
        &format!("{:?}", file.display().to_string()),
    );
    let l = Loaded::parse("test.toml", src, None).unwrap();
    let sets = [
        rxsched_sim::scenario::parse_set("lab.forwarder=\"interrupt\"").unwrap(),
        rxsched_sim::scenario::parse_set(&format!("traffic.rate_pps={rate}")).unwrap(),
    ];
    let m = run(&l.with(&sets).unwrap(), None).unwrap().0;
    std::fs::remove_file(&file).ok();
    m
}

/// Beside the interrupt router the receive work pays its own cost per
/// frame redirected into the socket (`napi_xsk_interrupt`, which
/// `calibrate --real` measures beside that router), not the one measured
/// beside the busy polling router (`napi_xsk_redirect`): below the peak,
/// where every frame goes into the socket, 500 ns more on the first is
/// 500 ns more of the receive work's CPU a frame, and 500 ns more on the
/// second moves nothing.
#[test]
fn beside_the_interrupt_router_the_receive_work_pays_its_own_cost_per_frame() {
    let rate = 100e3;
    let base = interrupt_with(rate, &[]);
    assert!(
        base.delivered_pps > 0.99 * rate,
        "below the peak: {}",
        base.delivered_pps
    );
    let own = interrupt_with(rate, &[("napi_xsk_interrupt", 500)]);
    let other = interrupt_with(rate, &[("napi_xsk_redirect", 500)]);
    let lab = rxsched_sim::profile::Profile::load("linux-veth-lab", None)
        .unwrap()
        .lab
        .unwrap();
    // A busier receive work runs, and wakes the router, fewer times (the
    // generator's batches come at random): those runs' costs come off.
    let fewer = |key: &str| (own.extra[key] - base.extra[key]) * 1e-9;
    let more = own.cpu["napi"] - base.cpu["napi"];
    let want = 500e-9 * base.delivered_pps
        + fewer("napi_runs_per_s") * lab.napi_xsk_run as f64
        + fewer("router_runs_per_s") * lab.napi_xsk_wake as f64;
    assert!(
        (more - want).abs() < 0.1 * want,
        "500 ns more a frame: the receive work's CPU {:.4} -> {:.4} (+{more:.4}), want +{want:.4} \
         (runs {} -> {})",
        base.cpu["napi"],
        own.cpu["napi"],
        base.extra["napi_runs_per_s"],
        own.extra["napi_runs_per_s"]
    );
    assert!(
        (other.cpu["napi"] - base.cpu["napi"]).abs() < 1e-9,
        "napi_xsk_redirect moved the interrupt router's receive work: {:.4} -> {:.4}",
        base.cpu["napi"],
        other.cpu["napi"]
    );
}

/// A wake-up from outside the CPU costs `wake` only when it interrupts
/// the compute process: the router's and the receive work's costs were
/// read from their own CPU time, interrupts included, so with no compute
/// process the CPU loses nothing beside them; with one, what it loses is
/// at most a `wake` for each of the NAPI thread's wake-ups and a fair
/// part of that.
#[test]
fn a_wake_up_costs_only_the_compute_process_it_interrupts() {
    let run_on = |src: String| {
        let l = Loaded::parse("test.toml", src, None).unwrap();
        let sets = [rxsched_sim::scenario::parse_set("lab.forwarder=\"interrupt\"").unwrap()];
        run(&l.with(&sets).unwrap(), None).unwrap().0
    };
    let wake = rxsched_sim::profile::Profile::load("linux-veth-lab", None)
        .unwrap()
        .lab
        .unwrap()
        .wake as f64;
    let interrupts = |m: &Metrics| m.cpu.get("interrupt").copied().unwrap_or(0.0);
    let alone = run_on(BASE.replace("[[process]]\nkind = \"compute\"\n", ""));
    assert!(
        alone.delivered_pps > 0.99 * 100e3,
        "{}",
        alone.delivered_pps
    );
    assert_eq!(interrupts(&alone), 0.0, "{:?}", alone.cpu);
    let beside = run_on(BASE.to_string());
    let most = beside.extra["napi_runs_per_s"] * wake / 1e9;
    let lost = interrupts(&beside);
    assert!(
        lost > 0.2 * most && lost <= most * 1.001,
        "the compute process lost {lost:.4} of the CPU; the NAPI thread's wake-ups at \
         {wake} ns each come to {most:.4}"
    );
}
