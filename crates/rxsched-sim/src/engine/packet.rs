//! What the hosts move: one packet, and what a TCP frame carries.

use rxsched_core::Nanos;

/// One packet inside the host.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    /// Arrival order, from 0.
    pub id: u32,
    /// Frame size.
    pub bytes: u32,
    /// When its last bit arrived.
    pub arrived: Nanos,
    /// The port it arrived on; a router sends it out of the other.
    pub port: u8,
    /// When it was handed to a device, in frames handed over so far.
    pub seq: u64,
    /// A TCP segment or ACK of the connection through the host, if it is one.
    pub tcp: Option<TcpSeg>,
    /// A datagram of the ping-pong client: the reader sends it back.
    pub echo: bool,
    /// Of a protected source (`[[traffic]] protected`): counted apart, and
    /// steered to the port's protected ring when it has one.
    pub protected: bool,
    /// The `[[traffic]]` source it came from ([`NO_SOURCE`] for the TCP
    /// connection's and the ping-pong client's frames).
    pub source: u8,
}

/// [`Packet::source`] of a frame no `[[traffic]]` source sent.
pub const NO_SOURCE: u8 = u8::MAX;

/// What a TCP frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSeg {
    /// An ACK (`n`: the next segment expected) rather than data (`n`: its number).
    pub ack: bool,
    /// Segment number.
    pub n: u32,
}
