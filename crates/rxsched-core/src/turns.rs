//! M12, weighted round robin with preemption windows (the Calaveras kernel
//! of Mogul & Ramakrishnan's expanded report, §9.1).
//!
//! Device drivers are real-time tasks: an interrupt only flags one, and the
//! scheduler polls the flagged tasks in turn, each handling at most its
//! weight in units of work (the polling facility's quota) and returning at
//! the end of a unit, its preemption window. After each round of polling
//! the scheduler turns to the general-purpose tasks: one runs until it
//! blocks or its quantum expires, and only then are the flags polled again.
//! So a general-purpose task gets at least a quantum in every round however
//! fast frames arrive, and a round's length is bounded by the weights: a
//! frame waits at most a quantum and a round before its driver's turn.
//!
//! In the polling loop a round ends when a device comes up for a second
//! callback since the round began, or when no flagged device is left; in
//! either case input and transmit work then wait until the quantum has
//! passed ([`GpTurns::deadline`]) or the CPU has nothing else to run
//! ([`GpTurns::idle`]: no general-purpose task was ready, or it blocked),
//! whichever comes first. Interrupts meanwhile only flag their devices, for
//! the next round.
//!
//! Left out: the isochronous tasks (timer-driven, preempting real-time
//! ones), and a weight per task (every driver has the facility's quota).

use crate::Nanos;

/// The general-purpose tasks' turns between rounds of polling.
#[derive(Debug, Clone)]
pub struct GpTurns {
    quantum: Nanos,
    /// When the turn in force ends, if one is.
    until: Option<Nanos>,
    /// The slots polled since the round began.
    polled: Vec<bool>,
    episodes: u64,
}

impl GpTurns {
    /// Turns of at most `quantum` ns (more than 0).
    pub fn new(quantum: Nanos) -> Self {
        assert!(quantum > 0, "a general-purpose quantum of 0");
        GpTurns {
            quantum,
            until: None,
            polled: Vec::new(),
            episodes: 0,
        }
    }

    /// Slot `idx` (of `slots`) comes up for a callback at `now`. Returns
    /// true if it was already polled in this round: the round is over, a
    /// turn begins, and the slot waits for the next round.
    pub fn round_over(&mut self, idx: usize, slots: usize, now: Nanos) -> bool {
        if self.polled.len() != slots {
            self.polled = vec![false; slots];
        }
        if self.polled[idx] {
            self.round_idle(now);
            return true;
        }
        self.polled[idx] = true;
        false
    }

    /// The loop found nothing left to poll at `now`: the round is over and
    /// a turn begins.
    pub fn round_idle(&mut self, now: Nanos) {
        self.polled.fill(false);
        self.until = Some(now + self.quantum);
        self.episodes += 1;
    }

    /// Lets a turn that is over end.
    pub fn timer(&mut self, now: Nanos) {
        if self.until.is_some_and(|t| t <= now) {
            self.until = None;
        }
    }

    /// Whether a turn holds the drivers at `now`.
    pub fn in_turn(&mut self, now: Nanos) -> bool {
        self.timer(now);
        self.until.is_some()
    }

    /// The CPU had nothing else to run: no general-purpose task is ready,
    /// so the turn ends.
    pub fn idle(&mut self) {
        self.until = None;
    }

    /// When the turn in force (as last looked at) ends: while it is
    /// `Some`, an interrupt leaves its flag for the round after the turn.
    pub fn deadline(&self) -> Option<Nanos> {
        self.until
    }

    /// Turns begun so far (those the CPU idled out of at once included).
    pub fn episodes(&self) -> u64 {
        self.episodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_callback_in_a_round_begins_a_turn_that_the_quantum_or_idle_ends() {
        let mut t = GpTurns::new(1_000);
        // Slots 0 and 2 polled once each: one round.
        assert!(!t.round_over(0, 4, 10));
        assert!(!t.round_over(2, 4, 20));
        assert!(!t.in_turn(25));
        // Slot 0 again: the round is over.
        assert!(t.round_over(0, 4, 30));
        assert_eq!(t.deadline(), Some(1_030));
        assert!(t.in_turn(500) && t.deadline().is_some());
        assert!(!t.in_turn(1_030), "the quantum has passed");
        // The next round starts afresh: slot 0 is polled at once.
        assert!(!t.round_over(0, 4, 1_040));
        assert!(t.round_over(0, 4, 1_050));
        t.idle();
        assert!(!t.in_turn(1_060), "the CPU idled: no task wanted the turn");
        assert_eq!(t.episodes(), 2);
        // A round that ends with nothing left to poll gives a turn too.
        assert!(!t.round_over(2, 4, 1_100));
        t.round_idle(1_100);
        assert_eq!(t.deadline(), Some(2_100));
        assert!(!t.in_turn(2_100));
        assert!(!t.round_over(2, 4, 2_200), "a fresh round");
        assert_eq!(t.episodes(), 3);
    }
}
