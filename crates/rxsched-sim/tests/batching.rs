//! Interrupt batching in the interrupt-driven kernel, as its record counts
//! it (`rx_interrupts_per_frame`).

use rxsched_sim::run;
use rxsched_sim::scenario::Loaded;

/// The record of one run of scenario `src`.
fn sim(src: String) -> rxsched_sim::Metrics {
    let s = Loaded::parse("batching.toml", src, None)
        .unwrap()
        .with(&[])
        .unwrap();
    run(&s, None).unwrap().0
}

fn monitor(rate: u32) -> rxsched_sim::Metrics {
    sim(format!(
        "profile = \"dec3000-500-fddi\"\n[kernel]\nkind = \"bsd\"\n[[traffic]]\nrate_pps = {rate}\nframe_bytes = 80\n[[process]]\nkind = \"tcpdump\"\n[run]\nduration_ms = 100\nwarmup_ms = 10\n"
    ))
}

fn rx_interrupts_per_frame(rate: u32) -> f64 {
    monitor(rate).extra["rx_interrupts_per_frame"]
}

/// Frames far apart each take an interrupt of their own; frames arriving
/// faster than the handler takes them are taken by the interrupt already
/// in service, so a flood costs a handful of interrupts.
#[test]
fn a_handler_slower_than_its_arrivals_takes_them_in_few_interrupts() {
    let light = rx_interrupts_per_frame(1_000);
    assert!(
        (light - 1.0).abs() < 1e-9,
        "at 1,000 pkts/s: {light} interrupts a frame, want one each"
    );
    let flood = rx_interrupts_per_frame(60_000);
    assert!(
        flood < 0.05,
        "at 60,000 pkts/s, where the handler's 29 µs a frame exceeds the 17 µs between them: {flood} interrupts a frame"
    );
}

/// Between the two, where the handler (29 µs a frame) only just keeps up
/// with frames 33 µs apart, some interrupts take one frame and some take
/// several; the monitor transmits nothing, so every receive interrupt
/// takes at least one, and the measure is the interrupts over the frames.
#[test]
fn a_handler_that_just_keeps_up_takes_some_frames_together() {
    let m = monitor(30_000);
    let got = m.extra["rx_interrupts_per_frame"];
    assert!(
        got > 0.05 && got < 0.95,
        "at 30,000 pkts/s: {got} interrupts a frame, want some batching and some not"
    );
    let counted = m.interrupts.rx as f64 / m.received as f64;
    assert!(
        (got - counted).abs() < 0.01,
        "{got} against {} receive interrupts over {} frames received ({counted})",
        m.interrupts.rx,
        m.received
    );
}

/// Each port's receive handler has its own circuit breaker, which closes
/// on its own timer: a router forwarding 1,000 pkts/s each way with a
/// breaker of 10 packets loses nothing (each ring holds 32 ms of frames
/// against 1 ms off), and neither port is left disabled.
#[test]
fn each_ports_breaker_closes_on_its_own() {
    let src = "profile = \"dec3000-300\"\n[kernel]\nkind = \"bsd\"\nbreaker = { enabled = true, batch = 10, off_us = 1000 }\n[[traffic]]\nport = 0\nrate_pps = 1000\n[[traffic]]\nport = 1\nrate_pps = 1000\n[run]\nduration_ms = 500\nwarmup_ms = 10\n";
    let m = sim(src.to_string());
    let trips = m.inhibits.get("circuit_breaker").copied().unwrap_or(0);
    assert!(
        trips > 50,
        "the breaker tripped {trips} times; the test needs it to trip often"
    );
    let lost: u64 = m.drops.values().sum();
    assert!(
        lost == 0 && m.delivered_pps > 0.95 * 2_000.0,
        "1,000 pkts/s each way: {} forwarded a second, drops {:?}",
        m.delivered_pps,
        m.drops
    );
}
