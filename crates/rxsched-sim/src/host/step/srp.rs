//! The steps of the SRP or LRP receiving host.

use crate::engine::packet::Packet;
use rxsched_core::Nanos;

/// Work of the SRP or LRP host.
#[derive(Debug, Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Step {
    /// The receive interrupt's work for one frame: copy, link-level input,
    /// the early demultiplexer and next-stage submit (the buffering check
    /// and the enqueue on the UIQ, or LRP's channel).
    RxLink(Packet),
    /// Posting SIGUIQ to the socket's owner (interrupt level).
    Signal,
    /// The receiver takes SIGUIQ: the kernel's signal delivery.
    Deliver,
    /// A caught SIGUIQ: entering the user handler and returning from it.
    Handler,
    /// IP and UDP input for one packet, in the receiver's context.
    Protocol(Packet),
    /// The forwarding stage: IP input and `ip_output` for one packet, in
    /// the forwarding process's context.
    Forward(Packet),
    /// A server's receive call copying one segment out, with the extra
    /// cost of what missed the cache.
    Read(Packet, Nanos),
    /// A piece of a server's computation over its request, of this cost.
    Compute(Nanos),
    /// A server sending its reply.
    Reply,
}

impl Step {
    /// The packet the step carries.
    pub fn packet(&self) -> Option<Packet> {
        match *self {
            Step::RxLink(p) | Step::Protocol(p) | Step::Forward(p) | Step::Read(p, _) => Some(p),
            Step::Signal | Step::Deliver | Step::Handler | Step::Compute(_) | Step::Reply => None,
        }
    }
}
