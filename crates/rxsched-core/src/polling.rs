//! M2: the polling facility, with M3 and M4 as options.

use crate::{
    CycleLimit, GpTurns, InhibitCause, Nanos, QueueFeedback, Quota, RtGuard, SloController,
    StageMarks,
};

/// A device registered with the facility.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId(pub usize);

/// The direction of a callback: receive, or transmit-complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// The receive callback: take packets off the ring and process them to completion.
    Rx,
    /// The transmit-complete callback: reclaim sent buffers, restart the transmitter.
    Tx,
}

/// What the polling thread should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Call `dev`'s callback for `dir`, handling at most `quota` packets,
    /// then report with [`PollingFacility::poll_done`].
    Poll {
        /// The device to poll.
        dev: DeviceId,
        /// Which callback.
        dir: Dir,
        /// The packet budget for this call.
        quota: Quota,
    },
    /// `dev` has no pending work in `dir`: re-enable its interrupts. If work
    /// arrived meanwhile, the driver reports it with
    /// [`PollingFacility::interrupt`] at once.
    EnableInterrupts {
        /// The device.
        dev: DeviceId,
        /// Which interrupt.
        dir: Dir,
    },
    /// Nothing to do: block until an interrupt, or until `until` when an
    /// input inhibit ends then.
    Idle {
        /// When to look again even without an interrupt.
        until: Option<Nanos>,
    },
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    registered: bool,
    needed: bool,
    intr_enabled: bool,
    /// A protected receive queue's own quota (see [`PollingFacility::register_protected`]).
    protected: Option<Quota>,
    /// The device's two directions share one interrupt enable (see
    /// [`PollingFacility::share_interrupt`]).
    shared: bool,
}

/// Interrupt-initiated polling (Mogul & Ramakrishnan 1996 §6).
///
/// Interrupt handlers only report that a device needs service, and leave
/// its interrupts disabled. The polling thread asks [`next_action`] what to
/// do: it visits the devices that need service round-robin, calling each
/// callback with a packet quota, and re-enables a device's interrupts once it
/// has no pending work. Input may be inhibited by queue-state feedback (M3)
/// or a CPU-cycle limit (M4); transmit-complete work never is.
///
/// [`next_action`]: PollingFacility::next_action
#[derive(Debug, Clone)]
pub struct PollingFacility {
    slots: Vec<Slot>,
    cursor: usize,
    quota: Quota,
    feedback: Option<QueueFeedback>,
    cycle: Option<CycleLimit>,
    /// The guard on the host's real-time budget.
    rt_guard: Option<RtGuard>,
    polls: u64,
    /// Frames the last protected callback handled, and ordinary receive
    /// frames handled since: the protected class's cap.
    protected_frames: u64,
    ordinary_since: u64,
    /// Whether any protected queue is registered.
    any_protected: bool,
    /// An objective that sets the quota and the cycle limit.
    slo: Option<SloController>,
    /// And M3's watermarks on a stage's queue, from the stage's cost.
    slo_stage: Option<StageMarks>,
    /// M12: general-purpose tasks' turns between rounds.
    turns: Option<GpTurns>,
}

impl PollingFacility {
    /// A facility granting `quota` packets per callback.
    pub fn new(quota: Quota) -> Self {
        PollingFacility {
            slots: Vec::new(),
            cursor: 0,
            quota,
            feedback: None,
            cycle: None,
            rt_guard: None,
            polls: 0,
            protected_frames: 0,
            ordinary_since: 0,
            any_protected: false,
            slo: None,
            slo_stage: None,
            turns: None,
        }
    }

    /// Lets an objective set the quota and the CPU-cycle limit (M4, which
    /// it adds), and keep them right as the measured costs move.
    pub fn with_slo(mut self, c: SloController) -> Self {
        let s = c.settings();
        self.quota = Quota::Limited(s.quota);
        self.cycle = Some(CycleLimit::new(s.period_ns, s.cycle_limit));
        self.slo = Some(c);
        self
    }

    /// The objective's controller, if one sets the constants.
    pub fn slo(&self) -> Option<&SloController> {
        self.slo.as_ref()
    }

    /// A callback in `dir` handled `n` frames at a cost of `cost_ns`, for
    /// the objective's controller.
    pub fn slo_callback(&mut self, dir: Dir, n: u32, cost_ns: Nanos) {
        if let Some(c) = &mut self.slo {
            c.callback(dir, n, cost_ns);
        }
    }

