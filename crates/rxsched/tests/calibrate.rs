//! Every built-in profile with free parameters is its fit: `rxsched
//! calibrate NAME --check` finds no step of 2% of a parameter's range, either
//! way, that does markedly better than the committed values. A change to
//! the simulator that moves a calibration claim shows here, and the profile
//! is then written again with `--write`, not left to drift.

use std::process::Command;

/// What `rxsched calibrate ARGS` printed, and whether it exited 0.
fn calibrate_with(args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .arg("calibrate")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    (o.status.success(), format!("{stdout}\n{stderr}"))
}

/// What `rxsched calibrate PROFILE` printed; it must succeed.
fn calibrate(profile: &str) -> String {
    let (ok, out) = calibrate_with(&[profile]);
    assert!(ok, "{profile}: {out}");
    out
}

#[test]
fn every_calibrated_profile_is_its_fit() {
    let names: Vec<&str> = rxsched_sim::profile::BUILTIN
        .iter()
        .filter(|(_, src)| src.contains("\n[calibrate]"))
        .map(|(n, _)| *n)
        .collect();
    assert!(
        names.len() >= 6,
        "profiles with a [calibrate] section: {names:?}"
    );
    for name in names {
        let (ok, out) = calibrate_with(&[name, "--check"]);
        assert!(ok, "{name}: {out}");
        let counts = out.lines().next().unwrap_or_default();
        let n: Vec<usize> = counts
            .rsplit(": ")
            .next()
            .unwrap_or_default()
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        assert!(
            counts.contains("free parameters") && n.len() == 2 && n[0] <= n[1],
            "{name}: at most as many free parameters as claims: {counts}"
        );
    }
}

/// A profile whose values were moved off its fit fails the check, naming
/// the step that does better and the command that writes the fit.
#[test]
fn a_profile_moved_off_its_fit_fails_the_check() {
    let src = rxsched_sim::profile::BUILTIN
        .iter()
        .find(|(n, _)| *n == "dual-p133-nt4")
        .map(|(_, s)| *s)
        .expect("dual-p133-nt4 is built in");
    // A little below the fit, the interrupt routine leaves gaps at the
    // line rate; the step up (2% of the range, 1 us) closes them.
    let moved = src
        .lines()
        .map(|l| {
            if l.starts_with("value = ") {
                "value = 27500.0".to_string()
            } else if l.starts_with("dpc_packet = ") {
                "dpc_packet = 27500".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dir = std::env::temp_dir().join(format!("rxsched-moved-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("moved.toml");
    std::fs::write(&path, moved).unwrap();
    let (ok, out) = calibrate_with(&[path.to_str().unwrap(), "--check"]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(!ok, "a profile off its fit passed the check:\n{out}");
    assert!(
        out.contains("better than the profile's values: dpc_packet") && out.contains("--write"),
        "{out}"
    );
}

/// The DECstation 3000/300 with its traced costs split into device-level
/// and thread-level work, each with a scale of its own, fitted to four
/// published constraints: no split brings polling's MLFRR within "slightly"
/// above unmodified's (1.00-1.15) while keeping the others, the reason the
/// profile keeps one scale and `mogul-fig6-3` a known miss. If a change to
/// the model lets it, the profile's comment and the miss are to be revisited.
#[test]
fn two_scales_do_not_reconcile_the_mogul_constraints() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../calibration/dec3000-300-two-scales.toml"
    );
    let stdout = calibrate(file);
    assert!(stdout.contains("2 free parameters, 4 claims"), "{stdout}");
    let fitted = stdout.split("fitted:").nth(1).expect("a fit");
    let pct = fitted
        .lines()
        .find(|l| l.contains("mogul-fig6-3"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|p| p.trim_end_matches('%').parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no mogul-fig6-3 residual at the fit:\n{stdout}"));
    // The range's top, 1.15, sits at +7.0% from its middle (1.075).
    assert!(
        pct > 7.0,
        "two scales met the MLFRR ratio ({pct:+.1}%):\n{stdout}"
    );
}
