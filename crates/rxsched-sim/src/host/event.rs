//! What happens at a point in the uniprocessor host's virtual time: the
//! engine's events (arrivals, job ends, the outside endpoints') and the
//! host's own (the wire, the clock, the kernels' timers, sleepers waking).

use crate::engine::echo::EchoEv;
use crate::engine::job::Done;
use crate::engine::tcp::TcpEv;
use crate::engine::traffic::Arrival;

/// Something that happens at a point in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// Traffic source `s` delivers a frame's last bit.
    Arrive(u8),
    /// The frame on port `n`'s wire has left.
    TxWireDone(u8),
    /// The CPU's job ends (stale if the CPU switched since).
    Done(Done),
    /// A kernel's own timer.
    Timer(Timer),
    /// The periodic clock interrupt.
    Tick,
    /// User process `u` wakes from a timed sleep.
    UserWake(u8),
    /// An event of the TCP connection through the host.
    Tcp(TcpEv),
    /// An event of the ping-pong client.
    Echo(EchoEv),
}

/// A kernel's own timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The polling thread looks again (an inhibit ends, or a timeout).
    PollWake,
    /// A port's circuit breaker may close.
    BreakerEnd(u8),
}

impl From<Arrival> for Ev {
    fn from(a: Arrival) -> Ev {
        Ev::Arrive(a.0)
    }
}

impl From<Done> for Ev {
    fn from(d: Done) -> Ev {
        Ev::Done(d)
    }
}

impl From<TcpEv> for Ev {
    fn from(e: TcpEv) -> Ev {
        Ev::Tcp(e)
    }
}

impl From<EchoEv> for Ev {
    fn from(e: EchoEv) -> Ev {
        Ev::Echo(e)
    }
}
