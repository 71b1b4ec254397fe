//! Flags of the real commands: each bad one is refused, named, before a
//! device is touched.

use super::*;

/// A malformed rule file is refused before anything starts: exit 2 naming
/// the file and line, for `route --screen` and `capture --filter` alike;
/// so are flags out of range.
#[test]
fn bad_rule_files_and_stage_flags_exit_2() {
    let p = scenario(
        "bad.rules",
        "# fine\naccept proto udp\ndeny proto udp sport 80-70\n",
    );
    let ps = p.to_str().unwrap();
    for args in [
        vec!["route", "--screen", ps],
        vec!["route", "--protect-rules", ps],
        vec!["capture", "-i", "lo", "-w", "/dev/null", "--filter", ps],
    ] {
        let o = rxsched(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains("bad.rules:3") && e.contains("backwards"), "{e}");
    }
    let good = scenario("good.rules", "accept\n");
    let gs = good.to_str().unwrap();
    for (args, flag) in [
        (
            vec!["route", "--screen", gs, "--screen-queue", "0"],
            "--screen-queue",
        ),
        (
            vec!["route", "--feedback-timeout-ms", "nan"],
            "--feedback-timeout-ms",
        ),
        (
            vec![
                "capture",
                "-i",
                "lo",
                "-w",
                "/dev/null",
                "--resume-at",
                "2000",
            ],
            "--resume-at",
        ),
    ] {
        let o = rxsched(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    }
}

/// The real commands check their flags and interfaces before touching a
/// device, and say which flag or interface is wrong.
#[test]
fn real_commands_name_the_bad_flag_or_interface() {
    for (args, want) in [
        (vec!["route", "--stats-every", "1e-9"], "--stats-every"),
        (vec!["route", "--stats-every", "nan"], "--stats-every"),
        (vec!["route", "--rx-ring", "1000"], "--rx-ring"),
        (vec!["capture", "-i", "lo", "--rx-ring", "32"], "--rx-ring"),
        (
            vec!["route", "--mode", "interrupt", "--protect-queue", "1"],
            "--protect-queue is for the polling thread",
        ),
        (
            vec!["route", "--protect-rules", "default", "--backend", "packet"],
            "needs --backend xdp",
        ),
        (
            vec!["route", "--protect-queue", "1", "--protect-quota", "0"],
            "--protect-quota",
        ),
        (
            vec!["route", "--slo", "latency=200us"],
            "--slo: cpu is missing",
        ),
        (
            vec!["route", "--slice-us", "100"],
            "--slice-us is the slice of a time-shared polling thread",
        ),
        (
            vec!["route", "--time-shared", "--slice-us", "50"],
            "--slice-us: 50 µs is outside",
        ),
        (
            vec!["route", "--slo", "latency=200us,cpu=150%"],
            "at most 100%",
        ),
        (
            vec!["route", "--slo", "latency=200us,cpu=50%,quota=4"],
            "unknown key \"quota\"",
        ),
        (
            vec![
                "route",
                "--mode",
                "interrupt",
                "--slo",
                "latency=1ms,cpu=50%",
            ],
            "--slo sets one polling thread's quota and cycle limit",
        ),
        (
            vec![
                "route",
                "--mode",
                "two-level",
                "--slo",
                "latency=1ms,cpu=50%",
                "--two-level-threshold",
                "0.3",
            ],
            "sets the switch's detector (the receive work's share of the CPU), threshold and return mark itself",
        ),
        (
            vec!["route", "--slo", "latency=1ms,cpu=50%", "--quota", "8"],
            "cannot be used with",
        ),
        (
            vec!["route", "--ports", "nosuch0,nosuch1"],
            "nosuch0: no such interface",
        ),
        (
            vec![
                "route",
                "--ports",
                "d0,d1",
                "--route",
                "198.19.0.0/24=d7@02:00:00:00:00:01",
            ],
            "not one of the router's interfaces",
        ),
        (
            vec![
                "route",
                "--ports",
                "nosuch0,nosuch1",
                "--route",
                "198.19.0.0/24=nosuch1@02:00:00:00:00:01",
            ],
            "nosuch0: no such interface",
        ),
        (
            vec!["capture", "-i", "nosuch", "-w", "/dev/null"],
            "nosuch: no such interface",
        ),
        (
            vec!["route", "--mode", "two-level", "--two-level-detector", "x"],
            "--two-level-detector",
        ),
        (
            vec![
                "route",
                "--mode",
                "two-level",
                "--two-level-return-below",
                "1.5",
            ],
            "--two-level-return-below",
        ),
        (
            vec![
                "route",
                "--mode",
                "two-level",
                "--two-level-return-below",
                "nan",
            ],
            "--two-level-return-below",
        ),
        // capture at tcpdump's edges, none of which needs root.
        (
            vec!["capture", "-i", "any", "-w", "/dev/null"],
            "`any` is not supported",
        ),
        (
            vec![
                "capture",
                "-i",
                "lo",
                "-w",
                "/dev/null",
                "udp",
                "and",
                "dst",
                "prot",
                "53",
            ],
            "column 13",
        ),
        (
            vec!["capture", "-i", "lo", "-w", "/dev/null", "-W", "3"],
            "-W",
        ),
        (
            vec!["capture", "-i", "lo", "-w", "/dev/null", "-c", "0"],
            "-c",
        ),
        (vec!["capture", "-w", "/dev/null"], "needs -i INTERFACE"),
        (vec!["capture", "-i", "lo"], "needs -w FILE"),
    ] {
        let o = rxsched(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

/// `capture -D` lists the interfaces, as tcpdump's does.
#[test]
fn capture_lists_interfaces() {
    let o = rxsched(&["capture", "-D"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.lines().any(|l| l.starts_with("1.lo [Up")), "{out}");
}

/// `bench real ... --predict PROFILE` loads the profile before it measures
/// anything: one that does not exist, or has no lab costs, is refused at
/// once (exit 2) and says nothing was measured.
#[test]
fn a_bench_refuses_a_profile_it_cannot_predict_from_before_measuring() {
    for (profile, want) in [
        ("/nonexistent/lab.toml", "/nonexistent/lab.toml"),
        ("dec3000-300", "no [lab] costs"),
    ] {
        let o = rxsched(&["bench", "real", "router", "--predict", profile]);
        assert_eq!(o.status.code(), Some(2), "{profile}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains(want) && e.contains("nothing was measured"),
            "{profile}: {e}"
        );
    }
}
