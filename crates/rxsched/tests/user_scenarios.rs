//! A user's own scenario: `reproduce PATH` runs it with its checks, and the
//! simulator refuses what it cannot run, naming the file and line.

use std::path::PathBuf;
use std::process::{Command, Output};

fn rxsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args(args)
        .output()
        .unwrap()
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rxsched-user-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An unmodified kernel swept past its peak, with a check that it holds
/// its peak: the sweep livelocks, so the check must fail.
fn livelock(kernel: &str) -> String {
    format!(
        "id = \"mine\"\nprofile = \"dec3000-300\"\n[kernel]\nkind = \"{kernel}\"\nquota = 10\n\
         [[traffic]]\nrate_pps = 3000\n[run]\nduration_ms = 100\n\
         [figure]\nvary = \"traffic.rate_pps\"\nvalues = [2000, 6000, 12000]\n\
         x = {{ metric = \"offered_pps\", label = \"in\" }}\ny = {{ metric = \"delivered_pps\", label = \"out\" }}\n\
         [[series]]\nlabel = \"a\"\n\
         [[check]]\nname = \"holds its peak\"\nkind = \"flat\"\nseries = [\"a\"]\nmin = 0.9\n"
    )
}

#[test]
fn reproduce_runs_a_users_scenario_with_its_checks() {
    let d = dir("reproduce");
    let out = d.join("out");
    for (kernel, code) in [("bsd", 1), ("polling", 0)] {
        let p = d.join(format!("{kernel}.toml"));
        std::fs::write(&p, livelock(kernel)).unwrap();
        let o = rxsched(&[
            "reproduce",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            o.status.code(),
            Some(code),
            "{kernel}: {said}{}",
            stderr(&o)
        );
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("mine.json")).unwrap()).unwrap();
        let check = &r["checks"][0];
        assert_eq!(
            check["pass"].as_bool(),
            Some(code == 0),
            "{kernel}: {check}"
        );
        assert!(said.contains("holds its peak") || code == 0, "{said}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_rate_above_the_line_rate_or_a_missing_profile_is_refused_at_its_line() {
    let d = dir("refused");
    let good = "profile = \"dec3000-300\"\n[kernel]\nkind = \"bsd\"\n[[traffic]]\nrate_pps = 3000\n[run]\nduration_ms = 50\n";
    for (name, body, want) in [
        (
            "fast.toml",
            good.replace("= 3000", "= 20000"),
            ["fast.toml:5", "traffic.0.rate_pps", "line rate"],
        ),
        (
            "noprof.toml",
            good.replace("dec3000-300", "no-such"),
            ["noprof.toml:1", "profile", "unknown profile"],
        ),
    ] {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        let o = rxsched(&["sim", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(want.iter().all(|w| e.contains(w)), "{name}: {e}");
    }
    // Just under the line rate runs, and what arrives is what was offered.
    let p = d.join("line.toml");
    std::fs::write(&p, good.replace("= 3000", "= 14880")).unwrap();
    let o = rxsched(&["sim", p.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let offered = m["offered_pps"].as_f64().unwrap();
    assert!((offered / 14880.0 - 1.0).abs() < 0.01, "offered {offered}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A profile without a cost the scenario's host reads is refused, naming
/// the cost, instead of running on a silent zero.
#[test]
fn a_profile_missing_a_cost_the_host_reads_is_refused() {
    let d = dir("missing");
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/dec3100-ultrix.toml"
    ))
    .unwrap();
    let cut: String = src
        .lines()
        .filter(|l| !l.starts_with("udp_input"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("mine.toml"), cut).unwrap();
    let body = "profile = \"mine.toml\"\n[kernel]\nkind = \"bsd\"\n[[traffic]]\nrate_pps = 300\n[[process]]\nkind = \"reader\"\n[run]\nduration_ms = 50\n";
    let p = d.join("reader.toml");
    std::fs::write(&p, body).unwrap();
    let o = rxsched(&["sim", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("reader.toml:1") && e.contains("cost.udp_input"),
        "{e}"
    );
    // The same profile with the cost given runs.
    std::fs::write(d.join("mine.toml"), src).unwrap();
    let o = rxsched(&["sim", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// `--set` is recorded in the result; an override of every run that a
/// series sets itself, or the swept key, is refused unless a series is named.
#[test]
fn overrides_are_recorded_and_never_hide_a_series_own_setting() {
    let d = dir("overrides");
    let p = d.join("two.toml");
    let body = livelock("bsd").replace(
        "[[series]]\nlabel = \"a\"\n",
        "[[series]]\nlabel = \"a\"\n[[series]]\nlabel = \"p\"\nset = { \"kernel.kind\" = \"polling\" }\n",
    );
    std::fs::write(&p, body).unwrap();
    let out = d.join("out");
    let run = |sets: &[&str]| {
        let mut args = vec![
            "reproduce",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        for s in sets {
            args.extend(["--set", s]);
        }
        rxsched(&args)
    };
    for (set, want) in [
        ("kernel.kind=bsd", "series \"p\" sets this key"),
        ("traffic.rate_pps=100", "sweeps this key"),
        ("q:kernel.quota=5", "no series \"q\""),
    ] {
        let o = run(&[set]);
        assert_eq!(o.status.code(), Some(2), "{set}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{set}: {}", stderr(&o));
    }
    let o = run(&["p:kernel.quota=3", "run.duration_ms=60"]);
    assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("mine.json")).unwrap()).unwrap();
    assert_eq!(
        r["overrides"],
        serde_json::json!(["p:kernel.quota=3", "run.duration_ms=60"]),
        "{}",
        r["overrides"]
    );
    assert_eq!(r["series"][1]["config"]["kernel.quota"], 3);
    let _ = std::fs::remove_dir_all(&d);
}

/// profiles/README.md is the reference `profiles --schema` writes from the
/// types: a key added to a profile type without it fails here.
#[test]
fn the_profile_reference_is_written_from_the_types() {
    let o = rxsched(&["profiles", "--schema"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let generated = String::from_utf8(o.stdout).unwrap();
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/README.md"
    ))
    .unwrap();
    assert!(
        generated == committed,
        "profiles/README.md is stale: run `rxsched profiles --schema > profiles/README.md`"
    );
    for key in [
        "`rx_copy`",
        "`t_skb_cold`",
        "`dpc_packet`",
        "`bit_rate_bps`",
    ] {
        assert!(generated.contains(key), "{key} missing");
    }
}

/// A reference scaled by a profile's free parameter takes the value the
/// series runs with (its `[profile_param]` here), and one naming a
/// parameter the profile lacks is refused at its key.
#[test]
fn a_reference_follows_the_profile_parameter_it_names() {
    let d = dir("refscale");
    let with = |param: &str| {
        livelock("bsd").replace("[[series]]", "[profile_param]\ntrace_scale = 0.5\n[[series]]")
            + &format!(
                "[[reference]]\nseries = \"a\"\npoints = [[2000, 1000]]\nscale_param = \"{param}\"\nnote = \"test\"\n"
            )
    };
    let good = d.join("good.toml");
    std::fs::write(&good, with("trace_scale")).unwrap();
    let out = d.join("out");
    let o = rxsched(&[
        "reproduce",
        good.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("mine.json")).unwrap()).unwrap();
    assert_eq!(
        r["reference"][0]["points"][0][1], 500.0,
        "{}",
        r["reference"]
    );
    let bad = d.join("bad.toml");
    std::fs::write(&bad, with("nope")).unwrap();
    let o = rxsched(&[
        "reproduce",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("reference.scale_param") && e.contains("nope"),
        "{e}"
    );
}
