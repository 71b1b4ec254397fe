//! The polling router (M2, with M3 and M4): one thread that the core's
//! [`PollLoop`] drives, exactly as the simulator's polling kernel is
//! driven. A receive callback takes a batch of frames off a ring in one
//! ring operation, forwarding each to completion onto its output queue; a
//! transmit callback claims a batch of queued frames for the device and
//! sends them with one kick.

use super::{
    forward_one, ring_drops, Counters, Mode, Onward, OutQueue, Port, Route, RouterConfig,
    RouterReport, ScreenEnd, Stats,
};
use crate::backend::{RxBackend, TxBackend, Wait};
use crate::links::LinkWatch;
use crate::sys::{self, SysResult};
use crate::wire::Mac;
use rxsched_core::{
    Clock, CycleLimit, DeviceId, Dir, Nanos, PollLoop, PollingFacility, QueueFeedback, Work, MS,
};
use std::sync::atomic::Ordering::Relaxed;

/// How the router opens and closes a device's input beyond its own rings:
/// with threaded NAPI, by the receive threads' priority
/// ([`crate::napi::NapiGate`]). Also reports those threads' CPU time, which
/// M4 charges to the loop.
pub trait Gate {
    /// Input allowed (true) or inhibited.
    fn set(&mut self, open: bool) -> SysResult<()>;
    /// CPU time the receive work outside this thread has used, in ns.
    fn cpu_ns(&self) -> SysResult<u64>;
}

/// No gate: the rings are all there is (AF_PACKET, in-memory ports).
pub struct NoGate;

impl Gate for NoGate {
    fn set(&mut self, _open: bool) -> SysResult<()> {
        Ok(())
    }
    fn cpu_ns(&self) -> SysResult<u64> {
        Ok(0)
    }
}

impl Gate for crate::napi::NapiGate {
    fn set(&mut self, open: bool) -> SysResult<()> {
        crate::napi::NapiGate::set(self, open)
    }
    fn cpu_ns(&self) -> SysResult<u64> {
        crate::napi::NapiGate::cpu_ns(self)
    }
}

/// The time read once at the start of a turn. The loop's own per-callback
/// charge is not used: the thread charges M4 itself (see [`CHARGE_EVERY`]).
pub(crate) struct At(pub Nanos);

impl Clock for At {
    fn now(&self) -> Nanos {
        self.0
    }
    fn cpu_ns(&self) -> Nanos {
        0
    }
}

/// With M4 on, the router reads its cycle counter every this many turns
/// and at every wake-up, and charges everything since the last reading:
/// its own thread's CPU time, callbacks or not, and its receive threads'.
/// Charging callbacks alone missed a third of what the router took from
/// other processes (its sleeps and wake-ups, and the receive work).
const CHARGE_EVERY: u32 = 16;

/// What a polling thread does to its input beside the loop, shared by the
/// router and the monitor: it opens and closes the gate on the devices'
/// receive work as the loop inhibits input, and (with M4) charges the loop
/// with everything the thread takes.
pub(crate) struct InputCtl {
    gate: Box<dyn Gate>,
    gate_open: bool,
    /// With M4: the CPU time (the thread's and the gate's) already charged.
    charged: Option<u64>,
    /// Turns since the last charge.
    since_charge: u32,
    /// With M4: ns charged per wake-up of the thread on top of CPU time.
    wake_cost: u64,
}

impl InputCtl {
    /// No gate; with M4 (`cycle_limit`), accounting starts now, charging
    /// `wake_cost_ns` per wake-up if given.
    pub(crate) fn new(
        clock: &impl Clock,
        cycle_limit: Option<f64>,
        wake_cost_ns: Option<u64>,
    ) -> SysResult<InputCtl> {
        let mut c = InputCtl {
            gate: Box::new(NoGate),
            gate_open: true,
            charged: None,
            since_charge: 0,
            wake_cost: cycle_limit.and(wake_cost_ns).unwrap_or(0),
        };
        if cycle_limit.is_some() {
            c.charged = Some(c.cpu_used(clock)?);
        }
        Ok(c)
    }

