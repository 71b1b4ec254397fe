//! What a polling thread does to its input beside the loop: the gate on
//! the devices' receive work (threaded NAPI with XDP), and M4's charging of
//! everything the thread takes, its own CPU time and what runs for it.

use crate::backend::{Gate, NoGate};
use crate::sys::{self, SysResult};
use rxsched_core::{Clock, Nanos, PollLoop};

/// The time read once at the start of a turn. The loop's own per-callback
/// charge is not used: the thread charges M4 itself (see [`CHARGE_EVERY`]).
pub struct At(pub Nanos);

impl Clock for At {
    fn now(&self) -> Nanos {
        self.0
    }
    fn cpu_ns(&self) -> Nanos {
        0
    }
    fn times_callbacks(&self) -> bool {
        false
    }
}

/// With M4 on, the router reads its cycle counter every this many turns
/// and at every wake-up, and charges everything since the last reading:
/// its own thread's CPU time, callbacks or not, and its receive threads'.
/// Charging callbacks alone missed a third of what the router took from
/// other processes (its sleeps and wake-ups, and the receive work).
pub const CHARGE_EVERY: u32 = 16;

/// With the real-time budget's guard alone, the thread charges at most
/// this often (every wake-up under a flood read five CPU clocks some ten
/// thousand times a second); a period's use then runs past the guard's
/// share by this much and a batch at most, within its margin.
pub const RT_GUARD_CHARGE_NS: Nanos = 250_000;

/// What a polling thread does to its input beside the loop, shared by the
/// router and the monitor: it opens and closes the gate on the devices'
/// receive work as the loop inhibits input, and (with M4) charges the loop
/// with everything the thread takes.
pub struct InputCtl {
    gate: Box<dyn Gate>,
    gate_open: bool,
    /// The protected queues' receive work held back (see [`InputCtl::follow`]).
    protected_held: bool,
    /// With M4 (or the real-time budget's guard): the CPU time (the
    /// thread's and the gate's) already charged.
    charged: Option<u64>,
    /// With the real-time budget's guard alone (no M4): the receive
    /// threads' time is then charged only while they run in the real-time
    /// class (the gate open), since the guard minds that class alone: a
    /// flood's receive work in the idle class while the gate was closed,
    /// charged too, held ordinary input early in every period after.
    rt_only: bool,
    /// While the gate is closed: the receive threads' CPU time, and the
    /// time, when it closed or was last charged since.
    closed_from: (Nanos, Nanos),
    /// Over the recent closed intervals, how long the receive threads ran
    /// and how long other work held the CPU (see [`IdleShare`]).
    idle: IdleShare,
    /// When the loop was last charged.
    charged_at: Nanos,
    /// Turns since the last charge.
    since_charge: u32,
    /// With M4: ns charged per wake-up of the thread on top of CPU time.
    wake_cost: u64,
    /// Not charging for now (the two-level switch's interrupt phase).
    paused: bool,
}

impl InputCtl {
    /// No gate; with M4 (`cycle_limit`), accounting starts now, charging
    /// `wake_cost_ns` per wake-up if given.
    pub fn new(
        clock: &impl Clock,
        cycle_limit: Option<f64>,
        wake_cost_ns: Option<u64>,
    ) -> SysResult<InputCtl> {
        let mut c = InputCtl {
            gate: Box::new(NoGate),
            gate_open: true,
            protected_held: false,
            charged: None,
            rt_only: false,
            closed_from: (0, 0),
            idle: IdleShare::default(),
            charged_at: 0,
            since_charge: 0,
            wake_cost: cycle_limit.and(wake_cost_ns).unwrap_or(0),
            paused: false,
        };
        if cycle_limit.is_some() {
            c.restart(clock)?;
        }
        Ok(c)
    }

    /// Drives `gate` instead, restarting M4's accounting to take in the
    /// CPU time of the receive work behind it.
    pub fn set_gate(&mut self, gate: Box<dyn Gate>, clock: &impl Clock) -> SysResult<()> {
        self.gate = gate;
        if self.charged.is_some() {
            self.restart(clock)?;
        }
        Ok(())
    }

    /// Charges the loop from now on, if it was not charged already (the
    /// real-time budget's guard added to a thread without M4): its CPU
    /// time and its receive threads' while they are real-time, without a
    /// wake-up cost.
    pub fn start_charging(&mut self, clock: &impl Clock) -> SysResult<()> {
        if self.charged.is_none() {
            self.rt_only = true;
            self.restart(clock)?;
        }
        Ok(())
    }

    /// With M4: the wake-up cost charged, in ns.
    pub fn wake_cost(&self) -> Option<u64> {
        self.charged
            .filter(|_| !self.rt_only)
            .map(|_| self.wake_cost)
    }

