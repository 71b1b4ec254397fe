//! The thread scheduler of a multiprocessor, after Windows NT 4.0: fixed
//! priorities (1–15 normal, 16–31 real-time), first in first out within a
//! priority, a time quantum, and the placement rule for a thread that
//! becomes ready (Solomon, *Inside Windows NT*, 2nd ed., ch. 4):
//!
//! 1. an idle CPU it may run on: its ideal CPU if idle, else the CPU it
//!    last ran on, else the lowest-numbered idle one;
//! 2. otherwise the thread on its ideal CPU (else last) if that one has a
//!    lower priority, which it preempts;
//! 3. otherwise the ready queue.
//!
//! A CPU counts as idle when it holds no thread, *even while a DPC or an
//! ISR runs on it*: NT's idle thread is current there. And a thread whose
//! CPU is taken by an interrupt stays on that CPU: the dispatcher does not
//! run at DPC level, so nothing moves it (Hansen & Jul's *thread pinning*).
//! Threads move between CPUs only when they become ready.

use std::collections::VecDeque;

/// A thread's index.
pub type Tid = usize;

/// NT priorities: 0..=31.
pub const PRIORITIES: usize = 32;
/// A normal thread's priority (NORMAL_PRIORITY_CLASS, THREAD_PRIORITY_NORMAL).
pub const NORMAL: u8 = 8;
/// A real-time thread's priority (REALTIME_PRIORITY_CLASS, normal).
pub const REALTIME: u8 = 24;

/// Where a thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Held by a CPU (running, or interrupted there).
    On(usize),
    /// Waiting for a CPU.
    Ready,
    /// Waiting for something else.
    Blocked,
}

/// One thread as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct Thread {
    /// Its priority, 0..=31.
    pub prio: u8,
    /// The CPUs it may run on, a bit each.
    pub affinity: u64,
    /// The CPU it prefers (NT's ideal processor).
    pub ideal: usize,
    /// The CPU it last ran on.
    pub last: usize,
    /// Where it is.
    pub state: State,
}

/// A change the engine must act on: CPU `cpu` now holds another thread;
/// `preempted` lost it (and went to `moved_to`, or waits at the head of its queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// The CPU.
    pub cpu: usize,
    /// The thread it held before, if one was preempted.
    pub preempted: Option<Tid>,
    /// The CPU that preempted thread was placed on at once (an idle one it
    /// may run on), if any; otherwise it waits at the head of its queue.
    pub moved_to: Option<usize>,
}

/// The scheduler's state.
#[derive(Debug, Clone)]
pub struct Sched {
    /// Every thread.
    pub threads: Vec<Thread>,
    on: Vec<Option<Tid>>,
    ready: Vec<VecDeque<Tid>>,
    /// Threads that a quantum's end sent to an idle CPU, for the engine
    /// ([`Sched::take_moved`]).
    moved: Vec<(Tid, usize)>,
}

impl Sched {
    /// A scheduler for `cpus` CPUs and no threads.
    pub fn new(cpus: usize) -> Sched {
        Sched {
            threads: Vec::new(),
            on: vec![None; cpus],
            ready: vec![VecDeque::new(); PRIORITIES],
            moved: Vec::new(),
        }
    }

    /// How many CPUs.
    pub fn cpus(&self) -> usize {
        self.on.len()
    }

    /// Adds a blocked thread that prefers CPU `ideal`.
    pub fn add(&mut self, prio: u8, affinity: u64, ideal: usize) -> Tid {
        self.threads.push(Thread {
            prio: prio.min(PRIORITIES as u8 - 1),
            affinity,
            ideal,
            last: ideal,
            state: State::Blocked,
        });
        self.threads.len() - 1
    }

    /// The thread CPU `cpu` holds.
    pub fn on(&self, cpu: usize) -> Option<Tid> {
        self.on[cpu]
    }

    fn allowed(&self, t: Tid, cpu: usize) -> bool {
        cpu < 64 && self.threads[t].affinity & (1 << cpu) != 0
    }

    fn put_on(&mut self, t: Tid, cpu: usize) {
        self.on[cpu] = Some(t);
        self.threads[t].state = State::On(cpu);
        self.threads[t].last = cpu;
    }

    /// An idle CPU thread `t` may take: its ideal CPU if idle, else the
    /// one it last ran on, else the lowest-numbered idle one.
    fn idle_for(&self, t: Tid) -> Option<usize> {
        let th = &self.threads[t];
        let idle = |c: usize| c < self.cpus() && self.on[c].is_none() && self.allowed(t, c);
        [th.ideal, th.last]
            .into_iter()
            .find(|&c| idle(c))
            .or_else(|| (0..self.cpus()).find(|&c| idle(c)))
    }

