//! Servicing the NT host's adapter, queue by queue: a datagram's arrival
//! (onto the queue receive-side scaling picks), the interrupt, the DPC's
//! jobs, the polling thread's passes, and the two-level switch between
//! interrupts and polling (M11).

use super::cpu::Dpc;
use super::event::Ev;
use super::sched;
use super::work::{job, Job, Work};
use super::Smp;
use crate::engine::job::per_byte;
use crate::engine::packet::Packet;
use crate::scenario::{SmpDetector, SmpService};
use rand::Rng;
use rxsched_core::{Nanos, Service, US};

/// A polling thread that finds nothing while the switch keeps it polling
/// (an idle grace) looks again after this long.
const POLL_IDLE: Nanos = 100 * US;

impl Smp {
    /// A datagram's last cell arrived: onto the ring of the queue
    /// receive-side scaling picks (drawn only when there are several), and
    /// an interrupt if that queue's are enabled.
    pub(super) fn enter(&mut self, p: Packet) {
        self.meter.arrival(p, self.now);
        let q = match self.adapters.len() {
            1 => 0,
            n => self.rng.gen_range(0..n),
        };
        let a = &mut self.adapters[q];
        if a.ring.len() >= a.cap {
            self.meter.ring_drop(p, self.now);
            return;
        }
        a.ring.push_back(p);
        if let Some(tl) = &mut a.two {
            if self.cfg.detector == SmpDetector::Queue {
                let svc = tl.queue_length(self.now, a.ring.len() as u32);
                self.follow(q, Some(svc));
            }
        }
        if self.adapters[q].intr_enabled {
            self.interrupt(q);
            if let Some(tl) = &mut self.adapters[q].two {
                if self.cfg.detector == SmpDetector::Rate {
                    let svc = tl.interrupt(self.now);
                    self.follow(q, Some(svc));
                }
            }
        }
    }

    /// The queue whose interrupt goes to `cpu`, if one does.
    pub(super) fn queue_on(&self, cpu: usize) -> Option<usize> {
        self.adapters.iter().position(|a| a.cpu == cpu)
    }

    /// Tells queue `q`'s detector how long its DPC has run since it was
    /// last told.
    fn tell_dpc_time(&mut self, q: usize) {
        let k = self.adapters[q].cpu;
        if self.cpus[k].dpc != Dpc::Running || self.cfg.detector != SmpDetector::Cpu {
            return;
        }
        let from = self.cpus[k].dpc_start.max(self.cpus[k].dpc_told);
        self.cpus[k].dpc_told = self.now;
        if let Some(tl) = &mut self.adapters[q].two {
            let svc = tl.dpc_ran(self.now, self.now - from);
            self.follow(q, Some(svc));
        }
    }

    /// Acts on queue `q`'s switch's answer: polling takes over (at the
    /// DPC's next datagram if one runs).
    fn follow(&mut self, q: usize, svc: Option<Service>) {
        if svc == Some(Service::Polling) && !self.adapters[q].polling {
            let k = self.adapters[q].cpu;
            if self.cpus[k].dpc == Dpc::Running {
                self.adapters[q].to_polling = true;
            } else {
                self.start_polling(q);
            }
        }
    }

    /// Queue `q`'s polling thread takes over, and its interrupts go off.
    fn start_polling(&mut self, q: usize) {
        let a = &mut self.adapters[q];
        a.to_polling = false;
        a.intr_enabled = false;
        a.polling = true;
        a.polling_since = self.now;
        a.pass = 0;
        if let Some(pt) = a.poll {
            if self.sched.threads[pt].state == sched::State::Blocked {
                self.wake(pt);
            }
        }
    }

    /// Queue `q`'s polling thread gives it back to its interrupt.
    fn stop_polling(&mut self, q: usize) {
        let a = &mut self.adapters[q];
        a.polling = false;
        a.polling_w += self.w.clip(a.polling_since, self.now);
        self.enable_interrupts(q);
    }

    /// Queue `q`'s interrupt is enabled again.
    fn enable_interrupts(&mut self, q: usize) {
        self.adapters[q].intr_enabled = true;
        if !self.adapters[q].ring.is_empty() {
            // The adapter interrupts at once for what waits.
            self.interrupt(q);
        }
    }

    /// Queue `q` interrupts its CPU and masks its interrupts until the
    /// receive work re-enables them.
    fn interrupt(&mut self, q: usize) {
        self.adapters[q].intr_enabled = false;
        let k = self.adapters[q].cpu;
        self.cpus[k].isr = Some(job(Work::Isr, self.c.isr));
        self.meter.interrupts.rx += 1;
    }

