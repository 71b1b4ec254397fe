//! The polling kernel (M2, with M3 and M4): interrupt handlers only wake
//! the polling thread, which the core's [`PollLoop`] drives. Each unit of
//! [`Work`] becomes a step costed from the profile, and a callback's batch
//! one step per packet (so that an interrupt can come between two);
//! packets then go through the BSD [`Stack`] to completion, with no
//! `ipintrq`.

use super::bsd::Stack;
use super::{Kernel, KernelReport};
use crate::engine::packet::Packet;
use crate::host::cpu::{CtxId, KTHREAD};
use crate::host::event::{Ev, Timer};
use crate::host::machine::Machine;
use crate::host::nic::Nic;
use crate::host::step::polling::Step;
use crate::host::step::{self, bsd, IntrSrc};
use crate::host::users::Consumer;
use crate::profile::Profile;
use crate::scenario::Scenario;
use rxsched_core::{
    Clock, CycleLimit, DeviceId, Dir, Nanos, PollLoop, PollingFacility, QueueFeedback, Wake, Work,
};
use std::collections::VecDeque;

/// Virtual time and the polling thread's CPU time, for the loop.
struct SimClock {
    now: Nanos,
    cpu_ns: Nanos,
    /// The polling thread's CPU and the devices' interrupt handlers'.
    router_ns: Nanos,
}

impl Clock for SimClock {
    fn now(&self) -> Nanos {
        self.now
    }
    fn cpu_ns(&self) -> Nanos {
        self.cpu_ns
    }
    fn router_ns(&self) -> Nanos {
        self.router_ns
    }
}

/// The receive ring of device `dev`: devices are registered in port order,
/// then the ports' protected rings in port order (`kernel.protect`).
fn rx_ring(nics: &mut [Nic], dev: DeviceId) -> &mut VecDeque<Packet> {
    let ports = nics.len();
    match dev.0 < ports {
        true => &mut nics[dev.0].rx,
        false => &mut nics[dev.0 - ports].prot,
    }
}

/// Whether device `dev` has work in `dir`: a received frame, or a sent
/// buffer to reclaim (ports only).
fn pending(nics: &mut [Nic], dev: DeviceId, dir: Dir) -> bool {
    match dir {
        Dir::Rx => !rx_ring(nics, dev).is_empty(),
        Dir::Tx => !nics[dev.0].done_q.is_empty(),
    }
}

/// The callback in progress: its device, direction and packets so far.
#[derive(Debug, Clone, Copy)]
struct Callback {
    dev: DeviceId,
    dir: Dir,
    n: u32,
}

/// The modified kernel of Mogul & Ramakrishnan.
#[derive(Debug)]
pub struct Polling {
    stack: Stack,
    lp: PollLoop,
    cb: Option<Callback>,
    /// The ports' receive and transmit events share one interrupt enable
    /// (the profile's `nic.one_interrupt`, LANCE).
    shared: bool,
    ports: usize,
    /// CPU time in the devices' interrupt handlers so far.
    intr_ns: Nanos,
    /// The watermarks an objective set for feedback, if it did.
    marks: Option<rxsched_core::FeedbackMarks>,
}