    /// The CPU whose thread `t` would preempt if it became ready now, if
    /// it would preempt one (no idle CPU it may run on, and its ideal or
    /// last CPU holds a thread of lower priority).
    pub fn would_preempt(&self, t: Tid) -> Option<usize> {
        if self.idle_for(t).is_some() {
            return None;
        }
        let th = &self.threads[t];
        let lower = |c: usize| {
            c < self.cpus()
                && self.allowed(t, c)
                && self.on[c].is_some_and(|v| self.threads[v].prio < th.prio)
        };
        // Its ideal CPU, else its last, else the allowed CPU whose thread
        // has the lowest priority.
        [th.ideal, th.last]
            .into_iter()
            .find(|&c| lower(c))
            .or_else(|| {
                (0..self.cpus())
                    .filter(|&c| lower(c))
                    .min_by_key(|&c| self.on[c].map(|v| self.threads[v].prio))
            })
    }

    /// Thread `t` becomes ready (it was blocked). Returns the CPU it took,
    /// if it took one. A thread it preempts is itself made ready the same
    /// way: onto an idle CPU if one may run it (so it migrates), else to
    /// the head of its queue.
    pub fn wake(&mut self, t: Tid) -> Option<Placed> {
        debug_assert_eq!(self.threads[t].state, State::Blocked);
        if let Some(cpu) = self.idle_for(t) {
            self.put_on(t, cpu);
            return Some(Placed {
                cpu,
                preempted: None,
                moved_to: None,
            });
        }
        if let Some(cpu) = self.would_preempt(t) {
            let victim = self.on[cpu].expect("not idle");
            self.put_on(t, cpu);
            let moved_to = self.idle_for(victim);
            match moved_to {
                Some(c) => self.put_on(victim, c),
                None => {
                    self.threads[victim].state = State::Ready;
                    let p = self.threads[victim].prio as usize;
                    self.ready[p].push_front(victim);
                }
            }
            return Some(Placed {
                cpu,
                preempted: Some(victim),
                moved_to,
            });
        }
        self.threads[t].state = State::Ready;
        let p = self.threads[t].prio as usize;
        self.ready[p].push_back(t);
        None
    }

    /// The thread on `cpu` blocks; the CPU takes the best ready thread it
    /// may run, which is returned.
    pub fn block(&mut self, cpu: usize) -> Option<Tid> {
        if let Some(t) = self.on[cpu].take() {
            self.threads[t].state = State::Blocked;
        }
        self.dispatch(cpu)
    }

    /// The thread on `cpu` has used its quantum: if a ready thread of at
    /// least its priority may run there, it goes to the back of its queue
    /// and that one takes the CPU (returned).
    pub fn quantum_end(&mut self, cpu: usize) -> Option<Tid> {
        let t = self.on[cpu]?;
        let prio = self.threads[t].prio as usize;
        let waiting =
            (prio..PRIORITIES).any(|p| self.ready[p].iter().any(|&r| self.allowed(r, cpu)));
        if !waiting {
            return None;
        }
        self.on[cpu] = None;
        self.threads[t].state = State::Ready;
        self.ready[prio].push_back(t);
        let next = self.dispatch(cpu);
        // Made ready, it takes an idle CPU it may run on if there is one.
        if self.threads[t].state == State::Ready {
            if let Some(c) = self.idle_for(t) {
                self.ready[prio].retain(|&r| r != t);
                self.put_on(t, c);
                self.moved.push((t, c));
            }
        }
        next
    }

    /// The threads a quantum's end moved to an idle CPU since last asked.
    pub fn take_moved(&mut self) -> Vec<(Tid, usize)> {
        std::mem::take(&mut self.moved)
    }

    /// Gives a free `cpu` the best ready thread allowed on it.
    fn dispatch(&mut self, cpu: usize) -> Option<Tid> {
        if self.on[cpu].is_some() {
            return self.on[cpu];
        }
        for p in (0..PRIORITIES).rev() {
            if let Some(i) = self.ready[p].iter().position(|&r| self.allowed(r, cpu)) {
                let t = self.ready[p].remove(i).expect("present");
                self.put_on(t, cpu);
                return Some(t);
            }
        }
        None
    }

