//! The steps of the Linux forwarding path.

use crate::engine::packet::Packet;

/// Work of the Linux forwarding path.
#[derive(Debug, Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Step {
    /// Receive bookkeeping and copy, in the ISR or a NAPI poll.
    Rx(Packet),
    /// IP forwarding, then onto the output queue.
    Ip(Packet),
    /// The driver hands a frame to port `n`'s device.
    Xmit(u8, Packet),
    /// Freeing one transmitted buffer of port `n`.
    TxReclaim(u8, Packet),
}

impl Step {
    /// The packet the step carries (a reclaimed buffer's frame is delivered).
    pub fn packet(&self) -> Option<Packet> {
        match *self {
            Step::Rx(p) | Step::Ip(p) | Step::Xmit(_, p) => Some(p),
            Step::TxReclaim(..) => None,
        }
    }
}
