//! The polling thread's loop: the one translation from the facility's
//! [`Action`]s into units of work, shared by the simulator and the real
//! dataplane.
//!
//! Like quinn-proto's `Connection`, the loop never touches a device or a
//! clock. A driver asks it for the next [`Work`] with [`PollLoop::next`],
//! carries that out (by charging modelled cost, or by really reading a
//! ring), and reports what happened. The loop owns the decisions and their
//! counters: which callback runs, its budget (the quota), input inhibits
//! (M3, M4), interrupt re-enabling and mode switches.
//!
//! A callback has Linux NAPI's shape (`poll(napi, budget) -> work_done`):
//! [`Work::Poll`] grants a budget, the driver handles up to that many
//! packets in a batch, asking [`PollLoop::proceed`] before each one, and
//! reports how many it handled with [`PollLoop::done`]. A real driver thus
//! touches its rings once per batch; the simulator may still charge each
//! packet as a step of its own.

use crate::{Action, DeviceId, Dir, InhibitCause, Nanos, PollingFacility, Quota};

/// Where the loop reads time from.
pub trait Clock {
    /// The current time: virtual in the simulator, monotonic in the router.
    fn now(&self) -> Nanos;
    /// CPU time the polling thread has used so far: what M4's cycle counter
    /// reads at the start and end of each callback.
    fn cpu_ns(&self) -> Nanos;
    /// CPU time the router has used so far in every context (its thread
    /// and its interrupts): what an objective's controller steers (see
    /// [`crate::slo`]). The thread's alone, unless the clock knows more.
    fn router_ns(&self) -> Nanos {
        self.cpu_ns()
    }
    /// Whether [`Clock::cpu_ns`] times each callback, so that the loop can
    /// tell an objective's controller what each cost. A clock that does
    /// not (a caller that charges M4 itself) reports callbacks' costs with
    /// [`PollLoop::slo_callback`] instead.
    fn times_callbacks(&self) -> bool {
        true
    }
}

/// One unit of work for the polling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// The thread was asleep and has been woken: switch into it.
    Switch,
    /// Call `dev`'s callback in `dir` (the call itself costs something):
    /// handle at most `budget` packets (take frames off the ring and process
    /// each to completion, or reclaim sent buffers), asking
    /// [`PollLoop::proceed`] before each, then report with
    /// [`PollLoop::done`] before asking for more work.
    Poll {
        /// The device.
        dev: DeviceId,
        /// Which callback.
        dir: Dir,
        /// The most packets this call may handle: the quota (`u32::MAX`
        /// when unlimited).
        budget: u32,
    },
    /// Re-enable `dev`'s interrupt in `dir`, then report with
    /// [`PollLoop::enabled`] whether work was already waiting.
    EnableInterrupts {
        /// The device.
        dev: DeviceId,
        /// Which interrupt.
        dir: Dir,
    },
    /// Nothing to do: the thread sleeps until an interrupt, or until `until`
    /// (when an input inhibit ends), when the driver calls [`PollLoop::timer`].
    Idle {
        /// When to look again even without an interrupt.
        until: Option<Nanos>,
    },
}

/// What a report to the loop asks of the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Wake {
    /// Nothing.
    No,
    /// The thread was asleep and is now runnable.
    Now,
    /// An inhibit began: call [`PollLoop::timer`] at this time.
    At(Nanos),
}

/// When an input inhibit (M3, M4) stops receive work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InhibitCheck {
    /// Before every packet: a callback stops as soon as input is inhibited.
    #[default]
    Packet,
    /// When a callback returns: a callback runs to its quota, as the
    /// paper's kernel checks the cycle threshold "only after handling a
    /// burst of input packets" (§7), so a burst can overshoot the limit.
    Callback,
}

/// The callback in progress.
#[derive(Debug, Clone, Copy)]
struct Job {
    dev: DeviceId,
    dir: Dir,
    quota: Quota,
    /// Packets `proceed` has allowed so far.
    allowed: u32,
    cpu0: Nanos,
}

/// The polling thread of M2, with M3 and M4 through its facility.
#[derive(Debug, Clone)]
pub struct PollLoop {
    fac: PollingFacility,
    awake: bool,
    need_switch: bool,
    job: Option<Job>,
    mode_switches: u64,
    check: InhibitCheck,
}

impl PollLoop {
    /// A loop over `fac`, asleep, with no device registered yet.
    pub fn new(fac: PollingFacility) -> Self {
        PollLoop {
            fac,
            awake: false,
            need_switch: false,
            job: None,
            mode_switches: 0,
            check: InhibitCheck::Packet,
        }
    }

    /// The loop with inhibits looked at as `check` says.
    pub fn with_inhibit_check(mut self, check: InhibitCheck) -> Self {
        self.check = check;
        self
    }

    /// Registers a device (see [`PollingFacility::register`]).
    pub fn register(&mut self, rx: bool, tx: bool) -> DeviceId {
        self.fac.register(rx, tx)
    }

