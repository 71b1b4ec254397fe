//! The protected stream's TCP part in `bench real protect`: a connection
//! from the generator's stack to the router itself, `iperf3` at both ends
//! (a client nobody here wrote), writing 100 bytes every 100 ms; its
//! server on the DUT's CPU as an operator runs a routing daemon. Each point
//! has TCP's retransmissions, the sender's smoothed round-trip estimate
//! (sampled once a second), mean and largest, and every exchange's round
//! trip, from a `tcpdump` capture on g0: each data segment's first
//! transmission to the first ACK that covers it (p50, p99).
//!
//! The largest estimate used to jump to 2-10 ms at one or two points of a
//! run, at rates that changed from run to run, in the kernel's own series
//! as often as in ours (one round trip of a few tens of ms moves an
//! estimate that weighs a sample by 1/8 that far). Captures on g0 and d0
//! put the delay between the two (a segment took 98 ms from g0 to d0 and
//! was ACKed 0.27 ms later). It is the host's (2026-11-28): traced with
//! bpftrace on the scheduler's, NAPI's and the network's tracepoints, each
//! late segment had been queued on d0 at once, and the DUT's CPU had then
//! run nothing, no timer, no switch, no poll, for 90-101 ms; its steal
//! column rises by 100 ms at such a stop; a SCHED_FIFO 99
//! thread there woke 100 ms late six times a minute under the kernel's
//! forwarding at 50k. In 15 ten-second trials by hand timed against the
//! steal, every one with such a stop had a largest estimate of 0.63-6.3 ms and every one
//! without had 134-423 µs. The bench watches for the stops
//! ([`rxsched_linux::sys::StallWatch`]) and judges the exchanges' p99,
//! which one late exchange does not move. Running the client at
//! SCHED_FIFO 60 had not helped; `sockperf ping-pong`, which times every
//! exchange, is no substitute on this lab: it paces its messages by
//! spinning (64% of a CPU at 10 exchanges a second), so on the
//! generator's CPU it either takes the generator's time or times its own
//! waits for that CPU.

use super::protect::quantile;
use super::BenchError;
use crate::result::Point;
use rxsched_linux::lab::{Lab, Role, D0, DUT_CPU, G0, GEN_CPU};
use rxsched_linux::wire::{EthernetFrame, Ipv4Packet, ETHERTYPE_IPV4};
use std::collections::HashMap;
use std::path::PathBuf;
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
/// iperf3's port: its control connection and the keepalive's.
const PORT: u16 = 5201;
const IPPROTO_TCP: u8 = 6;

/// A TCP connection from the generator's stack to the router itself,
/// `iperf3` at both ends, writing 100 bytes every 100 ms.
pub struct Keepalive {
    server: std::process::Child,
    /// Taken when its output is read.
    client: Option<std::process::Child>,
    /// tcpdump on g0, and the file it writes.
    tcpdump: std::process::Child,
    pcap: PathBuf,
}

/// iperf3 could not be started: what failed, and how to install it.
pub fn missing(e: std::io::Error) -> BenchError {
    BenchError(format!("iperf3: {e} (install it: apt-get install iperf3)"))
}

/// What the keepalive's sender said (`iperf3 -J`): bytes sent, TCP's
/// retransmissions, and its smoothed round-trip estimate (sampled once a
/// second), mean and largest, in µs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kept {
    /// Bytes the client sent.
    pub bytes: f64,
    /// Segments TCP retransmitted.
    pub retransmits: f64,
    /// The mean of the round-trip estimate's samples, in µs.
    pub rtt_mean_us: f64,
    /// The largest sample, in µs.
    pub rtt_max_us: f64,
    /// Every exchange's round trip (a segment to the ACK that covers it),
    /// in µs, from the capture on g0.
    pub exchanges_us: Vec<f64>,
}

impl Keepalive {
    /// Starts the server in the DUT's namespace and, once it listens, the
    /// client in the generator's, on its CPU, for `secs`.
    pub fn start(lab: &Lab, secs: f64) -> Result<Keepalive, BenchError> {
        let addr = std::net::Ipv4Addr::from(D0.ip).to_string();
        let pcap =
            std::env::temp_dir().join(format!("rxsched-keepalive-{}.pcap", std::process::id()));
        let tcpdump = Command::new("ip")
            .args(["netns", "exec", &lab.ns(Role::Gen)])
            // The whole frame: pcap-file refuses a record whose frame was
            // longer than the capture's snapshot length.
            .args(["tcpdump", "-i", G0.iface, "-U", "-w"])
            .arg(&pcap)
            .args(["tcp", "port", &PORT.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                BenchError(format!(
                    "tcpdump: {e} (install it: apt-get install tcpdump)"
                ))
            })?;
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
            tcpdump,
            pcap,
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
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(self.tcpdump.id() as i32, libc::SIGINT) };
        let _ = self.tcpdump.wait();
        let pcap = std::fs::read(&self.pcap);
        let _ = std::fs::remove_file(&self.pcap);
        let pcap = pcap
            .map_err(|e| BenchError(format!("tcpdump's capture {}: {e}", self.pcap.display())))?;
        let kept = parse_iperf(&text).map(|k| Kept {
            exchanges_us: exchanges(&pcap),
            ..k
        });
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
        for c in self
            .client
            .iter_mut()
            .chain([&mut self.server, &mut self.tcpdump])
        {
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
        exchanges_us: Vec::new(),
    })
}

/// One TCP segment of a capture: when, which client port, whether the
/// client sent it, its sequence range's end and its acknowledgement.
struct Seg {
    t_us: f64,
    client_port: u16,
    from_client: bool,
    seq_end: u32,
    ack: u32,
    payload: u32,
}

