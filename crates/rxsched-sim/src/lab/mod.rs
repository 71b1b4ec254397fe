//! The XDP lab's DUT as a simulated host (`kernel.kind = "lab"`): one CPU
//! running the threads of `rxsched bench real`'s forwarders under Linux's
//! scheduler ([`sched`]), on the costs `rxsched calibrate --real` measured
//! (`[lab]` of the profile).
//!
//! - The generator sends in batches: its program runs in batches of 64,
//!   each sending the frames due, `gen_batches_per_s` batches a second
//!   when its frames are few, more and full ones when they are many. The
//!   batches come at random (exponential gaps): the generator's CPU also
//!   runs the sink's receive work and the host's, which hold its loop at
//!   odd moments. Measured, the NAPI threads' runs a second over the share
//!   of time they sleep stay near one figure from 25,000 to 950,000
//!   pkts/s, as random arrivals would have it (a batch that finds the
//!   thread awake does not wake it); evenly spaced batches would wake it
//!   for each until it is busy nearly all the time.
//! - A batch lands on the veth's receive ring (`veth_ring`); what does not
//!   fit is dropped before any work (`nic_rx_ring`), and the device's NAPI
//!   thread is woken if it sleeps.
//! - The NAPI thread runs (its forwarder's `napi_*_run` a run), polls up to 64 frames at a
//!   time (the cost per frame of the forwarder's receive work), and sleeps
//!   when the ring is empty. Kernel and XDP forwarding deliver each frame
//!   there; the routers' frames go to the AF_XDP socket's ring
//!   (`xsk_rx_ring`), dropped when it is full after that work was spent
//!   (`xsk_rx_ring`; such a frame costs `napi_xsk_full`), and wake the
//!   router's thread. Beside the interrupt router a frame costs the NAPI
//!   thread `napi_xsk_interrupt` (measured beside that router), and a
//!   wake-up of its thread `napi_xsk_wake` more.
//! - The router's thread forwards up to a quota of frames at a time: in
//!   polling mode through the core's [`PollLoop`] (M4 charged with the
//!   thread's and the NAPI thread's CPU time and wake-ups, as the real
//!   router charges it, reading those clocks at each wake-up for
//!   `router_charge` more), its NAPI thread just below it at `SCHED_FIFO` and
//!   at `SCHED_IDLE` while input is inhibited; in interrupt mode as a
//!   normal thread below the NAPI thread at device priority.
//! - A wake-up from outside the CPU (the generator's batch waking the NAPI
//!   thread, a timer) costs the compute process `wake` when it interrupts
//!   it (`wakecost`: what the interrupted task loses), accounted as
//!   `interrupt`; the other threads' measured costs already carry it.
//! - A compute process, if the scenario has one, runs whenever nothing
//!   else wants the CPU, and shares it fairly with normal threads.
//! - With a screening process (`lab.screen = "process"`, [`stage`]), the
//!   router hands its frames to the process's queue instead of sending
//!   them; the process, a normal thread, judges and sends them in batches,
//!   and M3 (`kernel.feedback`) watches its queue. Rules in the receive
//!   work (`"program"`) cost that work more per frame.
//! - The monitor (`capture-copy`, `capture-take`) is a polling thread
//!   reading copies off a ring buffer (woken as the copying program wakes
//!   it, and looking again every millisecond while copies flow) or frames
//!   off its socket, onto a packet-filter queue that a writer thread
//!   drains, in the screening process's place.
//!
//! Every frame is delivered, in flight (on a ring or in a batch under
//! way), or dropped at a named point.

mod receive;
mod record;
mod router;
pub mod sched;
mod stage;

use crate::engine::interval::Interval;
use crate::metrics::{histogram, Histogram};
use crate::profile::{LabCosts, Profile};
use crate::scenario::{LabForwarder, LabScreen, ProcessKind, Scenario};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rxsched_core::{Clock, CycleLimit, DropPoint, Nanos, PollLoop, PollingFacility, QueueFeedback};
use sched::{Class, Sched, IDLE, NORMAL};
use std::collections::{BTreeMap, VecDeque};

