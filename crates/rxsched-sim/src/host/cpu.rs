//! The CPU: execution contexts in priority order, preemption that resumes
//! a step with exactly its remaining time, and the accounting of every
//! nanosecond of the measured interval to one context or to idle.

use super::step::Step;
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
/// The first user process; process `u` is `USER0 + u`.
pub const USER0: CtxId = 3;

const IDLE_BUCKET: usize = 0;

/// A step in progress, with the CPU time it still needs.
#[derive(Debug, Clone, Copy)]
pub struct Chunk {
    /// Time left.
    pub remaining: Nanos,
    /// The work.
    pub step: Step,
}

/// One context's state on the CPU.
#[derive(Debug, Default)]
pub struct Ctx {
    /// The step it is running or was preempted in.
    pub chunk: Option<Chunk>,
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
    since: Nanos,
    chunk_end: Nanos,
    gen: u64,
    buckets: Vec<String>,
    busy_w: Vec<Nanos>,
    w0: Nanos,
    end: Nanos,
}

impl Cpu {
    /// A CPU whose kernel thread is accounted as `kthread` and with one
    /// context per user process, measured over `[w0, end)`.
    pub fn new(kthread: &str, users: &[String], w0: Nanos, end: Nanos) -> Cpu {
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
            since: 0,
            chunk_end: 0,
            gen: 0,
            busy_w: vec![0; buckets.len()],
            buckets,
            w0,
            end,
        }
    }

    /// Adds the time since the last switch to context `c` (or to idle),
    /// clipped to the measured interval.
    pub fn account(&mut self, now: Nanos, c: Option<CtxId>) {
        let (a, b) = (self.since.max(self.w0), now.min(self.end));
        let bucket = c.map_or(IDLE_BUCKET, |c| self.ctx[c].bucket);
        if b > a {
            self.busy_w[bucket] += b - a;
        }
        if let Some(c) = c {
            self.ctx[c].cpu_ns += now - self.since;
        }
        self.since = now;
    }

    /// Takes the CPU from the running context, which keeps the rest of its
    /// step for later. Returns false if nothing was running.
    pub fn preempt(&mut self, now: Nanos) -> bool {
        let Some(r) = self.running.take() else {
            return false;
        };
        self.account(now, Some(r));
        let rem = self.chunk_end.saturating_sub(now);
        if let Some(ch) = self.ctx[r].chunk.as_mut() {
            ch.remaining = rem;
        }
        self.gen += 1;
        true
    }

    /// Gives the CPU to `c`, whose chunk is ready. Returns when that chunk
    /// ends and the generation that names it.
    pub fn start(&mut self, now: Nanos, c: CtxId) -> (Nanos, u64) {
        let rem = self.ctx[c].chunk.map_or(0, |ch| ch.remaining);
        self.running = Some(c);
        self.since = now;
        self.chunk_end = now + rem;
        self.gen += 1;
        (self.chunk_end, self.gen)
    }

    /// A chunk of generation `gen` ended at `now`: if it is the current one,
    /// the running context gives up the CPU and its finished step is returned.
    pub fn complete(&mut self, now: Nanos, gen: u64) -> Option<(CtxId, Step)> {
        if gen != self.gen {
            return None;
        }
        let c = self
            .running
            .take()
            .expect("a chunk completed with nothing running");
        self.account(now, Some(c));
        let step = self.ctx[c]
            .chunk
            .take()
            .expect("running context has a chunk")
            .step;
        Some((c, step))
    }

    /// Whether context `c` has work under way.
    pub fn busy(&self, c: CtxId) -> bool {
        let x = &self.ctx[c];
        x.chunk.is_some() || x.carry.is_some() || x.loading.is_some()
    }

    /// Packets held by steps in progress or carried.
    pub fn packets_held(&self) -> u64 {
        self.ctx
            .iter()
            .map(|c| {
                c.chunk.and_then(|ch| ch.step.packet()).is_some() as u64
                    + c.carry.and_then(|s| s.packet()).is_some() as u64
            })
            .sum()
    }

    /// Closes the accounting at `end` and returns each context's share of
    /// the measured interval; fails unless the shares cover it exactly.
    pub fn shares(&mut self) -> Result<BTreeMap<String, f64>, String> {
        self.account(self.end, self.running);
        let window = self.end - self.w0;
        let total: Nanos = self.busy_w.iter().sum();
        if total != window {
            return Err(format!(
                "CPU accounting covers {total} ns of a {window} ns interval"
            ));
        }
        let mut cpu = BTreeMap::new();
        for (name, ns) in self.buckets.iter().zip(&self.busy_w) {
            *cpu.entry(name.clone()).or_insert(0.0) += *ns as f64 / window as f64;
        }
        Ok(cpu)
    }
}
