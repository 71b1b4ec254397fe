//! A protected receive queue (`route --protect-queue 1`), judged by `ping`:
//! the generator floods the DUT's queue 0 from CPU 0 at its top rate while
//! ping's echo requests, which the sender's transmit steering (XPS) puts on
//! queue 1, cross the router to the sink; every one comes back while the
//! flood's excess dies on queue 0's ring.
//!
//! What this does not show: that serving the protected queue first matters.
//! Plain round robin over the two queues keeps ping alive here too, and on
//! this kernel a veth holds back frames its own stack sends when the
//! peer's ring is full (they wait in the sender's queueing discipline), so
//! even ping on the flooded queue loses nothing: only frames sent by XDP,
//! as the generator's are, die on a full veth ring. The protected class's
//! priority and cap are tested in the core and the simulator.

use super::*;

/// Maps the generator's transmit queue `q` to CPU `q` (XPS), so that what
/// a process on CPU q sends arrives on the DUT's receive queue q.
fn steer_by_cpu(l: &Lab) {
    for q in 0..2 {
        let path = format!("/sys/class/net/g0/queues/tx-{q}/xps_cpus");
        let set = format!("echo {} > {path}", 1 << q);
        let ok = Command::new("ip")
            .args(["netns", "exec", &l.ns(Role::Gen), "sh", "-c", &set])
            .status()
            .expect("ip netns exec")
            .success();
        assert!(ok, "could not write {path} in the generator's namespace");
    }
}

/// `ping` from CPU 1 in the generator's namespace to the sink, during a
/// flood from CPU 0: the replies received of `count`, and ping's summary.
fn ping_under_flood(l: &Lab, count: u32) -> (u32, String) {
    let flood = spawn(
        l,
        Role::Gen,
        &["gen", "--rate", "1e9", "--duration", "5", "--cpu", "0"],
    );
    std::thread::sleep(Duration::from_millis(500));
    let c = count.to_string();
    let o = Command::new("ip")
        .args(["netns", "exec", &l.ns(Role::Gen), "taskset", "-c", "1"])
        .args(["ping", "-n", "-q", "-c", &c, "-i", "0.01", "-W", "1"])
        .arg("198.19.0.1")
        .output()
        .expect("ping");
    let _: GenReport = report(flood);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    // "200 packets transmitted, 200 received, 0% packet loss, ..."
    let received = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let summary = out
        .lines()
        .filter(|l| l.contains("packets") || l.contains("rtt"));
    (received, summary.collect::<Vec<_>>().join("; "))
}

#[test]
fn a_protected_queue_keeps_ping_alive_under_a_flood() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !rxsched_linux::needs::tool("ping", "iputils-ping") {
        return;
    }
    let Some(t) = TestLab::with_queues("p", 2) else {
        return;
    };
    let l = &t.0;
    steer_by_cpu(l);
    trials(3, "ping on a protected queue under a flood", || {
        let route = spawn(
            l,
            Role::Dut,
            &[
                "route",
                "--mode",
                "polling",
                "--protect-queue",
                "1",
                "--duration",
                "30",
            ],
        );
        std::thread::sleep(Duration::from_millis(500));
        let (got, ping) = ping_under_flood(l, 200);
        stop(&route);
        let r: RouterReport = report(route);
        let died = r.dropped_before_taking();
        assert_eq!(r.rx + died, r.accounted(), "{r:?}");
        let taken = r.protected.map_or(0, |p| p.taken);
        let saw = format!(
            "ping on the protected queue: {got} of 200 replies ({ping}); the router took {taken} frames off the protected queues, forwarded {} and {died} of the flood died on the rings before it took them",
            r.forwarded
        );
        if got == 200 && taken >= 200 && r.forwarded > 100_000 && died > 0 {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}