    /// Drives `gate` instead, restarting M4's accounting to take in the
    /// CPU time of the receive work behind it.
    pub(crate) fn set_gate(&mut self, gate: Box<dyn Gate>, clock: &impl Clock) -> SysResult<()> {
        self.gate = gate;
        if self.charged.is_some() {
            self.charged = Some(self.cpu_used(clock)?);
        }
        Ok(())
    }

    /// With M4: the wake-up cost charged, in ns.
    pub(crate) fn wake_cost(&self) -> Option<u64> {
        self.charged.map(|_| self.wake_cost)
    }

    /// The thread's CPU time and the gate's receive threads', and what
    /// its wake-ups cost the tasks they interrupted: each wake-up of the
    /// thread follows one of the receive work, which a timer or device
    /// interrupt started on the CPU (see [`crate::wakecost`]).
    fn cpu_used(&self, clock: &impl Clock) -> SysResult<Nanos> {
        let wakes = if self.wake_cost > 0 {
            self.wake_cost * sys::thread_wakeups()
        } else {
            0
        };
        Ok(clock.cpu_ns() + self.gate.cpu_ns()? + wakes)
    }

    /// Charges M4 with the CPU used since the last charge.
    pub(crate) fn charge(
        &mut self,
        lp: &mut PollLoop,
        clock: &impl Clock,
        now: Nanos,
    ) -> SysResult<()> {
        if let Some(before) = self.charged {
            let after = self.cpu_used(clock)?;
            lp.charge(now, after.saturating_sub(before));
            self.charged = Some(after);
            self.since_charge = 0;
        }
        Ok(())
    }

    /// After a unit of work: charges M4 every [`CHARGE_EVERY`] turns.
    pub(crate) fn turned(
        &mut self,
        lp: &mut PollLoop,
        clock: &impl Clock,
        now: Nanos,
    ) -> SysResult<()> {
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
    pub(crate) fn follow(&mut self, lp: &mut PollLoop, now: Nanos) -> SysResult<()> {
        let open = lp.input_inhibited(now).is_none();
        if open != self.gate_open {
            self.gate.set(open)?;
            self.gate_open = open;
        }
        Ok(())
    }
}

/// What the ports have waiting: received frames, and queued frames not yet
/// claimed by a transmit callback.
struct View<'a, R, T> {
    ports: &'a [Port<R, T>],
    outq: &'a [OutQueue],
    claimed: &'a [usize],
}

impl<R: RxBackend, T> View<'_, R, T> {
    fn pending(&self, dev: DeviceId, dir: Dir) -> bool {
        match dir {
            Dir::Rx => self.ports[dev.0].rx.pending(),
            Dir::Tx => self.outq[dev.0].len() > self.claimed[dev.0],
        }
    }
}

/// A polling router over ports of backends `R`/`T`, a clock `C` and a way
/// of waiting `W`.
pub struct PollingRouter<R, T, C, W> {
    ports: Vec<Port<R, T>>,
    routes: Vec<Route>,
    macs: Vec<Mac>,
    outq: Vec<OutQueue>,
    /// Per port: frames at the head of its queue claimed by the transmit callback.
    claimed: Vec<usize>,
    out_cap: usize,
    lp: PollLoop,
    clock: C,
    wait: W,
    counters: Counters,
    /// While the thread sleeps: when an input inhibit ends.
    until: Option<Nanos>,
    buf: Vec<u8>,
    input: InputCtl,
    mode: Mode,
    /// The screening stage the frames go to, if any; its queue is what M3
    /// watches then.
    screen: Option<ScreenEnd>,
    /// Two-level: what the switch's monitor reads from this loop.
    polls: Option<std::sync::Arc<super::two_level::Polls>>,
    /// On real interfaces: their links, watched.
    links: Option<LinkWatch>,
    /// Why the run must end early (a port disappeared).
    fault: Option<String>,
}

