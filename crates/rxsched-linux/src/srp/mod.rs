//! `rxsched serve`: Signaled Receiver Processing (M9) on real frames, for
//! isolation between consumers. Each datagram is demultiplexed by its UDP
//! destination port to the consumer that owns it before any protocol work,
//! and each consumer does its own protocol work on what it is given,
//! charged to it: the IPv4 header checksum, the UDP checksum, copying the
//! payload out ([`protocol_work`]). A flooded consumer's excess dies at its
//! own queue; the others' frames still get through.
//!
//! Two forms: on AF_XDP the device's program demultiplexes (`in_xdp`):
//! each consumer has a socket of its own on every queue, and no thread of
//! the server touches a frame before its consumer does. On AF_PACKET the
//! polling thread does (`user_space`: the core's early demultiplexer and
//! buffering check, the simulator's SRP kernel's policy, into per-consumer
//! queues in shared memory). This module holds what both share: the
//! configuration, the report, the protocol work and the choice of form.

mod feedback;
mod in_xdp;
mod user_space;

pub use user_space::{consume, consumer_main, Demux, Server};

use crate::runtime::RunConfig;
use crate::sys::{self, SysResult};
use crate::wire::{checksum, EthernetFrame, Ipv4Packet, UdpPacket};
use rxsched_core::DropPoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Consumer counter: datagrams taken intact.
pub const RECEIVED: usize = 0;
/// Consumer counter: payload bytes copied out.
pub const BYTES: usize = 1;
/// Consumer counter: frames whose IPv4 or UDP checksum was wrong.
pub const BAD: usize = 2;
/// Consumer counter: the consumer's CPU time in ns, written as it exits.
pub const CPU_NS: usize = 3;
const COUNTERS: u32 = 4;
/// Frames a consumer takes off its UIQ at a time.
const BATCH: u32 = 64;

/// One consumer: the UDP port it owns, and its name.
#[derive(Debug, Clone)]
pub struct ConsumerCfg {
    /// The UDP destination port whose datagrams are its.
    pub port: u16,
    /// Its name in the report.
    pub name: String,
}

/// The server's configuration.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Backend, quota, M4, CPU (the polling thread and every consumer),
    /// duration, live counters.
    pub run: RunConfig,
    /// The interface.
    pub iface: String,
    /// The consumers.
    pub consumers: Vec<ConsumerCfg>,
    /// Each consumer's UIQ, in frames.
    pub uiq: u32,
    /// SRP's buffering check in bytes: a frame is queued only if it and
    /// the UIQ's frames fit in this many; `None`: the UIQ's slots bound it.
    pub rcvbuf: Option<u64>,
    /// The program to run as each consumer (`rxsched`, whose hidden
    /// `consume` command calls [`consumer_main`]).
    pub exe: PathBuf,
    /// LRP's discipline (demultiplexer in XDP only): each consumer's
    /// socket ring is its NI channel of `uiq` frames, and a datagram's
    /// protocol work is done in the receive call that takes it.
    pub lrp: bool,
    /// With the demultiplexer in XDP: queue-state feedback on the
    /// consumers' channels, `(high, low)` fractions of a channel's ring
    /// (see `feedback`); `None`: off.
    pub feedback: Option<(f64, f64)>,
    /// `--metrics` (the demultiplexer in XDP): where the polling thread
    /// publishes the counters.
    pub metrics: Option<crate::metrics::Publisher>,
}

/// What one consumer got.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConsumerReport {
    /// Its name.
    pub name: String,
    /// Its UDP port.
    pub port: u16,
    /// Its process id (with the demultiplexer in XDP, its thread's).
    pub pid: u32,
    /// Frames queued for it.
    pub queued: u64,
    /// Datagrams it took intact.
    pub received: u64,
    /// Payload bytes it copied out.
    pub bytes: u64,
    /// Frames its checksums refused.
    pub bad_checksum: u64,
    /// Frames its full UIQ refused, before any protocol work (with the
    /// demultiplexer in XDP: its sockets' full rings, in the device's
    /// receive work, before any copy).
    pub uiq_drops: u64,
    /// Frames queued and not taken when it stopped.
    pub in_flight: u64,
    /// Its CPU time, in seconds: its protocol work and its own.
    pub cpu_s: f64,
    /// Its exit status, if it exited by itself when asked to stop.
    pub exit_code: Option<i32>,
}

/// What the server did, printed as JSON at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeReport {
    /// Seconds it ran.
    pub duration_s: f64,
    /// Frames taken off the ring.
    pub rx: u64,
    /// Drops before the demultiplexer: `nic_rx_ring`, `xsk_rx_ring`, and
    /// frames no consumer owns (`no_pcb`) where no program kept them from
    /// the server.
    pub drops: BTreeMap<DropPoint, u64>,
    /// Frames the device's program left to the host's stack (no consumer
    /// owns them: the host's own traffic among them).
    #[serde(default)]
    pub to_stack: u64,
    /// Each consumer's share.
    pub consumers: Vec<ConsumerReport>,
    /// The polling thread's CPU time, in seconds.
    pub cpu_s: f64,
    /// Where the demultiplexer ran: `xdp` (the device's program) or
    /// `polling-thread`.
    #[serde(default)]
    pub demux: String,
    /// The consumers' discipline: `srp` or `lrp`.
    #[serde(default)]
    pub discipline: String,
    /// With feedback on the channels: times a queue was held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_holds: Option<u64>,
    /// Why the server stopped early, if it did (the interface disappeared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
}

/// A consumer's protocol work on one frame: the IPv4 header checksum, the
/// UDP checksum (if the sender set one), and the payload copied into `buf`.
/// Returns the payload length, or `None` if a checksum is wrong.
pub fn protocol_work(f: &[u8], buf: &mut Vec<u8>) -> Option<usize> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if !ip.verify_checksum() {
        return None;
    }
    let l4 = ip.payload();
    let udp = UdpPacket::new_checked(l4).ok()?;
    if u16::from_be_bytes([l4[6], l4[7]]) != 0 {
        let mut pseudo = Vec::with_capacity(12 + l4.len());
        pseudo.extend_from_slice(&ip.src());
        pseudo.extend_from_slice(&ip.dst());
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(l4);
        if checksum(&pseudo) != 0 {
            return None;
        }
    }
    buf.clear();
    buf.extend_from_slice(udp.payload());
    Some(buf.len())
}

/// Runs the server on a real interface until its duration is over, a stop
/// signal arrives or the interface disappears: on AF_XDP with the
/// demultiplexer in the device's program (`in_xdp`), on AF_PACKET in the
/// polling thread, the consumers started first as ordinary processes.
pub fn run(cfg: &ServeConfig) -> SysResult<ServeReport> {
    let cfg = &ServeConfig {
        run: cfg.run.launch()?,
        ..cfg.clone()
    };
    match cfg.run.backend {
        crate::runtime::Backend::Xdp => in_xdp::run(cfg),
        crate::runtime::Backend::Packet if cfg.lrp => Err(sys::SysError {
            what: cfg.iface.clone(),
            syscall: "configure",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--lrp needs the demultiplexer in XDP: --backend xdp",
            ),
        }),
        crate::runtime::Backend::Packet if cfg.metrics.is_some() => Err(sys::SysError {
            what: cfg.iface.clone(),
            syscall: "configure",
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "--metrics is served with the demultiplexer in XDP: --backend xdp",
            ),
        }),
        crate::runtime::Backend::Packet => user_space::run(cfg),
    }
}
