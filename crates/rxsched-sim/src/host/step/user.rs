//! A user process's own steps and their costs.

use crate::engine::job::{per_byte, COMPUTE_SLICE};
use crate::engine::packet::Packet;
use crate::profile::Costs;
use crate::scenario::CaptureOutput;
use rxsched_core::Nanos;

/// A user process's own work.
#[derive(Debug, Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Step {
    /// Switching to this process.
    CtxSwitch,
    /// screend reads, checks and writes back one packet (two system calls).
    Screen(Packet),
    /// The application's receive call for one packet.
    AppRead(Packet),
    /// tcpdump reads one packet and writes it out.
    Capture(Packet, CaptureOutput),
    /// A slice of computation.
    Compute,
    /// A slice of an `onoff` process's computation, of this many ns.
    Run(Nanos),
}

impl Step {
    /// The packet the step carries.
    pub fn packet(&self) -> Option<Packet> {
        match *self {
            Step::Screen(p) | Step::AppRead(p) | Step::Capture(p, _) => Some(p),
            Step::CtxSwitch | Step::Compute | Step::Run(_) => None,
        }
    }

    /// Its CPU cost.
    pub fn cost(&self, c: &Costs) -> Nanos {
        match *self {
            Step::CtxSwitch => c.context_switch,
            Step::Screen(_) => c.screend,
            Step::AppRead(p) if p.tcp.is_some() => c.tcp_read,
            // The ping-pong reader also sends the datagram back.
            Step::AppRead(p) if p.echo => {
                c.app_read
                    + c.udp_send
                    + per_byte(p.bytes, c.app_read_per_byte + c.udp_send_per_byte)
            }
            Step::AppRead(p) => c.app_read + per_byte(p.bytes, c.app_read_per_byte),
            Step::Capture(_, out) => {
                c.capture_read
                    + match out {
                        CaptureOutput::Null => 0,
                        CaptureOutput::File => c.capture_file,
                    }
            }
            Step::Compute => COMPUTE_SLICE,
            Step::Run(ns) => ns,
        }
    }
}
