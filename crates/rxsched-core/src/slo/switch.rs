//! The two-level switch's settings from an objective (M11; see
//! [`Slo::switch_marks`]).
//!
//! **Threshold.** The objective's CPU share is what the receive work may
//! take when overloaded. Under interrupts nothing caps that work (the
//! device's priority is above every thread), so once it passes the share
//! for longer than the objective's own time scale, servicing must move to
//! polling, where the work is the polling thread's and is scheduled (and,
//! where the host has it, capped by M4). The detector is therefore the
//! receive work's share of one CPU, over M4's period (10 ms), and the
//! threshold is the objective's share.
//!
//! **Hold.** The objective judges a share over the controller's window
//! (four periods, 40 ms): a burst that is over the share for less than a
//! window does not break it, and one that lasts longer does. So overload
//! must last one window before polling takes over, and no longer (the
//! paper's 2 s is fifty windows of livelock under a sustained flood).
//!
//! **Return, and why it does not flap.** Servicing returns to interrupts
//! once a whole period's polling work is under `share × p / (2 × i)`,
//! where `i` is what one frame costs under interrupts when it comes
//! alone (the interrupt, the deferred call's entry, the frame) and `p`
//! what it costs to a polling thread (the frame). A load that took more
//! than the share under interrupts takes at least `share × p / i` of the
//! CPU when polled, since polling a frame costs no more than taking it by
//! interrupt and `i` is the most an interrupt adds; the return mark is half
//! of that. So a load that switched to polling does not switch back while
//! it lasts: to flap, the same load would have to be over the threshold
//! under interrupts and under the return mark when polled, which the
//! factor of two forbids with room for a period's measurement noise. The
//! paper's rule (back at the first empty poll) flaps whenever the polling
//! thread keeps up, since it then empties the device again and again.
//!
//! **Latency.** Interrupts are the least latency a frame can have, and the
//! switch keeps them whenever the load is under the share. An objective
//! whose latency is below what one frame costs under interrupts cannot be
//! met by either mode and is refused, saying what can.

use super::{Slo, SloError, PERIOD_NS, WINDOW_PERIODS};
use crate::Nanos;

/// The two-level switch's settings an objective sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwitchMarks {
    /// Polling once the receive work's share of one CPU is over this.
    pub over: f64,
    /// Interrupts again once a window's polling work is under this share.
    pub return_below: f64,
    /// The window the share is judged over, in ns.
    pub window_ns: Nanos,
    /// How long the share must stay over the threshold, in ns.
    pub hold_ns: Nanos,
}

impl Slo {
    /// The two-level switch's settings for a host where one frame that
    /// comes alone costs `interrupt_frame_ns` under interrupts and
    /// `poll_frame_ns` to a polling thread; or why the objective cannot be
    /// met (see the module's notes).
    pub fn switch_marks(
        &self,
        interrupt_frame_ns: f64,
        poll_frame_ns: f64,
    ) -> Result<SwitchMarks, SloError> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !(positive(interrupt_frame_ns) && positive(poll_frame_ns)) {
            return Err(SloError(format!(
                "the switch needs what a frame costs under interrupts ({interrupt_frame_ns} ns) and polled ({poll_frame_ns} ns), both positive"
            )));
        }
        if (self.latency_ns as f64) < interrupt_frame_ns {
            return Err(SloError(format!(
                "latency={:.1}us cannot be met: one frame alone takes {:.1} us under interrupts here, the least either mode gives; ask for {:.0}us or more",
                self.latency_ns as f64 / 1e3,
                interrupt_frame_ns / 1e3,
                (interrupt_frame_ns / 1e3).ceil()
            )));
        }
        // Polling a frame costs no more than taking it by interrupt.
        let ratio = (poll_frame_ns / interrupt_frame_ns).min(1.0);
        Ok(SwitchMarks {
            over: self.cpu,
            return_below: self.cpu * ratio / 2.0,
            window_ns: PERIOD_NS,
            hold_ns: WINDOW_PERIODS * PERIOD_NS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    #[test]
    fn marks_follow_the_share_and_the_costs() {
        let slo = Slo::parse("latency=200us,cpu=50%").unwrap();
        let m = slo.switch_marks(80_000.0, 65_000.0).unwrap();
        assert_eq!(m.over, 0.5);
        assert!((m.return_below - 0.5 * 65.0 / 80.0 / 2.0).abs() < 1e-12);
        assert_eq!((m.window_ns, m.hold_ns), (10 * MS, 40 * MS));
        // A polled frame dearer than an interrupt's is taken as equal.
        let m = slo.switch_marks(50_000.0, 70_000.0).unwrap();
        assert_eq!(m.return_below, 0.25);
    }

    #[test]
    fn refuses_what_no_mode_meets() {
        let slo = Slo::parse("latency=50us,cpu=50%").unwrap();
        let e = slo.switch_marks(80_000.0, 65_000.0).unwrap_err();
        assert!(e.0.contains("ask for 80us or more"), "{e}");
        assert!(slo.switch_marks(0.0, 1.0).is_err());
        assert!(slo.switch_marks(1.0, f64::NAN).is_err());
    }

    proptest::proptest! {
        /// No load flaps: a share over the threshold under interrupts
        /// is, polled at the costs' ratio (or cheaper), at least twice the
        /// return mark.
        #[test]
        fn no_load_is_both_over_and_under(
            cpu in 0.01f64..=1.0,
            int_ns in 1_000.0f64..1e6,
            frac in 0.05f64..=1.0,
            load in 0.0f64..2.0,
        ) {
            let slo = Slo::new(1_000_000_000, cpu).unwrap();
            let m = slo.switch_marks(int_ns, int_ns * frac).unwrap();
            let int_share = load * int_ns;
            let poll_share = load * int_ns * frac;
            if int_share > m.over {
                proptest::prop_assert!(poll_share >= 2.0 * m.return_below - 1e-12);
            }
            proptest::prop_assert!(m.return_below < m.over);
        }
    }
}
