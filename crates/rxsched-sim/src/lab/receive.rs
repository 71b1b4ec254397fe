//! The device's receive side of the lab's DUT: the generator's batches
//! landing on veth's ring, the wake-ups they cause, and the NAPI thread's
//! polls into the socket's ring (or the monitor's ring buffer).

use super::{Item, Lab, COMPUTE, NAPI, NAPI_BUDGET, ROUTER};
use crate::engine::traffic::exponential;
use crate::scenario::{LabForwarder, LabScreen};
use rxsched_core::{DropPoint, Nanos};

impl Lab {
    /// The receive work's cost a run and a frame, by forwarder.
    pub(super) fn napi_costs(&self) -> (Nanos, Nanos) {
        let c = &self.c;
        let rules = self.screen == LabScreen::Program;
        match self.fwd {
            LabForwarder::Kernel if rules => (c.napi_kernel_run, c.napi_nft_forward),
            LabForwarder::Kernel => (c.napi_kernel_run, c.napi_kernel_forward),
            LabForwarder::XdpFwd => (c.napi_xdp_run, c.napi_xdp_forward),
            LabForwarder::PollingInXdp if rules => (c.napi_route_run, c.napi_xdp_screen),
            LabForwarder::PollingInXdp => (c.napi_route_run, c.napi_xdp_route),
            LabForwarder::Interrupt => (c.napi_xsk_run, c.napi_xsk_interrupt),
            LabForwarder::Polling | LabForwarder::CaptureTake => {
                (c.napi_xsk_run, c.napi_xsk_redirect)
            }
            LabForwarder::CaptureCopy => (c.napi_copy_run, c.napi_copy),
        }
    }

    /// Frames the socket's ring (copying: the ring buffer) has room for.
    pub(super) fn xsk_room(&self) -> usize {
        let cap = match self.fwd {
            LabForwarder::CaptureCopy => self.c.copy_ring,
            _ => self.c.xsk_rx_ring,
        };
        (cap as usize).saturating_sub(self.xsk.len())
    }

    /// A generator batch lands on the veth's ring.
    pub(super) fn batch(&mut self) {
        // The frames come due since the last batch.
        self.owed += self.rate * self.since_batch / 1e9;
        let gap = exponential(&mut self.rng, self.batch_gap);
        self.since_batch = gap;
        let n = self.owed.floor();
        self.owed -= n;
        let n = n as u64;
        self.arrived += n;
        if self.w.contains(self.now) {
            self.in_window.arrived += n;
        }
        let room = (self.c.veth_ring as usize).saturating_sub(self.veth.len()) as u64;
        let kept = n.min(room);
        self.veth
            .extend(std::iter::repeat_n(self.now, kept as usize));
        self.drop(DropPoint::NicRxRing, n - kept);
        if kept > 0 && !self.cpu.t[NAPI].runnable {
            // Its run's cost comes as it is switched in (`switched_in`).
            self.item[NAPI] = Some((Item::NapiRun, 0));
            self.cpu.wake(NAPI);
            self.interrupt();
        }
        self.next_batch += gap;
    }

    /// A wake-up from outside the CPU interrupts whatever runs. What the
    /// interrupted task loses (`wake`: wakecost's spinning task, in its
    /// switches and caches) is charged when that task is the compute
    /// process, whose progress is what is measured. A thread whose costs
    /// `calibrate --real` read from its own CPU time already carries the
    /// interrupts that hit it in those trials (without IRQ time
    /// accounting the kernel charges an interrupt to the task it
    /// interrupts, and the caches it cools are that task's), so charging
    /// them again would count them twice; an idle CPU loses nothing.
    pub(super) fn interrupt(&mut self) {
        if self.cpu.running == Some(COMPUTE) {
            self.irq += self.c.wake;
        }
    }

    /// The NAPI thread's next poll, or its sleep.
    pub(super) fn napi_next(&mut self) {
        let n = self.veth.len().min(NAPI_BUDGET);
        if n == 0 {
            self.item[NAPI] = None;
            self.cpu.sleep(NAPI);
            return;
        }
        let frames: Vec<Nanos> = self.veth.drain(..n).collect();
        // A frame the socket's ring will refuse costs what a refused
        // redirect costs (the ring's room as the poll starts: nothing
        // drains it before the poll ends).
        let ringed = self.fwd.to_socket() || self.fwd == LabForwarder::CaptureCopy;
        let fits = if ringed { n.min(self.xsk_room()) } else { n };
        let full = match self.fwd {
            LabForwarder::CaptureCopy => self.c.napi_copy_full,
            _ => self.c.napi_xsk_full,
        };
        let cost = self.napi_costs().1 * fits as u64 + full * (n - fits) as u64;
        self.item[NAPI] = Some((Item::NapiPoll(frames), cost));
    }

    /// A NAPI poll finished: its frames are forwarded, or on the socket.
    pub(super) fn napi_polled(&mut self, frames: Vec<Nanos>) {
        if self.fwd == LabForwarder::CaptureCopy {
            self.copied(frames);
        } else if self.fwd.to_socket() {
            let kept = frames.len().min(self.xsk_room());
            self.xsk.extend(&frames[..kept]);
            self.drop(DropPoint::XskRxRing, (frames.len() - kept) as u64);
            let asleep = !self.cpu.t[ROUTER].runnable;
            if kept > 0 {
                self.socket_ready();
            }
            // Waking the interrupt router costs the receive work more than
            // waking the polling router does (`napi_xsk_wake`, measured).
            let woke = asleep && self.cpu.t[ROUTER].runnable;
            if self.fwd == LabForwarder::Interrupt && woke && self.c.napi_xsk_wake > 0 {
                self.item[NAPI] = Some((Item::NapiWoke, self.c.napi_xsk_wake));
                return;
            }
        } else {
            self.deliver(&frames);
        }
        self.napi_next();
    }
}
