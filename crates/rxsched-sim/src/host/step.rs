//! What the model moves and what the CPU runs: packets, interrupt sources
//! and steps of work.

use super::kernel;
use super::users;
use rxsched_core::{Dir, Nanos};

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
}

/// What a TCP frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSeg {
    /// An ACK (`n`: the next segment expected) rather than data (`n`: its number).
    pub ack: bool,
    /// Segment number.
    pub n: u32,
}

/// What raised an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntrSrc {
    /// A port's receive interrupt (interrupt-driven kernels).
    Rx(u8),
    /// A port's transmit-complete interrupt.
    Tx(u8),
    /// The polling kernel's handler for a port and direction.
    Poll(u8, Dir),
    /// Linux: a port's one interrupt line, for receive and transmit events.
    Port(u8),
    /// The periodic clock.
    Clock,
}

impl IntrSrc {
    /// The port and direction whose line this is, if it is a port's.
    pub fn line(self) -> Option<(usize, usize)> {
        match self {
            IntrSrc::Rx(n) | IntrSrc::Poll(n, Dir::Rx) | IntrSrc::Port(n) => Some((n as usize, 0)),
            IntrSrc::Tx(n) | IntrSrc::Poll(n, Dir::Tx) => Some((n as usize, 1)),
            IntrSrc::Clock => None,
        }
    }
}

/// One indivisible piece of work. Its effect happens when it completes;
/// it may be preempted and resumed with its remaining time.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Entering an interrupt handler.
    IntrEnter(IntrSrc),
    /// Leaving an interrupt handler, after its last piece of work.
    IntrExit(IntrSrc),
    /// Work of the BSD network stack (the bsd, emulated and polling kernels).
    Bsd(kernel::bsd::Step),
    /// Work of the polling thread itself.
    Poll(kernel::polling::Step),
    /// Work of the Linux forwarding path.
    Linux(kernel::linux::Step),
    /// Work of the SRP or LRP receiving host.
    Srp(kernel::srp::Step),
    /// A user process's own work.
    User(users::Step),
}

impl Step {
    /// The step's name in a trace (`rx_intr`, `rx_link`, `ip_input`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Step::IntrEnter(IntrSrc::Rx(_) | IntrSrc::Poll(_, Dir::Rx)) => "rx_intr",
            Step::IntrEnter(IntrSrc::Tx(_) | IntrSrc::Poll(_, Dir::Tx)) => "tx_intr",
            Step::IntrEnter(IntrSrc::Port(_)) => "port_intr",
            Step::IntrEnter(IntrSrc::Clock) => "clock",
            Step::IntrExit(_) => "intr_exit",
            Step::Bsd(s) => s.into(),
            Step::Poll(s) => match s {
                kernel::polling::Step::Rx(_) => "rx_link",
                s => s.into(),
            },
            Step::Linux(s) => s.into(),
            Step::Srp(s) => match s {
                kernel::srp::Step::RxLink(_) => "rx_link",
                s => s.into(),
            },
            Step::User(s) => s.into(),
        }
    }

    /// The packet this step carries, if any: it is in flight while the step is.
    pub fn packet(&self) -> Option<Packet> {
        match self {
            Step::IntrEnter(_) | Step::IntrExit(_) => None,
            Step::Bsd(s) => s.packet(),
            Step::Poll(s) => s.packet(),
            Step::Linux(s) => s.packet(),
            Step::Srp(s) => s.packet(),
            Step::User(s) => s.packet(),
        }
    }
}
