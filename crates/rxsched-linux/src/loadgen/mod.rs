//! `rxsched gen` and `rxsched sink`: rate-controlled UDP with sequence
//! numbers and send times, and the receiving end that measures loss,
//! reordering and one-way latency (both ends read CLOCK_MONOTONIC). Two
//! engines: [`xdp`] (an XDP program run in live-frames mode, and one that
//! counts at the sink: millions of frames per second from one core) and
//! [`packet`] (AF_PACKET, for interfaces without XDP).

pub mod packet;
pub mod xdp;

use crate::sys::SysResult;
use crate::wire::Mac;
use serde::{Deserialize, Serialize};

/// How frames are sent or received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// XDP: BPF_PROG_TEST_RUN in live-frames mode, and an XDP counter (the
    /// command line's default).
    #[default]
    Xdp,
    /// AF_PACKET: `sendmmsg` and a TPACKET_V3 ring.
    Packet,
}

/// What to send.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Interface to send on.
    pub iface: String,
    /// Source MAC (default: the interface's own).
    pub src_mac: Option<Mac>,
    /// Destination MAC: the next hop.
    pub dst_mac: Mac,
    /// Source address.
    pub src_ip: [u8; 4],
    /// Destination address.
    pub dst_ip: [u8; 4],
    /// Destination UDP port (the source port is 9000).
    pub dst_port: u16,
    /// Frames per second wanted.
    pub rate_pps: f64,
    /// Frame size in bytes (without CRC; at least 60).
    pub frame_bytes: usize,
    /// Stop after this many frames (0: no limit).
    pub count: u64,
    /// Stop after this many seconds.
    pub duration_s: f64,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
    /// How to send.
    pub engine: Engine,
    /// A second stream mixed in (xdp engine): its destination UDP port and
    /// rate, its frames leaving between the first stream's.
    pub mix: Option<(u16, f64)>,
}

/// What the generator really did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenReport {
    /// How it sent.
    pub engine: Engine,
    /// Frames the kernel took.
    pub sent: u64,
    /// From the first to the last send, in seconds.
    pub duration_s: f64,
    /// The rate wanted.
    pub requested_pps: f64,
    /// The rate achieved: this is the offered rate a benchmark uses.
    pub achieved_pps: f64,
    /// Times the generator fell behind: the send queue was full (packet),
    /// or the schedule slipped and was reset (xdp).
    pub waits: u64,
    /// Frames of the mixed stream sent, if one was mixed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix_sent: Option<u64>,
}

/// How long to listen.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Interface to receive on.
    pub iface: String,
    /// Stop after this many seconds at most.
    pub duration_s: f64,
    /// Stop this long after the last frame, once frames have come.
    pub idle_s: f64,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
    /// How to receive.
    pub engine: Engine,
    /// XDP engine: count at tc ingress (true) or in XDP.
    pub tc_hook: bool,
    /// XDP engine: time one probe in this many (a power of two) for the
    /// latency histogram; every probe is still counted and checked.
    pub latency_every: u64,
}

/// Latency percentiles in µs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LatencyUs {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// What arrived.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SinkReport {
    /// How it received.
    pub engine: Engine,
    /// Probe frames received.
    pub received: u64,
    /// Other frames seen (not from the generator).
    pub other: u64,
    /// Probes missing up to the highest sequence number seen.
    pub lost: u64,
    /// Probes that came after a higher-numbered one.
    pub reordered: u64,
    /// Probes seen twice.
    pub duplicates: u64,
    /// The highest sequence number seen.
    pub max_seq: u64,
    /// One-way latency.
    pub latency_us: LatencyUs,
    /// Probes the latency comes from (all, or one in `--latency-every`).
    pub latency_samples: u64,
    /// From the first to the last probe, in seconds.
    pub duration_s: f64,
    /// Probes per second over that time.
    pub rate_pps: f64,
    /// Frames the kernel dropped on the sink's own ring.
    pub ring_drops: u64,
    /// Lowest and highest IPv4 TTL among the probes (a router decrements it).
    pub ttl_min: u8,
    /// Highest TTL.
    pub ttl_max: u8,
    /// Probes whose IPv4 header checksum did not verify.
    pub bad_ip_checksum: u64,
    /// Source MAC of the first probe (a router rewrites it).
    pub src_mac: String,
    /// Destination MAC of the first probe.
    pub dst_mac: String,
}

/// Sends until the count or the time is reached; never longer than
/// `duration_s`.
pub fn generate(cfg: &GenConfig) -> SysResult<GenReport> {
    match cfg.engine {
        Engine::Xdp => xdp::generate(cfg),
        Engine::Packet => packet::generate(cfg),
    }
}

/// Receives until the time is up or the traffic has stopped.
pub fn sink(cfg: &SinkConfig) -> SysResult<SinkReport> {
    match cfg.engine {
        Engine::Xdp => xdp::sink(cfg),
        Engine::Packet => packet::sink(cfg),
    }
}

/// The frame a generator sends: a probe of `cfg.frame_bytes` with sequence
/// number and send time 0 (the engine stamps them).
pub fn template(cfg: &GenConfig, src_mac: Mac) -> Vec<u8> {
    probe(cfg, src_mac, 0, 0).to_vec()
}

/// The generator's probe number `seq`, sent at `now`.
pub fn probe(cfg: &GenConfig, src_mac: Mac, seq: u64, now: u64) -> crate::wire::UdpProbe {
    crate::wire::UdpProbe {
        frame_len: cfg.frame_bytes,
        src_mac,
        dst_mac: cfg.dst_mac,
        src_ip: cfg.src_ip,
        dst_ip: cfg.dst_ip,
        ports: (9000, cfg.dst_port),
        ttl: 64,
        seq,
        sent_ns: now,
    }
}
