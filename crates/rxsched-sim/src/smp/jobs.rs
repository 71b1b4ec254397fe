//! What the NT host's threads do: each thread's next job (a switch, a
//! compute slice, a reader's receive call, lock and work, the polling
//! thread's pass) and what a finished job changes, with the consumer's
//! socket between the receive work and the readers.

use super::event::Ev;
use super::sched::Tid;
use super::thread::{Phase, Role};
use super::work::{job, Job, Work};
use super::Smp;
use crate::engine::job::{per_byte, COMPUTE_SLICE};
use crate::engine::packet::Packet;
use rxsched_core::DropPoint;

impl Smp {
    /// A datagram for the consumer: into its socket (or dropped there), and
    /// a waiting reader thread woken. Returns whether one was woken.
    pub(super) fn socket_in(&mut self, p: Packet) -> bool {
        if !self.consumer.sock.offer(p) {
            self.meter.drop(DropPoint::SocketBuffer);
            return false;
        }
        match self.consumer.waiting.pop_front() {
            Some(t) => {
                self.wake(t);
                true
            }
            None => false,
        }
    }

    /// The next job of thread `t`, or `None` if it blocks.
    pub(super) fn next_job(&mut self, t: Tid) -> Option<Job> {
        if std::mem::take(&mut self.threads[t].switch) {
            return Some(job(Work::Switch, self.c.context_switch));
        }
        match self.threads[t].role {
            Role::Compute => Some(job(Work::Compute, COMPUTE_SLICE)),
            Role::Onoff { on, off } => {
                if self.threads[t].left == 0 {
                    // Its time is used: it sleeps, then wants `on` again.
                    self.threads[t].left = on;
                    self.events.push(self.now + off, Ev::Wake(t as u32));
                    return None;
                }
                let slice = self.threads[t].left.min(COMPUTE_SLICE);
                self.threads[t].left -= slice;
                Some(job(Work::Compute, slice))
            }
            Role::Reader => self.reader_job(t),
            Role::Poll(q) => self.poll_job(q as usize),
        }
    }

    /// Reader thread `t`'s next job in its loop: a receive call, the
    /// lock, the critical section, the work outside it.
    fn reader_job(&mut self, t: Tid) -> Option<Job> {
        let c = &self.c;
        match self.threads[t].phase {
            Phase::Recv => {
                let Some(p) = self.consumer.sock.pop() else {
                    self.consumer.waiting.push_back(t);
                    return None;
                };
                let mut cost = c.recv + per_byte(p.bytes, c.recv_per_byte);
                if p.echo {
                    cost += c.send + per_byte(p.bytes, c.send_per_byte);
                }
                Some(job(Work::Recv(p), cost))
            }
            Phase::Lock => {
                // Idle time is `locking` while a thread waits: close
                // every CPU's account before that can change.
                self.account_all();
                if self.consumer.lock.acquire(t, self.now) {
                    self.threads[t].phase = Phase::Critical;
                    Some(job(Work::Critical, self.c.lock + self.consumer.lock_us))
                } else {
                    self.threads[t].phase = Phase::LockWait;
                    self.threads[t].lock_since = Some(self.now);
                    None
                }
            }
            Phase::Critical => Some(job(Work::Critical, self.c.lock + self.consumer.lock_us)),
            Phase::LockWait => None,
            Phase::Work => Some(job(Work::Unlocked, self.consumer.work_us)),
        }
    }

    /// Thread `t`'s job ended on `cpu`.
    pub(super) fn thread_done(&mut self, t: Tid, cpu: usize, j: Job) {
        match j.work {
            Work::Recv(p) => {
                self.meter.deliver(p, self.now);
                if p.echo {
                    if let Some(e) = &mut self.echo {
                        e.reply(p, self.now, &mut self.events);
                    }
                }
                self.threads[t].phase = self.consumer.after_recv();
            }
            Work::Critical => {
                self.account_all();
                if let Some(w) = self.consumer.lock.release(self.now) {
                    let since = self.threads[w].lock_since.take().unwrap_or(self.now);
                    self.consumer.blocked_ns += self.now - since;
                    self.threads[w].phase = Phase::Critical;
                    self.wake(w);
                }
                self.threads[t].phase = self.consumer.after_critical();
            }
            Work::Unlocked => self.threads[t].phase = Phase::Recv,
            Work::Receive(p) if self.socket_in(p) => {
                self.threads[t].job = Some(job(Work::Wake, self.c.wake));
            }
            _ => {}
        }
        // The polling thread has taken its quota: it yields its CPU to a
        // ready thread of its priority (NT's SwitchToThread), if one waits.
        if let Role::Poll(q) = self.threads[t].role {
            let a = &mut self.adapters[q as usize];
            if a.pass > self.cfg.poll_quota && self.threads[t].job.is_none() {
                a.pass = 0;
                if self.rotate(t, cpu) {
                    return;
                }
            }
        }
        // A scheduling point: the quantum.
        if self.now - self.threads[t].quantum_from >= self.quantum
            && self.threads[t].job.is_none()
            && !self.rotate(t, cpu)
        {
            self.threads[t].quantum_from = self.now;
        }
    }
}
