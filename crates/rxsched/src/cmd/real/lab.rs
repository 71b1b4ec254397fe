//! `rxsched lab`, `gen` and `sink`: the lab of namespaces and the traffic
//! through it.

use super::{json, positive};
use clap::{Args, Subcommand, ValueEnum};
use rxsched::error::{Error, Result};
use rxsched_linux::lab::{self, G0, S0};
use rxsched_linux::loadgen::{Engine, GenConfig, SinkConfig};
use rxsched_linux::wire::Mac;

/// `rxsched lab ...`
#[derive(Subcommand)]
pub enum LabCmd {
    /// Build the three namespaces and their links (clears leftovers first).
    Up {
        /// Also IPv6, in 2001:2::/48 (off by default: no IPv6 chatter in
        /// the benchmarks).
        #[arg(long)]
        ipv6: bool,
        /// Receive and transmit queues on every veth end, each receive
        /// queue with its own NAPI thread (a multi-queue NIC's shape).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        queues: u32,
    },
    /// Remove everything the lab made; harmless if nothing is there.
    Down,
    /// Show what exists, where receive work is steered, and per-CPU NET_RX counts.
    Status,
}

/// How frames are sent or received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// XDP programs: a live-frames generator, an XDP counter at the sink.
    Xdp,
    /// AF_PACKET: `sendmmsg` and a TPACKET_V3 ring (interfaces without XDP).
    Packet,
}

impl From<EngineArg> for Engine {
    fn from(e: EngineArg) -> Engine {
        match e {
            EngineArg::Xdp => Engine::Xdp,
            EngineArg::Packet => Engine::Packet,
        }
    }
}

/// `rxsched gen`
#[derive(Args)]
pub struct GenArgs {
    /// How to send.
    #[arg(long, value_enum, default_value = "xdp")]
    pub engine: EngineArg,
    /// Interface to send on.
    #[arg(long, default_value = "g0")]
    pub iface: String,
    /// Next hop's MAC (default: the lab's DUT port d0, its router).
    #[arg(long)]
    pub dst_mac: Option<String>,
    /// Source address (default: the lab generator's).
    #[arg(long)]
    pub src_ip: Option<std::net::Ipv4Addr>,
    /// Destination address (default: the lab sink's).
    #[arg(long)]
    pub dst_ip: Option<std::net::Ipv4Addr>,
    /// Destination UDP port (the source port is 9000).
    #[arg(long, default_value_t = 9001)]
    pub dport: u16,
    /// Frames per second.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Frame size in bytes, without CRC: 62 (the probe's headers and stamp) to 1514 (a 1500-byte MTU).
    #[arg(long, default_value_t = 62)]
    pub size: usize,
    /// Stop after this many frames (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Mix a second stream in: `DPORT:RATE`, UDP to DPORT at RATE
    /// pkts/s, its frames leaving between the first stream's as two
    /// senders' frames meet on a wire (xdp engine; reported as `mix_sent`).
    #[arg(long)]
    pub mix: Option<String>,
}

/// Where the XDP engine's sink counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HookArg {
    /// At tc ingress: cheapest for frames that arrive as socket buffers.
    Tc,
    /// In XDP: cheapest for frames that arrive as XDP frames.
    Xdp,
}

/// `rxsched sink`
#[derive(Args)]
pub struct SinkArgs {
    /// How to receive.
    #[arg(long, value_enum, default_value = "xdp")]
    pub engine: EngineArg,
    /// Where the xdp engine counts.
    #[arg(long, value_enum, default_value = "tc")]
    pub hook: HookArg,
    /// Interface to receive on.
    #[arg(long, default_value = "s0")]
    pub iface: String,
    /// Stop after this many seconds at most.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop this long after the last frame.
    #[arg(long, default_value_t = 1.0)]
    pub idle: f64,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Time one probe in this many (a power of two) for the latency
    /// histogram: reading the clock is the xdp sink's dearest step, and a
    /// sample keeps it above 3 Mpps on one core. Counts stay exact.
    #[arg(long, default_value_t = 1, value_parser = power_of_two)]
    pub latency_every: u64,
}

