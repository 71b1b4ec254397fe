//! The command line: bad input exits 2 with file, line and key; good input works.

use std::process::{Command, Output};

mod real_flags;

fn rxsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args(args)
        .output()
        .unwrap()
}

fn scenario(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rxsched-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const GOOD: &str = "profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\nquota = 10\n[[traffic]]\nrate_pps = 3000\n[run]\nduration_ms = 100\n";

#[test]
fn unknown_experiment_exits_2() {
    let o = rxsched(&["reproduce", "no-such-figure"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no-such-figure"));
}

/// A real bench's check file sits beside the scenarios but is none:
/// `reproduce` neither lists nor runs it, and `sim` says what it is.
#[test]
fn real_check_files_are_not_experiments() {
    let o = rxsched(&["reproduce", "--list"]);
    assert!(o.status.success());
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(
        list.contains("mogul-fig6-3") && !list.lines().any(|l| l.starts_with("real-")),
        "{list}"
    );
    let o = rxsched(&["reproduce", "real-router"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/real-router.toml"
    );
    let o = rxsched(&["sim", file]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("real-router.toml:6") && e.contains("`bench`") && e.contains("bench real"),
        "{e}"
    );
}

#[test]
fn unknown_key_exits_2_naming_file_line_key() {
    let p = scenario(
        "unknown.toml",
        "profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\nquotta = 5\n",
    );
    let o = rxsched(&["sim", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("unknown.toml:4") && e.contains("quotta"), "{e}");
}

#[test]
fn out_of_range_values_exit_2_naming_line_and_key() {
    for (name, body, line, key) in [
        (
            "neg.toml",
            "profile = \"dec3000-300\"\n[[traffic]]\nrate_pps = -1\n",
            3,
            "traffic.0.rate_pps",
        ),
        (
            "zero.toml",
            "profile = \"dec3000-300\"\n[kernel]\noutput_queue_limit = 0\n",
            3,
            "kernel.output_queue_limit",
        ),
        (
            "wm.toml",
            "profile = \"dec3000-300\"\n\n[kernel.feedback]\nhigh_pct = 150\n",
            4,
            "kernel.feedback.high_pct",
        ),
    ] {
        let p = scenario(name, body);
        let o = rxsched(&["sim", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        let e = stderr(&o);
        assert!(
            e.contains(&format!("{name}:{line}")) && e.contains(key),
            "{name}: {e}"
        );
    }
}

#[test]
fn malformed_scenario_and_bad_overrides_exit_2() {
    let p = scenario("broken.toml", "profile = \"dec3000-300\"\n[kernel\n");
    let o = rxsched(&["sim", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("broken.toml:2"), "{}", stderr(&o));
    let p = scenario("good.toml", GOOD);
    let o = rxsched(&["sim", p.to_str().unwrap(), "--set", "kernel.quota=0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = rxsched(&["sim", p.to_str().unwrap(), "--set", "kernel.kind=warp"]);
    assert_eq!(o.status.code(), Some(2));
    let o = rxsched(&["sim", p.to_str().unwrap(), "--set", "profile=nowhere"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown profile"));
    let o = rxsched(&["sim", "/nonexistent/x.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn figure_and_check_errors_exit_2_naming_line_and_key() {
    let fig = "[figure]\nvary = \"traffic.rate_pps\"\nvalues = [1000, 2000]\nx = { metric = \"offered_pps\", label = \"in\" }\ny = { metric = \"delivered_pps\", label = \"out\" }\n";
    for (name, tail, line, key) in [
        (
            "param.toml",
            "[[check]]\nname = \"c\"\nkind = \"flat\"\nseries = [\"scenario\"]\nmin = 0.9\ntolerance = 3\n",
            19,
            "check.0.tolerance",
        ),
        (
            "metric.toml",
            "[[check]]\nname = \"c\"\nkind = \"flat\"\nseries = [\"scenario\"]\nmin = 0.9\nmetric = \"no.such.metric\"\n",
            19,
            "check.0.metric",
        ),
        (
            "vacuous.toml",
            "[[series]]\nlabel = \"a\"\n[[check]]\nname = \"c\"\nkind = \"peak_ratio\"\nseries = [\"a\"]\nother = [\"a\"]\n",
            18,
            "check.0.kind",
        ),
        ("type.toml", "[[process]]\nkind = 5\n", 15, "process.0.kind"),
        (
            "claim.toml",
            "[[claim]]\nquote = \"q\"\nsection = \"§1\"\nkind = \"shape\"\n",
            14,
            "claim.0",
        ),
        (
            "claimkind.toml",
            "[[claim]]\nquote = \"q\"\nsection = \"§1\"\nkind = \"guess\"\nunchecked = \"why\"\n",
            17,
            "claim.0.kind",
        ),
    ] {
        let p = scenario(name, &format!("{GOOD}{fig}{tail}"));
        let o = rxsched(&["sweep", p.to_str().unwrap(), "--vary", "traffic.rate_pps=1000"]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(&format!("{name}:{line}")) && e.contains(key), "{name}: {e}");
    }
    let p = scenario("y.toml", GOOD);
    let o = rxsched(&[
        "sweep",
        p.to_str().unwrap(),
        "--vary",
        "traffic.rate_pps=1000",
        "--y",
        "no.such",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--y"), "{}", stderr(&o));
}

#[test]
fn a_bad_override_is_blamed_on_its_set() {
    let p = scenario("blame.toml", GOOD);
    let o = rxsched(&["sim", p.to_str().unwrap(), "--set", "traffic.rate_pps=-5"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("--set") && e.contains("traffic.rate_pps") && !e.contains("blame.toml:"),
        "{e}"
    );
}

#[test]
fn sim_prints_a_conserving_metrics_record() {
    let p = scenario("good2.toml", GOOD);
    let o = rxsched(&[
        "sim",
        p.to_str().unwrap(),
        "--json",
        "--set",
        "traffic.rate_pps=9000",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let drops: u64 = m["drops"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        m["arrived"].as_u64().unwrap(),
        m["delivered"].as_u64().unwrap() + drops + m["in_flight"].as_u64().unwrap()
    );
    assert!(drops > 0, "9000 pkts/s should overload the polling kernel");
    let cpu: f64 = m["cpu"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!((cpu - 1.0).abs() < 1e-9);
    for k in [
        "offered_pps",
        "delivered_pps",
        "interrupts",
        "latency_us",
        "inhibits",
        "events",
        "wall_ms",
    ] {
        assert!(m.get(k).is_some(), "missing {k}");
    }
    let o = rxsched(&["sim", p.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("delivered"));
}

#[test]
fn sweep_writes_a_figure() {
    let p = scenario("sweep.toml", GOOD);
    let out = std::env::temp_dir().join(format!("rxsched-sweep-{}", std::process::id()));
    let o = rxsched(&[
        "sweep",
        p.to_str().unwrap(),
        "--vary",
        "traffic.rate_pps=1000:9000:2000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep-sweep.json")).unwrap())
            .unwrap();
    let pts = r["series"][0]["points"].as_array().unwrap();
    assert_eq!(pts.len(), 5);
    assert!(out.join("sweep-sweep.svg").exists() && out.join("index.html").exists());
    let o = rxsched(&[
        "sweep",
        p.to_str().unwrap(),
        "--vary",
        "traffic.rate_pps=5:1:1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn profiles_show_their_sources() {
    let o = rxsched(&["profiles"]);
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("dec3000-300") && s.contains("dec3100-ultrix"));
    assert!(s.contains("calibrated from") && s.contains("trace"));
}

#[test]
fn throughput_search_is_available_to_users() {
    let p = scenario(
        "rfc.toml",
        "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\nvariant = \"NAPI-TX-OFF\"\n[[traffic]]\nport = 0\n[[traffic]]\nport = 1\n[run]\nwarmup_ms = 5\n",
    );
    let out = std::env::temp_dir().join(format!("rxsched-rfc-{}", std::process::id()));
    let o = rxsched(&[
        "sweep",
        p.to_str().unwrap(),
        "--throughput",
        "--trial-ms",
        "30",
        "--vary",
        "traffic.frame_bytes=64,1518",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("rfc-sweep.json")).unwrap())
            .unwrap();
    let pts = r["series"][0]["points"].as_array().unwrap();
    let small = pts[0]["throughput_mbps_per_port"].as_f64().unwrap();
    let large = pts[1]["throughput_mbps_per_port"].as_f64().unwrap();
    // Small frames are CPU-bound; full-size frames reach the line rate.
    assert!(small > 1.0 && small < 99.0, "{small}");
    assert_eq!(large, 100.0);
    assert_eq!(
        pts[0]["drops"].as_object().unwrap().len(),
        0,
        "the reported trial lost nothing"
    );
    let _ = std::fs::remove_dir_all(&out);
}

const PROFILE: &str = "name = \"p\"\ntestbed = \"t\"\ncalibrated_from = [\"x\"]\n[wire]\nbit_rate_bps = 1e7\n[nic]\nrx_ring = 32\ntx_ring = 32\n[cost]\nintr_dispatch = 1000\n";

/// Values that hung the simulator, made it allocate without bound or run
/// at zero cost are refused when loaded, naming the key.
#[test]
fn values_that_hung_or_misled_are_refused_naming_the_key() {
    let good = scenario("good.toml", GOOD);
    let g = good.to_str().unwrap();
    for (set, key) in [
        ("traffic.rate_pps=5e-11", "traffic.rate_pps"),
        ("kernel.napi_budget_us=0.0001", "kernel.napi_budget_us"),
        ("kernel.kind=\"linux\"", "kernel.kind"),
    ] {
        let o = rxsched(&["sim", g, "--set", set]);
        assert_eq!(o.status.code(), Some(2), "{set}: {}", stderr(&o));
        assert!(stderr(&o).contains(key), "{set}: {}", stderr(&o));
    }
    for (from, to, key) in [
        (
            "bit_rate_bps = 1e7",
            "bit_rate_bps = inf",
            "wire.bit_rate_bps",
        ),
        ("rx_ring = 32", "rx_ring = 4294967295", "nic.rx_ring"),
        (
            "intr_dispatch = 1000",
            "rx_copy_per_byte = nan",
            "cost.rx_copy_per_byte",
        ),
        (
            "intr_dispatch = 1000",
            "clock_hz = 2000000000\nclock_tick = 1",
            "cost.clock_hz",
        ),
    ] {
        let p = scenario(
            &format!("p-{}.toml", key.replace('.', "-")),
            &PROFILE.replace(from, to),
        );
        let set = format!("profile={:?}", p.to_str().unwrap());
        let o = rxsched(&["sim", g, "--set", &set]);
        assert_eq!(o.status.code(), Some(2), "{key}: {}", stderr(&o));
        assert!(stderr(&o).contains(key), "{key}: {}", stderr(&o));
    }
    let o = rxsched(&[
        "reproduce",
        "mogul-fig6-3",
        "--seed",
        "18446744073709551615",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A full standard output is an error that says so (exit 1), not a panic.
#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let good = scenario("good.toml", GOOD);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args(["sim", good.to_str().unwrap()])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("standard output"), "{}", stderr(&o));
}

/// The rest of what a hostile user found: each refused naming its flag or
/// key with exit 2, or run to the end, never a hang, panic or silent zero.
#[test]
fn sweeps_linux_hosts_pipes_and_syntax_errors_are_handled() {
    let good = scenario("sweep-good.toml", GOOD);
    let g = good.to_str().unwrap();
    let out = std::env::temp_dir().join(format!("rxsched-cli-out-{}", std::process::id()));
    let o = out.to_str().unwrap();
    let many = format!(
        "traffic.rate_pps={}",
        (1..=20_000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    for (args, want) in [
        (
            vec![
                "--vary",
                "traffic.rate_pps=1000,2000",
                "--y",
                "no.such.metric",
            ],
            "--y",
        ),
        (vec!["--vary", "traffic.rate_pps=1:nan:1"], "--vary"),
        (vec!["--vary", many.as_str()], "--vary"),
        (vec!["--vary", "rate=1,2"], "--vary: key `rate`"),
        (
            vec!["--vary", "traffic.rate_pps=-5,1"],
            "--vary: key `traffic.rate_pps`",
        ),
        (
            vec![
                "--vary",
                "traffic.rate_pps=1",
                "--throughput",
                "--resolution",
                "1e-17",
            ],
            "--resolution",
        ),
    ] {
        let mut a = vec!["sweep", g, "--out", o];
        a.extend(args);
        let r = rxsched(&a);
        assert_eq!(r.status.code(), Some(2), "{a:?}: {}", stderr(&r));
        assert!(stderr(&r).contains(want), "{a:?}: {}", stderr(&r));
        assert!(stderr(&r).len() < 1000, "{a:?}: a long value echoed whole");
    }
    let r = rxsched(&[
        "sweep",
        g,
        "--vary",
        "traffic.rate_pps=1",
        "--out",
        "/dev/null/x",
    ]);
    assert_ne!(r.status.code(), Some(0));
    assert!(stderr(&r).contains("/dev/null/x"), "{}", stderr(&r));

    // A linux host: a reader is refused by name; compute runs (it hung).
    let lr = scenario(
        "linux-reader.toml",
        "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\n[[traffic]]\nrate_pps = 1000\n[[process]]\nkind = \"reader\"\n[run]\nduration_ms = 100\n",
    );
    let r = rxsched(&["sim", lr.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("kernel.kind"), "{}", stderr(&r));
    let lc = scenario(
        "linux-compute.toml",
        "profile = \"mpc8250-linux\"\n[kernel]\nkind = \"linux\"\n[[traffic]]\nrate_pps = 0\n[[process]]\nkind = \"compute\"\n[run]\nduration_ms = 100\n",
    );
    let r = rxsched(&["sim", lc.to_str().unwrap(), "--json"]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let m: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert!(m["cpu"]["user:compute"].as_f64().unwrap() > 0.5, "{m}");

    // A syntax error names the key on its line.
    let bad = scenario(
        "syntax.toml",
        "profile = \"dec3000-300\"\n[[traffic]]\nrate_pps = = 5\n",
    );
    let r = rxsched(&["sim", bad.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("syntax.toml:3") && stderr(&r).contains("traffic.0.rate_pps"),
        "{}",
        stderr(&r)
    );

    // The generator refuses a frame it cannot send, before sending.
    let r = rxsched(&["gen", "--size", "2048", "--iface", "nosuch0"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(stderr(&r).contains("--size"), "{}", stderr(&r));

    // A closed pipe: quiet, exit 141 (as if killed by SIGPIPE), no panic.
    let mut fds = [0; 2];
    // SAFETY: fds is a live two-element array for pipe(2) to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the read end is ours and closed once; the write end is handed
    // to the child, which owns it from here.
    unsafe { libc::close(fds[0]) };
    let w = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    let r = Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args(["sim", g])
        .stdout(w)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(141), "{}", stderr(&r));
    assert!(stderr(&r).is_empty(), "{}", stderr(&r));
}

/// `calibrate` refuses a profile with no free parameters (the lab's, which
/// `calibrate --real` measures); tests/calibrate.rs fits every other.
#[test]
fn calibrate_refuses_a_profile_with_nothing_to_fit() {
    let o = rxsched(&["calibrate", "linux-veth-lab"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no free parameters"), "{}", stderr(&o));
}
