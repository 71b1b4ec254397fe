//! The polling thread of the real dataplane, generic over what takes each
//! frame ([`App`]): the router's forwarding, the monitor's filter and
//! packet-filter queue, SRP's early demultiplexer. The core's [`PollLoop`]
//! decides, exactly as it does for the simulator's polling kernel; the
//! thread carries each [`Work`] out on real rings, a callback's batch in one
//! ring operation, and sleeps on the devices (and on the kick of the stage
//! whose queue M3 watches) when the loop goes idle.

use super::input::{At, InputCtl};
use crate::backend::Gate;
use crate::backend::{RxBackend, Wait};
use crate::links::LinkWatch;
use crate::stage::StageQueue;
use crate::sys::{self, SysResult};
use rxsched_core::{Clock, DeviceId, Dir, Nanos, PollLoop, Work};
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The most entries an objective's log keeps.
pub const SLO_LOG_MAX: usize = 4096;

/// One change an objective's controller made, with what it measured in
/// the window that made it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloChange {
    /// When, on `CLOCK_MONOTONIC` in ns (the clock every process of the
    /// host shares, so a test or bench can line it up with the load it
    /// offered).
    pub at_ns: u64,
    /// Frames per callback from then on.
    pub quota: u32,
    /// M4's share from then on.
    pub cycle_limit: f64,
    /// The receive callbacks' cost per frame as then estimated, in ns (what
    /// set the quota).
    #[serde(default)]
    pub rx_frame_ns: f64,
    /// The router's share of the CPU in that window (what moved the limit).
    #[serde(default)]
    pub share: f64,
}

/// The shortest sleep between two looks at the receive work's CPU time.
const MIN_LOOK_NS: u64 = 50_000;

/// What a polling thread serves.
pub trait App {
    /// Whether the app has transmit callbacks (a router); receive-only
    /// apps register their devices for receive work alone.
    const TRANSMITS: bool = false;

    /// One frame taken off port `port`'s ring, handled to completion. It
    /// may report a queue's level to M3 or raise transmit work through `lp`.
    fn frame(&mut self, port: usize, f: &[u8], lp: &mut PollLoop, now: Nanos);

    /// [`App::frame`], told the receive queue the frame came in on where
    /// the port's ring holds several queues' frames (`None`: the port's
    /// own).
    fn frame_on(
        &mut self,
        port: usize,
        _queue: Option<u32>,
        f: &[u8],
        lp: &mut PollLoop,
        now: Nanos,
    ) {
        self.frame(port, f, lp, now)
    }

    /// Whether port `port` has transmit work waiting.
    fn tx_pending(&self, _port: usize) -> bool {
        false
    }

    /// How many frames a receive callback may take now: what the app has
    /// room for downstream (a router: its fullest output queue's room), so
    /// that a frame it could not pass on is left on the device's ring,
    /// before any work, instead of dropped after it.
    fn intake(&self) -> u32 {
        u32::MAX
    }

    /// The transmit callback of port `port`: claims waiting frames while
    /// `lp` lets it, and sends them with one kick. Returns how many.
    fn transmit(&mut self, _port: usize, _lp: &mut PollLoop, _now: Nanos) -> SysResult<u32> {
        Ok(0)
    }

    /// With an objective that sets M3's watermarks: once a controller
    /// window has passed, the frames the stage behind the loop took and
    /// the CPU time it spent meanwhile, in ns.
    fn stage_cost(&mut self, _now: Nanos) -> Option<(u64, u64)> {
        None
    }

    /// The stage queue M3 watches, if it watches one: its level is
    /// reported after every frame, and its consumer kicks the thread awake
    /// once it has drained it to the level the loop resumes at.
    fn watched(&self) -> Option<&StageQueue> {
        None
    }
}

/// What the two-level switch's monitor reads from a polling thread: whether
/// polling finds work, how often the thread is woken, and what the rings
/// hold.
#[derive(Debug, Default)]
pub struct Polls {
    /// Packets taken while polling found work.
    pub busy: std::sync::atomic::AtomicU64,
    /// Times the loop found nothing to do.
    pub dry: std::sync::atomic::AtomicU64,
    /// Times the thread was woken by input.
    pub wakeups: std::sync::atomic::AtomicU64,
    /// Frames waiting on the rings when last looked at.
    pub queued: std::sync::atomic::AtomicU64,
    /// The monitor's switches so far (for the live counters).
    pub switches: std::sync::atomic::AtomicU64,
    /// 1 while polling services the devices.
    pub polling: std::sync::atomic::AtomicU64,
    /// With an objective: what a received frame costs the router as its
    /// controller measured it, in ns (0 until measured).
    pub frame_ns: std::sync::atomic::AtomicU64,
}

