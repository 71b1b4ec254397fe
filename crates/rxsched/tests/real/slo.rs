//! `route --slo`: one objective instead of the quota and the cycle limit.

use super::*;

/// Under a flood at the generator's top rate, `route --slo
/// latency=500us,cpu=50%` leaves a compute process on its CPU at least
/// 45% (the objective's half, less five points for the machine's noise),
/// forwards, and has raised its quota from the safe start of 1 once it had
/// measured its frames; at low load, ping crosses it.
#[test]
fn an_objective_holds_the_routers_share_and_sets_the_quota() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new("o") else { return };
    let l = &t.0;
    trials(3, "route --slo under a flood", || {
        let route = spawn(
            l,
            Role::Dut,
            &[
                "route",
                "--mode",
                "polling",
                "--slo",
                "latency=500us,cpu=50%",
                "--cpu",
                "1",
                "--duration",
                "30",
            ],
        );
        std::thread::sleep(Duration::from_millis(1500));
        let ping = Command::new("ip")
            .args(["netns", "exec", &l.ns(Role::Gen), "ping", "-n", "-q"])
            .args(["-c", "50", "-i", "0.01", "-W", "1", "198.19.0.1"])
            .output()
            .expect("ping");
        let ping = String::from_utf8_lossy(&ping.stdout).into_owned();
        let pinged = ping.contains(" 0% packet loss");
        let s = spin_beside_flood(l);
        stop(&route);
        let r: RouterReport = report(route);
        let slo = r.slo.expect("the report says what the objective set");
        assert!(
            (0.0..=0.5).contains(&slo.cycle_limit),
            "the limit is within the share: {slo:?}"
        );
        let rtt = ping
            .lines()
            .find(|l| l.contains("rtt"))
            .unwrap_or("no rtt line")
            .to_string();
        let saw = format!(
            "compute kept {:.2} of the CPU; forwarded {}; the objective set quota {} (measured {:.0} ns a frame, {} quota changes) and limit {:.2}; ping at low load: {rtt}",
            s.cpu_share, r.forwarded, slo.quota, slo.rx_frame_ns, slo.quota_changes, slo.cycle_limit
        );
        if s.cpu_share >= 0.45 && r.forwarded > 100_000 && slo.quota > 1 && pinged {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}
