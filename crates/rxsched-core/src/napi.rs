//! M7: NAPI, the Linux receive interface.

use crate::{DeviceId, Nanos, MS};

/// NAPI's knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NapiConfig {
    /// Packets one device may hand up per poll turn.
    pub weight: u32,
    /// Packets one softirq run may handle over all devices.
    pub budget_packets: u32,
    /// Time one softirq run may take.
    pub budget_ns: Nanos,
}

impl NapiConfig {
    /// Linux's defaults: weight 64, a budget of 300 packets or 2 ms.
    pub const LINUX: NapiConfig = NapiConfig {
        weight: 64,
        budget_packets: 300,
        budget_ns: 2 * MS,
    };

    /// The embedded-router study's setting (Spanos et al. 2008): weight 32,
    /// Linux's budget.
    pub const SPANOS: NapiConfig = NapiConfig {
        weight: 32,
        ..NapiConfig::LINUX
    };
}

/// What the softirq should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NapiAction {
    /// Poll `dev` for at most `limit` packets, then call [`Napi::poll_done`].
    Poll {
        /// The device.
        dev: DeviceId,
        /// At most this many packets (its weight, or what is left of the budget).
        limit: u32,
    },
    /// The budget is spent but devices still have work: end this run and
    /// raise the softirq again.
    Yield,
    /// No device has work: the softirq is done.
    Done,
}

/// NAPI (M7). The first arrival raises a receive interrupt; the handler
/// masks the device's receive interrupt and puts it on the poll list. The
/// softirq polls listed devices round-robin, each for at most `weight`
/// packets a turn, within a global budget per run. A device drained within
/// its turn leaves the list and gets its interrupt back; excess traffic
/// waits on (and overflows) the device's ring.
#[derive(Debug, Clone)]
pub struct Napi {
    cfg: NapiConfig,
    masked: Vec<bool>,
    /// What is left of each device's turn (Linux's `dev->quota`), so that a
    /// turn cut short by the budget continues in the next run.
    turn_left: Vec<u32>,
    list: std::collections::VecDeque<DeviceId>,
    run_start: Nanos,
    used: u32,
    runs: u64,
    yields: u64,
}

impl Napi {
    /// A NAPI instance with the given knobs.
    pub fn new(cfg: NapiConfig) -> Self {
        Napi {
            cfg,
            masked: Vec::new(),
            turn_left: Vec::new(),
            list: Default::default(),
            run_start: 0,
            used: 0,
            runs: 0,
            yields: 0,
        }
    }

    /// The knobs.
    pub fn config(&self) -> NapiConfig {
        self.cfg
    }

    /// Registers a device; its receive interrupt starts unmasked.
    pub fn register(&mut self) -> DeviceId {
        self.masked.push(false);
        self.turn_left.push(self.cfg.weight);
        DeviceId(self.masked.len() - 1)
    }

    /// Whether `dev`'s receive interrupt is masked.
    pub fn masked(&self, dev: DeviceId) -> bool {
        self.masked[dev.0]
    }

    /// A receive interrupt from `dev`: mask it and schedule a poll.
    /// Returns true if the caller must raise the softirq.
    pub fn interrupt(&mut self, dev: DeviceId) -> bool {
        if self.masked[dev.0] {
            return false;
        }
        self.masked[dev.0] = true;
        self.list.push_back(dev);
        true
    }

    /// A softirq run begins at `now`: a fresh budget.
    pub fn begin_run(&mut self, now: Nanos) {
        self.run_start = now;
        self.used = 0;
        self.runs += 1;
    }

    /// What to do next in this run.
    pub fn next(&mut self, now: Nanos) -> NapiAction {
        let Some(&dev) = self.list.front() else {
            return NapiAction::Done;
        };
        let left = self.cfg.budget_packets.saturating_sub(self.used);
        if left == 0 || now.saturating_sub(self.run_start) >= self.cfg.budget_ns {
            self.yields += 1;
            return NapiAction::Yield;
        }
        NapiAction::Poll {
            dev,
            limit: self.turn_left[dev.0].min(left),
        }
    }

