//! Studies bigger than one machine: `--shard K/N` and `rxsched merge` give
//! what the unsharded study gives, byte for byte apart from wall times;
//! shard sets that do not make one study are refused.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rxsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = rxsched(args);
    assert!(
        o.status.success(),
        "rxsched {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rxsched-shard-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A result file with every `wall_ms` taken out.
fn without_wall(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("wall_ms");
            o.values_mut().for_each(without_wall);
        }
        Value::Array(a) => a.iter_mut().for_each(without_wall),
        _ => {}
    }
}

/// A CSV with its `wall_ms` column taken out.
fn csv_without_wall(text: &str) -> Vec<Vec<String>> {
    let rows: Vec<Vec<String>> = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let col = rows[0].iter().position(|c| c == "wall_ms");
    rows.into_iter()
        .map(|mut r| {
            if let Some(c) = col {
                r.remove(c);
            }
            r
        })
        .collect()
}

/// Every file of `a` is in `b`, the same apart from wall times.
fn same_results(a: &Path, b: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.iter().any(|n| n.ends_with(".json")), "{names:?}");
    for n in &names {
        let (x, y) = (a.join(n), b.join(n));
        let (tx, ty) = (
            std::fs::read_to_string(&x).unwrap(),
            std::fs::read_to_string(&y).unwrap_or_else(|e| panic!("{}: {e}", y.display())),
        );
        if n.ends_with(".json") {
            let (mut vx, mut vy): (Value, Value) = (
                serde_json::from_str(&tx).unwrap(),
                serde_json::from_str(&ty).unwrap(),
            );
            without_wall(&mut vx);
            without_wall(&mut vy);
            assert!(vx == vy, "{n} differs");
        } else if n.ends_with(".csv") {
            assert!(
                csv_without_wall(&tx) == csv_without_wall(&ty),
                "{n} differs"
            );
        } else {
            assert!(tx == ty, "{n} differs byte for byte");
        }
    }
}

#[test]
fn two_shards_merged_are_the_unsharded_reproduce() {
    let ids = ["mogul-fig6-3", "hansen-switch", "srp-fig6"];
    let (whole, s1, s2, merged) = (dir("whole"), dir("s1"), dir("s2"), dir("merged"));
    let run = |extra: &[&str], out: &Path| {
        let mut a = vec!["reproduce", "--quick"];
        a.extend(ids);
        a.extend(extra);
        a.extend(["--out", s(out)]);
        ok(&a)
    };
    run(&[], &whole);
    let said = run(&["--shard", "1/2"], &s1);
    assert!(said.contains("shard 1/2:"), "{said}");
    run(&["--shard", "2/2"], &s2);
    // A shard alone writes no result, only its file.
    assert!(!s1.join("mogul-fig6-3.json").exists());
    ok(&["merge", s(&s1), s(&s2), "--out", s(&merged)]);
    same_results(&whole, &merged);

    // One shard missing, one given twice, shards of another study.
    let o = rxsched(&["merge", s(&s1), "--out", s(&dir("bad1"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("shard 2/2 missing"));
    let o = rxsched(&["merge", s(&s1), s(&s1), s(&s2), "--out", s(&dir("bad2"))]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("given twice"));
    let other = dir("other");
    ok(&[
        "reproduce",
        "--quick",
        "mogul-fig6-3",
        "--shard",
        "2/2",
        "--out",
        s(&other),
    ]);
    let o = rxsched(&["merge", s(&s1), s(&other), "--out", s(&dir("bad3"))]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("different studies"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = rxsched(&["reproduce", "mogul-fig6-3", "--shard", "3/2"]);
    assert_eq!(o.status.code(), Some(2));
    for d in [whole, s1, s2, merged, other] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A swarm's shards merged print what the whole swarm prints, but for the
/// wall time.
#[test]
fn swarm_shards_merged_print_the_whole_swarm() {
    let (whole, s1, s2, merged) = (dir("sw"), dir("sw1"), dir("sw2"), dir("swm"));
    let swarm = |out: &Path, shard: Option<&str>| {
        let mut a = vec!["swarm", "--runs", "6", "--seed", "11", "--out", s(out)];
        if let Some(k) = shard {
            a.extend(["--shard", k]);
        }
        ok(&a)
    };
    let scrub = |t: &str, out: &Path| {
        t.lines()
            .filter(|l| !l.starts_with("shard "))
            .map(|l| {
                l.split(" in ")
                    .next()
                    .unwrap()
                    .split(" events (")
                    .next()
                    .unwrap()
                    .replace(s(out), "OUT")
            })
            .collect::<Vec<_>>()
    };
    let w = swarm(&whole, None);
    swarm(&s1, Some("1/2"));
    swarm(&s2, Some("2/2"));
    let m = ok(&["merge", s(&s1), s(&s2), "--out", s(&merged)]);
    assert_eq!(scrub(&w, &whole), scrub(&m, &merged), "{w}\n---\n{m}");
    for d in [whole, s1, s2, merged] {
        let _ = std::fs::remove_dir_all(d);
    }
}