/// The NAPI poll's budget (veth's weight).
const NAPI_BUDGET: usize = 64;
/// The generator's program runs per batch: the most frames a batch holds.
const GEN_BATCH: f64 = 64.0;
/// Device priority (the interrupt mode's NAPI thread, the polling thread).
const DEVICE_PRIO: u8 = 50;
/// The polling router's NAPI thread while input is allowed.
const NAPI_PRIO: u8 = 40;
/// The in-XDP router's look while M4 charges: every millisecond at most,
/// sooner when the budget would be spent (`route`'s `LOOK_NS`, `MIN_LOOK_NS`).
const LOOK_NS: Nanos = 1_000_000;
const MIN_LOOK_NS: Nanos = 50_000;

const NAPI: usize = 0;
const ROUTER: usize = 1;
const COMPUTE: usize = 2;
/// The stage behind the router: the screening process or the monitor's writer.
const STAGE: usize = 3;
/// The monitor's polling thread copying (`KTHREAD_PRIO`).
const MONITOR_PRIO: u8 = 1;
/// The copying program wakes the monitor at least this often while
/// copies flow, and the monitor looks again this soon on its own.
const COPY_LOOK_NS: Nanos = 1_000_000;
/// How long after its last copy the monitor keeps looking on its own.
const FLOWING_NS: Nanos = 100_000_000;

/// A unit of a thread's work, charged as one stretch of CPU.
#[derive(Debug, Clone)]
enum Item {
    /// A NAPI thread's run beside its frames.
    NapiRun,
    /// A NAPI poll over these frames (their arrival times).
    NapiPoll(Vec<Nanos>),
    /// The NAPI thread's frames woke the interrupt router's thread.
    NapiWoke,
    /// The router's thread woke: its run beside its frames.
    RouterRun,
    /// The router forwards these frames.
    RouterBatch(Vec<Nanos>),
    /// The in-XDP router's look at its counters.
    Look,
    /// The stage's thread woke: its run beside its frames.
    StageRun,
    /// The stage judges and sends (or writes) this many frames, the
    /// oldest on its queue (they stay queued until it is done).
    StageBatch(usize),
    /// The compute process's loop, forever.
    Compute,
}

#[derive(Debug, Clone, Copy)]
struct At(Nanos);

impl Clock for At {
    fn now(&self) -> Nanos {
        self.0
    }
    // M4 is charged by the host (`charge`), as the real router charges it.
    fn cpu_ns(&self) -> Nanos {
        0
    }
}

/// The lab's DUT, built and ready to run.
#[derive(Debug)]
pub struct Lab {
    c: LabCosts,
    fwd: LabForwarder,
    screen: LabScreen,
    rate: f64,
    quota: usize,
    w: Interval,
    now: Nanos,
    cpu: Sched,
    item: Vec<Option<(Item, Nanos)>>,
    veth: VecDeque<Nanos>,
    xsk: VecDeque<Nanos>,
    /// The stage's queue, its size, and the level at which the stage
    /// kicks the router (M3 asked for it).
    sq: VecDeque<Nanos>,
    sq_cap: usize,
    kick_at: Option<usize>,
    compute: bool,
    /// Copying: when the program last woke the monitor, and when the
    /// monitor last took copies.
    copy_woke: Option<Nanos>,
    took: Option<Nanos>,
    lp: Option<PollLoop>,
    limit: bool,
    charged: Nanos,
    timer: Option<Nanos>,
    /// Interrupt work pending on the CPU, and done so far.
    irq: Nanos,
    irq_cpu: Nanos,
    /// When the generator's next batch lands, and the mean gap.
    next_batch: f64,
    batch_gap: f64,
    /// The generator's gaps, and the one before the next batch.
    rng: ChaCha8Rng,
    since_batch: f64,
    owed: f64,
    arrived: u64,
    delivered: u64,
    drops: BTreeMap<DropPoint, u64>,
    in_window: Counts,
    at_start: Option<(Counts, Vec<Nanos>, Vec<u64>)>,
    latency: Histogram,
    events: u64,
}

