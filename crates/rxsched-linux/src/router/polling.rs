//! The polling router (M2, with M3 and M4): the runtime's polling thread
//! ([`Poller`]), which the core's [`PollLoop`] drives exactly as the
//! simulator's polling kernel is driven, serving [`Forward`]. A receive
//! callback takes a batch of frames off a ring in one ring operation,
//! forwarding each to completion onto its output queue (or to the
//! screening stage); a transmit callback claims a batch of queued frames
//! and sends them with one kick.

use super::{forward_one, Counters, Egress, Mode, Onward, OutQueue, Port, Route, RouterConfig};
use super::{live_line, stage_cost::StageMeter, QueueTaken, RouterReport, ScreenEnd};
use crate::backend::{RxBackend, TxBackend, Wait};
use crate::links::LinkWatch;
use crate::runtime::{App, Gate, Poller, Polls};
use crate::stage::StageQueue;
use crate::sys::SysResult;
use rxsched_core::{Clock, DeviceId, Dir, DropPoint, Nanos, PollLoop, QueueFeedback};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// How far below the kernel's real-time budget the guard of a router with
/// a protected queue holds ordinary input: the protected class's room, and
/// the slack for the guard's charges, which come every few callbacks and
/// at wake-ups, so that a period's use runs past its threshold by up to a
/// callback's and a look's worth.
pub const RT_GUARD_MARGIN: f64 = 0.05;

/// What the polling router does with frames: forwards them onto its output
/// queues, or hands them to the screening stage, and sends what is queued.
pub struct Forward<T> {
    tx: Vec<T>,
    routes: Vec<Route>,
    egress: Vec<Egress>,
    outq: Vec<OutQueue>,
    out_cap: usize,
    /// Shared by every polling thread of one router.
    counters: Arc<Counters>,
    buf: Vec<u8>,
    /// The screening stage the frames go to, if any; its queue is what M3
    /// watches then.
    screen: Option<ScreenEnd>,
    /// With an objective that sets M3's marks: the stage's cost.
    stage_meter: Option<StageMeter>,
}

impl<T: TxBackend> App for Forward<T> {
    const TRANSMITS: bool = true;

    fn stage_cost(&mut self, now: Nanos) -> Option<(u64, u64)> {
        let q = &self.screen.as_ref()?.queue;
        self.stage_meter.as_mut()?.read(q, now)
    }

    fn frame(&mut self, port: usize, f: &[u8], lp: &mut PollLoop, now: Nanos) {
        self.counters.rx.fetch_add(1, Relaxed);
        let onward = match &self.screen {
            Some(s) => Onward::Screen(&s.queue),
            None => Onward::Out {
                outq: &mut self.outq[..],
                cap: self.out_cap,
            },
        };
        let out = forward_one(
            f,
            &mut self.buf,
            &self.routes,
            &self.egress,
            onward,
            &self.counters,
        );
        if let Some(o) = out {
            // A protected side's frames go out ahead of the ordinary ones.
            if self.screen.is_none() && lp.facility().is_protected(DeviceId(port)) {
                self.outq[o].promote_last();
            }
            let _ = lp.interrupt(DeviceId(o), Dir::Tx);
            // Without a screening stage, M3 watches the output queue.
            let _ = lp.queue_level(self.outq[o].len() as u32, now);
        }
    }

    fn tx_pending(&self, port: usize) -> bool {
        !self.outq[port].is_empty()
    }

    /// Without a screening stage (whose queue has feedback of its own):
    /// the least room among the output queues, since any frame may go out
    /// of any port. A quota larger than an output queue (an objective's
    /// reaches 170 against 256 under overload, M4 holding the transmit
    /// callbacks off as well) filled them and dropped the rest after the
    /// forwarding work (`output_queue`): 630-660k drops in 4 s, forwarding
    /// 187-191k pkts/s against 272k with a quota of 32.
    fn intake(&self) -> u32 {
        if self.screen.is_some() {
            return u32::MAX;
        }
        let fullest = self.outq.iter().map(|q| q.len()).max().unwrap_or(0);
        self.out_cap.saturating_sub(fullest) as u32
    }