/// A power of two from 1 to 65536.
fn power_of_two(s: &str) -> std::result::Result<u64, String> {
    let v: u64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_power_of_two() && v <= 65_536 {
        Ok(v)
    } else {
        Err(format!("{v} is not a power of two from 1 to 65536"))
    }
}

/// Runs a lab command.
pub fn lab_cmd(c: LabCmd) -> Result<()> {
    match c {
        LabCmd::Up { ipv6, queues } => {
            let l = lab::Lab::standard().with_queues(queues);
            l.up()?;
            if ipv6 {
                l.ipv6_on()?;
            }
            eprintln!(
                "lab up: {}, {}, {}; generator on CPU {}, DUT receive work on CPU {}",
                l.ns(lab::Role::Gen),
                l.ns(lab::Role::Dut),
                l.ns(lab::Role::Sink),
                lab::GEN_CPU,
                lab::DUT_CPU
            );
        }
        LabCmd::Down => {
            lab::Lab::standard().down()?;
            eprintln!("lab down");
        }
        LabCmd::Status => rxsched::out::print(&lab::Lab::standard().status())?,
    }
    Ok(())
}

/// `rxsched gen`
pub fn gen(a: GenArgs) -> Result<()> {
    positive("duration", a.duration)?;
    if !(a.rate.is_finite() && a.rate > 0.0) {
        return Err(Error::Input(format!(
            "--rate: must be a positive rate, got {}",
            a.rate
        )));
    }
    if !(62..=1514).contains(&a.size) {
        return Err(Error::Input(format!(
            "--size: must be 62 to 1514 bytes, got {}",
            a.size
        )));
    }
    let dst_mac = match &a.dst_mac {
        Some(m) => Mac::parse(m)
            .ok_or_else(|| Error::Input(format!("--dst-mac: {m:?} is not a MAC address")))?,
        None => lab::D0.mac,
    };
    let cfg = GenConfig {
        iface: a.iface,
        src_mac: None,
        dst_mac,
        src_ip: a.src_ip.map_or(G0.ip, |i| i.octets()),
        dst_ip: a.dst_ip.map_or(S0.ip, |i| i.octets()),
        dst_port: a.dport,
        rate_pps: a.rate,
        frame_bytes: a.size,
        count: a.count,
        duration_s: a.duration,
        cpu: a.cpu,
        engine: a.engine.into(),
        mix: a.mix.as_deref().map(mix).transpose()?,
    };
    json(&rxsched_linux::loadgen::generate(&cfg)?)
}

/// `--mix DPORT:RATE`.
fn mix(s: &str) -> Result<(u16, f64)> {
    let bad = || Error::Input(format!("--mix: {s:?} is not DPORT:RATE (e.g. 7002:20000)"));
    let (p, r) = s.split_once(':').ok_or_else(bad)?;
    let port: u16 = p.parse().ok().filter(|p| *p > 0).ok_or_else(bad)?;
    let rate: f64 = r
        .parse()
        .ok()
        .filter(|r: &f64| r.is_finite() && *r > 0.0)
        .ok_or_else(bad)?;
    Ok((port, rate))
}

/// `rxsched sink`
pub fn sink(a: SinkArgs) -> Result<()> {
    positive("duration", a.duration)?;
    positive("idle", a.idle)?;
    rxsched_linux::sys::signals::install();
    json(&rxsched_linux::loadgen::sink(&SinkConfig {
        iface: a.iface,
        duration_s: a.duration,
        idle_s: a.idle,
        cpu: a.cpu,
        engine: a.engine.into(),
        tc_hook: a.hook == HookArg::Tc,
        latency_every: a.latency_every,
    })?)
}
