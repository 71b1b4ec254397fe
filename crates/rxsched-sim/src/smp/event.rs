//! The NT host's events: the engine's (arrivals, job ends, the echo
//! client's) and its own (the two-level switch's window, the polling
//! thread's second look, a sleeping thread waking).

use crate::engine::echo::EchoEv;
use crate::engine::events::carries;
use crate::engine::job::Done;
use crate::engine::traffic::Arrival;

/// Events of the multiprocessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// A traffic source delivers a frame's last bit.
    Arrive(Arrival),
    /// An event of the ping-pong client.
    Echo(EchoEv),
    /// A CPU's job ends (stale if the CPU switched since).
    Done(Done),
    /// A queue's two-level detector's window closes.
    Window(u32),
    /// A queue's polling thread, idle in its grace period, looks again.
    PollAgain(u32),
    /// An on-off thread's sleep ends.
    Wake(u32),
}

carries!(Ev {
    Arrival => Arrive,
    Done => Done,
    EchoEv => Echo,
});