/// Reads a captured Ethernet/IPv4/TCP frame to or from [`PORT`].
fn segment(t_us: f64, f: &[u8]) -> Option<Seg> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let tcp = ip.payload();
    if ip.protocol() != IPPROTO_TCP || tcp.len() < 20 {
        return None;
    }
    let port = |i: usize| u16::from_be_bytes([tcp[i], tcp[i + 1]]);
    let word = |i: usize| u32::from_be_bytes([tcp[i], tcp[i + 1], tcp[i + 2], tcp[i + 3]]);
    let (sport, dport) = (port(0), port(2));
    let from_client = dport == PORT;
    if !from_client && sport != PORT {
        return None;
    }
    let payload = tcp.len().saturating_sub(usize::from(tcp[12] >> 4) * 4) as u32;
    Some(Seg {
        t_us,
        client_port: if from_client { sport } else { dport },
        from_client,
        seq_end: word(4).wrapping_add(payload),
        ack: word(8),
        payload,
    })
}

/// One connection of a capture: its segments awaiting their ACK (the end
/// of each one's sequence range, when it was first sent), and the round
/// trips found.
type Conn = (Vec<(u32, f64)>, Vec<f64>);

/// Every exchange's round trip in a pcap capture of iperf3's connections,
/// in µs: from each data segment's first transmission by the client to the
/// first ACK that covers it, on the connection that carried the most
/// segments (iperf3's control connection shares the port).
pub fn exchanges(pcap: &[u8]) -> Vec<f64> {
    let Ok(mut r) = pcap_file::pcap::PcapReader::new(pcap) else {
        return Vec::new();
    };
    let mut conns: HashMap<u16, Conn> = HashMap::new();
    while let Some(Ok(p)) = r.next_packet() {
        let Some(s) = segment(p.timestamp.as_secs_f64() * 1e6, &p.data) else {
            continue;
        };
        let (waiting, rtts) = conns.entry(s.client_port).or_default();
        // `a` at or after `b`, in sequence space.
        let covers = |a: u32, b: u32| a.wrapping_sub(b) as i32 >= 0;
        if s.from_client && s.payload > 0 {
            if !waiting.iter().any(|w| covers(w.0, s.seq_end)) {
                waiting.push((s.seq_end, s.t_us));
            }
        } else if !s.from_client {
            waiting.retain(|&(end, sent)| {
                let acked = covers(s.ack, end);
                if acked {
                    rtts.push(s.t_us - sent);
                }
                !acked
            });
        }
    }
    conns
        .into_values()
        .map(|c| c.1)
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

impl Kept {
    /// Its part of a point.
    pub fn set(&self, p: &mut Point) {
        p.set("tcp_keepalive_bytes", self.bytes);
        p.set("tcp_retransmits", self.retransmits);
        p.set("tcp_rtt_mean_us", self.rtt_mean_us);
        p.set("tcp_rtt_max_us", self.rtt_max_us);
        let mut x = self.exchanges_us.clone();
        p.set("tcp_exchanges", x.len() as f64);
        if !x.is_empty() {
            p.set("tcp_exchange_p50_us", quantile(&mut x, 0.5));
            p.set("tcp_exchange_p99_us", quantile(&mut x, 0.99));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet/IPv4/TCP frame with `payload` bytes.
    fn frame(sport: u16, dport: u16, seq: u32, ack: u32, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x08, 0x00]);
        let total = (20 + 20 + payload) as u16;
        f.extend([
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0,
            0,
            64,
            6,
            0,
            0,
        ]);
        f.extend([198, 18, 0, 1, 198, 18, 0, 2]);
        f.extend(sport.to_be_bytes());
        f.extend(dport.to_be_bytes());
        f.extend(seq.to_be_bytes());
        f.extend(ack.to_be_bytes());
        f.extend([0x50, 0x10, 0, 0, 0, 0, 0, 0]);
        f.extend(vec![0u8; payload]);
        f
    }

    /// Each data segment's first transmission to the first ACK covering
    /// it, on the busier connection; a retransmission and a cumulative
    /// ACK counted as TCP would see them.
    #[test]
    fn exchanges_are_timed_from_a_capture() {
        let (ctl, data) = (40000, 40001);
        let s = u32::MAX - 50; // sequence numbers wrap on the way
        let frames: Vec<(u64, Vec<u8>)> = vec![
            (0, frame(ctl, PORT, 7, 0, 10)),
            (5_000, frame(PORT, ctl, 0, 17, 0)),
            (10_000, frame(data, PORT, s, 0, 100)),
            (10_150, frame(PORT, data, 0, s.wrapping_add(100), 0)),
            (110_000, frame(data, PORT, s.wrapping_add(100), 0, 100)),
            (110_300, frame(data, PORT, s.wrapping_add(100), 0, 100)),
            (111_000, frame(PORT, data, 0, s.wrapping_add(200), 0)),
            (210_000, frame(data, PORT, s.wrapping_add(200), 0, 100)),
            (210_050, frame(data, PORT, s.wrapping_add(300), 0, 100)),
            (210_200, frame(PORT, data, 0, s.wrapping_add(400), 0)),
        ];
        let mut w = pcap_file::pcap::PcapWriter::new(Vec::new()).unwrap();
        for (us, f) in &frames {
            let t = Duration::from_micros(*us);
            w.write_packet(&pcap_file::pcap::PcapPacket::new(t, f.len() as u32, f))
                .unwrap();
        }
        let out = w.into_writer();
        let mut x = exchanges(&out);
        x.sort_by(f64::total_cmp);
        let x: Vec<i64> = x.iter().map(|v| v.round() as i64).collect();
        assert_eq!(x, vec![150, 150, 200, 1000]);
        assert!(exchanges(b"not a capture").is_empty());
    }

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