    /// The scheduler's promise: no CPU holds no thread while a ready
    /// thread allowed on it waits; every thread is where its state says.
    pub fn check(&self) -> Result<(), String> {
        for c in 0..self.cpus() {
            if self.on[c].is_none() {
                for q in &self.ready {
                    if let Some(&t) = q.iter().find(|&&t| self.allowed(t, c)) {
                        return Err(format!("CPU {c} holds no thread while thread {t} is ready"));
                    }
                }
            }
        }
        // Where each thread sits in the ready queues, in one pass over them.
        let mut queued = vec![false; self.threads.len()];
        for (p, q) in self.ready.iter().enumerate() {
            for &t in q {
                let th = &self.threads[t];
                if queued[t] || th.state != State::Ready || th.prio as usize != p {
                    return Err(format!(
                        "thread {t} waits in ready queue {p} in state {:?} at priority {}{}",
                        th.state,
                        th.prio,
                        if queued[t] { ", twice" } else { "" }
                    ));
                }
                queued[t] = true;
            }
        }
        for (t, th) in self.threads.iter().enumerate() {
            let ok = match th.state {
                State::On(c) => self.on[c] == Some(t),
                State::Ready => queued[t],
                State::Blocked => !self.on.contains(&Some(t)),
            };
            if !ok {
                return Err(format!(
                    "thread {t} is not where its state {:?} says",
                    th.state
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_idle_cpu_under_a_dpc_takes_the_woken_thread_that_last_ran_there() {
        let mut s = Sched::new(2);
        let busy = s.add(NORMAL, 0b11, 1);
        let reader = s.add(NORMAL, 0b11, 0);
        assert_eq!(s.wake(busy).unwrap().cpu, 1);
        // CPU 0 holds no thread (a DPC may be running there): the reader,
        // whose ideal CPU it is, goes there, and stays until it blocks.
        assert_eq!(s.wake(reader).unwrap().cpu, 0);
        s.check().unwrap();
    }

    #[test]
    fn a_realtime_thread_preempts_on_its_ideal_cpu_a_normal_one_waits() {
        let mut s = Sched::new(2);
        let a = s.add(NORMAL, 0b11, 0);
        let b = s.add(NORMAL, 0b11, 1);
        s.wake(a);
        s.wake(b);
        let normal = s.add(NORMAL, 0b11, 0);
        assert_eq!(s.wake(normal), None);
        let rt = s.add(REALTIME, 0b11, 0);
        assert_eq!(
            s.wake(rt),
            Some(Placed {
                cpu: 0,
                preempted: Some(a),
                moved_to: None,
            })
        );
        // The preempted thread is first in line at its priority.
        assert_eq!(s.block(1), Some(a));
        s.check().unwrap();
    }

    #[test]
    fn a_preempted_thread_moves_to_an_idle_cpu() {
        let mut s = Sched::new(2);
        let reader = s.add(NORMAL, 0b11, 0);
        s.wake(reader);
        // A system thread that may run only on CPU 0 preempts it there; CPU 1
        // is idle, so the reader is placed on it at once.
        let system = s.add(NORMAL + 5, 0b01, 0);
        assert_eq!(s.would_preempt(system), Some(0));
        assert_eq!(
            s.wake(system),
            Some(Placed {
                cpu: 0,
                preempted: Some(reader),
                moved_to: Some(1),
            })
        );
        assert_eq!(s.on(1), Some(reader));
        // A thread of the same priority does not preempt.
        let peer = s.add(NORMAL + 5, 0b01, 0);
        assert_eq!(s.would_preempt(peer), None);
        s.check().unwrap();
    }

    #[test]
    fn the_quantum_passes_to_an_equal_and_not_to_a_lower_priority() {
        let mut s = Sched::new(1);
        let a = s.add(NORMAL, 1, 0);
        let b = s.add(NORMAL, 1, 0);
        let low = s.add(NORMAL - 1, 1, 0);
        s.wake(a);
        s.wake(b);
        s.wake(low);
        assert_eq!(s.quantum_end(0), Some(b));
        assert_eq!(s.quantum_end(0), Some(a));
        assert_eq!(s.block(0), Some(b));
        assert_eq!(s.quantum_end(0), None);
        s.check().unwrap();
    }

    proptest! {
        /// Whatever wakes, blocks and quantum ends happen, no CPU is left
        /// without a thread while a thread allowed on it is ready.
        #[test]
        fn no_cpu_idles_while_a_thread_allowed_on_it_waits(
            cpus in 1usize..5,
            threads in proptest::collection::vec((0u8..32, 1u64..16, 0usize..4), 1..10),
            ops in proptest::collection::vec((0u8..3, 0usize..16), 1..200),
        ) {
            let mut s = Sched::new(cpus);
            let mask = (1u64 << cpus) - 1;
            for (p, aff, ideal) in &threads {
                let aff = aff & mask;
                s.add(*p, if aff == 0 { 1 } else { aff }, ideal % cpus);
            }
            for (op, i) in ops {
                match op {
                    0 => {
                        let t = i % s.threads.len();
                        if s.threads[t].state == State::Blocked {
                            s.wake(t);
                        }
                    }
                    1 => { s.block(i % cpus); }
                    _ => { s.quantum_end(i % cpus); }
                }
                prop_assert!(s.check().is_ok(), "{:?}", s.check());
            }
        }
    }
}
