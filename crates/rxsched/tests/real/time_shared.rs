//! `route --time-shared --slice-us`: the polling thread and the DUT's
//! receive threads run with the slice asked for while the router runs,
//! across the gate's openings and closings, and get the kernel's default
//! back when it stops; under `--slo` the slice is the objective's latency.

use super::*;
use rxsched_linux::napi_threads;
use rxsched_linux::sys::slice::slice;

/// The DUT's receive threads (both ports') and the slice each runs with.
fn napi_slices(l: &Lab) -> Vec<(i32, Option<u64>)> {
    l.in_netns(Role::Dut, || {
        let mut v = napi_threads::thread_ids(D0.iface)?;
        v.extend(napi_threads::thread_ids(D1.iface)?);
        v.into_iter()
            .filter(|t| *t > 0)
            .map(|t| Ok((t, slice(t)?)))
            .collect()
    })
    .expect("the DUT's receive threads")
}

/// Runs `route --mode polling --time-shared` with `flags` on a lab of its
/// own, and checks that the polling thread and the receive threads run with
/// `want_ns` while it forwards and with the kernel's defaults after.
fn keeps_the_slice(tag: &str, flags: &[&str], want_ns: u64) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new(tag) else { return };
    let l = &t.0;
    let before = napi_slices(l);
    assert!(!before.is_empty(), "the lab's ports have receive threads");
    if before.iter().all(|(_, s)| s.is_none()) {
        eprintln!("skipped: this kernel keeps no per-thread slice (Linux 6.12 or later does)");
        return;
    }
    let mut argv = vec!["route", "--mode", "polling", "--time-shared"];
    argv.extend_from_slice(flags);
    argv.extend_from_slice(&["--duration", "20"]);
    let route = start(l, Role::Dut, &argv);
    // Frames open and close the gate many times over.
    send(l, 20_000, &[]);
    // Idle, the router waits with the gate open (read again if a stray
    // frame had it closed at that moment).
    let mut during = Vec::new();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        during = napi_slices(l);
        if during.iter().all(|(_, s)| s.is_some()) {
            break;
        }
    }
    let poll_thread = slice(route.id() as i32).expect("the router's thread");
    stop(&route);
    let r: RouterReport = report(route);
    let after = napi_slices(l);
    assert!(r.forwarded > 0, "the router forwarded: {r:?}");
    assert_eq!(
        poll_thread,
        Some(want_ns),
        "the polling thread's slice ({flags:?})"
    );
    for (tid, s) in &during {
        assert_eq!(
            *s,
            Some(want_ns),
            "receive thread {tid} while the router runs ({flags:?}), after {} frames forwarded",
            r.forwarded
        );
    }
    assert_eq!(after, before, "the kernel's default slices back");
}

#[test]
fn a_time_shared_router_keeps_its_slice_and_gives_it_back() {
    keeps_the_slice("sl", &["--slice-us", "100"], 100_000);
}

/// Under `--slo` the slice is the objective's latency.
#[test]
fn an_objective_sets_a_time_shared_routers_slice() {
    keeps_the_slice("so", &["--slo", "latency=300us,cpu=50%"], 300_000);
}