/// Counts read at the window's edges.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    arrived: u64,
    delivered: u64,
}

impl Lab {
    /// The DUT a scenario describes, on its profile's `[lab]` costs.
    pub fn new(s: &Scenario, p: &Profile) -> Lab {
        let c = p.lab.clone().unwrap_or_default();
        let cfg = s.lab.clone().unwrap_or_default();
        let fwd = cfg.forwarder;
        let rate = s.traffic.iter().map(|t| t.rate_pps).sum::<f64>();
        let napi = match fwd {
            LabForwarder::Kernel | LabForwarder::XdpFwd | LabForwarder::CaptureCopy => NORMAL,
            LabForwarder::Interrupt => Class::Fifo(DEVICE_PRIO),
            LabForwarder::Polling | LabForwarder::PollingInXdp | LabForwarder::CaptureTake => {
                Class::Fifo(NAPI_PRIO)
            }
        };
        let router = match fwd {
            LabForwarder::CaptureCopy => Class::Fifo(MONITOR_PRIO),
            _ if fwd.polls() => Class::Fifo(DEVICE_PRIO),
            _ => NORMAL,
        };
        let queue = if fwd.captures() {
            cfg.filter_queue
        } else {
            cfg.screen_queue
        };
        // The compute process and the screening process, if any: normal.
        let classes = [napi, router, NORMAL, NORMAL];
        let compute = s.process.iter().any(|p| p.kind == ProcessKind::Compute);
        let k = &s.kernel;
        // An objective adds M4 (its controller steers the limit), charged
        // as the real router charges it.
        let slo = crate::host::slo_of(s, p, 2)
            .map(|c| c.expect("an objective the scenario's check let through"));
        let limit = (k.cycle_limit.enabled || slo.is_some()) && fwd.polls();
        let lp = fwd.polls().then(|| {
            let mut fac = PollingFacility::new(k.quota);
            if let Some(c) = slo {
                fac = fac.with_slo(c);
            }
            // (An objective's M4 is its own; the scenario's is off then.)
            if k.cycle_limit.enabled && limit {
                fac = fac.with_cycle_limit(CycleLimit::new(
                    (k.cycle_limit.period_us * 1e3) as Nanos,
                    k.cycle_limit.percent / 100.0,
                ));
            }
            let f = &k.feedback;
            let timeout = (f.timeout_us * 1e3) as Nanos;
            if f.enabled && f.min_free > 0 {
                // The monitor's form: resumed only by the timeout.
                fac = fac.with_feedback(QueueFeedback::min_free(queue, f.min_free, timeout));
            } else if f.enabled {
                fac = fac.with_feedback(QueueFeedback::watermarks(
                    queue,
                    f.high_pct / 100.0,
                    f.low_pct / 100.0,
                    timeout,
                ));
            }
            let mut lp = PollLoop::new(fac).with_inhibit_check(k.inhibit_check);
            lp.register(true, false);
            lp
        });
        let batches = (c.gen_batches_per_s as f64).max(rate / GEN_BATCH).max(1.0);
        let w = Interval::of(&s.run);
        let mut lab = Lab {
            quota: k.quota.as_count().min(1 << 20) as usize,
            fwd,
            screen: cfg.screen,
            rate,
            w,
            now: 0,
            cpu: Sched::new(&classes, 1_000_000_000 / c.tick_hz.max(1)),
            item: vec![None; classes.len()],
            veth: VecDeque::new(),
            xsk: VecDeque::new(),
            sq: VecDeque::new(),
            sq_cap: queue as usize,
            kick_at: None,
            compute,
            copy_woke: None,
            took: None,
            lp,
            limit,
            charged: 0,
            timer: None,
            irq: 0,
            irq_cpu: 0,
            next_batch: 0.0,
            batch_gap: 1e9 / batches,
            rng: ChaCha8Rng::seed_from_u64(s.run.seed),
            since_batch: 0.0,
            owed: 0.0,
            arrived: 0,
            delivered: 0,
            drops: BTreeMap::new(),
            in_window: Counts::default(),
            at_start: None,
            latency: histogram(),
            events: 0,
            c,
        };
        // Sessions: the router's (its threads, the screening process it
        // starts, the monitor's writer) and the compute process's; the
        // NAPI threads are the kernel's.
        for (t, g) in [(ROUTER, 1), (STAGE, 1), (COMPUTE, 2)] {
            lab.cpu.set_group(t, g);
        }
        if compute {
            lab.item[COMPUTE] = Some((Item::Compute, Nanos::MAX / 4));
            lab.cpu.wake(COMPUTE);
        }
        if lab.fwd == LabForwarder::PollingInXdp && lab.limit {
            lab.timer = Some(0);
        }
        lab
    }