    /// At `now`, the router having used `router_ns` of CPU so far: the
    /// objective's controller closes its window and the settings it
    /// changed take effect (between callbacks).
    pub fn slo_tick(&mut self, now: Nanos, router_ns: Nanos) {
        let Some(c) = &mut self.slo else { return };
        if let Some(s) = c.tick(now, router_ns) {
            self.quota = Quota::Limited(s.quota);
            if let Some(cy) = &mut self.cycle {
                cy.set_fraction(s.cycle_limit);
            }
        }
    }

    /// M3 on a stage's queue of `capacity` frames with watermarks the
    /// objective sets from the stage's measured cost
    /// ([`PollingFacility::slo_stage`]); until it is measured, Mogul &
    /// Ramakrishnan's router marks (75%, 25%, `timeout_ns`).
    pub fn with_slo_feedback(mut self, capacity: u32, timeout_ns: Nanos) -> Self {
        self.feedback = Some(QueueFeedback::watermarks(capacity, 0.75, 0.25, timeout_ns));
        self.slo_stage = Some(StageMarks::new(capacity));
        self
    }

    /// The stage took `frames` off its queue in `ns` of its CPU since the
    /// last report: the objective moves M3's watermarks if they should.
    pub fn slo_stage(&mut self, frames: u64, ns: u64) {
        let (Some(c), Some(st), Some(fb)) = (&self.slo, &mut self.slo_stage, &mut self.feedback)
        else {
            return;
        };
        let quota = c.settings().quota;
        if let Some(m) = st.measured(&c.slo(), &c.costs(), quota, frames, ns) {
            fb.retune(m.inhibit_at, Some(m.resume_at), m.timeout_ns);
        }
    }

    /// The objective's watermarks on the stage's queue, if it sets them.
    pub fn slo_stage_marks(&self) -> Option<&StageMarks> {
        self.slo_stage.as_ref()
    }

    /// Adds M3 queue-state feedback.
    pub fn with_feedback(mut self, feedback: QueueFeedback) -> Self {
        self.feedback = Some(feedback);
        self
    }

    /// M3, if on.
    pub fn feedback(&self) -> Option<&QueueFeedback> {
        self.feedback.as_ref()
    }

    /// Adds the M4 CPU-cycle limit.
    pub fn with_cycle_limit(mut self, limit: CycleLimit) -> Self {
        self.cycle = Some(limit);
        self
    }

    /// Adds a guard on the host's real-time budget (see [`RtGuard`]):
    /// ordinary input waits once a period's use nears the share of the CPU
    /// the kernel lets the real-time class take, and the protected class
    /// goes on to the budget itself, not owing the held ordinary input
    /// anything meanwhile. It is not an operator's share: M3's and M4's
    /// inhibits still hold the protected class.
    pub fn with_rt_guard(mut self, guard: RtGuard) -> Self {
        self.set_rt_guard(guard);
        self
    }

    /// Adds the real-time budget's guard to a facility in use (see
    /// [`PollingFacility::with_rt_guard`]).
    pub fn set_rt_guard(&mut self, guard: RtGuard) {
        self.rt_guard = Some(guard);
    }

    /// The real-time budget's guard, if on.
    pub fn rt_guard(&self) -> Option<&RtGuard> {
        self.rt_guard.as_ref()
    }

    /// Registers a device with a receive callback, a transmit-complete
    /// callback, or both. Its interrupts start enabled.
    pub fn register(&mut self, rx: bool, tx: bool) -> DeviceId {
        let dev = DeviceId(self.slots.len() / 2);
        for registered in [rx, tx] {
            self.slots.push(Slot {
                registered,
                needed: false,
                intr_enabled: registered,
                protected: None,
                shared: false,
            });
        }
        dev
    }

    /// Makes registered device `dev`'s receive and transmit events share
    /// one interrupt enable, as a LANCE's do: an event in either direction
    /// disables both, and the driver's enable callback, which sets the one
    /// flag, runs once every pending packet at the interface has been
    /// handled in both directions (Mogul & Ramakrishnan §6.4), so not while
    /// input is inhibited with frames on the ring. Meanwhile the driver
    /// learns of the other direction's work from the status it reads in a
    /// callback ([`PollingFacility::noticed`]).
    pub fn share_interrupt(&mut self, dev: DeviceId) {
        self.slots[dev.0 * 2].shared = true;
        self.slots[dev.0 * 2 + 1].shared = true;
    }

    /// The driver saw, in a callback, that `dev` has work in `dir` (a
    /// shared interrupt's status): it needs service, and its interrupt is
    /// left as it is.
    pub fn noticed(&mut self, dev: DeviceId, dir: Dir) {
        self.slot(dev, dir).needed = true;
    }

    fn slot(&mut self, dev: DeviceId, dir: Dir) -> &mut Slot {
        &mut self.slots[dev.0 * 2 + dir as usize]
    }

