//! M2: the polling facility, with M3 and M4 as options.

use crate::{CycleLimit, InhibitCause, Nanos, QueueFeedback, Quota};

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
    polls: u64,
    /// Frames the last protected callback handled, and ordinary receive
    /// frames handled since: the protected class's cap.
    protected_frames: u64,
    ordinary_since: u64,
    /// Whether any protected queue is registered.
    any_protected: bool,
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
            polls: 0,
            protected_frames: 0,
            ordinary_since: 0,
            any_protected: false,
        }
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
            });
        }
        dev
    }

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

    fn slot(&mut self, dev: DeviceId, dir: Dir) -> &mut Slot {
        &mut self.slots[dev.0 * 2 + dir as usize]
    }

    /// Whether a CPU-cycle limit (M4) is configured.
    pub fn has_cycle_limit(&self) -> bool {
        self.cycle.is_some()
    }

    /// With M4: input time left in the current period before it inhibits
    /// input (see [`CycleLimit::headroom`]).
    pub fn cycle_headroom(&mut self, now: Nanos) -> Option<Nanos> {
        self.cycle.as_mut().and_then(|c| c.headroom(now))
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
        self.cycle.as_mut().is_some_and(|c| c.charge(now, cost_ns))
    }

    /// The idle thread ran: the cycle limit re-enables input (M4).
    pub fn idle(&mut self, now: Nanos) {
        if let Some(c) = &mut self.cycle {
            c.idle(now);
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
        None
    }

    /// The earliest time an inhibit in force ends.
    pub fn deadline(&self) -> Option<Nanos> {
        let f = self.feedback.as_ref().and_then(|f| f.deadline());
        let c = self.cycle.as_ref().and_then(|c| c.deadline());
        match (f, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
        v
    }

    /// Callbacks completed so far.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// Input not inhibited: a protected queue's work that goes ahead of the
    /// round robin, if any.
    fn protected_action(&mut self) -> Option<Action> {
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
        // frames (the cap).
        let ordinary_waiting = self
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

    /// What the polling thread should do next.
    pub fn next_action(&mut self, now: Nanos) -> Action {
        let inhibited = self.input_inhibited(now).is_some();
        let n = self.slots.len();
        if self.any_protected && !inhibited {
            if let Some(a) = self.protected_action() {
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
                self.cursor = (idx + 1) % n;
                return Action::Poll {
                    dev,
                    dir,
                    quota: self.quota,
                };
            }
            if !s.intr_enabled {
                self.slots[idx].intr_enabled = true;
                self.cursor = (idx + 1) % n;
                return Action::EnableInterrupts { dev, dir };
            }
        }
        Action::Idle {
            until: if inhibited { self.deadline() } else { None },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;
    use proptest::prelude::*;

    /// A toy driver: each device has some receive and transmit work pending.
    struct Toy {
        pending: Vec<[u32; 2]>,
        served: Vec<[u64; 2]>,
    }

    impl Toy {
        /// Executes one action; returns how many packets it handled.
        fn step(&mut self, f: &mut PollingFacility, now: Nanos) -> Option<(Action, u32)> {
            let a = f.next_action(now);
            match a {
                Action::Poll { dev, dir, quota } => {
                    let p = &mut self.pending[dev.0][dir as usize];
                    let n = (*p).min(quota.as_count());
                    *p -= n;
                    self.served[dev.0][dir as usize] += n as u64;
                    f.poll_done(dev, dir, n, *p > 0);
                    Some((a, n))
                }
                Action::EnableInterrupts { dev, dir } => {
                    if self.pending[dev.0][dir as usize] > 0 {
                        f.interrupt(dev, dir);
                    }
                    Some((a, 0))
                }
                Action::Idle { .. } => None,
            }
        }
    }

    #[test]
    fn round_robin_then_enable_then_idle() {
        let mut f = PollingFacility::new(Quota::Limited(2));
        let a = f.register(true, true);
        let b = f.register(true, true);
        let mut toy = Toy {
            pending: vec![[3, 0], [1, 1]],
            served: vec![[0; 2]; 2],
        };
        f.interrupt(a, Dir::Rx);
        f.interrupt(b, Dir::Rx);
        f.interrupt(b, Dir::Tx);
        let mut seq = Vec::new();
        while let Some((act, n)) = toy.step(&mut f, 0) {
            seq.push((act, n));
        }
        assert_eq!(
            seq[0],
            (
                Action::Poll {
                    dev: a,
                    dir: Dir::Rx,
                    quota: Quota::Limited(2)
                },
                2
            )
        );
        assert_eq!(
            seq[1].0,
            Action::Poll {
                dev: b,
                dir: Dir::Rx,
                quota: Quota::Limited(2)
            }
        );
        assert_eq!(
            seq[2].0,
            Action::Poll {
                dev: b,
                dir: Dir::Tx,
                quota: Quota::Limited(2)
            }
        );
        assert_eq!(
            seq[3],
            (
                Action::Poll {
                    dev: a,
                    dir: Dir::Rx,
                    quota: Quota::Limited(2)
                },
                1
            )
        );
        assert!(seq[4..]
            .iter()
            .all(|(a, _)| matches!(a, Action::EnableInterrupts { .. })));
        assert_eq!(seq.len(), 4 + 3);
        assert!(f.interrupts_enabled(a, Dir::Rx) && f.interrupts_enabled(b, Dir::Tx));
    }

    #[test]
    fn feedback_inhibits_input_but_not_output() {
        let fb = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
        let mut f = PollingFacility::new(Quota::Limited(10)).with_feedback(fb);
        let d = f.register(true, true);
        f.interrupt(d, Dir::Rx);
        f.interrupt(d, Dir::Tx);
        assert!(f.queue_level(30, 0));
        assert_eq!(
            f.next_action(1),
            Action::Poll {
                dev: d,
                dir: Dir::Tx,
                quota: Quota::Limited(10)
            }
        );
        f.poll_done(d, Dir::Tx, 1, false);
        assert!(matches!(
            f.next_action(2),
            Action::EnableInterrupts { dir: Dir::Tx, .. }
        ));
        assert_eq!(f.next_action(3), Action::Idle { until: Some(MS) });
        assert!(matches!(
            f.next_action(MS),
            Action::Poll { dir: Dir::Rx, .. }
        ));
        assert_eq!(f.inhibits(), vec![(InhibitCause::QueueFeedback, 1)]);
    }

    #[test]
    fn cycle_limit_inhibits_input_until_period_end() {
        let mut f =
            PollingFacility::new(Quota::Limited(5)).with_cycle_limit(CycleLimit::new(10 * MS, 0.5));
        let d = f.register(true, false);
        f.interrupt(d, Dir::Rx);
        assert!(f.charge(6 * MS, 6 * MS));
        assert_eq!(f.input_inhibited(6 * MS), Some(InhibitCause::CycleLimit));
        assert_eq!(
            f.next_action(6 * MS),
            Action::Idle {
                until: Some(10 * MS)
            }
        );
        assert!(matches!(f.next_action(10 * MS), Action::Poll { .. }));
    }

    #[test]
    fn protected_queue_goes_first_and_then_yields() {
        let mut f = PollingFacility::new(Quota::Limited(5));
        let flood = f.register(true, true);
        let prot = f.register_protected(Quota::Limited(2));
        let mut toy = Toy {
            pending: vec![[100, 0], [3, 0]],
            served: vec![[0; 2]; 2],
        };
        f.interrupt(flood, Dir::Rx);
        let _ = toy.step(&mut f, 0);
        // A protected frame arrives while the flood is being served: the
        // next callback is the protected queue's, with its own quota.
        f.interrupt(prot, Dir::Rx);
        let (a, n) = toy.step(&mut f, 0).unwrap();
        assert_eq!(
            a,
            Action::Poll {
                dev: prot,
                dir: Dir::Rx,
                quota: Quota::Limited(2)
            }
        );
        assert_eq!(n, 2);
        // It still has a frame, but the flood has its turn first (the cap).
        let (a, _) = toy.step(&mut f, 0).unwrap();
        assert!(matches!(a, Action::Poll { dev, .. } if dev == flood));
        let (a, n) = toy.step(&mut f, 0).unwrap();
        assert!(matches!(a, Action::Poll { dev, .. } if dev == prot));
        assert_eq!(n, 1);
        // Drained, its interrupt comes back in the round robin's turn.
        while let Some((a, _)) = toy.step(&mut f, 0) {
            assert!(!matches!(a, Action::Poll { dev, .. } if dev == prot));
            if toy.pending[0][0] == 0 {
                break;
            }
        }
        assert!(f.interrupts_enabled(prot, Dir::Rx));
    }

    #[test]
    fn inhibits_hold_the_protected_queue_too() {
        let mut f =
            PollingFacility::new(Quota::Limited(5)).with_cycle_limit(CycleLimit::new(10 * MS, 0.5));
        let prot = f.register_protected(Quota::Limited(4));
        f.interrupt(prot, Dir::Rx);
        assert!(f.charge(6 * MS, 6 * MS));
        assert_eq!(
            f.next_action(6 * MS),
            Action::Idle {
                until: Some(10 * MS)
            }
        );
        assert!(matches!(f.next_action(10 * MS), Action::Poll { dev, .. } if dev == prot));
    }

    proptest! {
        /// With ordinary devices backlogged, a flooded protected queue gets
        /// at most one callback per ordinary callback and no more frames than
        /// they do, and no backlogged ordinary device goes unserved for more
        /// than one round.
        #[test]
        fn protected_flood_is_capped(q in 1u32..20, pq in 1u32..20, ndev in 1usize..4, steps in 4usize..300) {
            let mut f = PollingFacility::new(Quota::Limited(q));
            let devs: Vec<_> = (0..ndev).map(|_| f.register(true, false)).collect();
            let prot = f.register_protected(Quota::Limited(pq));
            let mut toy = Toy { pending: vec![[u32::MAX / 2, 0]; ndev + 1], served: vec![[0; 2]; ndev + 1] };
            for d in devs.iter().chain([&prot]) { f.interrupt(*d, Dir::Rx); }
            let (mut protected, mut ordinary, mut last_prot) = (0u64, 0u64, false);
            let (mut pframes, mut oframes) = (0u64, 0u64);
            for _ in 0..steps {
                let (a, n) = toy.step(&mut f, 0).unwrap();
                if let Action::Poll { dev, quota, .. } = a {
                    let is_prot = dev == prot;
                    prop_assert!(!(is_prot && last_prot), "two protected callbacks in a row");
                    if is_prot { protected += 1; pframes += n as u64; prop_assert_eq!(quota, Quota::Limited(pq)); }
                    else { ordinary += 1; oframes += n as u64; prop_assert_eq!(quota, Quota::Limited(q)); }
                    last_prot = is_prot;
                }
            }
            prop_assert!(protected <= ordinary + 1);
            // No more protected frames than ordinary ones, but for the last callback's.
            prop_assert!(pframes <= oframes + pq as u64, "{} protected frames, {} ordinary", pframes, oframes);
            let least = toy.served[..ndev].iter().map(|s| s[0]).min().unwrap();
            let most = toy.served[..ndev].iter().map(|s| s[0]).max().unwrap();
            prop_assert!(most - least <= q as u64);
        }
    }

    proptest! {
        /// No callback is handed more than the quota, and every backlogged
        /// device is served within one quota of every other.
        #[test]
        fn quota_and_fairness(q in 1u32..50, ndev in 1usize..6, steps in 1usize..400) {
            let mut f = PollingFacility::new(Quota::Limited(q));
            let devs: Vec<_> = (0..ndev).map(|_| f.register(true, false)).collect();
            let mut toy = Toy { pending: vec![[u32::MAX / 2, 0]; ndev], served: vec![[0; 2]; ndev] };
            for d in &devs { f.interrupt(*d, Dir::Rx); }
            for _ in 0..steps {
                let (a, n) = toy.step(&mut f, 0).unwrap();
                if let Action::Poll { quota, .. } = a {
                    prop_assert!(n <= quota.as_count());
                    prop_assert_eq!(quota, Quota::Limited(q));
                }
                let max = toy.served.iter().map(|s| s[0]).max().unwrap();
                let min = toy.served.iter().map(|s| s[0]).min().unwrap();
                prop_assert!(max - min <= q as u64);
            }
        }

        /// With a finite quota, transmit-complete work is served within one
        /// round however much input keeps arriving.
        #[test]
        fn tx_never_starved(q in 1u32..200, ndev in 1usize..4, tx_dev in 0usize..4) {
            let tx_dev = tx_dev % ndev;
            let mut f = PollingFacility::new(Quota::Limited(q));
            let devs: Vec<_> = (0..ndev).map(|_| f.register(true, true)).collect();
            let mut toy = Toy { pending: vec![[u32::MAX / 2, 0]; ndev], served: vec![[0; 2]; ndev] };
            for d in &devs { f.interrupt(*d, Dir::Rx); }
            toy.pending[tx_dev][1] = 1;
            f.interrupt(devs[tx_dev], Dir::Tx);
            let mut actions = 0;
            while toy.served[tx_dev][1] == 0 {
                toy.step(&mut f, 0).unwrap();
                actions += 1;
                prop_assert!(actions <= 2 * ndev, "tx waited {} actions", actions);
            }
        }

        /// Input inhibited by feedback always resumes by the timeout, even if
        /// the consumer never drains its queue.
        #[test]
        fn inhibit_always_ends(timeout in 1u64..10_000_000, at in 0u64..1_000_000) {
            let fb = QueueFeedback::watermarks(32, 0.75, 0.25, timeout);
            let mut f = PollingFacility::new(Quota::Limited(10)).with_feedback(fb);
            let d = f.register(true, false);
            f.interrupt(d, Dir::Rx);
            f.queue_level(32, at);
            let until = match f.next_action(at) { Action::Idle { until } => until, a => panic!("{a:?}") };
            prop_assert_eq!(until, Some(at + timeout));
            let resumed = matches!(f.next_action(at + timeout), Action::Poll { dir: Dir::Rx, .. });
            prop_assert!(resumed);
        }
    }
}
