//! Servicing the NT host's adapter: a datagram's arrival, the interrupt,
//! the DPC's jobs, the polling thread's passes, and the two-level switch
//! between interrupts and polling (M11).

use super::cpu::Dpc;
use super::event::Ev;
use super::sched;
use super::work::{job, Job, Work};
use super::Smp;
use crate::engine::job::per_byte;
use crate::engine::packet::Packet;
use crate::scenario::{SmpDetector, SmpService};
use rxsched_core::{Nanos, Service, US};

/// A polling thread that finds nothing while the switch keeps it polling
/// (an idle grace) looks again after this long.
const POLL_IDLE: Nanos = 100 * US;

impl Smp {
    /// A datagram's last cell arrived: onto the adapter's ring, and an
    /// interrupt if they are enabled.
    pub(super) fn enter(&mut self, p: Packet) {
        self.meter.arrival(self.now);
        if self.adapter.ring.len() >= self.adapter.cap {
            self.meter.ring_drop(self.now);
            return;
        }
        self.adapter.ring.push_back(p);
        if let Some(tl) = &mut self.adapter.two {
            if self.cfg.detector == SmpDetector::Queue {
                let svc = tl.queue_length(self.now, self.adapter.ring.len() as u32);
                let svc = Some(svc);
                self.follow(svc);
            }
        }
        if self.adapter.intr_enabled {
            self.interrupt();
            if let Some(tl) = &mut self.adapter.two {
                if self.cfg.detector == SmpDetector::Rate {
                    let svc = tl.interrupt(self.now);
                    self.follow(Some(svc));
                }
            }
        }
    }

    /// Tells the detector how long the DPC has run since it was last told.
    fn tell_dpc_time(&mut self) {
        let k = self.cfg.interrupt_cpu as usize;
        if self.cpus[k].dpc != Dpc::Running || self.cfg.detector != SmpDetector::Cpu {
            return;
        }
        let from = self.cpus[k].dpc_start.max(self.cpus[k].dpc_told);
        self.cpus[k].dpc_told = self.now;
        if let Some(tl) = &mut self.adapter.two {
            let svc = tl.dpc_ran(self.now, self.now - from);
            self.follow(Some(svc));
        }
    }

    /// Acts on the switch's answer: polling takes over (at the DPC's next
    /// datagram if one runs).
    fn follow(&mut self, svc: Option<Service>) {
        if svc == Some(Service::Polling) && !self.adapter.polling {
            let k = self.cfg.interrupt_cpu as usize;
            if self.cpus[k].dpc == Dpc::Running {
                self.adapter.to_polling = true;
            } else {
                self.start_polling();
            }
        }
    }

    /// The polling thread takes over the adapter, whose interrupts go off.
    fn start_polling(&mut self) {
        self.adapter.to_polling = false;
        self.adapter.intr_enabled = false;
        self.adapter.polling = true;
        self.adapter.polling_since = self.now;
        self.adapter.pass = 0;
        if let Some(pt) = self.adapter.poll {
            if self.sched.threads[pt].state == sched::State::Blocked {
                self.wake(pt);
            }
        }
    }

    /// The polling thread gives the adapter back to its interrupt.
    fn stop_polling(&mut self) {
        self.adapter.polling = false;
        self.adapter.polling_w += self.w.clip(self.adapter.polling_since, self.now);
        self.enable_interrupts();
    }

    /// The adapter's interrupt is enabled again.
    fn enable_interrupts(&mut self) {
        self.adapter.intr_enabled = true;
        if !self.adapter.ring.is_empty() {
            // The adapter interrupts at once for what waits.
            self.interrupt();
        }
    }

    /// The adapter interrupts its CPU and masks its interrupts until the
    /// receive work re-enables them.
    fn interrupt(&mut self) {
        self.adapter.intr_enabled = false;
        let k = self.cfg.interrupt_cpu as usize;
        self.cpus[k].isr = Some(job(Work::Isr, self.c.isr));
        self.meter.interrupts.rx += 1;
    }

    /// The DPC's next job on `cpu`, or `None` when it is done.
    pub(super) fn dpc_next(&mut self, cpu: usize) -> Option<Job> {
        let c = &self.c;
        if self.cpus[cpu].dpc == Dpc::Queued {
            self.cpus[cpu].dpc = Dpc::Running;
            self.cpus[cpu].dpc_start = self.now;
            self.cpus[cpu].dpc_told = self.now;
            let monitor = if self.adapter.two.is_some() {
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
        if self.cfg.service == SmpService::Polling
            || self.adapter.to_polling
            || self.adapter.polling
        {
            return None;
        }
        let p = self.adapter.ring.pop_front()?;
        Some(job(
            Work::Receive(p),
            c.dpc_packet + per_byte(p.bytes, c.dpc_per_byte),
        ))
    }

    /// The DPC on `cpu` has finished its work.
    pub(super) fn dpc_end(&mut self, cpu: usize) {
        self.tell_dpc_time();
        self.cpus[cpu].dpc = Dpc::None;
        if self.cfg.service == SmpService::Polling {
            // Interrupt-initiated polling: the DPC has woken the thread; the
            // adapter's interrupts stay off until it runs dry.
            self.start_polling();
            return;
        }
        if self.adapter.to_polling {
            self.start_polling();
            return;
        }
        if !self.adapter.polling {
            self.enable_interrupts();
        }
    }

    /// The polling thread's next job: a pass's entry, a datagram's receive
    /// work, or, out of work, `None` (it blocks, and the adapter's
    /// interrupts return unless the switch keeps it polling a while).
    pub(super) fn poll_job(&mut self) -> Option<Job> {
        if !self.adapter.polling {
            return None;
        }
        if self.adapter.pass == 0 || self.adapter.pass > self.cfg.poll_quota {
            // A new pass over the adapter, with its entry cost.
            self.adapter.pass = 1;
            let entry = self.c.dpc_entry;
            if let Some(tl) = &mut self.adapter.two {
                tl.poll_ran(self.now, entry);
            }
            return Some(job(Work::Entry, entry));
        }
        if let Some(p) = self.adapter.ring.pop_front() {
            self.adapter.pass += 1;
            if let Some(tl) = &mut self.adapter.two {
                tl.polled(self.now, true);
            }
            let c = &self.c;
            let cost = c.dpc_packet + per_byte(p.bytes, c.dpc_per_byte);
            if let Some(tl) = &mut self.adapter.two {
                tl.poll_ran(self.now, cost);
            }
            return Some(job(Work::Receive(p), cost));
        }
        // Out of work.
        let svc = self
            .adapter
            .two
            .as_mut()
            .map(|tl| tl.polled(self.now, false));
        match svc {
            Some(Service::Polling) => {
                // Still polling (a grace period): look again shortly.
                self.events.push(self.now + POLL_IDLE, Ev::PollAgain);
            }
            _ => self.stop_polling(),
        }
        self.adapter.pass = 0;
        None
    }

    /// The two-level detector's window closes: it judges the window (the
    /// DPC's time so far included), and the next one is scheduled.
    pub(super) fn window(&mut self) {
        self.tell_dpc_time();
        let svc = self.adapter.two.as_mut().map(|tl| tl.tick(self.now));
        self.follow(svc);
        self.events.push(self.now + self.adapter.window, Ev::Window);
    }

    /// The polling thread, idle in its grace period, looks again if it
    /// still polls and sleeps.
    pub(super) fn poll_again(&mut self) {
        if let Some(pt) = self.adapter.poll {
            if self.adapter.polling && self.sched.threads[pt].state == sched::State::Blocked {
                self.wake(pt);
            }
        }
    }
}