    /// Makes `dev`'s two directions share one interrupt enable (see
    /// [`PollingFacility::share_interrupt`]).
    pub fn share_interrupt(&mut self, dev: DeviceId) {
        self.fac.share_interrupt(dev);
    }

    /// The driver saw in a callback that `dev` has work in `dir` (see
    /// [`PollingFacility::noticed`]).
    pub fn noticed(&mut self, dev: DeviceId, dir: Dir) {
        self.fac.noticed(dev, dir);
    }

    /// Registers a protected receive queue (see
    /// [`PollingFacility::register_protected`]).
    pub fn register_protected(&mut self, quota: Quota) -> DeviceId {
        self.fac.register_protected(quota)
    }

    /// Makes registered device `dev`'s receive queue a protected one (see
    /// [`PollingFacility::protect`]).
    pub fn protect(&mut self, dev: DeviceId, quota: Quota) {
        self.fac.protect(dev, quota);
    }

    /// Adds the real-time budget's guard (see
    /// [`PollingFacility::with_rt_guard`]): from now on callbacks are
    /// charged, and ordinary input is held once the guard's share of a
    /// period is spent.
    pub fn set_rt_guard(&mut self, guard: crate::RtGuard) {
        self.fac.set_rt_guard(guard);
    }

    /// With M4: input time left in the current period before an inhibit.
    pub fn cycle_headroom(&mut self, now: Nanos) -> Option<Nanos> {
        self.fac.cycle_headroom(now)
    }

    /// The facility, for queries.
    pub fn facility(&self) -> &PollingFacility {
        &self.fac
    }

    /// Whether `dev`'s interrupt in `dir` is enabled: whether an event there
    /// should raise an interrupt at all.
    pub fn interrupts_enabled(&self, dev: DeviceId, dir: Dir) -> bool {
        self.fac.interrupts_enabled(dev, dir)
    }

    /// Whether the thread is awake (running or runnable).
    pub fn awake(&self) -> bool {
        self.awake
    }

    fn wake(&mut self) -> Wake {
        if self.awake {
            return Wake::No;
        }
        self.awake = true;
        self.need_switch = true;
        self.mode_switches += 1;
        Wake::Now
    }

    /// A device interrupt was taken: the handler notes that `dev` needs
    /// service in `dir`, leaves the interrupt disabled and wakes the thread.
    pub fn interrupt(&mut self, dev: DeviceId, dir: Dir) -> Wake {
        self.fac.interrupt(dev, dir);
        // M12: during a general-purpose turn the flag waits for the round
        // after it (the turn's timer, or the CPU idling, wakes the thread).
        if self.fac.gp_turn_pending() && !self.awake {
            return Wake::No;
        }
        self.wake()
    }

    /// A timer the loop asked for fired: inhibits that are over end, and the
    /// thread wakes to look.
    pub fn timer(&mut self, now: Nanos) -> Wake {
        self.fac.timer(now);
        self.wake()
    }

    /// A downstream queue reports its length (M3). Wakes the thread when
    /// this ends an inhibit; asks for a timer when it starts one.
    pub fn queue_level(&mut self, len: u32, now: Nanos) -> Wake {
        let was = self.fac.input_inhibited(now).is_some();
        self.fac.queue_level(len, now);
        if was && self.fac.input_inhibited(now).is_none() {
            self.wake()
        } else if !was {
            let w = self.fac.deadline().map_or(Wake::No, Wake::At);
            debug_assert!(
                !matches!(w, Wake::At(t) if t <= now),
                "an inhibit that began at {now} ends in the past"
            );
            w
        } else {
            Wake::No
        }
    }

    /// The idle thread ran: M4 re-enables input, which may wake the thread;
    /// an M12 turn ends, which wakes it only if a device was flagged
    /// meanwhile (else the next interrupt will).
    pub fn idle(&mut self, now: Nanos) -> Wake {
        let was = self.fac.input_inhibited(now).is_some();
        let turn = self.fac.gp_turn_pending();
        self.fac.idle(now);
        if was && self.fac.input_inhibited(now).is_none() && (!turn || self.fac.any_needed()) {
            self.wake()
        } else {
            Wake::No
        }
    }

    /// Charges CPU used on the loop's behalf outside its callbacks (a
    /// kernel thread's receive work that fills the rings it polls) to the
    /// cycle limit (M4).
    pub fn charge(&mut self, now: Nanos, cost_ns: Nanos) {
        self.fac.charge(now, cost_ns);
    }

    /// Why input is inhibited at `now`, if it is.
    pub fn input_inhibited(&mut self, now: Nanos) -> Option<InhibitCause> {
        self.fac.input_inhibited(now)
    }

    /// Whether an inhibit in force at `now` holds the protected class (see
    /// [`PollingFacility::protected_inhibited`]).
    pub fn protected_inhibited(&mut self, now: Nanos) -> bool {
        self.fac.protected_inhibited(now)
    }

    /// Whether a callback is in progress: [`PollLoop::done`] is owed.
    pub fn in_callback(&self) -> bool {
        self.job.is_some()
    }

