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

    /// The idle thread ran: M4 re-enables input, which may wake the thread.
    pub fn idle(&mut self, now: Nanos) -> Wake {
        let was = self.fac.input_inhibited(now).is_some();
        self.fac.idle(now);
        if was && self.fac.input_inhibited(now).is_none() {
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
                || self.fac.input_inhibited(now).is_none());
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
        if self.fac.has_cycle_limit() {
            self.fac
                .charge(clock.now(), clock.cpu_ns().saturating_sub(job.cpu0));
        }
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
mod tests {
    use super::*;
    use crate::{CycleLimit, QueueFeedback, MS};
    use proptest::prelude::*;
    use std::cell::Cell;

    /// Devices with counts of waiting work, and a clock the test moves.
    struct World {
        pending: Vec<[u32; 2]>,
        now: Cell<Nanos>,
        cpu: Cell<Nanos>,
    }

    impl Clock for World {
        fn now(&self) -> Nanos {
            self.now.get()
        }
        fn cpu_ns(&self) -> Nanos {
            self.cpu.get()
        }
    }

    /// One callback as a driver runs it: packets while there are some and
    /// the loop lets it, each costing `cost` ns of CPU; returns how many.
    fn callback(lp: &mut PollLoop, w: &mut World, dev: DeviceId, dir: Dir, cost: Nanos) -> u32 {
        let mut n = 0;
        while w.pending[dev.0][dir as usize] > 0 && lp.proceed(w.now.get()) {
            w.pending[dev.0][dir as usize] -= 1;
            w.cpu.set(w.cpu.get() + cost);
            w.now.set(w.now.get() + cost);
            n += 1;
        }
        let more = w.pending[dev.0][dir as usize] > 0;
        lp.done(n, more, w);
        n
    }

    /// Runs the loop until it sleeps, each packet costing `cost` ns of CPU;
    /// returns the work done and the packets each callback handled.
    fn drain(lp: &mut PollLoop, w: &mut World, cost: Nanos) -> (Vec<Work>, Vec<u32>) {
        let (mut seen, mut handled) = (Vec::new(), Vec::new());
        while let Some(work) = lp.next(w) {
            seen.push(work);
            match work {
                Work::Poll { dev, dir, .. } => handled.push(callback(lp, w, dev, dir, cost)),
                Work::EnableInterrupts { dev, dir } => {
                    let p = w.pending[dev.0][dir as usize] > 0;
                    lp.enabled(dev, dir, p);
                }
                _ => {}
            }
        }
        (seen, handled)
    }

    fn world(pending: Vec<[u32; 2]>) -> World {
        World {
            pending,
            now: Cell::new(0),
            cpu: Cell::new(0),
        }
    }

    #[test]
    fn interrupt_wakes_polls_with_quota_then_sleeps() {
        let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(2)));
        let d = lp.register(true, true);
        let mut w = world(vec![[5, 0]]);
        assert_eq!(lp.next(&w), None);
        assert_eq!(lp.interrupt(d, Dir::Rx), Wake::Now);
        assert_eq!(lp.interrupt(d, Dir::Rx), Wake::No);
        let (seen, handled) = drain(&mut lp, &mut w, 10);
        assert_eq!(seen[0], Work::Switch);
        assert_eq!(
            seen[1],
            Work::Poll {
                dev: d,
                dir: Dir::Rx,
                budget: 2
            }
        );
        assert_eq!(handled, vec![2, 2, 1]);
        assert!(matches!(seen.last(), Some(Work::Idle { until: None })));
        assert!(lp.interrupts_enabled(d, Dir::Rx));
        // One switch into polling, one back to interrupts; the transmit
        // interrupt was never taken, so it was never disabled.
        assert_eq!(lp.mode_switches(), 2);
        assert_eq!(lp.polls(), 3);
    }

    #[test]
    fn feedback_inhibit_asks_for_a_timer_and_ends_by_it() {
        let fb = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
        let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(10)).with_feedback(fb));
        let d = lp.register(true, false);
        let mut w = world(vec![[3, 0]]);
        assert_eq!(lp.queue_level(30, 0), Wake::At(MS));
        let _ = lp.interrupt(d, Dir::Rx);
        let (seen, _) = drain(&mut lp, &mut w, 10);
        assert_eq!(seen, vec![Work::Switch, Work::Idle { until: Some(MS) }]);
        w.now.set(MS);
        assert_eq!(lp.timer(MS), Wake::Now);
        let (_, handled) = drain(&mut lp, &mut w, 10);
        assert_eq!(handled, vec![3]);
        assert_eq!(w.pending[0][0], 0);
        assert_eq!(lp.inhibits(), vec![(InhibitCause::QueueFeedback, 1)]);
    }

    #[test]
    fn low_watermark_wakes_the_thread() {
        let fb = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
        let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(10)).with_feedback(fb));
        lp.register(true, false);
        assert_eq!(lp.queue_level(30, 0), Wake::At(MS));
        assert_eq!(lp.queue_level(20, 5), Wake::No);
        assert_eq!(lp.queue_level(8, 6), Wake::Now);
    }

    #[test]
    fn cycle_limit_is_charged_per_callback() {
        let fac =
            PollingFacility::new(Quota::Limited(5)).with_cycle_limit(CycleLimit::new(10 * MS, 0.5));
        let mut lp = PollLoop::new(fac);
        let d = lp.register(true, false);
        let mut w = world(vec![[1_000, 0]]);
        let _ = lp.interrupt(d, Dir::Rx);
        let (seen, handled) = drain(&mut lp, &mut w, 600_000);
        // Each callback of five packets costs 3 ms: the second passes the
        // 5 ms threshold and input stops until the period ends.
        assert_eq!(handled, vec![5, 5]);
        assert_eq!(
            seen.last(),
            Some(&Work::Idle {
                until: Some(10 * MS)
            })
        );
        assert_eq!(lp.inhibits(), vec![(InhibitCause::CycleLimit, 1)]);
        // The idle thread runs at the period's end: input resumes.
        w.now.set(10 * MS);
        assert_eq!(lp.idle(10 * MS), Wake::No); // the period ended by itself
        assert_eq!(lp.timer(10 * MS), Wake::Now);
    }

    #[test]
    fn an_inhibit_stops_a_callback_at_the_next_packet() {
        let fb = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
        let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(4)).with_feedback(fb));
        let d = lp.register(true, false);
        let w = world(vec![[10, 0]]);
        let _ = lp.interrupt(d, Dir::Rx);
        assert_eq!(lp.next(&w), Some(Work::Switch));
        assert!(matches!(lp.next(&w), Some(Work::Poll { budget: 4, .. })));
        assert!(lp.proceed(0));
        // The queue fills behind the first packet: the callback stops.
        assert_eq!(lp.queue_level(30, 0), Wake::At(MS));
        assert!(!lp.proceed(0));
        lp.done(1, true, &w);
        assert_eq!(lp.next(&w), Some(Work::Idle { until: Some(MS) }));
    }

    #[test]
    fn an_inhibit_takes_effect_when_the_callback_returns() {
        let fb = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
        let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(4)).with_feedback(fb))
            .with_inhibit_check(InhibitCheck::Callback);
        let d = lp.register(true, false);
        let w = world(vec![[10, 0]]);
        let _ = lp.interrupt(d, Dir::Rx);
        assert_eq!(lp.next(&w), Some(Work::Switch));
        assert_eq!(
            lp.next(&w),
            Some(Work::Poll {
                dev: d,
                dir: Dir::Rx,
                budget: 4
            })
        );
        assert!(lp.proceed(0));
        // The queue fills during the callback: the rest of its quota runs.
        assert_eq!(lp.queue_level(30, 0), Wake::At(MS));
        for _ in 0..3 {
            assert!(lp.proceed(0));
        }
        assert!(!lp.proceed(0), "the quota is spent");
        lp.done(4, true, &w);
        assert_eq!(lp.next(&w), Some(Work::Idle { until: Some(MS) }));
    }

    #[test]
    fn transmit_work_is_not_inhibited() {
        let fb = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
        let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(4)).with_feedback(fb));
        let d = lp.register(true, true);
        let mut w = world(vec![[3, 3]]);
        let _ = lp.queue_level(32, 0);
        let _ = lp.interrupt(d, Dir::Rx);
        let _ = lp.interrupt(d, Dir::Tx);
        drain(&mut lp, &mut w, 1);
        assert_eq!(w.pending[0], [3, 0]);
    }

    #[test]
    #[should_panic(expected = "during a callback")]
    fn asking_for_work_before_reporting_a_callback_is_refused() {
        let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(4)));
        let d = lp.register(true, false);
        let w = world(vec![[1, 0]]);
        let _ = lp.interrupt(d, Dir::Rx);
        let _ = lp.next(&w);
        let _ = lp.next(&w);
        let _ = lp.next(&w);
    }

    proptest! {
        /// Whatever arrives and however much each packet costs, no callback
        /// handles more than its quota, every packet is handled once, and
        /// the thread ends asleep with every interrupt back on.
        #[test]
        fn quota_never_exceeded_and_work_drains(
            quota in 1u32..40,
            rx in prop::collection::vec(0u32..200, 1..4),
            tx in prop::collection::vec(0u32..200, 1..4),
            cost in 1u64..50_000,
        ) {
            let n = rx.len().min(tx.len());
            let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(quota)));
            let devs: Vec<DeviceId> = (0..n).map(|_| lp.register(true, true)).collect();
            let pending: Vec<[u32; 2]> = (0..n).map(|i| [rx[i], tx[i]]).collect();
            let total: u32 = pending.iter().map(|p| p[0] + p[1]).sum();
            let mut w = world(pending);
            for &d in &devs {
                let _ = lp.interrupt(d, Dir::Rx);
                let _ = lp.interrupt(d, Dir::Tx);
            }
            let (_, handled) = drain(&mut lp, &mut w, cost);
            prop_assert!(handled.iter().all(|&h| h <= quota));
            prop_assert_eq!(handled.iter().sum::<u32>(), total);
            prop_assert!(!lp.awake());
            for &d in &devs {
                prop_assert!(lp.interrupts_enabled(d, Dir::Rx) && lp.interrupts_enabled(d, Dir::Tx));
            }
        }
    }
}