    /// Whether the router hands its frames to a stage behind it.
    fn staged(&self) -> bool {
        self.screen == LabScreen::Process || self.fwd.captures()
    }

    /// The router's cost a run (M4's accounting included) and a frame.
    fn router_costs(&self) -> (Nanos, Nanos) {
        let c = &self.c;
        let screened = self.screen == LabScreen::Process;
        // With M4 the router reads its clocks and its receive threads' at
        // every wake-up to charge the loop (`route`'s `InputCtl::charge`);
        // a monitor's reading of its own clock alone is not told apart.
        let charge = match self.fwd {
            LabForwarder::Polling | LabForwarder::PollingInXdp if self.limit => c.router_charge,
            _ => 0,
        };
        let (run, frame) = match self.fwd {
            LabForwarder::CaptureCopy => (c.capture_run, c.capture_copy),
            LabForwarder::CaptureTake => (c.capture_take_run, c.capture_take),
            LabForwarder::Interrupt if screened => {
                (c.router_interrupt_screen_run, c.router_interrupt_screen)
            }
            LabForwarder::Interrupt => (c.router_interrupt_run, c.router_interrupt),
            _ if screened => (c.router_screen_run, c.router_screen),
            _ => (c.router_polling_run, c.router_polling),
        };
        (run + charge, frame)
    }

    fn drop(&mut self, at: DropPoint, n: u64) {
        if n > 0 {
            *self.drops.entry(at).or_insert(0) += n;
        }
    }

    fn deliver(&mut self, frames: &[Nanos]) {
        self.delivered += frames.len() as u64;
        if self.w.contains(self.now) {
            self.in_window.delivered += frames.len() as u64;
            for &a in frames {
                let _ = self.latency.record(self.now - a);
            }
        }
    }

    /// Thread `t` was switched in: it pays its run (what `calibrate
    /// --real` fits a run to: the thread's runs in `/proc/TID/schedstat`,
    /// each time it is put on the CPU, whether it woke from sleep or was
    /// preempted and came back).
    fn switched_in(&mut self, t: usize) {
        let run = match t {
            NAPI => self.napi_costs().0,
            ROUTER => self.router_costs().0,
            STAGE => self.stage_costs().0,
            _ => 0,
        };
        if let Some((_, left)) = &mut self.item[t] {
            *left += run;
        }
    }

