//! The host model: one CPU with interrupt priority levels and real
//! preemption, NICs with rings and interrupts, user processes, and a
//! kernel that drives the `rxsched-core` policies.
//!
//! Work is cut into *steps* (one packet's link-level work, IP input, a
//! reclaim, ...). Each context on the CPU runs one step at a time; a step's
//! effect happens when it completes. A higher-priority context that becomes
//! ready preempts the running step, which later resumes with exactly its
//! remaining time.
//!
//! The pieces live in their own modules: [`cpu`] (contexts on the
//! engine's jobs and ledger), [`event`] (the host's events and the
//! kernels' timers), [`nic`] (rings, wire, interrupt lines), [`users`]
//! (processes and their scheduler), [`step`] (what the CPU runs, each
//! kernel's steps in a module of their own), [`machine`] (all a kernel
//! works on), and one module per kernel under [`kernel`]. Traffic, the
//! outside endpoints, the meter and the record are the engine's
//! (`crate::engine`). This module builds the kernel a scenario asks for
//! and is the event loop that joins them.

pub mod cpu;
pub mod event;
pub mod kernel;
pub mod machine;
pub mod nic;
pub mod step;
pub mod users;

use crate::engine::echo::EchoClient;
use crate::engine::events::Events;
use crate::engine::interval::Interval;
use crate::engine::job::Job;
use crate::engine::meter::Meter;
use crate::engine::packet::Packet;
use crate::engine::record::{Outside, Record};
use crate::engine::tcp::TcpFlow;
use crate::engine::traffic::{Arrival, Traffic};
use crate::engine::Model;
use crate::error::SimError;
use crate::metrics::{Metrics, Samples, TraceEvent};
use crate::profile::Profile;
use crate::scenario::{KernelKind, Scenario};
use cpu::{Cpu, CtxId, CLOCK, INTR, KTHREAD, SOFT, USER0};
use event::Ev;
use kernel::Kernel;
use machine::Machine;
use nic::{IntrController, Nic};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use step::{bsd, user, IntrSrc, Step};
use users::{Consumer, Users};

/// The objective's controller a polling scenario asks for (`kernel.slo`),
/// starting from the profile's costs for the largest frame the scenario
/// sends, on a host with `ports` interfaces; or why it cannot be met.
pub fn slo_of(
    s: &Scenario,
    p: &Profile,
    ports: usize,
) -> Option<Result<rxsched_core::SloController, rxsched_core::SloError>> {
    if s.kernel.kind == KernelKind::Nt {
        // The objective sets the two-level switch there (`smp::switch_of_slo`).
        return None;
    }
    let slo = match rxsched_core::Slo::parse(s.kernel.slo.as_deref()?) {
        Ok(slo) => slo,
        Err(e) => return Some(Err(e)),
    };
    if s.kernel.kind == KernelKind::Lab {
        // As the real router starts (`route --slo`): nothing measured but
        // the wake-up, the quota at 1 until the first window.
        let wake = p.lab.as_ref().map_or(0, |l| l.wake) as f64;
        let costs = rxsched_core::SloCosts::unmeasured(slo, wake, ports as u32);
        return Some(costs.and_then(|c| rxsched_core::SloController::new(slo, c)));
    }
    let c = &p.cost;
    let bytes = s.traffic.iter().map(|t| t.frame_bytes).max().unwrap_or(64);
    let costs = rxsched_core::SloCosts {
        // Taken off the ring, through IP, and handed to the output device.
        rx_frame_ns: (c.rx_copy
            + c.rx_link
            + c.ip_input
            + c.ip_output
            + c.driver_tx
            + c.output_done) as f64
            + f64::from(bytes) * c.rx_copy_per_byte,
        tx_frame_ns: c.tx_reclaim as f64,
        pass_ns: c.poll_callback as f64,
        // The interrupt that notes the device, and the switch to the thread.
        wake_ns: (c.poll_intr + c.poll_switch) as f64,
        ports: ports as u32,
    };
    Some(rxsched_core::SloController::new(slo, costs))
}

