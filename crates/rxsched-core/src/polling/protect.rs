//! The protected class of receive queues: rings of their own for the
//! traffic that keeps the network alive, served ahead of ordinary input
//! within a cap.

use super::{Action, DeviceId, Dir, PollingFacility};
use crate::{InhibitCause, Nanos, Quota};

impl PollingFacility {
    /// Registers a protected receive queue: a ring of its own onto which
    /// the device steers the traffic that keeps the network alive (ARP,
    /// ICMP, routing protocols, frames for the host). It is served first,
    /// with `quota` frames a callback at most: when it has frames the next
    /// callback is its own, and a callback on an ordinary ring stops early
    /// for it ([`PollingFacility::protected_due`]).
    ///
    /// Its cap: while ordinary input waits, the protected class takes no
    /// more frames than the ordinary traffic it makes wait; each protected
    /// callback is owed as many ordinary frames as it handled before the
    /// class goes first again. A flood of "protected" frames thus gets half
    /// the receive work at most and cannot starve forwarding, while a
    /// stream that is not a flood (a few frames between many ordinary ones)
    /// is never held behind more than the frame in hand. Input inhibits
    /// (M3, M4) hold it as they hold every receive callback; its frames
    /// wait on their own ring, where the ordinary flood cannot reach them.
    /// The real-time budget's guard holds it only past the budget itself
    /// ([`PollingFacility::with_rt_guard`]).
    pub fn register_protected(&mut self, quota: Quota) -> DeviceId {
        let dev = self.register(true, false);
        self.protect(dev, quota);
        dev
    }

    /// Makes registered device `dev`'s receive queue a protected one (see
    /// [`PollingFacility::register_protected`]); its transmit callback, if
    /// any, stays an ordinary one.
    pub fn protect(&mut self, dev: DeviceId, quota: Quota) {
        self.slots[dev.0 * 2].protected = Some(quota);
        self.any_protected = true;
    }

    /// Whether a protected queue has frames waiting.
    pub fn protected_waiting(&self) -> bool {
        self.any_protected
            && self
                .slots
                .iter()
                .any(|s| s.registered && s.needed && s.protected.is_some())
    }

    /// Whether the protected class may go ahead of ordinary input that
    /// waits, counting `in_hand` ordinary frames of a callback in progress:
    /// once the ordinary traffic has had as many frames as the last
    /// protected callback took (the cap).
    pub fn protected_due(&self, in_hand: u32) -> bool {
        self.ordinary_since + in_hand as u64 >= self.protected_frames
    }

    /// Whether any protected queue is registered.
    pub fn has_protected(&self) -> bool {
        self.any_protected
    }

    /// Whether `dev` is a protected queue.
    pub fn is_protected(&self, dev: DeviceId) -> bool {
        self.slots[dev.0 * 2].protected.is_some()
    }

    /// Whether an inhibit in force at `now` holds the protected class:
    /// M3's, M4's, and the real-time budget's guard's only once the
    /// period's use has passed the budget itself.
    pub fn protected_inhibited(&mut self, now: Nanos) -> bool {
        match self.input_inhibited(now) {
            None => false,
            Some(InhibitCause::RtBudget) => self
                .rt_guard
                .as_mut()
                .is_some_and(|g| !g.protected_allowed(now)),
            Some(_) => true,
        }
    }

    /// Input not inhibited: a protected queue's work that goes ahead of the
    /// round robin, if any.
    pub(super) fn protected_action(&mut self, ordinary_held: bool) -> Option<Action> {
        // A protected queue that has run dry gets its interrupt back at
        // once, not in the round robin's turn, so that its next frame is
        // heard while the others keep the thread busy.
        let dry = self
            .slots
            .iter()
            .position(|s| s.registered && s.protected.is_some() && !s.needed && !s.intr_enabled);
        if let Some(idx) = dry {
            self.slots[idx].intr_enabled = true;
            return Some(Action::EnableInterrupts {
                dev: DeviceId(idx / 2),
                dir: Dir::Rx,
            });
        }
        // Protected queues first, unless ordinary input waits and is owed
        // frames (the cap). Ordinary input held by the real-time budget's
        // guard is not kept waiting by the protected class.
        let ordinary_waiting = !ordinary_held
            && self
                .slots
                .iter()
                .step_by(2)
                .any(|s| s.registered && s.needed && s.protected.is_none());
        if ordinary_waiting && !self.protected_due(0) {
            return None;
        }
        let idx = self
            .slots
            .iter()
            .position(|s| s.registered && s.needed && s.protected.is_some())?;
        Some(Action::Poll {
            dev: DeviceId(idx / 2),
            dir: Dir::Rx,
            quota: self.slots[idx].protected.unwrap_or(self.quota),
        })
    }
}