impl<R: RxBackend, T: TxBackend, C: Clock, W: Wait> PollingRouter<R, T, C, W> {
    /// A router over `ports`, configured by `cfg`; the thread starts asleep
    /// with every port's interrupt enabled.
    pub fn new(
        ports: Vec<Port<R, T>>,
        cfg: &RouterConfig,
        clock: C,
        mut wait: W,
    ) -> SysResult<Self> {
        let mut fac = PollingFacility::new(cfg.quota);
        if let Some((hi, lo)) = cfg.feedback {
            let watched = cfg
                .screen
                .as_ref()
                .map_or(cfg.out_queue as u32, |s| s.queue);
            let timeout = cfg.feedback_timeout_ns;
            fac = fac.with_feedback(QueueFeedback::watermarks(watched, hi, lo, timeout));
        }
        if let Some(share) = cfg.cycle_limit {
            fac = fac.with_cycle_limit(CycleLimit::new(10 * MS, share));
        }
        let mut lp = PollLoop::new(fac);
        for (i, p) in ports.iter().enumerate() {
            lp.register(true, true);
            wait.add(i, p.rx.fd())?;
        }
        let input = InputCtl::new(&clock, cfg.cycle_limit, cfg.wake_cost_ns)?;
        Ok(PollingRouter {
            macs: ports.iter().map(|p| p.mac).collect(),
            outq: ports.iter().map(|_| OutQueue::default()).collect(),
            claimed: vec![0; ports.len()],
            ports,
            routes: cfg.routes.clone(),
            out_cap: cfg.out_queue,
            lp,
            clock,
            wait,
            counters: Counters::default(),
            until: None,
            buf: vec![0u8; 65_536],
            input,
            mode: cfg.mode,
            screen: None,
            polls: None,
            links: None,
            fault: None,
        })
    }

    /// Watches the ports' links (see [`LinkWatch`]): changes are reported,
    /// and the run ends with its report if a port disappears.
    pub fn with_links(mut self, links: LinkWatch) -> Self {
        self.links = Some(links);
        self
    }

    /// Tells the two-level switch's monitor, through `polls`, whether
    /// polling finds work, how often the thread is woken and what the
    /// rings hold.
    pub fn with_polls(mut self, polls: std::sync::Arc<super::two_level::Polls>) -> Self {
        self.polls = Some(polls);
        self
    }

    /// Hands forwarded frames to the screening stage behind `screen`
    /// instead of the output queues; its queue is what M3 watches, and the
    /// stage kicks the thread awake when it has drained the queue to the
    /// low watermark.
    pub fn with_screen(mut self, screen: Option<ScreenEnd>) -> SysResult<Self> {
        if let Some(s) = &screen {
            self.wait
                .add(self.ports.len(), Some(s.queue.producer_fd()))?;
        }
        self.screen = screen;
        Ok(self)
    }

    /// Drives `gate` with the loop's input inhibits, and (with M4) charges
    /// the CPU time of the receive work behind it.
    pub fn with_gate(mut self, gate: Box<dyn Gate>) -> SysResult<Self> {
        self.input.set_gate(gate, &self.clock)?;
        Ok(self)
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The loop, for its counters of inhibits and switches.
    pub fn poll_loop(&self) -> &PollLoop {
        &self.lp
    }

    /// Frames inside the router: on output queues.
    pub fn in_flight(&self) -> u64 {
        self.outq.iter().map(|q| q.len() as u64).sum()
    }

    /// The ports, for their backends.
    pub fn ports_mut(&mut self) -> &mut [Port<R, T>] {
        &mut self.ports
    }

    /// Carries out one unit of work (a callback's whole batch), or waits
    /// once while the thread sleeps (until an interrupt, an inhibit's end or
    /// `deadline`). Returns true if it waited.
    pub fn turn(&mut self, deadline: Nanos) -> SysResult<bool> {
        let now = self.clock.now();
        let at = At(now);
        let Some(work) = self.lp.next(&at) else {
            self.sleep(deadline)?;
            return Ok(true);
        };
        match work {
            Work::Switch => {}
            Work::Poll { dev, dir, budget } => {
                let n = match dir {
                    Dir::Rx => self.receive(dev.0, budget, now),
                    Dir::Tx => self.transmit(dev.0, now)?,
                };
                let more = self.view().pending(dev, dir);
                self.lp.done(n, more, &at);
                self.counters.callbacks.fetch_add(1, Relaxed);
                self.counters
                    .largest_callback
                    .fetch_max(u64::from(n), Relaxed);
                if let (Some(p), Dir::Rx) = (&self.polls, dir) {
                    p.busy.fetch_add(u64::from(n), Relaxed);
                }
            }
            Work::EnableInterrupts { dev, dir } => {
                let pending = self.view().pending(dev, dir);
                self.lp.enabled(dev, dir, pending);
            }
            Work::Idle { until } => {
                self.until = until;
                if let Some(p) = &self.polls {
                    p.dry.fetch_add(1, Relaxed);
                }
            }
        }
        self.input.turned(&mut self.lp, &self.clock, now)?;
        Ok(false)
    }

    fn view(&self) -> View<'_, R, T> {
        View {
            ports: &self.ports,
            outq: &self.outq,
            claimed: &self.claimed,
        }
    }