    /// The DPC's next job on `cpu`, or `None` when it is done.
    pub(super) fn dpc_next(&mut self, cpu: usize) -> Option<Job> {
        let q = self.queue_on(cpu)?;
        let c = &self.c;
        if self.cpus[cpu].dpc == Dpc::Queued {
            self.cpus[cpu].dpc = Dpc::Running;
            self.cpus[cpu].dpc_start = self.now;
            self.cpus[cpu].dpc_told = self.now;
            let monitor = if self.adapters[q].two.is_some() {
                c.monitor
            } else {
                0
            };
            // Interrupt-initiated polling: the DPC only wakes the thread.
            let signal = if self.cfg.service == SmpService::Polling {
                c.wake
            } else {
                0
            };
            return Some(job(Work::Entry, c.dpc_entry + monitor + signal));
        }
        // What waits is the polling thread's once it has taken over.
        let a = &mut self.adapters[q];
        if self.cfg.service == SmpService::Polling || a.to_polling || a.polling {
            return None;
        }
        let p = a.ring.pop_front()?;
        Some(job(
            Work::Receive(p),
            c.dpc_packet + per_byte(p.bytes, c.dpc_per_byte),
        ))
    }

    /// The DPC on `cpu` has finished its work.
    pub(super) fn dpc_end(&mut self, cpu: usize) {
        let q = self.queue_on(cpu);
        if let Some(q) = q {
            self.tell_dpc_time(q);
        }
        self.cpus[cpu].dpc = Dpc::None;
        let Some(q) = q else { return };
        if self.cfg.service == SmpService::Polling {
            // Interrupt-initiated polling: the DPC has woken the thread; the
            // queue's interrupts stay off until it runs dry.
            self.start_polling(q);
            return;
        }
        if self.adapters[q].to_polling {
            self.start_polling(q);
            return;
        }
        if !self.adapters[q].polling {
            self.enable_interrupts(q);
        }
    }

    /// Queue `q`'s polling thread's next job: a pass's entry, a
    /// datagram's receive work, or, out of work, `None` (it blocks, and
    /// the queue's interrupts return unless the switch keeps it polling a
    /// while).
    pub(super) fn poll_job(&mut self, q: usize) -> Option<Job> {
        let now = self.now;
        let a = &mut self.adapters[q];
        if !a.polling {
            return None;
        }
        if a.pass == 0 || a.pass > self.cfg.poll_quota {
            // A new pass over the queue, with its entry cost.
            a.pass = 1;
            let entry = self.c.dpc_entry;
            if let Some(tl) = &mut a.two {
                tl.poll_ran(now, entry);
            }
            return Some(job(Work::Entry, entry));
        }
        if let Some(p) = a.ring.pop_front() {
            a.pass += 1;
            let c = &self.c;
            let cost = c.dpc_packet + per_byte(p.bytes, c.dpc_per_byte);
            if let Some(tl) = &mut a.two {
                tl.polled(now, true);
                tl.poll_ran(now, cost);
            }
            return Some(job(Work::Receive(p), cost));
        }
        // Out of work.
        let svc = a.two.as_mut().map(|tl| tl.polled(now, false));
        a.pass = 0;
        match svc {
            Some(Service::Polling) => {
                // Still polling (a grace period): look again shortly.
                self.events.push(now + POLL_IDLE, Ev::PollAgain(q as u32));
            }
            _ => self.stop_polling(q),
        }
        None
    }

    /// Queue `q`'s two-level detector's window closes: it judges the
    /// window (the DPC's time so far included), and the next one is
    /// scheduled.
    pub(super) fn window(&mut self, q: usize) {
        self.tell_dpc_time(q);
        let svc = self.adapters[q].two.as_mut().map(|tl| tl.tick(self.now));
        self.follow(q, svc);
        let next = self.now + self.adapters[q].window;
        self.events.push(next, Ev::Window(q as u32));
    }

    /// Queue `q`'s polling thread, idle in its grace period, looks again
    /// if it still polls and sleeps.
    pub(super) fn poll_again(&mut self, q: usize) {
        let a = &self.adapters[q];
        if let Some(pt) = a.poll {
            if a.polling && self.sched.threads[pt].state == sched::State::Blocked {
                self.wake(pt);
            }
        }
    }
}