    /// `dev`'s poll handled `handled` packets. If it `drained` its ring it
    /// leaves the list and its interrupt is unmasked (returns true: the
    /// caller re-enables the interrupt, and must re-check the ring);
    /// otherwise it goes to the back of the list.
    pub fn poll_done(&mut self, dev: DeviceId, handled: u32, drained: bool) -> bool {
        debug_assert!(
            handled <= self.turn_left[dev.0],
            "a poll handled {handled} packets past the {} left of its weight",
            self.turn_left[dev.0]
        );
        self.used += handled;
        let left = &mut self.turn_left[dev.0];
        *left = left.saturating_sub(handled);
        if drained {
            if let Some(p) = self.list.iter().position(|d| *d == dev) {
                self.list.remove(p);
            }
            self.turn_left[dev.0] = self.cfg.weight;
            self.masked[dev.0] = false;
            return true;
        }
        if *left == 0 {
            // A full turn: to the back of the list with a fresh one.
            *left = self.cfg.weight;
            if let Some(p) = self.list.iter().position(|d| *d == dev) {
                self.list.remove(p);
            }
            self.list.push_back(dev);
        }
        false
    }

    /// Softirq runs begun, and runs that ended with the budget spent.
    pub fn runs(&self) -> (u64, u64) {
        (self.runs, self.yields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn masks_until_drained() {
        let mut n = Napi::new(NapiConfig::SPANOS);
        let d = n.register();
        assert!(n.interrupt(d));
        assert!(!n.interrupt(d), "a masked device raises nothing");
        n.begin_run(0);
        assert_eq!(n.next(0), NapiAction::Poll { dev: d, limit: 32 });
        assert!(!n.poll_done(d, 32, false));
        assert!(n.masked(d));
        assert_eq!(n.next(1), NapiAction::Poll { dev: d, limit: 32 });
        assert!(n.poll_done(d, 3, true));
        assert!(!n.masked(d));
        assert_eq!(n.next(2), NapiAction::Done);
    }

    #[test]
    fn budget_in_time() {
        let mut n = Napi::new(NapiConfig::LINUX);
        let d = n.register();
        n.interrupt(d);
        n.begin_run(0);
        n.poll_done(d, 1, false);
        assert_eq!(n.next(2 * MS), NapiAction::Yield);
        n.begin_run(2 * MS);
        assert!(matches!(n.next(2 * MS), NapiAction::Poll { .. }));
    }

    proptest! {
        /// No poll exceeds the weight, no run exceeds the packet budget, and
        /// backlogged devices are served within one weight of each other.
        #[test]
        fn weight_budget_fairness(weight in 1u32..100, budget in 1u32..600, ndev in 1usize..5, runs in 1usize..20) {
            let mut n = Napi::new(NapiConfig { weight, budget_packets: budget, budget_ns: u64::MAX });
            let devs: Vec<_> = (0..ndev).map(|_| n.register()).collect();
            for d in &devs { n.interrupt(*d); }
            let mut served = vec![0u64; ndev];
            for r in 0..runs {
                n.begin_run(r as u64);
                let mut in_run = 0;
                loop {
                    match n.next(r as u64) {
                        NapiAction::Poll { dev, limit } => {
                            prop_assert!(limit <= weight);
                            in_run += limit;
                            served[dev.0] += limit as u64;
                            n.poll_done(dev, limit, false);
                        }
                        NapiAction::Yield => break,
                        NapiAction::Done => prop_assert!(false, "backlogged devices left the list"),
                    }
                }
                prop_assert!(in_run <= budget);
            }
            let (lo, hi) = (served.iter().min().unwrap(), served.iter().max().unwrap());
            prop_assert!(hi - lo <= weight as u64);
        }

        /// A device's interrupt is unmasked exactly when its poll drained it.
        #[test]
        fn unmask_only_when_drained(pattern in prop::collection::vec(any::<bool>(), 1..50)) {
            let mut n = Napi::new(NapiConfig::SPANOS);
            let d = n.register();
            n.interrupt(d);
            n.begin_run(0);
            for drained in pattern {
                if !n.masked(d) { n.interrupt(d); }
                let unmask = n.poll_done(d, 1, drained);
                prop_assert_eq!(unmask, drained);
                prop_assert_eq!(n.masked(d), !drained);
            }
        }
    }
}
