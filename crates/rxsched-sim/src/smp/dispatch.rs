//! Dispatching the NT host's CPUs: each CPU runs its highest level with
//! work (the ISR, the DPC, or the thread the scheduler placed there),
//! preempted jobs keep their remaining time, the ledger is charged at
//! every change, and threads are woken, placed, blocked and rotated as
//! NT's dispatcher does (`super::sched` decides where).

use super::cpu::{Dpc, Level, DPC, IDLE, ISR, LOCKING};
use super::sched::{self, Tid};
use super::work::{job, Work};
use super::Smp;
use crate::engine::job::Done;
use crate::error::SimError;

impl Smp {
    /// Dispatches every CPU until none changes, then holds the scheduler
    /// to its promise.
    pub(super) fn reschedule_all(&mut self) -> Result<(), SimError> {
        // Waking a thread can change another CPU: go round until nothing does.
        for _ in 0..4 * self.cpus.len() + 4 {
            let mut changed = false;
            for k in 0..self.cpus.len() {
                changed |= self.reschedule(k);
            }
            if !changed {
                // The promise is held after every dispatch in test builds;
                // a release build samples it (one dispatch in 64), which
                // still catches a broken promise, later, at half the cost.
                self.settles += 1;
                if cfg!(debug_assertions) || self.settles.is_multiple_of(64) {
                    self.sched.check().map_err(SimError::Invariant)?;
                }
                return Ok(());
            }
        }
        Err(SimError::Invariant(
            "the CPUs' dispatching did not settle".into(),
        ))
    }

    /// Gives CPU `k` to its highest level with work. Returns whether the
    /// CPU started something new.
    fn reschedule(&mut self, k: usize) -> bool {
        let want = self.want(k);
        let cur = self.cpus[k].running;
        if want == cur {
            return false;
        }
        // Preempt what runs: it keeps its remaining time.
        self.account(k);
        let cpu = &mut self.cpus[k];
        let running = match cur {
            Level::Isr => cpu.isr.as_mut(),
            Level::Dpc => cpu.dpc_job.as_mut(),
            Level::Thread(t) => self.threads[t].job.as_mut(),
            Level::Idle => None,
        };
        cpu.runner.preempt(self.now, running);
        let next = match want {
            Level::Isr => cpu.isr.as_ref(),
            Level::Dpc => cpu.dpc_job.as_ref(),
            Level::Thread(t) => self.threads[t].job.as_ref(),
            Level::Idle => None,
        };
        cpu.running = want;
        match next {
            Some(j) => {
                let (t, done) = cpu.runner.start(k as u16, self.now, j);
                self.events.push(t, done);
                true
            }
            None => cur != Level::Idle,
        }
    }

    /// What CPU `k` should run now, with its job ready.
    fn want(&mut self, k: usize) -> Level {
        if self.cpus[k].isr.is_some() {
            return Level::Isr;
        }
        loop {
            if self.cpus[k].dpc == Dpc::None {
                break;
            }
            if self.cpus[k].dpc_job.is_some() {
                return Level::Dpc;
            }
            match self.dpc_next(k) {
                Some(j) => {
                    self.cpus[k].dpc_job = Some(j);
                    return Level::Dpc;
                }
                None => {
                    if self.cpus[k].dpc == Dpc::Running {
                        self.dpc_end(k);
                    }
                    if self.cpus[k].dpc == Dpc::Queued {
                        continue;
                    }
                    if self.cpus[k].isr.is_some() {
                        return Level::Isr;
                    }
                    break;
                }
            }
        }
        // Back at thread level: the dispatcher readies what waited for it.
        for t in std::mem::take(&mut self.cpus[k].deferred) {
            self.threads[t].deferred = false;
            if self.sched.threads[t].state == sched::State::Blocked {
                self.wake(t);
            }
        }
        for _ in 0..=self.threads.len() {
            let Some(t) = self.sched.on(k) else {
                return Level::Idle;
            };
            let th = &mut self.threads[t];
            if th.switch && th.job.is_some() && th.resume.is_none() {
                // Back on a CPU in the middle of a job: the switch first.
                th.switch = false;
                th.resume = th.job.take();
                th.job = Some(job(Work::Switch, self.c.context_switch));
            }
            if self.threads[t].job.is_none() {
                let j = self.next_job(t);
                self.threads[t].job = j;
            }
            if self.threads[t].job.is_some() {
                return Level::Thread(t);
            }
            // It has nothing to do: it blocks, and the CPU takes another.
            self.block(k);
        }
        Level::Idle
    }