    /// Whether a CPU-cycle limit (M4, or the real-time budget's guard) is
    /// configured: whether callbacks are charged.
    pub fn has_cycle_limit(&self) -> bool {
        self.cycle.is_some() || self.rt_guard.is_some()
    }

    /// With M4: input time left in the current period before it inhibits
    /// input (see [`CycleLimit::headroom`]).
    pub fn cycle_headroom(&mut self, now: Nanos) -> Option<Nanos> {
        let c = self.cycle.as_mut().and_then(|c| c.headroom(now));
        let g = self.rt_guard.as_mut().and_then(|g| g.headroom(now));
        match (c, g) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The packet quota per callback.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// An interrupt from `dev` in `dir`: record that it needs service and
    /// leave its interrupt disabled. The caller wakes the polling thread.
    pub fn interrupt(&mut self, dev: DeviceId, dir: Dir) {
        let s = self.slot(dev, dir);
        s.needed = true;
        s.intr_enabled = false;
        if s.shared {
            self.slots[dev.0 * 2 + 1 - dir as usize].intr_enabled = false;
        }
    }

    /// Whether `dev`'s interrupt in `dir` is enabled.
    pub fn interrupts_enabled(&self, dev: DeviceId, dir: Dir) -> bool {
        self.slots[dev.0 * 2 + dir as usize].intr_enabled
    }

    /// A callback handled `handled` packets; `more` says whether the device
    /// still has work in that direction.
    pub fn poll_done(&mut self, dev: DeviceId, dir: Dir, handled: u32, more: bool) {
        self.polls += 1;
        let s = self.slot(dev, dir);
        s.needed = more;
        let protected = s.protected.is_some();
        debug_assert!(
            protected || !self.quota.exhausted(handled.saturating_sub(1)) || handled == 0
        );
        if protected {
            self.protected_frames = handled as u64;
            self.ordinary_since = 0;
        } else if dir == Dir::Rx {
            self.ordinary_since += handled as u64;
        }
    }

    /// Adds M12: after each round of polling, general-purpose tasks have
    /// the CPU for up to `quantum` ns before the next round (see
    /// [`GpTurns`]); the quota is each driver's weight.
    pub fn with_gp_turns(mut self, quantum: Nanos) -> Self {
        self.turns = Some(GpTurns::new(quantum));
        self
    }

    /// Whether a general-purpose turn was in force when last looked at:
    /// an interrupt then flags its device for the next round and wakes
    /// nothing.
    pub fn gp_turn_pending(&self) -> bool {
        self.turns.as_ref().is_some_and(|t| t.deadline().is_some())
    }

    /// Whether any device is flagged as needing service.
    pub fn any_needed(&self) -> bool {
        self.slots.iter().any(|s| s.registered && s.needed)
    }

    /// A downstream queue reports its length (M3). Returns true if this
    /// starts an inhibit.
    pub fn queue_level(&mut self, len: u32, now: Nanos) -> bool {
        self.feedback
            .as_mut()
            .is_some_and(|f| f.queue_level(len, now))
    }

    /// Charges the CPU cost of a polling pass that ended at `now` (M4).
    /// Returns true if this starts an inhibit.
    pub fn charge(&mut self, now: Nanos, cost_ns: Nanos) -> bool {
        if let Some(c) = &mut self.slo {
            c.charged(cost_ns);
        }
        let guard = self
            .rt_guard
            .as_mut()
            .is_some_and(|g| g.charge(now, cost_ns));
        self.cycle.as_mut().is_some_and(|c| c.charge(now, cost_ns)) || guard
    }

    /// The idle thread ran: the cycle limit re-enables input (M4).
    pub fn idle(&mut self, now: Nanos) {
        if let Some(c) = &mut self.cycle {
            c.idle(now);
        }
        if let Some(g) = &mut self.rt_guard {
            g.idle(now);
        }
        if let Some(t) = &mut self.turns {
            t.idle();
        }
    }

    /// Lets timeouts and period ends take effect.
    pub fn timer(&mut self, now: Nanos) {
        if let Some(f) = &mut self.feedback {
            f.timer(now);
        }
        if let Some(c) = &mut self.cycle {
            c.input_allowed(now);
        }
        if let Some(g) = &mut self.rt_guard {
            g.input_allowed(now);
        }
        if let Some(t) = &mut self.turns {
            t.timer(now);
        }
    }

    /// Why input is inhibited at `now`, if it is.
    pub fn input_inhibited(&mut self, now: Nanos) -> Option<InhibitCause> {
        self.timer(now);
        if self.feedback.as_ref().is_some_and(|f| f.inhibited(now)) {
            return Some(InhibitCause::QueueFeedback);
        }
        if self.cycle.as_mut().is_some_and(|c| !c.input_allowed(now)) {
            return Some(InhibitCause::CycleLimit);
        }
        if self
            .rt_guard
            .as_mut()
            .is_some_and(|g| !g.input_allowed(now))
        {
            return Some(InhibitCause::RtBudget);
        }
        if self.turns.as_mut().is_some_and(|t| t.in_turn(now)) {
            return Some(InhibitCause::GpTurn);
        }
        None
    }

    /// Whether receive work on `dev` is held at `now`: any inhibit holds
    /// an ordinary queue, and those of [`PollingFacility::protected_inhibited`]
    /// a protected one.
    pub fn rx_inhibited(&mut self, dev: DeviceId, now: Nanos) -> bool {
        if self.is_protected(dev) {
            self.protected_inhibited(now)
        } else {
            self.input_inhibited(now).is_some()
        }
    }

    /// The earliest time an inhibit in force ends.
    pub fn deadline(&self) -> Option<Nanos> {
        [
            self.feedback.as_ref().and_then(|f| f.deadline()),
            self.cycle.as_ref().and_then(|c| c.deadline()),
            self.rt_guard.as_ref().and_then(|g| g.deadline()),
            self.turns.as_ref().and_then(|t| t.deadline()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Inhibit episodes by cause.
    pub fn inhibits(&self) -> Vec<(InhibitCause, u64)> {
        let mut v = Vec::new();
        if let Some(f) = &self.feedback {
            v.push((InhibitCause::QueueFeedback, f.episodes()));
        }
        if let Some(c) = &self.cycle {
            v.push((InhibitCause::CycleLimit, c.episodes()));
        }
        if let Some(g) = &self.rt_guard {
            v.push((InhibitCause::RtBudget, g.episodes()));
        }
        if let Some(t) = &self.turns {
            v.push((InhibitCause::GpTurn, t.episodes()));
        }
        v
    }

    /// Callbacks completed so far.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// What the polling thread should do next.
    pub fn next_action(&mut self, now: Nanos) -> Action {
        // M12: a general-purpose turn holds every driver, both directions.
        if let Some(t) = &mut self.turns {
            if t.in_turn(now) {
                return Action::Idle {
                    until: t.deadline(),
                };
            }
        }
        let inhibited = self.input_inhibited(now).is_some();
        let n = self.slots.len();
        if self.any_protected && !self.protected_inhibited(now) {
            if let Some(a) = self.protected_action(inhibited) {
                return a;
            }
        }
        // One round-robin scan: the first slot with work is polled, and a
        // slot that has run dry gets its interrupt back in its turn, so a
        // busy neighbour cannot keep it deaf.
        for i in 0..n {
            let idx = (self.cursor + i) % n;
            let s = self.slots[idx];
            let rx = idx.is_multiple_of(2);
            if !s.registered || (rx && inhibited) {
                continue;
            }
            let dev = DeviceId(idx / 2);
            let dir = if rx { Dir::Rx } else { Dir::Tx };
            if s.needed && s.protected.is_some() {
                // Served ahead of the round robin, or owed a turn to others.
                continue;
            }
            if s.needed {
                if let Some(t) = &mut self.turns {
                    if t.round_over(idx, n, now) {
                        return Action::Idle {
                            until: t.deadline(),
                        };
                    }
                }
                self.cursor = (idx + 1) % n;
                return Action::Poll {
                    dev,
                    dir,
                    quota: self.quota,
                };
            }
            if s.shared && !s.intr_enabled {
                // One enable for both directions, once neither has work
                // and input may go on.
                let (r, t) = (self.slots[idx & !1], self.slots[idx | 1]);
                if !r.needed && !t.needed && !inhibited {
                    self.slots[idx & !1].intr_enabled = true;
                    self.slots[idx | 1].intr_enabled = true;
                    self.cursor = (idx + 1) % n;
                    return Action::EnableInterrupts { dev, dir: Dir::Rx };
                }
                continue;
            }
            if !s.intr_enabled {
                self.slots[idx].intr_enabled = true;
                self.cursor = (idx + 1) % n;
                return Action::EnableInterrupts { dev, dir };
            }
        }
        if let Some(t) = &mut self.turns {
            // The round is over with nothing left: the processes' turn.
            t.round_idle(now);
            return Action::Idle {
                until: self.deadline(),
            };
        }
        Action::Idle {
            until: if inhibited { self.deadline() } else { None },
        }
    }
}

mod protect;
#[cfg(test)]
mod tests;