impl Polling {
    /// The kernel a scenario configures.
    pub fn new(s: &Scenario, p: &Profile, ports: usize) -> Polling {
        let k = &s.kernel;
        let mut fac = PollingFacility::new(k.quota);
        let mut marks = None;
        if k.feedback.enabled {
            let t = (k.feedback.timeout_us * 1e3) as Nanos;
            // The queue watched: the packet filter's for a monitor, else screend's.
            let size = match Consumer::of(s) {
                Consumer::Capture => k.filter_queue_limit,
                _ => k.screen_queue_limit,
            };
            marks = crate::host::feedback_of_slo(s, p, ports)
                // Checked when the scenario was read (kernel.feedback.from_slo).
                .map(|m| m.expect("watermarks the scenario's check let through"));
            fac = fac.with_feedback(if let Some(m) = marks {
                QueueFeedback::new(m.inhibit_at, Some(m.resume_at), m.timeout_ns)
            } else if k.feedback.min_free > 0 {
                QueueFeedback::min_free(size, k.feedback.min_free, t)
            } else {
                QueueFeedback::watermarks(
                    size,
                    k.feedback.high_pct / 100.0,
                    k.feedback.low_pct / 100.0,
                    t,
                )
            });
        }
        if k.cycle_limit.enabled {
            fac = fac.with_cycle_limit(CycleLimit::new(
                (k.cycle_limit.period_us * 1e3) as Nanos,
                k.cycle_limit.percent / 100.0,
            ));
        }
        if k.gp_quantum_us > 0.0 {
            fac = fac.with_gp_turns((k.gp_quantum_us * 1e3).round().max(1.0) as Nanos);
        }
        if let Some(slo) = crate::host::slo_of(s, p, ports) {
            // Checked when the scenario was read (kernel.slo).
            fac = fac.with_slo(slo.expect("an objective the scenario's check let through"));
        }
        let mut lp = PollLoop::new(fac).with_inhibit_check(k.inhibit_check);
        for _ in 0..ports {
            let dev = lp.register(true, true);
            if p.nic.one_interrupt {
                lp.share_interrupt(dev);
            }
        }
        if k.protect.enabled {
            for _ in 0..ports {
                lp.register_protected(k.protect.quota);
            }
        }
        Polling {
            stack: Stack::new(p, ports),
            lp,
            cb: None,
            shared: p.nic.one_interrupt,
            ports,
            intr_ns: 0,
            marks,
        }
    }

    fn raise_if_enabled(&self, m: &mut Machine, n: u8, dir: Dir) {
        if self.lp.interrupts_enabled(DeviceId(n as usize), dir) {
            m.raise(IntrSrc::Poll(n, dir));
        }
    }

    fn wake_at(m: &mut Machine, w: Wake) {
        if let Wake::At(t) = w {
            m.push(t, Ev::Timer(Timer::PollWake));
        }
    }
}