    /// Thread `t`'s item finished.
    fn finished(&mut self, t: usize, item: Item) {
        match item {
            Item::NapiRun | Item::NapiWoke => self.napi_next(),
            Item::NapiPoll(frames) => self.napi_polled(frames),
            Item::RouterRun => {
                self.charge();
                match self.fwd {
                    LabForwarder::Interrupt => self.interrupt_next(),
                    _ => self.polling_next(),
                }
            }
            Item::RouterBatch(frames) => {
                let n = frames.len();
                if self.staged() {
                    self.hand_to_stage(frames);
                } else {
                    self.deliver(&frames);
                }
                match self.fwd {
                    LabForwarder::Interrupt => self.interrupt_next(),
                    _ => {
                        let more = !self.xsk.is_empty();
                        let lp = self.lp.as_mut().expect("a polling router has its loop");
                        // An objective's controller counts the frames; what
                        // they cost is what M4 is charged: all the router's
                        // CPU (`charge`), as on real frames.
                        // (The real router's transmit callback sends the
                        // same frames: the host models it in the batch.)
                        lp.slo_callback(rxsched_core::Dir::Rx, n as u32, 0);
                        lp.slo_callback(rxsched_core::Dir::Tx, n as u32, 0);
                        lp.done(n as u32, more, &At(self.now));
                        self.charge();
                        self.polling_next();
                    }
                }
            }
            Item::Look => self.looked(),
            Item::StageRun => self.stage_next(),
            Item::StageBatch(n) => self.staged_out(n),
            Item::Compute => unreachable!("thread {t}: the compute loop never ends"),
        }
    }

    /// The window's counts, each thread's CPU time (the interrupts' last)
    /// and runs.
    fn snapshot(&self) -> (Counts, Vec<Nanos>, Vec<u64>) {
        let mut cpu: Vec<Nanos> = self.cpu.t.iter().map(|t| t.cpu).collect();
        cpu.push(self.irq_cpu);
        let runs = self.cpu.t.iter().map(|t| t.runs).collect();
        (self.in_window, cpu, runs)
    }

    /// Frames inside the host: on its rings and in batches under way.
    fn in_flight(&self) -> u64 {
        let held = self
            .item
            .iter()
            .flatten()
            .map(|(i, _)| match i {
                Item::NapiPoll(f) | Item::RouterBatch(f) => f.len() as u64,
                _ => 0,
            })
            .sum::<u64>();
        (self.veth.len() + self.xsk.len() + self.sq.len()) as u64 + held
    }

    /// Runs to the end of the measured interval.
    fn simulate(&mut self) {
        loop {
            // Interrupt work first: no thread runs meanwhile.
            let was = self.cpu.running;
            let running = if self.irq > 0 { None } else { self.cpu.pick() };
            if let Some(r) = running.filter(|&r| Some(r) != was) {
                self.switched_in(r);
            }
            let done_at =
                running.and_then(|r| self.item[r].as_ref().map(|(_, left)| self.now + left));
            let mut next = (self.next_batch.ceil() as Nanos).min(self.w.end);
            if self.irq > 0 {
                next = next.min(self.now + self.irq);
            }
            if self.at_start.is_none() {
                next = next.min(self.w.w0);
            }
            for t in [done_at, self.cpu.next_look(self.now), self.timer]
                .into_iter()
                .flatten()
            {
                next = next.min(t);
            }
            let dt = next - self.now;
            if self.irq > 0 {
                self.irq -= dt;
                self.irq_cpu += dt;
                self.cpu.pass(next);
            } else {
                self.cpu.advance(next, dt);
            }
            if let Some(r) = running {
                if let Some((_, left)) = &mut self.item[r] {
                    *left -= dt.min(*left);
                }
            }
            self.now = next;
            self.events += 1;
            if self.at_start.is_none() && self.now >= self.w.w0 {
                self.at_start = Some(self.snapshot());
            }
            if self.now >= self.w.end {
                return;
            }
            if let Some(r) = running {
                if self.item[r].as_ref().is_some_and(|(_, left)| *left == 0) {
                    let (item, _) = self.item[r].take().expect("an item finished");
                    self.finished(r, item);
                }
            }
            if self.timer.is_some_and(|t| t <= self.now) {
                self.timer_fired();
            }
            while self.next_batch <= self.now as f64 {
                self.batch();
            }
        }
    }
}