    fn transmit(&mut self, port: usize, lp: &mut PollLoop, now: Nanos) -> SysResult<u32> {
        let mut n = 0;
        while self.outq[port].len() > n && lp.proceed(now) {
            n += 1;
        }
        if n > 0 {
            // Those the device does not take stay queued.
            self.outq[port].flush(&mut self.tx[port], n, &self.counters)?;
            let _ = lp.queue_level(self.outq[port].len() as u32, now);
        }
        Ok(n as u32)
    }

    fn watched(&self) -> Option<&StageQueue> {
        self.screen.as_ref().map(|s| &*s.queue)
    }
}

/// A polling router over ports of backends `R`/`T`, a clock `C` and a way
/// of waiting `W`.
pub struct PollingRouter<R, T, C, W> {
    poller: Poller<R, C, W, Forward<T>>,
    mode: Mode,
    in_xdp: bool,
    /// With `--protect-queue`: its number.
    protect_queue: Option<u32>,
    /// M4's share (an objective's CPU share), if M4 is on.
    cycle_share: Option<f64>,
    /// Each receive side's port and queue, for `--metrics`'s labels.
    sides: Vec<(String, String)>,
    /// With `--cpus` and `--metrics`: the page the threads share, and
    /// this thread's place in it.
    page: Option<(Arc<super::threads::SharedPage>, usize)>,
}

impl<R: RxBackend, T: TxBackend, C: Clock, W: Wait> PollingRouter<R, T, C, W> {
    /// A router over `ports`, configured by `cfg`, handing forwarded frames
    /// to the screening stage behind `screen` if there is one (its queue is
    /// then what M3 watches, and the stage kicks the thread awake when it
    /// has drained the queue to the low watermark). The thread starts
    /// asleep with every port's interrupt enabled.
    pub fn new(
        ports: Vec<Port<R, T>>,
        cfg: &RouterConfig,
        screen: Option<ScreenEnd>,
        clock: C,
        wait: W,
    ) -> SysResult<Self> {
        Self::with_counters(ports, cfg, screen, clock, wait, Arc::default())
    }

    /// [`PollingRouter::new`], counting into `counters` (shared with the
    /// router's other polling threads).
    pub fn with_counters(
        ports: Vec<Port<R, T>>,
        cfg: &RouterConfig,
        screen: Option<ScreenEnd>,
        clock: C,
        wait: W,
        counters: Arc<Counters>,
    ) -> SysResult<Self> {
        let mut fac = cfg.run.facility(ports.len())?;
        let watched = screen
            .as_ref()
            .map_or(cfg.out_queue as u32, |s| s.queue.capacity());
        let timeout = cfg.feedback_timeout_ns;
        if let Some((hi, lo)) = cfg.feedback {
            fac = fac.with_feedback(QueueFeedback::watermarks(watched, hi, lo, timeout));
        }
        // An objective with a screening stage and no hand-set marks sets
        // M3's from the stage's measured cost.
        let stage_meter = match (&screen, cfg.feedback, cfg.run.slo) {
            (Some(s), None, Some(_)) => {
                fac = fac.with_slo_feedback(watched, timeout);
                s.pid.map(StageMeter::new)
            }
            _ => None,
        };
        let app = Forward {
            egress: ports
                .iter()
                .map(|p| Egress {
                    mac: p.mac,
                    mtu: p.mtu,
                })
                .collect(),
            outq: ports.iter().map(|_| OutQueue::default()).collect(),
            routes: cfg.routes.clone(),
            out_cap: cfg.out_queue,
            counters,
            buf: vec![0u8; 65_536],
            screen,
            stage_meter,
            tx: Vec::new(),
        };
        let (rx, tx): (Vec<R>, Vec<T>) = ports.into_iter().map(|p| (p.rx, p.tx)).unzip();
        let mut poller = cfg.run.poller(rx, fac, app, clock, wait)?;
        poller.app.tx = tx;
        Ok(PollingRouter {
            poller,
            mode: cfg.mode,
            in_xdp: cfg.in_xdp,
            protect_queue: None,
            cycle_share: cfg.run.cycle_limit.or(cfg.run.slo.map(|o| o.cpu)),
            sides: Vec::new(),
            page: None,
        })
    }

    /// Tells the two-level switch's monitor, through `polls`, whether
    /// polling finds work, how often the thread is woken and what the
    /// rings hold.
    pub fn with_polls(mut self, polls: Arc<Polls>) -> Self {
        self.poller = self.poller.with_polls(polls);
        self
    }

