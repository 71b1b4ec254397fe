//! The committed XDP objects in `bpf/obj/` are what `bpf/build.sh` builds
//! from the sources beside them: the binary embeds the objects, so a
//! source changed without a rebuild would silently not take effect.
//! Needs Debian's clang and libbpf-dev (`.ci/run` installs them); without
//! them the test says it skipped (see `rxsched_linux::needs`).

use rxsched_linux::needs;
use std::process::Command;

#[test]
fn committed_objects_match_their_sources() {
    let headers = std::path::Path::new("/usr/include/bpf/bpf_helpers.h").exists();
    if !needs::check(
        needs::has("clang") && headers,
        "clang and libbpf's headers",
        "clang libbpf-dev",
    ) {
        return;
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