    /// The receive callback of port `d`: takes up to `budget` frames off its
    /// ring in one batch, while the loop lets it, and forwards each to its
    /// queue or to the screening stage. Returns how many it took.
    fn receive(&mut self, d: usize, budget: u32, now: Nanos) -> u32 {
        let lp = &mut self.lp;
        if !lp.proceed(now) {
            return 0;
        }
        let (routes, macs, outq, cap, c, buf) = (
            &self.routes,
            &self.macs,
            &mut self.outq,
            self.out_cap,
            &self.counters,
            &mut self.buf,
        );
        let screen = self.screen.as_ref();
        let mut n = 0;
        self.ports[d].rx.recv_while(budget as usize, &mut |f| {
            n += 1;
            c.rx.fetch_add(1, Relaxed);
            let onward = match screen {
                Some(s) => Onward::Screen(&s.queue),
                None => Onward::Out {
                    outq: &mut outq[..],
                    cap,
                },
            };
            if let Some(o) = forward_one(f, buf, routes, macs, onward, c) {
                let _ = lp.interrupt(DeviceId(o), Dir::Tx);
                let _ = lp.queue_level(outq[o].len() as u32, now);
            } else if let Some(s) = screen {
                screen_level(lp, s, now);
            }
            lp.proceed(now)
        });
        n
    }

    /// The transmit callback of port `d`: claims its queued frames while
    /// the loop lets it (its budget) and sends them with one kick. Returns
    /// how many it claimed.
    fn transmit(&mut self, d: usize, now: Nanos) -> SysResult<u32> {
        let mut n = 0;
        while self.outq[d].len() > self.claimed[d] && self.lp.proceed(now) {
            self.claimed[d] += 1;
            n += 1;
        }
        self.flush(now)?;
        Ok(n)
    }

    /// Sends the frames the transmit callbacks claimed; those the device
    /// does not take stay queued.
    fn flush(&mut self, now: Nanos) -> SysResult<()> {
        for d in 0..self.ports.len() {
            let n = std::mem::take(&mut self.claimed[d]);
            if n > 0 {
                self.outq[d].flush(&mut self.ports[d].tx, n, &self.counters)?;
                let _ = self.lp.queue_level(self.outq[d].len() as u32, now);
            }
        }
        Ok(())
    }

    /// The thread sleeps: it waits on the ports whose interrupt is enabled,
    /// until one has input, the inhibit in force ends, or `deadline`.
    fn sleep(&mut self, deadline: Nanos) -> SysResult<()> {
        let now = self.clock.now();
        self.flush(now)?;
        let limit = deadline.saturating_sub(now);
        let timeout = self
            .until
            .map_or(limit, |u| u.saturating_sub(now).min(limit));
        let n = self.ports.len();
        let mut armed: Vec<bool> = (0..n)
            .map(|i| self.lp.interrupts_enabled(DeviceId(i), Dir::Rx))
            .collect();
        // The screening stage's kick is always armed: it comes only when asked for.
        armed.extend(self.screen.iter().map(|_| true));
        let (ports, screen) = (&self.ports, &self.screen);
        let ready = |i: usize| match screen {
            Some(s) if i == n => s.queue.producer_kicked(),
            _ => ports[i].rx.pending(),
        };
        self.input.follow(&mut self.lp, now)?;
        let woken = self.wait.wait(&armed, &ready, timeout)?;
        let now = self.clock.now();
        let errors = self.wait.take_errors();
        if let Some(l) = &mut self.links {
            if let Some(f) = l.errors(errors, now)? {
                self.fault = Some(f);
            }
        }
        if let Some(p) = &self.polls {
            p.wakeups.fetch_add(1, Relaxed);
            let q: u64 = self.ports.iter().map(|p| p.rx.queued()).sum();
            p.queued.store(q, Relaxed);
        }
        for i in woken {
            if i < n {
                let _ = self.lp.interrupt(DeviceId(i), Dir::Rx);
            } else if let Some(s) = &self.screen {
                s.queue.take_producer_kick();
                screen_level(&mut self.lp, s, now);
            }
        }
        // The receive work that ran while this thread slept is M4's too.
        self.input.charge(&mut self.lp, &self.clock, now)?;
        if self.until.is_some_and(|u| now >= u) {
            let _ = self.lp.timer(now);
        }
        if self.lp.awake() {
            self.until = None;
        }
        Ok(())
    }

