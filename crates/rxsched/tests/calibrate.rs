//! Every built-in profile with free parameters is its fit: `rxsched
//! calibrate NAME`, started from the committed values, finds nothing
//! markedly better. A change to the simulator that moves a calibration
//! claim shows here, and the profile is then written again with
//! `--write`, not left to drift.

use std::process::Command;

/// What `rxsched calibrate PROFILE` printed; it must succeed.
fn calibrate(profile: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args(["calibrate", profile])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{profile}: {stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

/// The sums of the claims' mean squares `calibrate` prints: at the
/// profile's values, then at its fit (which starts there, so is no worse).
fn sums(name: &str) -> (f64, f64) {
    let stdout = calibrate(name);
    let v: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("sum of the claims' mean squares: "))
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(v.len(), 2, "{name}: two sums expected in:\n{stdout}");
    let counts = stdout.lines().next().unwrap_or_default();
    let n: Vec<usize> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(
        counts.contains("free parameters") && n.len() >= 2 && n[n.len() - 2] <= n[n.len() - 1],
        "{name}: at most as many free parameters as claims: {counts}"
    );
    assert!(
        v[1] <= v[0] + 1e-5,
        "{name}: the fit is worse than its start:\n{stdout}"
    );
    (v[0], v[1])
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
        let (at, fit) = sums(name);
        // The fit may polish the last digits (its objective is flat near
        // the optimum); a profile a simulator change left behind is off
        // by more than a tenth of its objective, or 0.001.
        assert!(
            at <= fit + (0.1 * fit).max(0.001),
            "{name}: {at:.5} at the committed values against {fit:.5} at the fit: \
             run `rxsched calibrate {name} --write`"
        );
    }
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