/// The polling thread over receive backends `R` (one per port, in device
/// order), clock `C` and way of waiting `W`, serving `A`.
pub struct Poller<R, C, W, A> {
    /// The receive sides, by port.
    pub rx: Vec<R>,
    /// The polling loop.
    pub lp: PollLoop,
    /// The clock.
    pub clock: C,
    wait: W,
    /// While the thread sleeps: when an input inhibit ends.
    until: Option<Nanos>,
    input: InputCtl,
    /// What takes the frames.
    pub app: A,
    /// Frames taken off the rings.
    pub taken: u64,
    /// Of those, frames taken off protected queues.
    pub taken_protected: u64,
    /// Frames and bytes taken off each receive side, in the poller's order.
    pub taken_by_side: Vec<(u64, u64)>,
    /// With an objective: its settings when the thread began, and each
    /// change it made, up to [`SLO_LOG_MAX`] entries.
    pub slo_log: Vec<SloChange>,
    slo_seen: u64,
    /// The receive sides frames were taken from since the thread last slept.
    served: Vec<bool>,
    callbacks: u64,
    largest_callback: u32,
    links: Option<LinkWatch>,
    fault: Option<String>,
    polls: Option<Arc<Polls>>,
}

impl<R: RxBackend, C: Clock, W: Wait, A: App> Poller<R, C, W, A> {
    /// A thread over `rx` whose loop is `lp` (devices not yet registered:
    /// one per port is, here), charging M4 as `cycle_limit` and
    /// `wake_cost_ns` say. It starts asleep with every interrupt enabled.
    pub fn new(
        rx: Vec<R>,
        mut lp: PollLoop,
        app: A,
        clock: C,
        mut wait: W,
        cycle_limit: Option<f64>,
        wake_cost_ns: Option<u64>,
    ) -> SysResult<Self> {
        for (i, r) in rx.iter().enumerate() {
            lp.register(true, A::TRANSMITS);
            wait.add(i, r.fd())?;
        }
        if let Some(q) = app.watched() {
            wait.add(rx.len(), Some(q.producer_fd()))?;
        }
        let input = InputCtl::new(&clock, cycle_limit, wake_cost_ns)?;
        Ok(Poller {
            rx,
            lp,
            clock,
            wait,
            until: None,
            input,
            app,
            taken: 0,
            taken_protected: 0,
            taken_by_side: Vec::new(),
            slo_log: Vec::new(),
            slo_seen: 0,
            served: Vec::new(),
            callbacks: 0,
            largest_callback: 0,
            links: None,
            fault: None,
            polls: None,
        })
    }

    /// Attaches the real devices' controls: drives `gate` with the loop's
    /// inhibits (threaded NAPI with XDP), and (with M4) charges the CPU time
    /// of the receive work behind it; watches the ports' `links` (changes
    /// are reported, and the run ends if a port disappears).
    pub fn attach(&mut self, gate: Box<dyn Gate>, links: LinkWatch) -> SysResult<()> {
        self.input.set_gate(gate, &self.clock)?;
        self.links = Some(links);
        Ok(())
    }

    /// Adds the guard on the host's real-time budget (see
    /// [`rxsched_core::PollingFacility::with_rt_guard`]), charged with the
    /// thread's CPU time and its receive threads' from now on.
    pub fn guard_rt_budget(&mut self, guard: rxsched_core::RtGuard) -> SysResult<()> {
        self.lp.set_rt_guard(guard);
        self.input.start_charging(&self.clock)
    }

    /// Runs receive queue `queue` of every port ahead of the others' (a
    /// protected queue) through the gate attached; how many receive
    /// threads that moved.
    pub fn protect_receive_work(&mut self, queue: u32) -> SysResult<usize> {
        self.input.protect(queue)
    }