/// The watermarks an objective sets for queue-state feedback
/// (`kernel.feedback.from_slo`): from its costs and quota, the watched
/// stage's cost per frame on the profile, and the watched queue's size;
/// `None` where the scenario does not ask for them.
pub fn feedback_of_slo(
    s: &Scenario,
    p: &Profile,
    ports: usize,
) -> Option<Result<rxsched_core::FeedbackMarks, rxsched_core::SloError>> {
    let k = &s.kernel;
    if !(k.feedback.enabled && k.feedback.from_slo) {
        return None;
    }
    let c = match slo_of(s, p, ports)? {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    let (stage, size) = match crate::host::users::Consumer::of(s) {
        crate::host::users::Consumer::Capture => (p.cost.capture_read, k.filter_queue_limit),
        _ => (p.cost.screend, k.screen_queue_limit),
    };
    let slo = c.slo();
    Some(slo.feedback_marks(&c.costs(), c.settings().quota, stage as f64, size))
}

/// What an objective's controller set, as it stood at the end of a run,
/// as a record's extras (`slo_quota`, `slo_cycle_limit`, `slo_changes`,
/// `slo_quota_changes`, `slo_last_change_ms`, `slo_router_share`).
pub fn slo_extras(
    c: &rxsched_core::SloController,
    extra: &mut std::collections::BTreeMap<String, f64>,
) {
    let s = c.settings();
    extra.insert("slo_quota".into(), f64::from(s.quota));
    extra.insert("slo_cycle_limit".into(), s.cycle_limit);
    extra.insert("slo_changes".into(), c.changes() as f64);
    extra.insert("slo_quota_changes".into(), c.quota_changes() as f64);
    if let Some(t) = c.last_change() {
        extra.insert("slo_last_change_ms".into(), t as f64 / 1e6);
    }
    extra.insert("slo_router_share".into(), c.share());
}

/// The kernel a scenario asks for, with `ports` interfaces.
fn build(s: &Scenario, p: &Profile, ports: usize) -> Box<dyn Kernel> {
    match s.kernel.kind {
        KernelKind::Bsd | KernelKind::Emulated => Box::new(kernel::bsd::Bsd::new(s, p, ports)),
        KernelKind::Polling => Box::new(kernel::polling::Polling::new(s, p, ports)),
        KernelKind::Linux => Box::new(kernel::linux::Linux::new(s, p, ports)),
        KernelKind::Srp | KernelKind::Lrp => Box::new(kernel::srp::Srp::new(s, p, ports)),
        KernelKind::Nt | KernelKind::Lab => {
            unreachable!("kernel.kind = \"nt\" and \"lab\" run on hosts of their own (crate::smp, crate::lab)")
        }
    }
}

/// One simulated host, built from a scenario and a profile.
#[derive(Debug)]
pub struct Host {
    m: Machine,
    k: Box<dyn Kernel>,
    w: Interval,
}

impl Host {
    /// Builds a host ready to run, from a scenario with its process
    /// counts spelled out ([`Scenario::expanded`]).
    pub fn new(s: &Scenario, p: Profile) -> Host {
        let (users, names) = Users::new(s);
        let ports = if matches!(users.consumer, Consumer::Reader | Consumer::Capture) {
            1
        } else {
            2
        };
        let k = build(s, &p, ports);
        let w = Interval::of(&s.run);
        let protect = &s.kernel.protect;
        let nics = (0..ports)
            .map(|_| {
                let nic = Nic::new(p.nic.rx_ring, s.kernel.output_queue_limit, p.nic.tx_ring);
                match protect.enabled {
                    true => nic.with_protected_ring(protect.ring),
                    false => nic,
                }
            })
            .collect();
        let m = Machine {
            now: 0,
            events: Events::default(),
            rng: ChaCha8Rng::seed_from_u64(s.run.seed),
            cpu: Cpu::new(k.kthread_bucket(), &names, w),
            nics,
            // The polling kernel's protected rings interrupt on lines of
            // their own, after the ports', and so do Linux's other
            // receive queues.
            intr: IntrController::new(
                ports * (s.kernel.rx_queues as usize).max(2),
                p.nic.one_interrupt,
            ),
            traffic: Traffic::new(&s.traffic),
            tcp: s.tcp.as_ref().map(|t| TcpFlow::new(t, &p.wire, w.w0)),
            echo: s.echo.as_ref().map(|e| EchoClient::new(e, &p.wire, w.w0)),
            users,
            meter: Meter::new(w.w0),
            p,
        };
        Host { m, k, w }
    }
}

impl Model for Host {
    fn run(mut self: Box<Self>) -> Result<(Metrics, Samples), SimError> {
        let m = &mut self.m;
        m.traffic.start(&m.p.wire, &mut m.rng, &mut m.events);
        if let Some(t) = &mut self.m.tcp {
            t.start(0, &mut self.m.events);
        }
        if let Some(e) = &mut self.m.echo {
            e.start(0, &mut self.m.events);
        }
        self.reschedule();
        let c = &self.m.p.cost;
        if c.clock_hz > 0 && c.clock_tick > 0 {
            let t = 1_000_000_000 / c.clock_hz;
            self.m.push(t, Ev::Tick);
        }
        while let Some((t, ev)) = self.m.events.pop() {
            if t > self.w.end {
                break;
            }
            self.m.now = t;
            self.m.meter.events += 1;
            match ev {
                Ev::Done(d) => {
                    let Some((c, step)) = self.m.cpu.complete(t, d) else {
                        continue;
                    };
                    self.complete(c, step);
                }
                Ev::Arrive(Arrival(s)) => self.arrive(s as usize),
                Ev::TxWireDone(n) => self.tx_wire_done(n as usize),
                Ev::Timer(timer) => self.k.timer(&mut self.m, timer),
                Ev::UserWake(u) => self.m.users.wake(u as usize),
                Ev::Echo(e) => {
                    let m = &mut self.m;
                    let c = m.echo.as_mut().expect("an echo event has a client");
                    if let Some(p) = c.handle(e, m.now, &mut m.events) {
                        self.enter(p);
                    }
                }
                Ev::Tcp(e) => {
                    let m = &mut self.m;
                    let t = m.tcp.as_mut().expect("a TCP event has a flow");
                    if let Some(p) = t.handle(e, m.now, &mut m.events) {
                        self.enter(p);
                    }
                }
                Ev::Tick => {
                    self.m.raise(IntrSrc::Clock);
                    let t = self.m.now + 1_000_000_000 / self.m.p.cost.clock_hz;
                    self.m.push(t, Ev::Tick);
                }
            }
            self.reschedule();
        }
        self.m.now = self.w.end;
        (*self).finish()
    }
}

impl Host {
    // ---------------------------------------------------------- scheduling

    /// Gives the CPU to the context that should hold it, preempting the
    /// running one if need be; runs the idle hook when nothing is runnable.
    fn reschedule(&mut self) {
        loop {
            let want = self.pick();
            if want.is_some() && want == self.m.cpu.running {
                return;
            }
            let now = self.m.now;
            if !self.m.cpu.preempt(now) && want.is_some() {
                self.m.cpu.account(now, None);
            }
            match want {
                Some(c) => {
                    // A kernel thread (the IP thread, the polling thread)
                    // takes the CPU from a process by a thread switch, and
                    // the process gets it back by another: it pays that
                    // one before its next step. An interrupt or a software
                    // interrupt returns to it without one.
                    if c == KTHREAD {
                        if let Some(u) = self.m.users.cur {
                            self.m.users.switched_out(u);
                        }
                    }
                    let (t, done) = self.m.cpu.start(now, c);
                    self.m.push(t, Ev::Done(done));
                    if c >= USER0 {
                        self.m.users.cur = Some(c - USER0);
                    }
                    return;
                }
                // The idle thread runs: M4 re-enables input.
                None if !self.k.idle(&mut self.m) => return,
                None => {}
            }
        }
    }

    /// The context that should hold the CPU now, with its next job ready.
    fn pick(&mut self) -> Option<CtxId> {
        for c in [CLOCK, INTR, SOFT, KTHREAD] {
            if self.ensure_job(c) {
                return Some(c);
            }
        }
        // A process the kernel drives may turn out to have nothing to do
        // (it goes back to sleep, and the kernel marks it so): pick again.
        for _ in 0..=self.m.users.len() {
            let u = self.m.users.pick(self.m.now, &self.m.cpu)?;
            if self.ensure_job(USER0 + u) {
                return Some(USER0 + u);
            }
        }
        None
    }

    fn ensure_job(&mut self, c: CtxId) -> bool {
        if self.m.cpu.ctx[c].job.is_some() {
            return true;
        }
        let Some(step) = self.next_step(c) else {
            return false;
        };
        let remaining = match step {
            Step::User(s) => s.cost(&self.m.p.cost),
            s => self.k.cost(&self.m, s),
        };
        self.trace(step.name(), step.packet(), false);
        self.m.cpu.ctx[c].job = Some(Job {
            work: step,
            remaining,
        });
        true
    }

    /// What context `c` does next; `None` if it has nothing to do.
    fn next_step(&mut self, c: CtxId) -> Option<Step> {
        // The driver loads what it was handed before the context's next
        // work (the output path's rest after the hand-off): the device has
        // the frame from the hand-off on.
        if self.m.cpu.ctx[c].loading.is_some() {
            if let Some(s) = self.k.driver_step(&mut self.m, c) {
                return Some(s);
            }
        }
        if let Some(s) = self.m.cpu.ctx[c].carry.take() {
            if let Step::Bsd(bsd::Step::IpInput(p)) = s {
                self.m.meter.ip_input_begins(p, self.m.now);
            }
            return Some(s);
        }
        match c {
            CLOCK => self
                .m
                .intr
                .take_tick()
                .then_some(Step::IntrEnter(IntrSrc::Clock)),
            INTR => self.next_intr(),
            SOFT | KTHREAD => self.k.next_step(&mut self.m, c),
            _ => {
                let u = c - USER0;
                let step = if self.k.owns_user(u) {
                    if self.m.users.take_switch(u) {
                        Some(Step::User(user::Step::CtxSwitch))
                    } else {
                        self.k.user_step(&mut self.m, u)
                    }
                } else {
                    let (step, popped) = self.m.users.next(u);
                    if popped {
                        self.k.queue_level(&mut self.m);
                    }
                    step.map(Step::User)
                };
                let switch = matches!(step, Some(Step::User(user::Step::CtxSwitch)));
                self.m.users.stepped(u, switch);
                step
            }
        }
    }

    /// The interrupt level: the handler in service, or the next one raised.
    fn next_intr(&mut self) -> Option<Step> {
        loop {
            match self.m.intr.cur {
                None => {
                    let src = self.m.intr.begin_next()?;
                    self.k.isr_enter(&mut self.m, src);
                    return Some(Step::IntrEnter(src));
                }
                Some(src) => {
                    if !self.m.intr.exiting {
                        if let Some(step) = self.k.isr_step(&mut self.m, src) {
                            return Some(step);
                        }
                        self.m.intr.exiting = true;
                        let exit = Step::IntrExit(src);
                        if self.k.cost(&self.m, exit) > 0 {
                            return Some(exit);
                        }
                    }
                    self.m.intr.end();
                    self.trace("isr_exit", None, false);
                    self.k.isr_exit(&mut self.m, src);
                }
            }
        }
    }

    /// Records a step's start or end (or a handler's exit) in the kernel
    /// trace, which keeps only the run's first events.
    fn trace(&mut self, step: &'static str, packet: Option<Packet>, end: bool) {
        self.m.meter.trace(TraceEvent {
            t: self.m.now,
            step,
            packet: packet.map(|p| p.id),
            end,
        });
    }

    /// Applies a completed step's effect.
    fn complete(&mut self, c: CtxId, step: Step) {
        self.trace(step.name(), step.packet(), true);
        match step {
            Step::User(user::Step::Screen(p)) => {
                if let Some(next) = self.k.screened(p) {
                    self.m.carry(c, next);
                }
            }
            Step::User(user::Step::AppRead(p)) => {
                self.m.deliver(p);
                let m = &mut self.m;
                if let (Some(_), Some(t)) = (p.tcp, m.tcp.as_mut()) {
                    t.host_consumed(m.now, &mut m.events);
                }
                if let (true, Some(e)) = (p.echo, m.echo.as_mut()) {
                    e.reply(p, m.now, &mut m.events);
                }
            }
            Step::User(user::Step::Capture(p, _)) => self.m.deliver(p),
            Step::User(user::Step::CtxSwitch) => self.m.meter.switch(self.m.now),
            Step::User(user::Step::Run(ns)) => {
                if let Some(t) = self.m.users.ran(c - USER0, ns, self.m.now) {
                    self.m.push(t, Ev::UserWake((c - USER0) as u8));
                }
            }
            Step::User(_) => {}
            s => self.k.complete(&mut self.m, c, s),
        }
    }

    // ------------------------------------------------------------- traffic

    fn schedule_source(&mut self, s: usize) {
        let m = &mut self.m;
        m.traffic.schedule(s, &m.p.wire, &mut m.rng, &mut m.events);
    }

    fn arrive(&mut self, s: usize) {
        let m = &mut self.m;
        if let Some(p) = m.traffic.due(s, m.now, &mut m.events) {
            self.enter(p);
            self.schedule_source(s);
        }
    }

    /// A frame's last bit reached its port: onto the receive ring, or
    /// dropped if the ring is full.
    fn enter(&mut self, p: Packet) {
        let now = self.m.now;
        self.m.meter.arrival(p, now);
        let protected_ring = p.protected && self.m.nics[p.port as usize].prot_cap > 0;
        if !protected_ring && self.k.take_arrival(&mut self.m, p) {
            return;
        }
        let nic = &mut self.m.nics[p.port as usize];
        match nic.ring_for(&p) {
            None => self.m.meter.ring_drop(p, now),
            Some(ring) => {
                ring.push_back(p);
                if protected_ring {
                    self.k.rx_arrived_protected(&mut self.m, p.port);
                } else {
                    self.k.rx_arrived(&mut self.m, p.port);
                }
            }
        }
    }

    fn tx_wire_done(&mut self, n: usize) {
        let nic = &mut self.m.nics[n];
        let p = nic.wire.take().expect("a frame was on the wire");
        nic.done_q.push_back(p);
        self.m.deliver(p);
        if let Some(t) = &mut self.m.tcp {
            t.from_host(n as u8, p, self.m.now, &mut self.m.events);
        }
        self.m.kick(n);
        self.k.tx_done(&mut self.m, n as u8);
    }

    // ------------------------------------------------------------- results

    fn finish(mut self) -> Result<(Metrics, Samples), SimError> {
        let in_flight = self.m.packets_held() + self.k.in_flight();
        let cpu = self.m.cpu.shares().map_err(SimError::Invariant)?;
        let secs = self.w.secs();
        let mut kr = self.k.report();
        let compute: f64 = cpu
            .iter()
            .filter(|(k, _)| self.m.users.is_compute_bucket(k))
            .map(|(_, v)| v)
            .sum();
        if compute > 0.0 {
            // What a background process's progress says the rest used
            // (Brustoloni et al. 2000's table 1 measures utilisation so).
            kr.extra.insert("utilization".into(), 1.0 - compute);
        }
        if self.m.users.consumer == Consumer::Reader {
            let meter = &self.m.meter;
            kr.extra.insert(
                "misaccounted_share".into(),
                meter.misaccounted_ns as f64 / 1e9 / secs,
            );
            kr.extra.insert(
                "context_switches_per_packet".into(),
                meter.switches_w as f64 / meter.delivered_w.max(1) as f64,
            );
        }
        let record = Record {
            in_flight,
            cpu,
            mode_switches: kr.mode_switches,
            inhibits: kr.inhibits,
            extra: kr.extra,
        };
        let outside = Outside {
            echo: self.m.echo.as_ref(),
            tcp: self.m.tcp.as_ref(),
        };
        record.close(self.m.meter, self.w, outside)
    }
}
