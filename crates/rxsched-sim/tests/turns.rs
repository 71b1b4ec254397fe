//! M12 (Calaveras's weighted round robin) in the simulator: where its
//! quantum may be set, and that a host running it conserves packets and
//! gives a busy process its quantum between rounds.

use rxsched_sim::scenario::{parse_set, Loaded};
use rxsched_sim::{run, Metrics};

const ROUTER: &str = "profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\n[[traffic]]\nrate_pps = 12000\n[[process]]\nkind = \"compute\"\n[run]\nduration_ms = 200\nwarmup_ms = 20\n";

fn at(quantum_us: &str) -> Metrics {
    let l = Loaded::parse("m12.toml", ROUTER.into(), None).unwrap();
    let sets = [parse_set(&format!("kernel.gp_quantum_us={quantum_us}")).unwrap()];
    run(&l.with(&sets).unwrap(), None).unwrap().0
}

fn refused(kind: &str, q: &str) -> String {
    let src = format!(
        "profile = \"dec3000-300\"\n[kernel]\nkind = \"{kind}\"\ngp_quantum_us = {q}\n[[traffic]]\nrate_pps = 1000\n"
    );
    let e = Loaded::parse("m12.toml", src, None)
        .and_then(|l| l.with(&[]))
        .expect_err("refused");
    assert_eq!(e.key.as_deref(), Some("kernel.gp_quantum_us"), "{e}");
    e.to_string()
}

#[test]
fn a_processes_quantum_is_refused_off_the_polling_kernel_and_out_of_range() {
    let e = refused("bsd", "1000");
    assert!(e.contains("m12.toml:4") && e.contains("polling"), "{e}");
    assert!(refused("polling", "-5").contains("positive time"));
}

/// Under overload the polling kernel alone starves the process; with a
/// quantum between rounds it gets at least the quantum over a quantum and
/// a round (a round here: two callbacks of at most 10 frames), and every
/// packet is accounted for.
#[test]
fn between_rounds_a_busy_process_gets_its_quantum() {
    let none = at("0");
    let turns = at("2000");
    for m in [&none, &turns] {
        let dropped: u64 = m.drops.values().sum();
        assert_eq!(
            m.arrived,
            m.delivered + dropped + m.in_flight,
            "conservation: {m:?}"
        );
    }
    let share = |m: &Metrics| m.cpu.get("user:compute").copied().unwrap_or(0.0);
    assert!(
        share(&none) < 0.02,
        "no turns: the process got {}",
        share(&none)
    );
    assert!(
        share(&turns) > 0.4,
        "a 2 ms quantum: the process got {} of the CPU, {} turns",
        share(&turns),
        turns.inhibits.get("gp_turn").copied().unwrap_or(0)
    );
    assert!(
        turns.delivered > 0,
        "the router still forwards between turns"
    );
}
