//! A polling thread over one receive device, driven by the core's
//! [`PollLoop`] as the router's is, that hands every frame it takes to a
//! [`FrameStage`]: the monitor's filter and packet-filter queue
//! (`capture`), or SRP's early demultiplexer into per-consumer queues
//! (`serve`). With M3 the stage names the queue feedback watches, and its
//! consumer kicks the thread awake when it has drained it.

use crate::backend::{RxBackend, Wait};
use crate::links::LinkWatch;
use crate::router::polling::{At, Gate, InputCtl};
use crate::stage::StageQueue;
use crate::sys::{self, SysResult};
use rxsched_core::{Clock, DeviceId, Dir, Nanos, PollLoop, Work};

/// What takes the frames a [`RxPoller`] receives.
pub trait FrameStage {
    /// One frame taken off the device.
    fn frame(&mut self, f: &[u8]);
    /// The queue M3 watches, if feedback is on.
    fn watched(&self) -> Option<&StageQueue> {
        None
    }
}

/// The polling thread over receive backend `R`, clock `C`, way of waiting
/// `W`, handing frames to stage `S`.
pub struct RxPoller<R, C, W, S> {
    /// The device.
    pub rx: R,
    /// The polling loop.
    pub lp: PollLoop,
    /// The clock.
    pub clock: C,
    wait: W,
    until: Option<Nanos>,
    input: InputCtl,
    /// What takes the frames.
    pub stage: S,
    /// Frames taken off the device.
    pub taken: u64,
    links: Option<LinkWatch>,
    fault: Option<String>,
}

impl<R: RxBackend, C: Clock, W: Wait, S: FrameStage> RxPoller<R, C, W, S> {
    /// A thread over `rx` whose loop is `lp` (with one device registered),
    /// charging M4 as `cycle_limit` and `wake_cost_ns` say.
    pub fn new(
        rx: R,
        lp: PollLoop,
        stage: S,
        clock: C,
        mut wait: W,
        cycle_limit: Option<f64>,
        wake_cost_ns: Option<u64>,
    ) -> SysResult<Self> {
        wait.add(0, rx.fd())?;
        if let Some(q) = stage.watched() {
            wait.add(1, Some(q.producer_fd()))?;
        }
        let input = InputCtl::new(&clock, cycle_limit, wake_cost_ns)?;
        Ok(RxPoller {
            rx,
            lp,
            clock,
            wait,
            until: None,
            input,
            stage,
            taken: 0,
            links: None,
            fault: None,
        })
    }

    /// Watches the device's link (see [`LinkWatch`]): changes are
    /// reported, and the run ends if the device disappears.
    pub fn with_links(mut self, links: LinkWatch) -> Self {
        self.links = Some(links);
        self
    }

    /// Why the run ended early (the device disappeared), if it did.
    pub fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    /// Drives `gate` with the loop's inhibits (threaded NAPI with XDP).
    pub fn with_gate(mut self, gate: Box<dyn Gate>) -> SysResult<Self> {
        self.input.set_gate(gate, &self.clock)?;
        Ok(self)
    }

    /// Input-inhibit episodes so far.
    pub fn inhibits(&self) -> u64 {
        self.lp.inhibits().iter().map(|(_, n)| n).sum()
    }

    /// Carries out one unit of work, or sleeps once (until input, the end
    /// of an inhibit, the stage's kick, or `deadline`). Returns true if it
    /// slept.
    pub fn turn(&mut self, deadline: Nanos) -> SysResult<bool> {
        let now = self.clock.now();
        let Some(work) = self.lp.next(&At(now)) else {
            self.sleep(deadline)?;
            return Ok(true);
        };
        match work {
            Work::Poll { budget, .. } => {
                let n = self.receive(budget, now);
                let more = self.rx.pending();
                self.lp.done(n, more, &At(now));
            }
            Work::EnableInterrupts { dev, dir } => {
                let pending = self.rx.pending();
                self.lp.enabled(dev, dir, pending);
            }
            Work::Idle { until } => self.until = until,
            Work::Switch => {}
        }
        self.input.turned(&mut self.lp, &self.clock, now)?;
        Ok(false)
    }

    /// The receive callback: up to `budget` frames off the ring in one
    /// batch, each handed to the stage, while the loop lets it. Returns how
    /// many it took.
    fn receive(&mut self, budget: u32, now: Nanos) -> u32 {
        let (lp, stage) = (&mut self.lp, &mut self.stage);
        if !lp.proceed(now) {
            return 0;
        }
        let mut n = 0;
        self.rx.recv_while(budget as usize, &mut |f| {
            n += 1;
            stage.frame(f);
            report_level(lp, stage.watched(), now);
            lp.proceed(now)
        });
        self.taken += u64::from(n);
        n
    }

    fn sleep(&mut self, deadline: Nanos) -> SysResult<()> {
        let now = self.clock.now();
        let limit = deadline.saturating_sub(now);
        let timeout = self
            .until
            .map_or(limit, |u| u.saturating_sub(now).min(limit));
        // The consumer's kick is always armed: it comes only when asked for.
        let mut armed = vec![self.lp.interrupts_enabled(DeviceId(0), Dir::Rx)];
        armed.extend(self.stage.watched().map(|_| true));
        let (rx, stage) = (&self.rx, &self.stage);
        let ready = |i: usize| match i {
            0 => rx.pending(),
            _ => stage.watched().is_some_and(|q| q.producer_kicked()),
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
        for i in woken {
            if i == 0 {
                let _ = self.lp.interrupt(DeviceId(0), Dir::Rx);
            } else if let Some(q) = self.stage.watched() {
                q.take_producer_kick();
                report_level(&mut self.lp, Some(q), now);
            }
        }
        self.input.charge(&mut self.lp, &self.clock, now)?;
        if self.until.is_some_and(|u| now >= u) {
            let _ = self.lp.timer(now);
        }
        if self.lp.awake() {
            self.until = None;
        }
        Ok(())
    }

    /// Turns until `duration_s` has passed, a stop signal arrives or
    /// `done()`; every `stats_every_s` (and on SIGUSR1) calls `live` with
    /// the time. Returns the seconds it ran and the thread's CPU seconds.
    pub fn run_for(
        &mut self,
        duration_s: f64,
        stats_every_s: f64,
        live: &mut dyn FnMut(&Self, Nanos),
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