    /// Attaches the real ports' gate and link watch (see [`Poller::attach`]):
    /// the run ends with its report if a port disappears.
    /// With a protected queue, its receive threads go ahead of the others'.
    pub fn attach(&mut self, gate: Box<dyn Gate>, links: LinkWatch) -> SysResult<()> {
        self.poller.attach(gate, links)?;
        if let Some(q) = self.protect_queue {
            self.poller.protect_receive_work(q)?;
        }
        Ok(())
    }

    /// Tells the gate which receive thread serves each receive side,
    /// `(port, queue)` in the poller's order (see [`Poller::order_receive_work`]).
    pub fn order_receive_work(&mut self, sides: &[(usize, u32)]) -> SysResult<()> {
        self.poller.order_receive_work(sides)
    }

    /// Publishes into the page the threads of a `--cpus` router share, as
    /// thread `i` (instead of a page of its own).
    pub(super) fn share_page(&mut self, page: Arc<super::threads::SharedPage>, i: usize) {
        self.page = Some((page, i));
    }

    /// Names each receive side by its port and queue (for `--metrics`).
    pub fn name_sides(&mut self, sides: Vec<(String, String)>) {
        self.sides = sides;
    }

    /// Makes receive sides `sides` (devices in the poller's order: each
    /// port's queue 0, then the other queues, then the queues' protected
    /// sockets) protected: every port's queue `queue`, if given, and the
    /// protected sockets.
    pub fn protect(&mut self, queue: Option<u32>, sides: &[usize], quota: rxsched_core::Quota) {
        for &s in sides {
            self.poller.lp.protect(rxsched_core::DeviceId(s), quota);
        }
        self.protect_queue = queue;
    }

    /// Keeps the router's real-time threads under the share of the CPU
    /// the kernel lets the real-time class take (`budget`, from
    /// [`crate::sys::rt_budget`]): ordinary input waits [`RT_GUARD_MARGIN`]
    /// below it, the protected class at it, so that the kernel never stops
    /// them, a protected queue's with the rest (see
    /// [`rxsched_core::PollingFacility::with_rt_guard`]). Moot under an M4
    /// limit at or below that share.
    pub fn guard_rt_budget(&mut self, budget: f64) -> SysResult<()> {
        let guard = rxsched_core::RtGuard::new(10 * rxsched_core::MS, budget, RT_GUARD_MARGIN);
        if self.cycle_share.is_some_and(|c| c <= guard.share()) {
            return Ok(());
        }
        self.poller.guard_rt_budget(guard)
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.poller.app.counters
    }

    /// The polling thread, for its loop and its callbacks' counts.
    pub fn poller(&self) -> &Poller<R, C, W, Forward<T>> {
        &self.poller
    }

    /// Frames inside the router: on output queues.
    pub fn in_flight(&self) -> u64 {
        self.poller.app.outq.iter().map(|q| q.len() as u64).sum()
    }

    /// Frames waiting on the receive rings, as far as the backends tell.
    pub fn rx_queued(&self) -> u64 {
        self.poller.rx.iter().map(|r| r.queued()).sum()
    }

    /// Carries out one unit of work (a callback's whole batch), or waits
    /// once while the thread sleeps (until an interrupt, an inhibit's end or
    /// `deadline`). Returns true if it waited.
    pub fn turn(&mut self, deadline: Nanos) -> SysResult<bool> {
        self.poller.turn(deadline)
    }

    /// Runs until the configured duration has passed, a stop signal
    /// arrives or a port disappears, printing live counters as asked; then
    /// reports.
    pub fn run(&mut self, cfg: &RouterConfig) -> SysResult<RouterReport> {
        let (duration_s, cpu_s) = self.serve(cfg, cfg.run.stats_every_s)?;
        let mut r = self.report()?;
        r.duration_s = duration_s;
        r.cpu_s = cpu_s;
        Ok(r)
    }