    /// Runs until the configured duration has passed or a stop signal
    /// arrives, printing live counters as asked; then reports.
    pub fn run(&mut self, cfg: &RouterConfig) -> SysResult<RouterReport> {
        let t0 = self.clock.now();
        let cpu0 = sys::thread_cpu_ns();
        let end = t0 + (cfg.duration_s * 1e9) as u64;
        let mut stats = Stats::new(cfg.stats_every_s, t0);
        let mut turns = 0u32;
        loop {
            turns = turns.wrapping_add(1);
            let next_look = self.links.as_ref().map_or(u64::MAX, LinkWatch::next);
            let slept = self.turn(end.min(stats.due()).min(next_look))?;
            if slept || turns.is_multiple_of(64) {
                let now = self.clock.now();
                if let Some(l) = self.links.as_mut().filter(|l| l.due(now)) {
                    if let Some(f) = l.check(now)? {
                        self.fault = Some(f);
                    }
                }
                if now >= end || sys::signals::stopping() || self.fault.is_some() {
                    break;
                }
                let extra = self.live_extra();
                stats.tick(self.mode, &self.counters, self.screen.as_ref(), &extra, now);
            }
        }
        self.flush(self.clock.now())?;
        let mut r = self.report()?;
        r.duration_s = (self.clock.now() - t0) as f64 / 1e9;
        r.cpu_s = (sys::thread_cpu_ns() - cpu0) as f64 / 1e9;
        Ok(r)
    }

    fn live_extra(&self) -> String {
        if let Some(p) = &self.polls {
            let how = if p.polling.load(Relaxed) == 1 {
                "polling"
            } else {
                "interrupts"
            };
            return format!(
                "; serviced by {how}; two-level switches {}",
                p.switches.load(Relaxed)
            );
        }
        let inh: Vec<String> = self
            .lp
            .inhibits()
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
        format!(
            "; inhibits [{}]; mode switches {}",
            inh.join(", "),
            self.lp.mode_switches()
        )
    }

    /// The report so far.
    pub fn report(&mut self) -> SysResult<RouterReport> {
        let drops = ring_drops(&mut self.ports)?;
        let mut r = RouterReport::new(self.mode, &self.counters, drops, self.in_flight());
        let sock: u64 = self
            .ports
            .iter_mut()
            .map(|p| p.rx.socket_drops())
            .sum::<SysResult<u64>>()?;
        if sock > 0 {
            r.drops.insert("xsk_rx_ring".to_string(), sock);
        }
        for (cause, n) in self.lp.inhibits() {
            r.inhibits.insert(cause.name().to_string(), n);
        }
        r.mode_switches = self.lp.mode_switches();
        r.wake_cost_ns = self.input.wake_cost();
        r.fault = self.fault.clone();
        Ok(r)
    }
}

/// Reports the screening queue's length to M3; when that starts an inhibit,
/// asks the stage for a kick at the low watermark.
fn screen_level(lp: &mut PollLoop, s: &ScreenEnd, now: Nanos) {
    let wake = lp.queue_level(s.queue.len(), now);
    if let rxsched_core::Wake::At(_) = wake {
        let low = lp.facility().feedback().and_then(|f| f.resume_at());
        if let Some(low) = low {
            s.queue.kick_when_drained_to(low);
        }
    }
}
