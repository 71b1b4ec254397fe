//! A few hundred swarm cases on every test run: random valid scenarios
//! over every kernel, process and traffic kind, each run twice under a
//! watchdog, must finish, conserve, close CPU accounting and replay.

use rxsched::swarm::{run, Config};
use rxsched_sim::swarm::{KERNELS, PROCESSES, TRAFFIC};
use std::time::Duration;

#[test]
fn a_swarm_of_random_valid_scenarios_passes_and_covers_every_kind() {
    let out = std::env::temp_dir().join(format!("rxsched-swarm-test-{}", std::process::id()));
    // A fixed stretch of seeds, so that a commit's result is its own;
    // RXSCHED_SWARM_SEED runs another (`rxsched swarm` runs many more).
    let seed = std::env::var("RXSCHED_SWARM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let cfg = Config {
        seed,
        runs: 400,
        jobs: None,
        timeout: Duration::from_secs(120),
        out: out.clone(),
        shard: None,
    };
    let s = run(&cfg, &|| {}).expect("the swarm runs");
    for f in &s.failures {
        eprintln!(
            "seed {}: {} (case written to {})",
            f.seed,
            f.what,
            f.file.display()
        );
    }
    assert!(
        s.failures.is_empty(),
        "{} of {} swarm cases failed (RXSCHED_SWARM_SEED={seed} replays this run)",
        s.failures.len(),
        s.runs
    );
    let _ = std::fs::remove_dir_all(&out);
    for (group, kinds) in [
        ("kernel", KERNELS),
        ("process", PROCESSES),
        ("traffic", TRAFFIC),
    ] {
        for k in kinds {
            let key = format!("{group}:{k}");
            assert!(
                s.covers.get(&key).copied().unwrap_or(0) > 0,
                "no case covered {key}"
            );
        }
    }
    assert!(s.packets > 100_000, "only {} packets simulated", s.packets);
}
