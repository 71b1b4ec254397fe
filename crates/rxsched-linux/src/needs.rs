//! What a test needs from the machine beyond Rust: a tool from Debian's
//! packages, or root for network namespaces.
//!
//! On a machine without it, a test says on one line what it skipped and
//! how to get it, and passes, so that `cargo test --workspace` passes on a
//! fresh machine. With `RXSCHED_REQUIRE_TOOLS=1` (which `.ci/run` sets
//! after installing the tools) a missing tool fails the test instead, so CI
//! still runs every check.

use std::io::Write;
use std::process::{Command, Stdio};

/// The environment variable that turns a skip into a failure.
pub const REQUIRE_TOOLS: &str = "RXSCHED_REQUIRE_TOOLS";

fn required() -> bool {
    std::env::var(REQUIRE_TOOLS).as_deref() == Ok("1")
}

/// Says that a test was skipped, or fails it when tools are required. The
/// line goes to the process's standard error itself, past the test
/// harness's capture, so that a passing run shows what it left out.
fn skip(line: String) {
    if required() {
        panic!("{line}, and {REQUIRE_TOOLS}=1");
    }
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Whether `cmd` runs here (it answers `--version`).
pub fn has(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Whether the test may go on: `present`, or else it prints
/// `skipped: needs WHAT (apt-get install PACKAGES)` and returns false
/// (panics instead under `RXSCHED_REQUIRE_TOOLS=1`).
pub fn check(present: bool, what: &str, packages: &str) -> bool {
    if present {
        return true;
    }
    skip(format!(
        "skipped: needs {what} (apt-get install {packages})"
    ));
    false
}

/// Whether the tool `cmd` from Debian's `package` is here (see [`check`]).
pub fn tool(cmd: &str, package: &str) -> bool {
    check(has(cmd), cmd, package)
}

/// Whether the test may build network namespaces: it runs as root, or
/// else it prints why `what` was skipped and returns false (panics instead
/// under `RXSCHED_REQUIRE_TOOLS=1`).
pub fn root(what: &str) -> bool {
    if crate::sys::is_root() {
        return true;
    }
    skip(format!(
        "skipped: {what} needs root (network namespaces and XDP; run the tests as root)"
    ));
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_tool_is_found_and_an_absent_one_is_not() {
        // `sh` is on every machine this builds on; the other name is on none.
        assert!(has("sh"));
        assert!(!has("rxsched-no-such-tool-anywhere"));
        assert!(check(true, "sh", "dash"));
    }
}