    /// Stops charging the loop (`true`), or charges it again from now on:
    /// under the two-level switch's interrupts the receive work is not the
    /// loop's to cap, the switch answers an overload.
    pub fn pause(&mut self, paused: bool, clock: &impl Clock) -> SysResult<()> {
        if self.paused && !paused && self.charged.is_some() {
            self.restart(clock)?;
        }
        self.paused = paused;
        Ok(())
    }

    /// Whether charging is paused.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Whether the loop is charged (M4, or the real-time budget's guard).
    pub fn charging(&self) -> bool {
        self.charged.is_some()
    }

    /// Charges from now on: what has been used so far is taken as charged.
    fn restart(&mut self, clock: &impl Clock) -> SysResult<()> {
        let (own, gate) = self.cpu_parts(clock)?;
        self.charged = Some(own + gate);
        if !self.gate_open {
            self.closed_from = (gate, clock.now());
        }
        Ok(())
    }

    /// The CPU used so far in two parts: the thread's own, with what its
    /// wake-ups cost the tasks they interrupted (each wake-up of the
    /// thread follows one of the receive work, which a timer or device
    /// interrupt started on the CPU, see [`crate::wakecost`]), and the
    /// gate's receive threads'.
    fn cpu_parts(&self, clock: &impl Clock) -> SysResult<(Nanos, Nanos)> {
        let wakes = if self.wake_cost > 0 {
            self.wake_cost * (sys::thread_wakeups() + self.gate.wakeups()?)
        } else {
            0
        };
        Ok((clock.cpu_ns() + wakes, self.gate.cpu_ns()?))
    }

    /// CPU time the gated receive work (the receive threads) has used, in ns.
    pub fn receive_cpu_ns(&self) -> SysResult<u64> {
        self.gate.cpu_ns()
    }

    /// Charges M4 with the CPU used since the last charge.
    pub fn charge(&mut self, lp: &mut PollLoop, clock: &impl Clock, now: Nanos) -> SysResult<()> {
        if self.paused || (self.rt_only && now < self.charged_at + RT_GUARD_CHARGE_NS) {
            return Ok(());
        }
        self.charged_at = now;
        if let Some(before) = self.charged {
            let (own, gate) = self.cpu_parts(clock)?;
            let after = own + gate;
            let mut used = after.saturating_sub(before);
            if !self.gate_open {
                // The receive threads ran in the idle class meanwhile (the
                // gate is set only while the thread sleeps).
                used = used.saturating_sub(self.closed_free(gate, now));
            }
            lp.charge(now, used);
            self.charged = Some(after);
            self.since_charge = 0;
        }
        Ok(())
    }

    /// Of the receive threads' CPU time since the gate closed (or the last
    /// charge since), `gate` at `now`, what took nothing from other work,
    /// which is not charged. The real-time budget's guard minds the
    /// real-time class alone: all of it. M4 minds what the router takes
    /// from the other processes: a thread in the idle class runs when
    /// nothing else wants the CPU, for free, and now and then (the
    /// scheduler's leak, a slice of some milliseconds) while something
    /// does. Under a flood the threads are ready to run throughout the
    /// interval, so they either ran (`ran`) or stood aside for other work
    /// (the rest of it); that work's share of the recent closed intervals
    /// is the share of `ran` charged. Beside a compute process that never
    /// sleeps nearly all of it is; on a CPU with nothing else to run,
    /// nothing, and the router keeps its share of the CPU for forwarding
    /// instead of losing it to receive work that only idle time paid for.
    /// Below a flood the threads also sleep, and their idle time counts as
    /// other work's, which charges more.
    fn closed_free(&mut self, gate: Nanos, now: Nanos) -> Nanos {
        let ran = gate.saturating_sub(self.closed_from.0);
        let others = now.saturating_sub(self.closed_from.1).saturating_sub(ran);
        self.closed_from = (gate, now);
        if self.rt_only {
            ran
        } else {
            self.idle.free(ran, others)
        }
    }

    /// After a unit of work: charges M4 every [`CHARGE_EVERY`] turns.
    pub fn turned(&mut self, lp: &mut PollLoop, clock: &impl Clock, now: Nanos) -> SysResult<()> {
        self.since_charge += 1;
        if self.since_charge >= CHARGE_EVERY {
            self.charge(lp, clock, now)?;
        }
        Ok(())
    }

