//! The router's thread on the lab host: hearing of frames on its socket,
//! its loop (polling through the core's [`PollLoop`], or the interrupt
//! mode's batches), M4's charge and the gate, and the in-XDP router's look.

use super::sched::Class;
use super::{
    At, Item, Lab, LabForwarder, COPY_LOOK_NS, FLOWING_NS, IDLE, LOOK_NS, MIN_LOOK_NS, NAPI,
    NAPI_PRIO, ROUTER,
};
use rxsched_core::{DeviceId, Dir, Nanos, Work};

impl Lab {
    /// Frames reached the socket's ring: the router's thread hears of it.
    pub(super) fn socket_ready(&mut self) {
        if self.cpu.t[ROUTER].runnable {
            return;
        }
        let wake = match &mut self.lp {
            Some(lp) => {
                lp.interrupts_enabled(DeviceId(0), Dir::Rx)
                    && lp.interrupt(DeviceId(0), Dir::Rx) == rxsched_core::Wake::Now
            }
            None => true,
        };
        if wake {
            self.router_wake();
        }
    }

    /// The router's thread wakes; its run's cost comes as it is switched
    /// in (`switched_in`).
    pub(super) fn router_wake(&mut self) {
        let item = if self.fwd == LabForwarder::PollingInXdp {
            Item::Look
        } else {
            Item::RouterRun
        };
        self.item[ROUTER] = Some((item, 0));
        self.cpu.wake(ROUTER);
    }

    pub(super) fn router_sleep(&mut self) {
        self.item[ROUTER] = None;
        self.cpu.sleep(ROUTER);
    }

    /// M4: charges the loop with the CPU the receive work used since the
    /// last charge (the thread's, the NAPI thread's, and a wake-up cost
    /// for each wake-up), and opens or closes the gate, as the real
    /// router's input charges it (`runtime/input.rs`): a wake-up of the
    /// thread follows one of the receive work, and the pair is charged
    /// once; the in-XDP router's thread wakes only to look, so there each
    /// wake-up of the NAPI thread is charged too. A copying monitor has
    /// no gate, and is charged its own thread's alone (the receive work
    /// is the host's).
    pub(super) fn charge(&mut self) {
        let copying = self.fwd == LabForwarder::CaptureCopy;
        let in_xdp = self.fwd == LabForwarder::PollingInXdp;
        let Some(lp) = &mut self.lp else { return };
        if self.limit {
            let (r, n) = (&self.cpu.t[ROUTER], &self.cpu.t[NAPI]);
            let used = if copying {
                r.cpu + self.c.wake * r.wakeups
            } else if in_xdp {
                r.cpu + n.cpu + self.c.wake * (r.wakeups + n.wakeups)
            } else {
                r.cpu + n.cpu + self.c.wake * r.wakeups
            };
            lp.charge(self.now, used.saturating_sub(self.charged));
            self.charged = used;
        }
        if copying {
            return;
        }
        let open = lp.input_inhibited(self.now).is_none();
        self.cpu
            .set_class(NAPI, if open { Class::Fifo(NAPI_PRIO) } else { IDLE });
    }

    /// The polling router's next unit of work (its loop's), or its sleep.
    pub(super) fn polling_next(&mut self) {
        let now = self.now;
        let (_, per_frame) = self.router_costs();
        loop {
            let lp = self.lp.as_mut().expect("a polling router has its loop");
            match lp.next(&At(now)) {
                None => return self.router_sleep(),
                Some(Work::Switch) => continue,
                Some(Work::Poll { budget, .. }) => {
                    let staged = self.staged();
                    let mut n = 0;
                    while n < self.xsk.len().min(budget as usize)
                        && self.lp.as_mut().is_some_and(|lp| lp.proceed(now))
                    {
                        n += 1;
                        // M3 hears the screening queue's length after each frame.
                        if staged {
                            self.stage_level(n);
                        }
                    }
                    let lp = self.lp.as_mut().expect("a polling router has its loop");
                    if n == 0 {
                        lp.done(0, !self.xsk.is_empty(), &At(now));
                        continue;
                    }
                    let frames: Vec<Nanos> = self.xsk.drain(..n).collect();
                    self.item[ROUTER] = Some((Item::RouterBatch(frames), per_frame * n as u64));
                    self.took = Some(now);
                    return;
                }
                Some(Work::EnableInterrupts { dev, dir }) => {
                    lp.enabled(dev, dir, !self.xsk.is_empty());
                }
                Some(Work::Idle { until }) => {
                    self.timer = self.wait_until(until);
                    self.charge();
                    return self.router_sleep();
                }
            }
        }
    }

    /// The interrupt-mode router's next batch, or its sleep.
    pub(super) fn interrupt_next(&mut self) {
        let n = self.xsk.len().min(self.quota.max(1));
        if n == 0 {
            return self.router_sleep();
        }
        let frames: Vec<Nanos> = self.xsk.drain(..n).collect();
        let (_, per_frame) = self.router_costs();
        self.item[ROUTER] = Some((Item::RouterBatch(frames), per_frame * n as u64));
    }

    /// The in-XDP router looked: charges M4, and sleeps until its next look.
    pub(super) fn looked(&mut self) {
        self.charge();
        let now = self.now;
        let lp = self.lp.as_mut().expect("a polling router has its loop");
        if lp.deadline().is_some_and(|d| d <= now) {
            let _ = lp.timer(now);
        }
        let look = lp
            .cycle_headroom(now)
            .map_or(LOOK_NS, |h| h.max(MIN_LOOK_NS))
            .min(LOOK_NS);
        let until = lp.deadline().map_or(now + look, |d| d.min(now + look));
        // Again, so that the gate follows an inhibit the timer ended.
        self.charge();
        self.timer = Some(until.max(now + 1));
        self.router_sleep();
    }

    /// The router's timer fired (an inhibit ends, or the in-XDP look).
    pub(super) fn timer_fired(&mut self) {
        self.timer = None;
        self.interrupt();
        if self.fwd == LabForwarder::PollingInXdp {
            return self.router_wake();
        }
        let lp = self
            .lp
            .as_mut()
            .expect("only a polling router sets a timer");
        if lp.timer(self.now) == rxsched_core::Wake::Now {
            self.charge();
            self.router_wake();
        } else if self.fwd == LabForwarder::CaptureCopy {
            // The copying monitor's own look: copies waiting wake it (if
            // input is allowed); otherwise it sleeps until its next look.
            if !self.xsk.is_empty() {
                self.socket_ready();
            }
            if !self.cpu.t[ROUTER].runnable {
                let until = self.lp.as_ref().and_then(|lp| lp.deadline());
                self.timer = self.wait_until(until);
            }
        }
    }

    /// When the sleeping thread wakes by itself: at `until` (its loop's
    /// deadline), or, for a copying monitor while copies flow, at its next
    /// look if that comes first.
    fn wait_until(&self, until: Option<Nanos>) -> Option<Nanos> {
        let now = self.now;
        let flowing = self.fwd == LabForwarder::CaptureCopy
            && self.took.is_some_and(|t| now < t + FLOWING_NS);
        let look = flowing.then_some(now + COPY_LOOK_NS);
        match (until, look) {
            (Some(u), Some(l)) => Some(u.min(l)),
            (u, l) => u.or(l),
        }
    }
}
