//! Tests of the polling thread's loop, with a fake clock and devices.

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

/// M12: two busy devices are polled once each, a quota at a time; then the
/// round is over and the thread sleeps for the processes' quantum, an
/// interrupt meanwhile waking nothing; the quantum's end (or the CPU
/// idling) starts the next round.
#[test]
fn a_round_of_polling_gives_the_processes_their_quantum() {
    let fac = PollingFacility::new(Quota::Limited(3)).with_gp_turns(MS);
    let mut lp = PollLoop::new(fac);
    let (a, b) = (lp.register(true, false), lp.register(true, false));
    let c = lp.register(true, false);
    let mut w = world(vec![[10, 0], [10, 0], [0, 0]]);
    assert_eq!(lp.interrupt(a, Dir::Rx), Wake::Now);
    assert_eq!(lp.interrupt(b, Dir::Rx), Wake::No);
    let (seen, handled) = drain(&mut lp, &mut w, 10_000);
    assert_eq!(
        handled,
        vec![3, 3],
        "one callback each, a quota each: {seen:?}"
    );
    let turn_end = match seen.last() {
        Some(Work::Idle { until: Some(t) }) => *t,
        other => panic!("the round should end in a turn, not {other:?}"),
    };
    assert_eq!(turn_end, w.now.get() + MS, "the turn lasts the quantum");
    assert_eq!(lp.input_inhibited(w.now.get()), Some(InhibitCause::GpTurn));
    // A frame for the third device during the turn waits for the round.
    w.pending[c.0][0] = 1;
    assert_eq!(
        lp.interrupt(c, Dir::Rx),
        Wake::No,
        "the turn keeps the flag"
    );
    assert_eq!(lp.next(&w), None);
    // The quantum passes: the next round takes all three in turn.
    w.now.set(turn_end);
    assert_eq!(lp.timer(turn_end), Wake::Now);
    let (_, handled) = drain(&mut lp, &mut w, 10_000);
    assert_eq!(
        handled,
        vec![1, 3, 3],
        "the next round, on from where it stopped"
    );
    // The processes block (the CPU idles): the turn ends at once.
    assert_eq!(lp.input_inhibited(w.now.get()), Some(InhibitCause::GpTurn));
    assert_eq!(lp.idle(w.now.get()), Wake::Now);
    assert_eq!(lp.input_inhibited(w.now.get()), None);
    let (_, handled) = drain(&mut lp, &mut w, 10_000);
    assert_eq!(handled, vec![3, 3], "a round, then the next turn");
    assert_eq!(lp.inhibits(), vec![(InhibitCause::GpTurn, 3)]);
    // The last frames: a round that leaves nothing ends in a turn too.
    let now = w.now.get() + MS;
    w.now.set(now);
    assert_eq!(lp.timer(now), Wake::Now);
    let (seen, handled) = drain(&mut lp, &mut w, 10_000);
    assert_eq!(handled, vec![1, 1]);
    assert!(
        matches!(seen.last(), Some(Work::Idle { until: Some(_) })),
        "an empty round's turn: {seen:?}"
    );
    // With nothing flagged, the CPU idling ends the turn and wakes nothing;
    // the next interrupt wakes the thread as usual.
    assert_eq!(lp.idle(w.now.get()), Wake::No);
    w.pending[a.0][0] = 1;
    assert_eq!(lp.interrupt(a, Dir::Rx), Wake::Now);
}