    /// Opens or closes the gate as input is allowed or inhibited; called
    /// just before the thread sleeps. While the thread runs, the receive
    /// threads cannot run either way (they are below it), so the gate
    /// matters only while it sleeps, and is set only then: flipping it on
    /// every inhibit and resume made the scheduler (EEVDF) hand the idle-
    /// class receive thread the lag it had saved up each time it came back
    /// from the real-time class, a whole slice (about 1 ms) each time the
    /// thread slept, which starved the stage downstream (seen with the
    /// screening process: 16 frames screened, then 1 ms of receive work
    /// that died on the full socket ring).
    ///
    /// `served` marks the receive sides the thread took frames from since
    /// it last slept: their receive work gives the others a turn first
    /// ([`Gate::yield_served`]). The protected queues' receive work is held
    /// back while an inhibit that holds the protected class is in force
    /// (M3's, M4's; not the real-time budget's guard), and while the
    /// protected class is over its cap (the core's
    /// [`rxsched_core::PollingFacility::protected_due`]) and ordinary input
    /// is coming in (the thread took ordinary frames since it last slept);
    /// otherwise it goes first. A flood of "protected" frames then leaves
    /// the ordinary queues' threads a turn at every sleep of the thread,
    /// and an idle network never leaves a protected frame to wait in the
    /// idle class.
    pub fn follow(&mut self, lp: &mut PollLoop, now: Nanos, served: &[bool]) -> SysResult<()> {
        let open = lp.input_inhibited(now).is_none();
        if open != self.gate_open {
            if !open && self.charged.is_some() {
                self.closed_from = (self.gate.cpu_ns()?, now);
            }
            self.gate.set(open)?;
            self.gate_open = open;
        }
        self.gate.yield_served(served)?;
        self.hold_protected(lp, now, served)
    }

    /// Holds the protected queues' receive work back, or lets it go first
    /// again (see [`InputCtl::follow`]): before the thread sleeps, and
    /// after each of its receive callbacks while a protected queue is
    /// registered, since a protected queue's receive work runs above the
    /// thread and would otherwise keep a flood of "protected" frames
    /// coming until the thread next slept.
    pub fn hold_protected(
        &mut self,
        lp: &mut PollLoop,
        now: Nanos,
        served: &[bool],
    ) -> SysResult<()> {
        if !lp.facility().has_protected() {
            return Ok(());
        }
        let inhibited = lp.protected_inhibited(now);
        let f = lp.facility();
        let ordinary_busy = served
            .iter()
            .enumerate()
            .any(|(d, s)| *s && !f.is_protected(rxsched_core::DeviceId(d)));
        let hold = inhibited || (ordinary_busy && !f.protected_due(0));
        if hold != self.protected_held {
            self.gate.hold_protected(hold)?;
            self.protected_held = hold;
        }
        Ok(())
    }

    /// Runs receive queue `queue` of every device ahead of the others (see
    /// [`Gate::protect`]); how many receive threads that moved.
    pub fn protect(&mut self, queue: u32) -> SysResult<usize> {
        self.gate.protect(queue)
    }

    /// Tells the gate which receive work serves each receive side (see [`Gate::sides`]).
    pub fn sides(&mut self, sides: &[(usize, u32)]) -> SysResult<()> {
        self.gate.sides(sides)
    }
}

/// The recent closed intervals' receive work in the idle class (`ran`)
/// and other work's time (`others`), halved whenever together they pass
/// [`IdleShare::HORIZON_NS`]. One interval alone says little: the
/// scheduler's leak is a slice of milliseconds, and an interval the slice
/// filled would look free though a compute process waited through it.
#[derive(Debug, Default)]
struct IdleShare {
    ran: Nanos,
    others: Nanos,
}

impl IdleShare {
    /// About this much closed time (ns) makes the estimate: tens of the
    /// leak's slices.
    const HORIZON_NS: Nanos = 100_000_000;

    /// Of `ran` ns of receive work in an interval in which other work held
    /// the CPU `others` ns, the part that took nothing from that work:
    /// `ran` × the receive work's share of the recent closed time.
    fn free(&mut self, ran: Nanos, others: Nanos) -> Nanos {
        self.ran = self.ran.saturating_add(ran);
        self.others = self.others.saturating_add(others);
        let all = self.ran as u128 + self.others as u128;
        if all == 0 {
            return 0;
        }
        let free = (ran as u128 * self.ran as u128 / all) as Nanos;
        if all > u128::from(Self::HORIZON_NS) {
            self.ran /= 2;
            self.others /= 2;
        }
        free
    }
}

#[cfg(test)]
mod tests {
    use super::{IdleShare, Nanos};

    /// Alone on its CPU the idle class's work is free; beside a process
    /// that holds the CPU 90% of the time, about 10% of it is, though the
    /// work comes in slices that fill whole intervals.
    #[test]
    fn idle_work_is_charged_by_what_else_held_the_cpu() {
        let mut alone = IdleShare::default();
        let free: Nanos = (0..100).map(|_| alone.free(4_000_000, 0)).sum();
        assert_eq!(free, 400_000_000);
        let mut beside = IdleShare::default();
        let (mut ran, mut free) = (0, 0);
        for i in 0..1000 {
            // One interval in ten is the leak's slice, filled by it.
            let (r, o) = if i % 10 == 3 {
                (3_000_000, 0)
            } else {
                (0, 3_000_000)
            };
            ran += r;
            free += beside.free(r, o);
        }
        let share = free as f64 / ran as f64;
        assert!((0.07..=0.13).contains(&share), "{share}");
        assert_eq!(IdleShare::default().free(0, 0), 0);
        assert_eq!(IdleShare::default().free(u64::MAX, u64::MAX), u64::MAX / 2);
    }
}