    /// Closes every CPU's account up to now.
    pub(super) fn account_all(&mut self) {
        for k in 0..self.cpus.len() {
            self.account(k);
        }
    }

    /// Adds the time since the last change on CPU `k` to what it ran.
    fn account(&mut self, k: usize) {
        let cpu = &self.cpus[k];
        let bucket = match cpu.running {
            Level::Isr => ISR,
            Level::Dpc => DPC,
            Level::Thread(t) => self.threads[t].bucket,
            Level::Idle if self.consumer.lock.contended_now() => LOCKING,
            Level::Idle => IDLE,
        };
        self.ledger.account(k, bucket, self.now);
    }

    /// The job `cpu` was running ended.
    pub(super) fn done(&mut self, d: Done) {
        let cpu = d.cpu as usize;
        if !self.cpus[cpu].runner.current(d) {
            return;
        }
        let level = self.cpus[cpu].running;
        self.account(cpu);
        self.cpus[cpu].running = Level::Idle;
        match level {
            Level::Isr => {
                self.cpus[cpu].isr = None;
                if self.cpus[cpu].dpc == Dpc::None {
                    self.cpus[cpu].dpc = Dpc::Queued;
                }
            }
            Level::Dpc => {
                let j = self.cpus[cpu].dpc_job.take().expect("a DPC job ran");
                if let Work::Receive(p) = j.work {
                    if self.socket_in(p) {
                        self.cpus[cpu].dpc_job = Some(job(Work::Wake, self.c.wake));
                    }
                }
            }
            Level::Thread(t) => {
                let j = self.threads[t].job.take().expect("a thread job ran");
                if let Some(r) = self.threads[t].resume.take() {
                    // The switch back to a preempted job: it goes on.
                    self.threads[t].job = Some(r);
                    return;
                }
                self.thread_done(t, cpu, j);
            }
            Level::Idle => {}
        }
    }

    /// Thread `t` becomes ready. If it would preempt the thread of a CPU
    /// that is busy at interrupt level, it waits for that CPU's dispatcher,
    /// which runs when the CPU drops below DPC level.
    pub(super) fn wake(&mut self, t: Tid) {
        if self.threads[t].deferred {
            return;
        }
        if let Some(k) = self.sched.would_preempt(t) {
            if self.cpus[k].at_interrupt_level() {
                self.threads[t].deferred = true;
                self.cpus[k].deferred.push(t);
                return;
            }
        }
        if let Some(pl) = self.sched.wake(t) {
            self.placed(t);
            if let Some(v) = pl.preempted {
                self.threads[v].switch = true;
                if pl.moved_to.is_some() {
                    self.placed(v);
                }
            }
        }
    }

    /// Thread `t` was put on a CPU: it is switched in, from another thread
    /// or from NT's idle thread, which is a thread like any other: a DPC
    /// that readies a thread on an idle CPU costs a context switch there
    /// too (Hansen & Jul §3: "the delay caused by both issuing an interrupt
    /// and making a context switch in order to process a packet when the
    /// network load is low"). Before, only a change of thread was charged,
    /// and a thread that came back to its own idle CPU switched for free.
    fn placed(&mut self, t: Tid) {
        self.threads[t].quantum_from = self.now;
        self.threads[t].switch = true;
    }

    /// The thread on `cpu` blocks; whoever the CPU takes next is placed.
    fn block(&mut self, cpu: usize) {
        if let Some(next) = self.sched.block(cpu) {
            self.placed(next);
        }
    }

    /// Thread `t` on `cpu` lets a ready thread of its priority have the
    /// CPU, if one may; it is then made ready itself (and may take an idle
    /// CPU at once). Returns whether `cpu` now holds another thread.
    pub(super) fn rotate(&mut self, t: Tid, cpu: usize) -> bool {
        let next = self.sched.quantum_end(cpu);
        for (m, _) in self.sched.take_moved() {
            self.placed(m);
        }
        match next {
            Some(n) if n != t => {
                self.placed(n);
                true
            }
            _ => false,
        }
    }
}
