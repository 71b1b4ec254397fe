//! What happens at a point in the uniprocessor host's virtual time: the
//! engine's events (arrivals, job ends, the outside endpoints') and the
//! host's own (the wire, the clock, the kernels' timers, sleepers waking).

use crate::engine::echo::EchoEv;
use crate::engine::events::carries;
use crate::engine::job::Done;
use crate::engine::tcp::TcpEv;
use crate::engine::traffic::Arrival;

/// Something that happens at a point in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// A traffic source delivers a frame's last bit.
    Arrive(Arrival),
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
    /// A port's interrupt coalescing delay has passed.
    Coalesce(u8),
}

carries!(Ev {
    Arrival => Arrive,
    Done => Done,
    TcpEv => Tcp,
    EchoEv => Echo,
});