    /// Runs as [`PollingRouter::run`] does, the live line every
    /// `stats_every_s` (0: only on SIGUSR1); returns the seconds it ran and
    /// the thread's CPU seconds.
    pub fn serve(&mut self, cfg: &RouterConfig, stats_every_s: f64) -> SysResult<(f64, f64)> {
        let (mode, in_xdp, protect_queue) = (self.mode, self.in_xdp, self.protect_queue);
        let t0 = self.poller.clock.now();
        let mut prev = (0, 0, t0);
        let page = self.page.clone();
        let publishing = cfg.metrics.is_some() || page.is_some();
        let mut cadence = crate::metrics::Cadence::new(stats_every_s, publishing, t0);
        let sides = self.sides.clone();
        let extras = |p: &mut Poller<R, C, W, Forward<T>>| crate::metrics::RouterExtras {
            // A side named with no queue is another thread's (`--cpus`).
            queues: by_queue(&p.taken_by_side, &sides)
                .into_iter()
                .filter(|q| !q.queue.is_empty())
                .collect(),
            rings: p
                .ring_drops_by_side()
                .unwrap_or_default()
                .into_iter()
                .zip(&sides)
                .filter(|(_, (_, queue))| !queue.is_empty())
                .map(|((ring, sock), (port, queue))| (port.clone(), queue.clone(), ring, sock))
                .collect(),
            ports: crate::metrics::RouterExtras::read_ports(&cfg.ports).unwrap_or_default(),
            cpu_s: vec![
                ("polling", crate::sys::thread_cpu_ns() as f64 / 1e9),
                ("receive", p.receive_cpu_ns().unwrap_or(0) as f64 / 1e9),
            ],
            quota: match cfg.run.quota {
                rxsched_core::Quota::Limited(q) => Some(q),
                rxsched_core::Quota::Unlimited => None,
            },
            cycle_limit: cfg.run.cycle_limit,
            inhibited: p.lp.input_inhibited(p.clock.now()),
            cycle_headroom_ns: p.lp.cycle_headroom(p.clock.now()),
        };
        if let Some(m) = &cfg.metrics {
            let r = report_of(&mut self.poller, mode, in_xdp, protect_queue)?;
            m.publish(crate::metrics::router_page(&r, &extras(&mut self.poller)));
        }
        self.poller.run_for(
            cfg.run.duration_s,
            cadence.every_s(),
            &mut |p, now| {
                if let Some(m) = &cfg.metrics {
                    if let Ok(r) = report_of(p, mode, in_xdp, protect_queue) {
                        m.publish(crate::metrics::router_page(&r, &extras(p)));
                    }
                }
                if let Some((page, i)) = &page {
                    if let Ok(part) = part_of(p) {
                        let e = extras(p);
                        page.publish(*i, part, e);
                    }
                }
                if !cadence.line_due(now) {
                    return;
                }
                // Forwarding in XDP, the program's counts are the router's.
                let program = if in_xdp {
                    p.program_counts().unwrap_or_default()
                } else {
                    Vec::new()
                };
                let (a, extra) = (&p.app, live_extra(p));
                let line = live_line(
                    mode,
                    &a.counters,
                    a.screen.as_ref(),
                    &program,
                    &extra,
                    &mut prev,
                    now,
                );
                eprintln!("{line}");
            },
            &|_| false,
        )
    }

    /// This thread's share of the report: its rings' drops, its devices'
    /// program counts, what it holds, its inhibits and its fault.
    pub fn part(&mut self) -> SysResult<Part> {
        part_of(&mut self.poller)
    }

    /// The report so far.
    pub fn report(&mut self) -> SysResult<RouterReport> {
        let mut r = report_of(&mut self.poller, self.mode, self.in_xdp, self.protect_queue)?;
        r.received_by_queue = by_queue(&self.poller.taken_by_side, &self.sides);
        Ok(r)
    }
}

/// The share of the report of the thread around `p` (see
/// [`PollingRouter::part`]).
fn part_of<R: RxBackend, T: TxBackend, C: Clock, W: Wait>(
    p: &mut Poller<R, C, W, Forward<T>>,
) -> SysResult<Part> {
    let (ring, sock) = p.ring_drops()?;
    let program = p.program_counts()?;
    Ok(Part {
        ring,
        sock,
        program,
        in_flight: p.app.outq.iter().map(|q| q.len() as u64).sum(),
        inhibits: p.lp.inhibits(),
        taken: p.taken,
        wake_cost_ns: p.wake_cost(),
        fault: p.fault().map(str::to_string),
    })
}

