//! Interrupt batching in the interrupt-driven kernel, as its record counts
//! it (`rx_interrupts_per_frame`).

use rxsched_sim::run;
use rxsched_sim::scenario::Loaded;

fn rx_interrupts_per_frame(rate: u32) -> f64 {
    let src = format!(
        "profile = \"dec3000-500-fddi\"\n[kernel]\nkind = \"bsd\"\n[[traffic]]\nrate_pps = {rate}\nframe_bytes = 80\n[[process]]\nkind = \"tcpdump\"\n[run]\nduration_ms = 100\nwarmup_ms = 10\n"
    );
    let s = Loaded::parse("batching.toml", src, None)
        .unwrap()
        .with(&[])
        .unwrap();
    let (m, _) = run(&s, None).unwrap();
    m.extra["rx_interrupts_per_frame"]
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