    /// Tells the gate attached which receive work serves each receive side,
    /// `(port, queue)` in the thread's order, so that it keeps the sides'
    /// round robin in the receive threads' order too (see [`Gate::yield_served`]).
    pub fn order_receive_work(&mut self, sides: &[(usize, u32)]) -> SysResult<()> {
        self.input.sides(sides)
    }

    /// Tells the two-level switch's monitor, through `polls`, what the
    /// thread finds.
    pub fn with_polls(mut self, polls: Arc<Polls>) -> Self {
        self.polls = Some(polls);
        self
    }

    /// What the two-level switch's monitor reads, if it watches.
    pub fn polls(&self) -> Option<&Polls> {
        self.polls.as_deref()
    }

    /// Callbacks run so far, and the most frames one handled.
    pub fn callbacks(&self) -> (u64, u32) {
        (self.callbacks, self.largest_callback)
    }

    /// Why the run ended early (a device disappeared), if it did.
    pub fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    /// CPU time the receive threads this thread gates have used, in ns
    /// (0 where it gates none).
    pub fn receive_cpu_ns(&self) -> SysResult<u64> {
        self.input.receive_cpu_ns()
    }

    /// With M4: the cost charged per wake-up, in ns.
    pub fn wake_cost(&self) -> Option<u64> {
        self.input.wake_cost()
    }

    /// Input-inhibit episodes so far, every cause together.
    pub fn inhibits(&self) -> u64 {
        self.lp.inhibits().iter().map(|(_, n)| n).sum()
    }

    /// Frames the rings dropped (`nic_rx_ring`), and frames the kernel's
    /// receive work dropped on full socket rings (`xsk_rx_ring`), over
    /// every port.
    pub fn ring_drops(&mut self) -> SysResult<(u64, u64)> {
        let by_side = self.ring_drops_by_side()?;
        Ok(by_side.iter().fold((0, 0), |(a, b), (r, s)| (a + r, b + s)))
    }

    /// [`Poller::ring_drops`], receive side by receive side.
    pub fn ring_drops_by_side(&mut self) -> SysResult<Vec<(u64, u64)>> {
        self.rx
            .iter_mut()
            .map(|r| Ok((r.ring_drops()?, r.socket_drops()?)))
            .collect()
    }