impl Kernel for Polling {
    fn kthread_bucket(&self) -> &'static str {
        "poll"
    }

    fn rx_arrived(&mut self, m: &mut Machine, n: u8) {
        self.raise_if_enabled(m, n, Dir::Rx);
    }

    fn rx_arrived_protected(&mut self, m: &mut Machine, n: u8) {
        self.raise_if_enabled(m, self.ports as u8 + n, Dir::Rx);
    }

    fn tx_done(&mut self, m: &mut Machine, n: u8) {
        self.raise_if_enabled(m, n, Dir::Tx);
    }

    fn isr_step(&mut self, _m: &mut Machine, _src: IntrSrc) -> Option<step::Step> {
        // The handler only records the event; its entry cost covers it.
        None
    }

    fn driver_step(&mut self, m: &mut Machine, c: CtxId) -> Option<step::Step> {
        self.stack.driver_step(m, c)
    }

    fn next_step(&mut self, m: &mut Machine, c: CtxId) -> Option<step::Step> {
        if c != KTHREAD {
            return None;
        }
        let cpu_ns = m.cpu.ctx[KTHREAD].cpu_ns;
        let clock = SimClock {
            now: m.now,
            cpu_ns,
            router_ns: cpu_ns + self.intr_ns,
        };
        if let Some(mut cb) = self.cb {
            // The callback takes its next packet, one step each, while the
            // loop lets it; then it returns.
            let more = pending(&mut m.nics, cb.dev, cb.dir);
            if more && self.lp.proceed(m.now) {
                cb.n += 1;
                self.cb = Some(cb);
                return Some(match cb.dir {
                    Dir::Rx => {
                        let p = rx_ring(&mut m.nics, cb.dev).pop_front();
                        step::Step::Poll(Step::Rx(p.expect("ring has a packet")))
                    }
                    Dir::Tx => {
                        let nic = &mut m.nics[cb.dev.0];
                        let p = nic.done_q.pop_front().expect("a completed frame");
                        step::Step::Bsd(bsd::Step::TxReclaim(cb.dev.0 as u8, p))
                    }
                });
            }
            self.lp.done(cb.n, more, &clock);
            self.cb = None;
            // The driver read the device's status: with one interrupt for
            // both directions, the other's work is seen here.
            if self.shared && cb.dev.0 < self.ports {
                let other = match cb.dir {
                    Dir::Rx => Dir::Tx,
                    Dir::Tx => Dir::Rx,
                };
                if pending(&mut m.nics, cb.dev, other) {
                    self.lp.noticed(cb.dev, other);
                }
            }
        }
        let work = self.lp.next(&clock)?;
        Some(match work {
            Work::Switch => step::Step::Poll(Step::Switch),
            Work::Poll { dev, dir, .. } => {
                self.cb = Some(Callback { dev, dir, n: 0 });
                step::Step::Poll(Step::Callback)
            }
            Work::EnableInterrupts { dev, dir } => {
                step::Step::Poll(Step::EnableIntr(dev.0 as u8, dir))
            }
            Work::Idle { until } => {
                if let Some(t) = until {
                    m.push(t.max(m.now), Ev::Timer(Timer::PollWake));
                }
                return None;
            }
        })
    }

    fn complete(&mut self, m: &mut Machine, c: CtxId, step: step::Step) {
        match step {
            step::Step::IntrEnter(IntrSrc::Poll(n, dir)) => {
                match dir {
                    Dir::Rx => m.meter.interrupts.rx += 1,
                    Dir::Tx => m.meter.interrupts.tx += 1,
                }
                self.intr_ns += self.stack.c.poll_intr;
                let _ = self.lp.interrupt(DeviceId(n as usize), dir);
            }
            step::Step::Poll(Step::Rx(p)) => {
                let next = if m.users.consumer == Consumer::Capture {
                    bsd::Step::Filter(p)
                } else {
                    bsd::Step::IpInput(p)
                };
                m.carry(c, step::Step::Bsd(next));
            }
            step::Step::Poll(Step::EnableIntr(n, dir)) => {
                let dev = DeviceId(n as usize);
                if self.shared && (n as usize) < self.ports {
                    // One enable for both: work waiting either way raises
                    // the interrupt at once.
                    let rx = pending(&mut m.nics, dev, Dir::Rx);
                    let tx = pending(&mut m.nics, dev, Dir::Tx);
                    if tx {
                        self.lp.enabled(dev, Dir::Tx, true);
                    }
                    if rx || !tx {
                        self.lp.enabled(dev, Dir::Rx, rx);
                    }
                } else {
                    let pending = pending(&mut m.nics, dev, dir);
                    self.lp.enabled(dev, dir, pending);
                }
            }
            step::Step::Bsd(s) => {
                let watched_changed = self.stack.complete(m, c, s);
                if watched_changed {
                    self.queue_level(m);
                }
            }
            _ => {}
        }
    }

    fn cost(&self, _m: &Machine, step: step::Step) -> Nanos {
        let c = &self.stack.c;
        match step {
            step::Step::IntrEnter(IntrSrc::Clock) => c.clock_tick,
            step::Step::IntrEnter(_) => c.poll_intr,
            step::Step::Poll(Step::Switch) => c.poll_switch,
            step::Step::Poll(Step::Callback) => c.poll_callback,
            step::Step::Poll(Step::Rx(p)) => self.stack.rx_cost(p),
            step::Step::Poll(Step::EnableIntr(..)) => c.intr_enable,
            step::Step::Bsd(s) => self.stack.cost(s),
            _ => 0,
        }
    }

    fn timer(&mut self, m: &mut Machine, t: Timer) {
        if t == Timer::PollWake {
            let _ = self.lp.timer(m.now);
        }
    }

    fn idle(&mut self, m: &mut Machine) -> bool {
        self.lp.idle(m.now) == Wake::Now
    }

    fn queue_level(&mut self, m: &mut Machine) {
        let w = self.lp.queue_level(m.users.watched_len() as u32, m.now);
        Self::wake_at(m, w);
    }

    fn screened(&mut self, p: Packet) -> Option<step::Step> {
        Some(step::Step::Bsd(bsd::Step::IpOutput(p)))
    }

    fn in_flight(&self) -> u64 {
        0
    }

    fn report(&self) -> KernelReport {
        let mut r = KernelReport {
            mode_switches: self.lp.mode_switches(),
            ..KernelReport::default()
        };
        for (cause, n) in self.lp.inhibits() {
            r.inhibits.insert(cause.name().to_string(), n);
        }
        if let Some(c) = self.lp.facility().slo() {
            crate::host::slo_extras(c, &mut r.extra);
        }
        if let Some(m) = self.marks {
            r.extra
                .insert("slo_inhibit_at".into(), f64::from(m.inhibit_at));
            r.extra
                .insert("slo_resume_at".into(), f64::from(m.resume_at));
            r.extra
                .insert("slo_feedback_timeout_us".into(), m.timeout_ns as f64 / 1e3);
        }
        r
    }
}
