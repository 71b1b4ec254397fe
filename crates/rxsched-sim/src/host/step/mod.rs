//! What the uniprocessor's CPU runs: interrupt sources and steps of work,
//! each kernel's own steps in a module of its own here (so that a kernel
//! and the host's step type do not import each other), and the user
//! processes' in [`user`].

pub mod bsd;
pub mod linux;
pub mod polling;
pub mod srp;
pub mod user;

use crate::engine::packet::Packet;
use rxsched_core::Dir;

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
    Bsd(bsd::Step),
    /// Work of the polling thread itself.
    Poll(polling::Step),
    /// Work of the Linux forwarding path.
    Linux(linux::Step),
    /// Work of the SRP or LRP receiving host.
    Srp(srp::Step),
    /// A user process's own work.
    User(user::Step),
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
                polling::Step::Rx(_) => "rx_link",
                s => s.into(),
            },
            Step::Linux(s) => s.into(),
            Step::Srp(s) => match s {
                srp::Step::RxLink(_) => "rx_link",
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
