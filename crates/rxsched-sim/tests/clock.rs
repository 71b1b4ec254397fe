//! The periodic clock interrupt sits above the devices' level, and the
//! DECstation 3000/500 shares the 3000/300's kernel code.

use rxsched_sim::scenario::Loaded;
use rxsched_sim::{run, Profile};

/// A flooded unmodified kernel's receive handler runs for milliseconds at a
/// time (here through the whole traced window); the clock's ticks still
/// start on time inside it (they preempt the handler) rather than waiting
/// for it to return, and the handler goes on between them.
#[test]
fn a_clock_tick_preempts_a_long_receive_handler() {
    let src = "profile = \"dec3000-500-fddi\"\n[kernel]\nkind = \"bsd\"\n[[traffic]]\nrate_pps = 60000\nframe_bytes = 80\n[[process]]\nkind = \"tcpdump\"\n[run]\nduration_ms = 20\nwarmup_ms = 1\n";
    let s = Loaded::parse("clock.toml", src.to_string(), None)
        .unwrap()
        .with(&[])
        .unwrap();
    let p = Profile::load("dec3000-500-fddi", None).unwrap();
    let period = 1_000_000_000 / p.cost.clock_hz;
    let (_, samples) = run(&s, None).unwrap();
    let t = &samples.trace;
    let first_exit = t
        .iter()
        .find(|e| e.step == "isr_exit")
        .map(|e| e.t)
        .unwrap_or(u64::MAX);
    let ticks: Vec<u64> = t
        .iter()
        .filter(|e| e.step == "clock" && !e.end)
        .map(|e| e.t)
        .collect();
    let inside: Vec<u64> = ticks.iter().copied().filter(|&x| x < first_exit).collect();
    assert!(
        inside.len() >= 2,
        "ticks {ticks:?} before the first handler's exit at {first_exit} ns: want at least two"
    );
    for (k, x) in inside.iter().enumerate() {
        assert_eq!(
            x % period,
            0,
            "tick {k} started at {x} ns, not on the clock's {period} ns period"
        );
    }
    // Between two ticks the handler goes on with its packets.
    let between = t
        .iter()
        .filter(|e| e.t > inside[0] && e.t < inside[1] && e.step == "rx_link")
        .count();
    assert!(between > 0, "no packet handled between the first two ticks");
}

/// The 3000/500 profile's costs for code it shares with the 3000/300 are
/// the 3000/300's, scaled by the two machines' SPECint92 (66.2 / 74.3), to
/// the nanosecond: a recalibration of one must be carried to the other.
#[test]
fn the_fddi_monitor_shares_the_3000_300s_calibrated_costs() {
    let a = Profile::load("dec3000-300", None).unwrap().cost;
    let b = Profile::load("dec3000-500-fddi", None).unwrap().cost;
    let scale = 66.2 / 74.3;
    let shared = [
        ("intr_dispatch", a.intr_dispatch, b.intr_dispatch),
        ("intr_exit", a.intr_exit, b.intr_exit),
        ("rx_link", a.rx_link, b.rx_link),
        ("pf_filter", a.pf_filter, b.pf_filter),
        ("capture_read", a.capture_read, b.capture_read),
        ("capture_file", a.capture_file, b.capture_file),
        ("context_switch", a.context_switch, b.context_switch),
        ("poll_intr", a.poll_intr, b.poll_intr),
        ("poll_switch", a.poll_switch, b.poll_switch),
        ("poll_callback", a.poll_callback, b.poll_callback),
        ("intr_enable", a.intr_enable, b.intr_enable),
        ("clock_tick", a.clock_tick, b.clock_tick),
    ];
    for (key, on_300, on_500) in shared {
        let want = (on_300 as f64 * scale).round() as i64;
        assert!(
            (on_500 as i64 - want).abs() <= 1,
            "cost.{key}: the 3000/500 has {on_500} ns, the 3000/300's {on_300} x 66.2/74.3 is {want}"
        );
    }
    assert_eq!(a.clock_hz, b.clock_hz, "the same kernel family's hardclock");
}
