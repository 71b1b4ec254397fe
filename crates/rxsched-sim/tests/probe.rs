//! A measuring kernel's probe on the interrupt handler's return
//! (`kernel.intr_return_probe_ns`): Mogul & Ramakrishnan's figure 7-6 kernel
//! pays it on the interrupt-driven path only.

use rxsched_sim::scenario::{parse_set, Loaded};
use rxsched_sim::{run, Metrics, Samples};

const BSD: &str = "profile = \"dec3000-300\"\n[kernel]\nkind = \"bsd\"\nip_layer = \"thread\"\n[[traffic]]\nkind = \"constant\"\nrate_pps = 500\nframe_bytes = 64\n[run]\nduration_ms = 200\nwarmup_ms = 0\n";

fn at(sets: &[(&str, &str)]) -> Result<(Metrics, Samples), String> {
    let l = Loaded::parse("probe.toml", BSD.into(), None).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| parse_set(&format!("{k}={v}")).unwrap())
        .collect();
    let s = l.with(&sets).map_err(|e| e.to_string())?;
    Ok(run(&s, None).unwrap())
}

#[test]
fn the_probe_delays_ip_input_by_its_cost_and_nothing_else() {
    let (plain, ps) = at(&[]).unwrap();
    let (probed, qs) = at(&[("kernel.intr_return_probe_ns", "1500")]).unwrap();
    assert_eq!(plain.delivered, probed.delivered);
    assert!(
        ps.ipin_latency.len() > 50,
        "{} samples",
        ps.ipin_latency.len()
    );
    // Packets 2 ms apart never meet: each one's path to IP input has
    // exactly one handler return on it (the histogram keeps 3 digits).
    let (a, b) = (ps.ipin_latency.mean(), qs.ipin_latency.mean());
    assert!(
        (b - a - 1500.0).abs() < 100.0,
        "mean {a} ns without the probe, {b} ns with it"
    );
}

#[test]
fn only_the_interrupt_driven_kernels_take_a_probe() {
    let e = at(&[
        ("kernel.kind", "polling"),
        ("kernel.intr_return_probe_ns", "1500"),
    ])
    .unwrap_err();
    assert!(e.contains("kernel.intr_return_probe_ns"), "{e}");
    assert!(at(&[("kernel.intr_return_probe_ns", "2000000")]).is_err());
}
