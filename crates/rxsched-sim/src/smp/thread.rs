//! The NT host's threads as the model sees them (what each is, where a
//! reader is in its loop, its job and the one it was preempted in), and
//! the roster that creates them with the scheduler's view of each and
//! their ledger buckets.

use super::cpu::LEVEL_BUCKETS;
use super::sched::{Sched, Tid, NORMAL, REALTIME};
use super::work::Job;
use crate::scenario::{ProcessCfg, ProcessKind};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rxsched_core::Nanos;

/// What a thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Reader,
    Compute,
    /// Runs `on` of CPU, sleeps `off`, and again.
    Onoff {
        on: Nanos,
        off: Nanos,
    },
    /// The polling thread of receive queue `q`.
    Poll(u32),
}

/// Where a reader thread is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Next: a receive call.
    Recv,
    /// Next: take the lock.
    Lock,
    /// Waiting for the lock (it is handed over on release).
    LockWait,
    /// Holding the lock: next the critical section.
    Critical,
    /// Next: the work outside the lock.
    Work,
}

/// One thread.
#[derive(Debug)]
pub(super) struct Thread {
    pub(super) role: Role,
    pub(super) bucket: usize,
    pub(super) job: Option<Job>,
    pub(super) phase: Phase,
    /// It pays a context switch before its next job.
    pub(super) switch: bool,
    pub(super) quantum_from: Nanos,
    /// When it blocked on the lock, if it waits for it.
    pub(super) lock_since: Option<Nanos>,
    /// A job it was preempted in, to resume after the switch back to it.
    pub(super) resume: Option<Job>,
    /// An on-off thread's CPU time left before it sleeps.
    pub(super) left: Nanos,
    /// Its wake-up waits on a CPU's dispatcher.
    pub(super) deferred: bool,
}

impl Thread {
    fn new(role: Role, bucket: usize) -> Thread {
        Thread {
            role,
            bucket,
            job: None,
            phase: Phase::Recv,
            switch: false,
            quantum_from: 0,
            lock_since: None,
            resume: None,
            left: 0,
            deferred: false,
        }
    }
}

/// The threads as they are created: the scheduler's view of each, the
/// model's, and the ledger's bucket names (the levels' first).
#[derive(Debug)]
pub(super) struct Roster {
    pub(super) sched: Sched,
    pub(super) threads: Vec<Thread>,
    pub(super) buckets: Vec<String>,
    cpus: usize,
}

impl Roster {
    /// No threads yet, on `cpus` CPUs.
    pub(super) fn new(cpus: usize) -> Roster {
        Roster {
            sched: Sched::new(cpus),
            threads: Vec::new(),
            buckets: LEVEL_BUCKETS.iter().map(|b| b.to_string()).collect(),
            cpus,
        }
    }

    /// Every CPU, a bit each.
    fn all(&self) -> u64 {
        if self.cpus >= 64 {
            u64::MAX
        } else {
            (1u64 << self.cpus) - 1
        }
    }

    fn add(&mut self, role: Role, prio: u8, mask: u64, cpu: usize, bucket: String) -> Tid {
        let t = self.sched.add(prio, mask, cpu);
        self.buckets.push(bucket);
        self.threads.push(Thread::new(role, self.buckets.len() - 1));
        t
    }

    /// Adds each process's threads, in order (a reader's threads start
    /// on consecutive CPUs); a process with no CPU of its own draws its
    /// ideal CPU from `rng`.
    pub(super) fn add_processes(&mut self, processes: &[ProcessCfg], rng: &mut ChaCha8Rng) {
        let n = self.cpus;
        for q in processes {
            let name = q.label();
            let prio = match q.nt_priority {
                Some(p) => p as u8,
                None if q.realtime.unwrap_or(false) => REALTIME,
                None => NORMAL,
            };
            let mask = match &q.affinity {
                Some(cpus) => cpus.iter().fold(0u64, |m, &c| m | 1u64 << c),
                None => self.all(),
            };
            let ideal = match (q.cpu, &q.affinity) {
                (Some(c), _) => c as usize,
                (None, Some(cpus)) => cpus[0] as usize,
                (None, None) => rng.gen_range(0..n),
            };
            let (role, count) = match q.kind {
                ProcessKind::Reader => (
                    Role::Reader,
                    match q.threads {
                        Some(0) => n as u32,
                        t => t.unwrap_or(1),
                    },
                ),
                ProcessKind::Onoff => {
                    let (on, off) = q.onoff_ns();
                    (Role::Onoff { on, off }, 1)
                }
                _ => (Role::Compute, 1),
            };
            for i in 0..count {
                let mut cpu = (ideal + i as usize) % n;
                if mask & (1 << cpu) == 0 {
                    cpu = ideal;
                }
                let bucket = if count > 1 {
                    format!("user:{name}#{i}")
                } else {
                    format!("user:{name}")
                };
                self.add(role, prio, mask, cpu, bucket);
            }
        }
    }

    /// Adds the polling thread of queue `q`: the only one may run on any
    /// CPU, its ideal CPU drawn from `rng`; one of several is pinned to
    /// its queue's CPU `cpu`.
    pub(super) fn add_poll(
        &mut self,
        q: u32,
        pinned: Option<usize>,
        realtime: bool,
        rng: &mut ChaCha8Rng,
    ) -> Tid {
        let prio = if realtime { REALTIME } else { NORMAL };
        let (mask, ideal) = match pinned {
            Some(c) => (1u64 << c, c),
            None => (self.all(), rng.gen_range(0..self.cpus)),
        };
        self.add(Role::Poll(q), prio, mask, ideal, "poll".into())
    }
}