    /// The next unit of work, or `None` while the thread sleeps. Not to be
    /// called while a callback is in progress.
    pub fn next(&mut self, clock: &impl Clock) -> Option<Work> {
        assert!(
            self.job.is_none(),
            "PollLoop::next during a callback: report it with done() first"
        );
        if !self.awake {
            return None;
        }
        if self.need_switch {
            self.need_switch = false;
            return Some(Work::Switch);
        }
        Some(match self.fac.next_action(clock.now()) {
            Action::Poll { dev, dir, quota } => {
                // The cycle counter is read only when M4 needs it.
                let cpu0 = if self.fac.has_cycle_limit() {
                    clock.cpu_ns()
                } else {
                    0
                };
                self.job = Some(Job {
                    dev,
                    dir,
                    quota,
                    allowed: 0,
                    cpu0,
                });
                Work::Poll {
                    dev,
                    dir,
                    budget: quota.as_count(),
                }
            }
            Action::EnableInterrupts { dev, dir } => Work::EnableInterrupts { dev, dir },
            Action::Idle { until } => {
                self.awake = false;
                Work::Idle { until }
            }
        })
    }

    /// Whether the callback in progress may handle one more packet at
    /// `now`, which the driver has waiting: not once its budget is spent,
    /// not when a protected queue's frames are due (receive work on an
    /// ordinary ring), and, for receive work under [`InhibitCheck::Packet`],
    /// not once input is inhibited. Transmit work is never inhibited. A `true` commits the
    /// driver to handling that packet.
    pub fn proceed(&mut self, now: Nanos) -> bool {
        let job = self
            .job
            .as_mut()
            .expect("PollLoop::proceed outside a callback");
        // A protected queue's frames stop an ordinary receive callback,
        // once it has handled a frame and as far as the cap allows.
        let protected = job.dir == Dir::Rx
            && job.allowed > 0
            && self.fac.protected_waiting()
            && !self.fac.is_protected(job.dev)
            && self.fac.protected_due(job.allowed);
        let go = !protected
            && !job.quota.exhausted(job.allowed)
            && (job.dir == Dir::Tx
                || self.check == InhibitCheck::Callback
                || !self.fac.rx_inhibited(job.dev, now));
        if go {
            job.allowed += 1;
        }
        go
    }

    /// The callback in progress returned, having handled `n` packets (each
    /// allowed by [`PollLoop::proceed`]); `more` says whether the device
    /// still has work in that direction. With M4 the loop reads the cycle
    /// counter here.
    pub fn done(&mut self, n: u32, more: bool, clock: &impl Clock) {
        let job = self.job.take().expect("PollLoop::done outside a callback");
        debug_assert!(
            n <= job.allowed,
            "a callback handled {n} packets but was allowed {}",
            job.allowed
        );
        debug_assert!(
            !job.quota.exhausted(n.saturating_sub(1)) || n == 0,
            "a callback handled {n} packets, beyond its quota {}",
            job.quota
        );
        self.fac.poll_done(job.dev, job.dir, n, more);
        let cost = clock.cpu_ns().saturating_sub(job.cpu0);
        if self.fac.has_cycle_limit() {
            self.fac.charge(clock.now(), cost);
        }
        if clock.times_callbacks() {
            self.fac.slo_callback(job.dir, n, cost);
        }
        self.fac.slo_tick(clock.now(), clock.router_ns());
    }

    /// A callback in `dir` handled `n` frames at a cost of `cost_ns`: for
    /// an objective's controller, from a caller whose clock does not time
    /// callbacks (see [`Clock::times_callbacks`]). Call it before
    /// [`PollLoop::done`].
    pub fn slo_callback(&mut self, dir: Dir, n: u32, cost_ns: Nanos) {
        self.fac.slo_callback(dir, n, cost_ns);
    }

    /// The stage behind the loop took `frames` in `ns` of its CPU since the
    /// last report (see [`PollingFacility::slo_stage`]).
    pub fn slo_stage(&mut self, frames: u64, ns: u64) {
        self.fac.slo_stage(frames, ns);
    }

    /// The driver re-enabled `dev`'s interrupt in `dir`. Interrupts are
    /// level-triggered: if work was already `pending`, it is noticed at
    /// once; otherwise the device is back in interrupt mode.
    pub fn enabled(&mut self, dev: DeviceId, dir: Dir, pending: bool) {
        if pending {
            self.fac.interrupt(dev, dir);
        } else {
            self.mode_switches += 1;
        }
    }

    /// Switches between interrupt-driven and polled service: each wake-up of
    /// the thread, and each device returned to interrupts with nothing waiting.
    pub fn mode_switches(&self) -> u64 {
        self.mode_switches
    }

    /// Input-inhibit episodes by cause.
    pub fn inhibits(&self) -> Vec<(InhibitCause, u64)> {
        self.fac.inhibits()
    }

    /// Callbacks completed so far.
    pub fn polls(&self) -> u64 {
        self.fac.polls()
    }

    /// The earliest time an inhibit in force ends.
    pub fn deadline(&self) -> Option<Nanos> {
        self.fac.deadline()
    }
}

#[cfg(test)]
mod tests;
