//! The NT host's events: the engine's (arrivals, job ends, the echo
//! client's) and its own (the two-level switch's window, the polling
//! thread's second look, a sleeping thread waking).

use crate::engine::echo::EchoEv;
use crate::engine::job::Done;
use crate::engine::traffic::Arrival;

/// Events of the multiprocessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// Traffic source `s` delivers a frame's last bit.
    Arrive(u8),
    /// An event of the ping-pong client.
    Echo(EchoEv),
    /// A CPU's job ends (stale if the CPU switched since).
    Done(Done),
    /// The two-level detector's window closes.
    Window,
    /// The polling thread, idle in its grace period, looks again.
    PollAgain,
    /// An on-off thread's sleep ends.
    Wake(u32),
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

impl From<EchoEv> for Ev {
    fn from(e: EchoEv) -> Ev {
        Ev::Echo(e)
    }
}
