//! The protected stream's TCP part in `bench real protect`: a connection
//! from the generator's stack to the router itself, `iperf3` at both ends
//! (a client nobody here wrote), writing 100 bytes every 100 ms; its
//! server on the DUT's CPU as an operator runs a routing daemon. Each point
//! has TCP's retransmissions and the sender's smoothed round-trip estimate
//! (sampled once a second), mean and largest.
//!
//! The largest estimate jumps to 2-10 ms at one or two points of a run,
//! at rates that change from run to run, in the kernel's own series as
//! often as in ours (a single round trip of a few tens of ms moves the
//! estimate, which weighs a sample by 1/8, that far); with nothing offered
//! it has not. Captured on both sides (the kernel's own forwarding, 50k
//! offered), the late ACKs reached g0 6.6-99 ms after their segments left
//! it, while at d0 (captured in 13 trials) no ACK came more than 5 ms
//! after its segment arrived (the one looked at closely: 0.27 ms after a
//! segment that had taken 98 ms from g0): the segment was held between g0
//! and d0, before the DUT's stack; why is not found (d0's receive threads
//! are pinned to the DUT's CPU). Running the client at SCHED_FIFO 60 did not remove it (two runs
//! by hand with it, two without, under the protected router at the top
//! rate: 656 and 2,964 µs with, 148 and 161 without). `sockperf
//! ping-pong`, which times every exchange, is no substitute on this lab:
//! it paces its messages by spinning (64% of a CPU at 10 exchanges a
//! second), so on the generator's CPU it either takes the generator's
//! time (at a real-time priority the flood fell to a quarter) or times its
//! own waits for that CPU (in the normal class a quarter of its exchanges
//! took 1.7-6 ms under a flood, p50 about 200 µs).

use super::BenchError;
use crate::result::Point;
use rxsched_linux::lab::{Lab, Role, D0, DUT_CPU, GEN_CPU};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The keepalive server's real-time priority (SCHED_FIFO): above the
/// router's polling thread (50) and its protected receive thread (51). A
/// process in the normal class on the router's CPU waits while the
/// router's real-time threads work, up to what the kernel's real-time
/// budget leaves (a twentieth of each period): by hand, under a top-rate
/// flood, its round-trip estimate averaged 1.6-2.1 ms there against
/// 0.13-0.22 ms on the other CPU, and M4 (`--cycle-limit 50`) did not cure
/// it. A routing daemon is run this way for the same reason.
pub const CONTROL_PLANE_PRIO: u32 = 60;

/// The keepalive's pacing, in bits per second, and its writes, in bytes:
/// one write every 100 ms.
const KEEPALIVE_BPS: &str = "8k";
const KEEPALIVE_WRITE: &str = "100";

/// A TCP connection from the generator's stack to the router itself,
/// `iperf3` at both ends, writing 100 bytes every 100 ms.
pub struct Keepalive {
    server: std::process::Child,
    /// Taken when its output is read.
    client: Option<std::process::Child>,
}

/// What the keepalive's sender said (`iperf3 -J`): bytes sent, TCP's
/// retransmissions, and its smoothed round-trip estimate (sampled once a
/// second), mean and largest, in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Kept {
    /// Bytes the client sent.
    pub bytes: f64,
    /// Segments TCP retransmitted.
    pub retransmits: f64,
    /// The mean of the round-trip estimate's samples, in µs.
    pub rtt_mean_us: f64,
    /// The largest sample, in µs.
    pub rtt_max_us: f64,
}

impl Keepalive {
    /// Starts the server in the DUT's namespace and, once it listens, the
    /// client in the generator's, on its CPU, for `secs`.
    pub fn start(lab: &Lab, secs: f64) -> Result<Keepalive, BenchError> {
        let addr = std::net::Ipv4Addr::from(D0.ip).to_string();
        let missing = |e: std::io::Error| {
            BenchError(format!("iperf3: {e} (install it: apt-get install iperf3)"))
        };
        let (prio, cpu) = (CONTROL_PLANE_PRIO.to_string(), DUT_CPU.to_string());
        let server = Command::new("ip")
            .args(["netns", "exec", &lab.ns(Role::Dut)])
            .args(["chrt", "-f", &prio, "taskset", "-c", &cpu])
            .args(["iperf3", "-s", "-1", "-B", &addr])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(missing)?;
        std::thread::sleep(Duration::from_millis(300));
        let client = Command::new("ip")
            .args(["netns", "exec", &lab.ns(Role::Gen), "taskset", "-c"])
            .arg(GEN_CPU.to_string())
            .args([
                "iperf3",
                "-J",
                "-c",
                &addr,
                "-b",
                KEEPALIVE_BPS,
                "-l",
                KEEPALIVE_WRITE,
                "-t",
            ])
            .arg(format!("{:.0}", secs.max(1.0)))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(missing)?;
        Ok(Keepalive {
            server,
            client: Some(client),
        })
    }

    /// Waits for the client, stops the server if it has not ended, and
    /// reads what the client said: `None` when the connection never carried
    /// anything (under a flood its handshake may die with the flood's
    /// frames, a measured outcome, said on one line, not a failed bench).
    pub fn finish(mut self) -> Result<Option<Kept>, BenchError> {
        let client = self.client.take().expect("taken once");
        let out = client
            .wait_with_output()
            .map_err(|e| BenchError(format!("iperf3: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let kept = parse_iperf(&text);
        if kept.is_none() {
            let why = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
                .unwrap_or_else(|| "no report".into());
            eprintln!("bench: the keepalive connection carried nothing: iperf3: {why}");
        }
        Ok(kept)
    }
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        for c in self.client.iter_mut().chain([&mut self.server]) {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// Reads `iperf3 -J`'s sender's end.
pub fn parse_iperf(json: &str) -> Option<Kept> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let s = v.get("end")?.get("streams")?.get(0)?.get("sender")?;
    let f = |k: &str| s.get(k).and_then(serde_json::Value::as_f64);
    Some(Kept {
        bytes: f("bytes")?,
        retransmits: f("retransmits").unwrap_or(0.0),
        rtt_mean_us: f("mean_rtt")?,
        rtt_max_us: f("max_rtt")?,
    })
}

impl Kept {
    /// Its part of a point.
    pub fn set(&self, p: &mut Point) {
        p.set("tcp_keepalive_bytes", self.bytes);
        p.set("tcp_retransmits", self.retransmits);
        p.set("tcp_rtt_mean_us", self.rtt_mean_us);
        p.set("tcp_rtt_max_us", self.rtt_max_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// iperf3's JSON, as 3.12 prints it (the parts read).
    #[test]
    fn reads_what_iperf3_said() {
        let j = r#"{"start":{},"intervals":[],"end":{"streams":[{"sender":{"socket":5,"bytes":3000,"retransmits":2,"max_rtt":149,"min_rtt":92,"mean_rtt":127}}],"sum_sent":{"retransmits":2}}}"#;
        let k = parse_iperf(j).unwrap();
        assert_eq!(
            (k.bytes, k.retransmits, k.rtt_mean_us, k.rtt_max_us),
            (3000.0, 2.0, 127.0, 149.0)
        );
        assert_eq!(parse_iperf(r#"{"error":"unable to connect"}"#), None);
        let mut p = Point::default();
        k.set(&mut p);
        assert_eq!(p.get("tcp_retransmits"), Some(2.0));
    }
}