    /// What the devices' programs did with the frames that arrived, summed
    /// over the ports (see [`crate::bpf::RouteOutcome`]).
    pub fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        crate::backend::program_counts(&mut self.rx)
    }

    fn pending(&self, dev: DeviceId, dir: Dir) -> bool {
        match dir {
            Dir::Rx => self.rx[dev.0].pending(),
            Dir::Tx => self.app.tx_pending(dev.0),
        }
    }

    /// Carries out one unit of work (a callback's whole batch), or sleeps
    /// once (until input, the end of an inhibit, the stage's kick, or
    /// `deadline`). Returns true if it slept.
    pub fn turn(&mut self, deadline: Nanos) -> SysResult<bool> {
        let now = self.clock.now();
        let at = At(now);
        // Under the two-level switch's interrupts an objective neither
        // charges M4 nor measures frames: the receive work is not the
        // thread's then.
        if let (Some(p), Some(_)) = (&self.polls, self.lp.facility().slo()) {
            let interrupts = p.polling.load(Relaxed) == 0;
            if interrupts != self.input.paused() {
                self.input.pause(interrupts, &self.clock)?;
            }
        }
        if self.lp.facility().has_protected() {
            self.hear_protected();
        }
        let Some(work) = self.lp.next(&at) else {
            self.sleep(deadline)?;
            return Ok(true);
        };
        match work {
            Work::Switch => {}
            Work::Poll { dev, dir, budget } => {
                let n = match dir {
                    Dir::Rx => self.receive(dev.0, budget, now),
                    Dir::Tx => self.app.transmit(dev.0, &mut self.lp, now)?,
                };
                let more = self.pending(dev, dir);
                // An objective's controller counts the frames; what they
                // cost is what M4 is charged: all the router's CPU.
                if !self.input.paused() {
                    self.lp.slo_callback(dir, n, 0);
                }
                self.lp.done(n, more, &at);
                if self.lp.facility().slo_stage_marks().is_some() {
                    if let Some((frames, ns)) = self.app.stage_cost(now) {
                        self.lp.slo_stage(frames, ns);
                    }
                }
                self.note_slo(now);
                if dir == Dir::Rx && self.lp.facility().has_protected() {
                    self.input.hold_protected(&mut self.lp, now, &self.served)?;
                }
                self.callbacks += 1;
                self.largest_callback = self.largest_callback.max(n);
                if let (Some(p), Dir::Rx) = (&self.polls, dir) {
                    p.busy.fetch_add(u64::from(n), Relaxed);
                }
            }
            Work::EnableInterrupts { dev, dir } => {
                let pending = self.pending(dev, dir);
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

    /// With an objective: logs its settings at the first callback and
    /// whenever its controller changes them.
    fn note_slo(&mut self, now: Nanos) {
        let Some(c) = self.lp.facility().slo() else {
            return;
        };
        if let (Some(p), true) = (&self.polls, c.rx_measured()) {
            p.frame_ns
                .store(c.costs().rx_frame_ns.round() as u64, Relaxed);
        }
        if (self.slo_log.is_empty() || c.changes() != self.slo_seen)
            && self.slo_log.len() < SLO_LOG_MAX
        {
            self.slo_seen = c.changes();
            let s = c.settings();
            self.slo_log.push(SloChange {
                at_ns: now,
                quota: s.quota,
                cycle_limit: s.cycle_limit,
                rx_frame_ns: c.costs().rx_frame_ns,
                share: c.share(),
            });
        }
    }

    /// The receive callback of port `d`: up to `budget` frames off its ring
    /// in one batch, each handed to the app, while the loop lets it.
    /// Returns how many it took.
    fn receive(&mut self, d: usize, budget: u32, now: Nanos) -> u32 {
        let budget = budget.min(self.app.intake());
        let (lp, app) = (&mut self.lp, &mut self.app);
        if budget == 0 || !lp.proceed(now) {
            return 0;
        }
        let (mut n, mut bytes) = (0, 0u64);
        self.rx[d].recv_tagged(budget as usize, &mut |f, queue| {
            n += 1;
            bytes += f.len() as u64;
            app.frame_on(d, queue, f, lp, now);
            report_level(lp, app.watched(), now);
            lp.proceed(now)
        });
        self.taken += u64::from(n);
        if self.lp.facility().is_protected(DeviceId(d)) {
            self.taken_protected += u64::from(n);
        }
        if n > 0 {
            self.served.resize(self.rx.len(), false);
            self.served[d] = true;
            self.taken_by_side.resize(self.rx.len(), (0, 0));
            let side = &mut self.taken_by_side[d];
            *side = (side.0 + u64::from(n), side.1 + bytes);
        }
        n
    }

    /// A device's readiness is heard only while the thread sleeps; a
    /// protected queue's frames are looked for between callbacks too, as an
    /// interrupt would announce them, so that a busy ordinary queue cannot
    /// keep them waiting beyond the callback in progress.
    fn hear_protected(&mut self) {
        for (d, r) in self.rx.iter().enumerate() {
            let dev = DeviceId(d);
            if self.lp.facility().is_protected(dev)
                && self.lp.interrupts_enabled(dev, Dir::Rx)
                && r.pending()
            {
                let _ = self.lp.interrupt(dev, Dir::Rx);
            }
        }
    }

    /// The thread sleeps: it waits on the ports whose interrupt is enabled
    /// and on the watched stage's kick, until one has input, the inhibit in
    /// force ends, or `deadline`.
    fn sleep(&mut self, deadline: Nanos) -> SysResult<()> {
        let now = self.clock.now();
        let limit = deadline.saturating_sub(now);
        let timeout = self
            .until
            .map_or(limit, |u| u.saturating_sub(now).min(limit));
        let charging = self.input.charging();
        let mut looks = self.rx.iter().filter_map(|r| r.max_sleep_ns(charging));
        let timeout = match looks.next() {
            // A backend whose receive work runs while the thread sleeps:
            // look again when M4's budget would be spent, were that work
            // to take the whole CPU meanwhile (a look every LOOK_NS alone
            // overshot the budget by up to that much each period).
            Some(first) => {
                let look = looks.fold(first, u64::min);
                let spent = self
                    .lp
                    .cycle_headroom(now)
                    .map_or(look, |h| h.max(MIN_LOOK_NS));
                timeout.min(look).min(spent)
            }
            None => timeout,
        };
        let n = self.rx.len();
        let mut armed: Vec<bool> = (0..n)
            .map(|i| self.lp.interrupts_enabled(DeviceId(i), Dir::Rx))
            .collect();
        // The stage's kick is always armed: it comes only when asked for.
        armed.extend(self.app.watched().map(|_| true));
        let (rx, app) = (&self.rx, &self.app);
        let ready = |i: usize| match app.watched() {
            Some(q) if i == n => q.producer_kicked(),
            _ => rx[i].pending(),
        };
        self.input.follow(&mut self.lp, now, &self.served)?;
        self.served.iter_mut().for_each(|s| *s = false);
        let mut woken = self.wait.wait(&armed, &ready, timeout)?;
        // A backend whose wake-ups are batched may hold frames its
        // descriptor has not announced (the wait only hears wake-ups).
        for (i, r) in self.rx.iter().enumerate() {
            if armed[i] && !woken.contains(&i) && r.max_sleep_ns(charging).is_some() && r.pending()
            {
                woken.push(i);
            }
        }
        let now = self.clock.now();
        let errors = self.wait.take_errors();
        if let Some(l) = &mut self.links {
            if let Some(f) = l.errors(errors, now)? {
                self.fault = Some(f);
            }
        }
        if let Some(p) = &self.polls {
            p.wakeups.fetch_add(1, Relaxed);
            let q: u64 = self.rx.iter().map(|r| r.queued()).sum();
            p.queued.store(q, Relaxed);
        }
        for i in woken {
            if i < n {
                let _ = self.lp.interrupt(DeviceId(i), Dir::Rx);
            } else if let Some(q) = self.app.watched() {
                q.take_producer_kick();
                report_level(&mut self.lp, Some(q), now);
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

    /// Turns until `duration_s` has passed, a stop signal arrives, a port
    /// disappears or `done()`; every `stats_every_s` (and on SIGUSR1) calls
    /// `live` with the time. Returns the seconds it ran and the thread's
    /// CPU seconds.
    pub fn run_for(
        &mut self,
        duration_s: f64,
        stats_every_s: f64,
        live: &mut dyn FnMut(&mut Self, Nanos),
        done: &dyn Fn(&Self) -> bool,
    ) -> SysResult<(f64, f64)> {
        let t0 = self.clock.now();
        let cpu0 = sys::thread_cpu_ns();
        let end = t0 + (duration_s * 1e9) as u64;
        let every = (stats_every_s * 1e9) as u64;
        let mut next_stats = if every > 0 { t0 + every } else { u64::MAX };
        let mut turns = 0u32;
        loop {
            turns = turns.wrapping_add(1);
            let next_look = self.links.as_ref().map_or(u64::MAX, LinkWatch::next);
            let slept = self.turn(end.min(next_stats).min(next_look))?;
            if slept || turns.is_multiple_of(64) {
                let now = self.clock.now();
                if let Some(l) = self.links.as_mut().filter(|l| l.due(now)) {
                    if let Some(f) = l.check(now)? {
                        self.fault = Some(f);
                    }
                }
                if now >= end || sys::signals::stopping() || done(self) || self.fault.is_some() {
                    break;
                }
                if now >= next_stats || sys::signals::take_usr1() {
                    live(self, now);
                    if now >= next_stats {
                        next_stats += every;
                    }
                }
            }
        }
        let duration_s = (self.clock.now() - t0) as f64 / 1e9;
        let cpu_s = (sys::thread_cpu_ns() - cpu0) as f64 / 1e9;
        Ok((duration_s, cpu_s))
    }
}

/// Reports the watched queue's length to M3; when that starts an inhibit
/// that the consumer may end, asks it for a kick at that level.
fn report_level(lp: &mut PollLoop, watched: Option<&StageQueue>, now: Nanos) {
    let Some(q) = watched else {
        return;
    };
    let wake = lp.queue_level(q.len(), now);
    if let rxsched_core::Wake::At(_) = wake {
        let low = lp.facility().feedback().and_then(|f| f.resume_at());
        if let Some(low) = low {
            q.kick_when_drained_to(low);
        }
    }
}
