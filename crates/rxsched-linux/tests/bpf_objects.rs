//! The committed XDP objects in `bpf/obj/` are what `bpf/build.sh` builds
//! from the sources beside them: the binary embeds the objects, so a
//! source changed without a rebuild would silently not take effect.
//! Needs Debian's clang and libbpf-dev (`.ci/run` installs them); without
//! clang the test fails saying so, unless RXSCHED_SKIP_BPF_CHECK=1 is set,
//! in which case it says loudly that it was skipped.

use std::process::Command;

#[test]
fn committed_objects_match_their_sources() {
    if Command::new("clang").arg("--version").output().is_err() {
        if std::env::var("RXSCHED_SKIP_BPF_CHECK").as_deref() == Ok("1") {
            eprintln!("SKIPPED: no clang, and RXSCHED_SKIP_BPF_CHECK=1");
            return;
        }
        panic!("checking bpf/obj needs clang and libbpf-dev (apt-get install clang libbpf-dev), or set RXSCHED_SKIP_BPF_CHECK=1 to skip it, loudly");
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/build.sh");
    let o = Command::new("sh")
        .args([script, "check"])
        .output()
        .expect("run bpf/build.sh");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
