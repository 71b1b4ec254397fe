//! Tests of the polling facility: round robin, quotas, M3 and M4 inhibits,
//! the protected class and its cap.

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
fn a_shared_interrupt_stays_off_while_input_is_held() {
    // One enable for both directions (a LANCE): the transmit side's
    // interrupt is not turned back on while input is inhibited with frames
    // waiting; the driver sees transmit work in its callbacks instead, and
    // one enable turns both back on once neither direction has work.
    let fb = QueueFeedback::watermarks(32, 0.75, 0.25, MS);
    let mut f = PollingFacility::new(Quota::Limited(10)).with_feedback(fb);
    let d = f.register(true, true);
    f.share_interrupt(d);
    f.interrupt(d, Dir::Rx);
    assert!(
        !f.interrupts_enabled(d, Dir::Tx),
        "an event either way disables both"
    );
    f.noticed(d, Dir::Tx);
    assert!(f.queue_level(30, 0));
    assert!(matches!(
        f.next_action(1),
        Action::Poll { dir: Dir::Tx, .. }
    ));
    f.poll_done(d, Dir::Tx, 1, false);
    assert_eq!(f.next_action(2), Action::Idle { until: Some(MS) });
    assert!(!f.interrupts_enabled(d, Dir::Tx) && !f.interrupts_enabled(d, Dir::Rx));
    assert!(matches!(
        f.next_action(MS),
        Action::Poll { dir: Dir::Rx, .. }
    ));
    f.poll_done(d, Dir::Rx, 3, false);
    assert_eq!(
        f.next_action(MS + 1),
        Action::EnableInterrupts {
            dev: d,
            dir: Dir::Rx
        }
    );
    assert!(f.interrupts_enabled(d, Dir::Tx) && f.interrupts_enabled(d, Dir::Rx));
    assert_eq!(f.next_action(MS + 2), Action::Idle { until: None });
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

#[test]
fn the_rt_guard_holds_ordinary_input_but_not_the_protected_class() {
    let mut f =
        PollingFacility::new(Quota::Limited(5)).with_rt_guard(RtGuard::new(10 * MS, 0.95, 0.05));
    let flood = f.register(true, true);
    let prot = f.register_protected(Quota::Limited(4));
    let mut toy = Toy {
        pending: vec![[1000, 0], [0, 0]],
        served: vec![[0; 2]; 2],
    };
    f.interrupt(flood, Dir::Rx);
    // The flood has had its frames this period when the guard trips.
    let _ = toy.step(&mut f, MS);
    assert!(f.charge(9 * MS + 200_000, 9 * MS + 200_000));
    let now = 9 * MS + 300_000;
    // Asleep until the period's end.
    let asleep = Action::Idle {
        until: Some(10 * MS),
    };
    assert_eq!(f.input_inhibited(now), Some(InhibitCause::RtBudget));
    assert!(!f.protected_inhibited(now));
    assert!(f.rx_inhibited(flood, now) && !f.rx_inhibited(prot, now));
    // With nothing protected waiting the thread sleeps to the period's end.
    assert_eq!(f.next_action(now), asleep);
    // A protected frame arrives: it is served at once, the flood is not.
    toy.pending[1][0] = 1;
    f.interrupt(prot, Dir::Rx);
    let (a, n) = toy.step(&mut f, now).unwrap();
    assert!(matches!(a, Action::Poll { dev, .. } if dev == prot));
    assert_eq!(n, 1);
    // Dry again: its interrupt comes back at once, then the thread sleeps.
    let (a, _) = toy.step(&mut f, now).unwrap();
    assert_eq!(
        a,
        Action::EnableInterrupts {
            dev: prot,
            dir: Dir::Rx
        }
    );
    assert_eq!(f.next_action(now), asleep);
    // The next one (a reply) is not owed to the flood the guard holds.
    toy.pending[1][0] = 1;
    f.interrupt(prot, Dir::Rx);
    let (a, _) = toy.step(&mut f, now).unwrap();
    assert!(matches!(a, Action::Poll { dev, .. } if dev == prot));
    let _ = toy.step(&mut f, now);
    // Past the budget itself, the protected class waits too.
    assert!(!f.charge(now + 1, 400_000));
    assert!(f.protected_inhibited(now + 1));
    toy.pending[1][0] = 1;
    f.interrupt(prot, Dir::Rx);
    assert_eq!(f.next_action(now + 1), asleep);
    assert_eq!(f.inhibits(), vec![(InhibitCause::RtBudget, 1)]);
    // The period over, the flood goes on.
    assert!(matches!(f.next_action(10 * MS), Action::Poll { dev, .. } if dev == flood));
}

#[test]
fn m4_beside_the_rt_guard_still_holds_the_protected_class() {
    let mut f = PollingFacility::new(Quota::Limited(5))
        .with_cycle_limit(CycleLimit::new(10 * MS, 0.5))
        .with_rt_guard(RtGuard::new(10 * MS, 0.95, 0.05));
    let prot = f.register_protected(Quota::Limited(4));
    f.interrupt(prot, Dir::Rx);
    assert!(f.charge(6 * MS, 6 * MS));
    assert_eq!(f.input_inhibited(6 * MS), Some(InhibitCause::CycleLimit));
    assert!(f.protected_inhibited(6 * MS));
    assert_eq!(
        f.next_action(6 * MS),
        Action::Idle {
            until: Some(10 * MS)
        }
    );
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
