//! Memory stays flat with simulated time: every per-packet record is a
//! bounded structure, so a 1,000 s simulation peaks within 1.5x of a 10 s one.

use std::process::Command;

/// Runs `rxsched sim` on `scenario` for `duration_ms` and returns the
/// child's peak resident set, in KiB.
// The child is reaped by wait4, which std does not know about.
#[allow(clippy::zombie_processes)]
fn peak_rss_kib(scenario: &std::path::Path, duration_ms: u64) -> i64 {
    let child = Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args(["sim", scenario.to_str().expect("utf-8 path")])
        .arg("--set")
        .arg(format!("run.duration_ms={duration_ms}"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("rxsched starts");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own child's; status and usage point to live locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 on rxsched sim");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "rxsched sim failed: {status}"
    );
    usage.ru_maxrss
}

#[test]
fn peak_memory_does_not_grow_with_simulated_time() {
    let dir = std::env::temp_dir().join(format!("rxsched-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("long.toml");
    // An interrupt-driven host with a reader past its capacity: latency
    // samples on every delivered packet, drops at the socket and ipintrq.
    std::fs::write(
        &path,
        "profile = \"dec3100-ultrix\"\n[kernel]\nkind = \"bsd\"\nip_layer = \"softirq\"\n\
         [[traffic]]\nkind = \"poisson\"\nrate_pps = 3000\n[[process]]\nkind = \"reader\"\n\
         [[process]]\nkind = \"compute\"\n",
    )
    .unwrap();
    let short = peak_rss_kib(&path, 10_000);
    let long = peak_rss_kib(&path, 1_000_000);
    eprintln!("peak RSS: 10 s simulated {short} KiB, 1,000 s simulated {long} KiB");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        (long as f64) <= 1.5 * short as f64,
        "peak RSS grew from {short} KiB (10 s) to {long} KiB (1,000 s)"
    );
}
