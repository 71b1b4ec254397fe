//! The uniprocessor's CPU: execution contexts in priority order, each with
//! its job (the engine's [`Job`], preempted and resumed by a [`Runner`]),
//! and the context each nanosecond is charged to in the engine's [`Ledger`].

use super::step::Step;
use crate::engine::interval::Interval;
use crate::engine::job::{Done, Job, Runner};
use crate::engine::ledger::Ledger;
use rxsched_core::Nanos;
use std::collections::BTreeMap;

/// An execution context: an interrupt level, a kernel thread or a process.
pub type CtxId = usize;

/// Device interrupts.
pub const INTR: CtxId = 0;
/// The software interrupt.
pub const SOFT: CtxId = 1;
/// The kernel thread (IP thread or polling thread).
pub const KTHREAD: CtxId = 2;
/// The periodic clock interrupt, above the devices' level ("clock
/// interrupts typically preempt device interrupt processing", Mogul &
/// Ramakrishnan §5.1): a tick preempts a device handler, and its time is
/// charged as interrupt time.
pub const CLOCK: CtxId = 3;
/// The first user process; process `u` is `USER0 + u`.
pub const USER0: CtxId = 4;

const IDLE_BUCKET: usize = 0;

/// One context's state on the CPU.
#[derive(Debug, Default)]
pub struct Ctx {
    /// The step it is running or was preempted in.
    pub job: Option<Job<Step>>,
    /// A step that follows at once in the same context (process to completion).
    pub carry: Option<Step>,
    /// BSD's `if_start`: the port whose output queue this context is loading.
    pub loading: Option<u8>,
    /// CPU time used so far, over the whole run.
    pub cpu_ns: Nanos,
    bucket: usize,
}

/// One CPU.
#[derive(Debug)]
pub struct Cpu {
    /// Contexts by [`CtxId`].
    pub ctx: Vec<Ctx>,
    /// The context holding the CPU, if any.
    pub running: Option<CtxId>,
    runner: Runner,
    ledger: Ledger,
    end: Nanos,
}

impl Cpu {
    /// A CPU whose kernel thread is accounted as `kthread` and with one
    /// context per user process, measured over `w`.
    pub fn new(kthread: &str, users: &[String], w: Interval) -> Cpu {
        let mut buckets = vec![
            "idle".to_string(),
            "interrupt".into(),
            "softirq".into(),
            kthread.into(),
        ];
        let mut ctx: Vec<Ctx> = (1..buckets.len())
            .map(|bucket| Ctx {
                bucket,
                ..Ctx::default()
            })
            .collect();
        ctx.push(Ctx {
            bucket: ctx[INTR].bucket,
            ..Ctx::default()
        });
        debug_assert_eq!(ctx.len(), USER0);
        for u in users {
            buckets.push(format!("user:{u}"));
            ctx.push(Ctx {
                bucket: buckets.len() - 1,
                ..Ctx::default()
            });
        }
        Cpu {
            ctx,
            running: None,
            runner: Runner::default(),
            ledger: Ledger::new(buckets, 1, w),
            end: w.end,
        }
    }

    /// Charges the time since the last switch to context `c` (or to idle).
    pub fn account(&mut self, now: Nanos, c: Option<CtxId>) {
        let bucket = c.map_or(IDLE_BUCKET, |c| self.ctx[c].bucket);
        let ran = self.ledger.account(0, bucket, now);
        if let Some(c) = c {
            self.ctx[c].cpu_ns += ran;
        }
    }

    /// Takes the CPU from the running context, which keeps the rest of its
    /// step for later. Returns false if nothing was running.
    pub fn preempt(&mut self, now: Nanos) -> bool {
        let Some(r) = self.running.take() else {
            return false;
        };
        self.account(now, Some(r));
        self.runner.preempt(now, self.ctx[r].job.as_mut());
        true
    }

    /// Gives the CPU to `c`, whose job is ready. Returns when that job
    /// ends and the event that says so.
    pub fn start(&mut self, now: Nanos, c: CtxId) -> (Nanos, Done) {
        self.running = Some(c);
        let job = self.ctx[c].job.as_ref().expect("a context starts ready");
        self.runner.start(0, now, job)
    }

    /// A job ended at `now`: if it is the current one, the running
    /// context gives up the CPU and its finished step is returned.
    pub fn complete(&mut self, now: Nanos, done: Done) -> Option<(CtxId, Step)> {
        if !self.runner.current(done) {
            return None;
        }
        let c = self
            .running
            .take()
            .expect("a job completed with nothing running");
        self.account(now, Some(c));
        let step = self.ctx[c]
            .job
            .take()
            .expect("running context has a job")
            .work;
        Some((c, step))
    }

    /// Whether context `c` has work under way.
    pub fn busy(&self, c: CtxId) -> bool {
        let x = &self.ctx[c];
        x.job.is_some() || x.carry.is_some() || x.loading.is_some()
    }

    /// Packets held by steps in progress or carried.
    pub fn packets_held(&self) -> u64 {
        self.ctx
            .iter()
            .map(|c| {
                c.job.and_then(|j| j.work.packet()).is_some() as u64
                    + c.carry.and_then(|s| s.packet()).is_some() as u64
            })
            .sum()
    }

    /// Closes the accounting at the end of the run and returns each
    /// context's share of the measured interval; fails unless the shares
    /// cover it exactly.
    pub fn shares(&mut self) -> Result<BTreeMap<String, f64>, String> {
        self.account(self.end, self.running);
        self.ledger.shares()
    }
}
