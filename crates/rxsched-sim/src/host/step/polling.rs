//! The steps of the polling thread itself.

use crate::engine::packet::Packet;
use rxsched_core::Dir;

/// Work of the polling thread itself.
#[derive(Debug, Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Step {
    /// Waking and switching to the polling thread.
    Switch,
    /// Calling one callback, whatever it handles.
    Callback,
    /// The receive callback's driver work for one frame: copy and
    /// link-level input (IP input follows in the same context).
    Rx(Packet),
    /// Re-enabling port `n`'s interrupt in one direction.
    EnableIntr(u8, Dir),
}

impl Step {
    /// The packet the step carries.
    pub fn packet(&self) -> Option<Packet> {
        match *self {
            Step::Rx(p) => Some(p),
            _ => None,
        }
    }
}