/// What was taken off each receive side, named by its port and queue
/// (`sides`, in the poller's order; nothing if the sides are unnamed).
fn by_queue(taken: &[(u64, u64)], sides: &[(String, String)]) -> Vec<QueueTaken> {
    sides
        .iter()
        .enumerate()
        .map(|(i, (port, queue))| {
            let (frames, bytes) = taken.get(i).copied().unwrap_or((0, 0));
            QueueTaken {
                port: port.clone(),
                queue: queue.clone(),
                frames,
                bytes,
            }
        })
        .collect()
}

/// The report of the router around `poller` so far.
fn report_of<R: RxBackend, T: TxBackend, C: Clock, W: Wait>(
    poller: &mut Poller<R, C, W, Forward<T>>,
    mode: Mode,
    in_xdp: bool,
    protect_queue: Option<u32>,
) -> SysResult<RouterReport> {
    let (ring, sock) = poller.ring_drops()?;
    let program = poller.program_counts()?;
    let p = &*poller;
    let in_flight = p.app.outq.iter().map(|q| q.len() as u64).sum();
    let mut r = RouterReport::new(mode, &p.app.counters, ring, in_flight);
    if sock > 0 {
        r.drops.insert(DropPoint::XskRxRing, sock);
    }
    r.inhibits.extend(p.lp.inhibits());
    r.add_program(&program, in_xdp);
    r.mode_switches = p.lp.mode_switches();
    r.wake_cost_ns = p.wake_cost();
    r.fault = p.fault().map(str::to_string);
    let guard = p.lp.facility().rt_guard();
    let steered = super::report::steered_counts(&program);
    r.protected =
        p.lp.facility()
            .has_protected()
            .then(|| super::ProtectedReport {
                queue: protect_queue,
                taken: p.taken_protected,
                steered: steered.0,
                unsteered: steered.1,
                rt_guard: guard.map(|g| super::report::RtGuardReport {
                    share: g.share(),
                    holds: g.episodes(),
                }),
            });
    let fac = p.lp.facility();
    let feedback =
        fac.slo_stage_marks()
            .zip(fac.feedback())
            .map(|(st, fb)| super::report::SloFeedback {
                inhibit_at: fb.inhibit_at(),
                resume_at: fb.resume_at(),
                timeout_us: fb.timeout_ns() as f64 / 1e3,
                stage_frame_ns: st.cost_ns(),
                changes: st.changes(),
                kept_because: st.kept_because().map(str::to_string),
            });
    r.slo = fac.slo().map(|c| super::report::SloReport {
        quota: c.settings().quota,
        cycle_limit: c.settings().cycle_limit,
        rx_frame_ns: c.costs().rx_frame_ns,
        changes: c.changes(),
        quota_changes: c.quota_changes(),
        log: p.slo_log.clone(),
        feedback,
    });
    Ok(r)
}

/// One polling thread's share of a router's report.
#[derive(Debug, Clone, Default)]
pub struct Part {
    /// Frames its rings dropped (`nic_rx_ring`).
    pub ring: u64,
    /// Frames its sockets' rings dropped (`xsk_rx_ring`).
    pub sock: u64,
    /// Its devices' program counts (queue 0's socket reports them).
    pub program: Vec<u64>,
    /// Frames on its output queues.
    pub in_flight: u64,
    /// Its input inhibits by cause.
    pub inhibits: Vec<(rxsched_core::InhibitCause, u64)>,
    /// Frames it took off its rings.
    pub taken: u64,
    /// With M4: the cost charged per wake-up.
    pub wake_cost_ns: Option<u64>,
    /// Why it stopped early, if it did.
    pub fault: Option<String>,
}

/// The live line's tail: how the devices are serviced (two-level), or the
/// inhibits and mode switches so far.
fn live_extra<R: RxBackend, C: Clock, W: Wait, A: App>(p: &Poller<R, C, W, A>) -> String {
    if let Some(polls) = p.polls() {
        let how = if polls.polling.load(Relaxed) == 1 {
            "polling"
        } else {
            "interrupts"
        };
        return format!(
            "; serviced by {how}; two-level switches {}",
            polls.switches.load(Relaxed)
        );
    }
    let inh: Vec<String> =
        p.lp.inhibits()
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
    format!(
        "; inhibits [{}]; mode switches {}",
        inh.join(", "),
        p.lp.mode_switches()
    )
}
