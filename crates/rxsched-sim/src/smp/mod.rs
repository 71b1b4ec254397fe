//! A multiprocessor host after Windows NT 4.0, for Hansen & Jul 1997
//! (`kernel.kind = "nt"`): any number of CPUs, each with its own interrupt
//! levels (an ISR above the DPC above threads); one network adapter whose
//! interrupt goes to one configured CPU (or, with several receive queues,
//! one queue's to each CPU, each with its own polling thread pinned there:
//! a Linux-style host of one NAPI thread per queue); threads scheduled across the CPUs
//! by [`sched`]; a lock the consumer's threads may share ([`lock`]); and
//! three ways of servicing the adapter: interrupts (ISR and DPC),
//! interrupt-initiated polling (the DPC only wakes a polling thread), and
//! the two-level switch between them (`rxsched_core::TwoLevel`, M11).
//!
//! The host is cut by concern: `cpu` (a CPU's interrupt levels and the
//! DPC), `dispatch` (giving each CPU its level, the ledger, waking and
//! placing threads), `thread` and `jobs` (the threads and what they
//! do), `adapter` and `service` (the adapter, its interrupt, the
//! polling thread and the switch), `consumer` (the socket and the
//! lock), `work` (the jobs CPUs run), `event` and `record`. This
//! module builds the host and runs its event loop.
//!
//! The uniprocessor kernels of the other papers keep their own host
//! (`crate::host`): their published systems had one CPU, and their results
//! do not change. Both run on the engine (`crate::engine`): its traffic,
//! echo client, meter, record, socket buffer, jobs with their completion
//! events and preemption, and the ledger that accounts every nanosecond of
//! every CPU to one bucket and demands that each CPU's buckets cover the
//! measured interval. A job that an interrupt preempts resumes later, on
//! the same CPU (interrupt levels) or on whichever CPU the thread is next
//! placed on (threads), with exactly its remaining time.

mod adapter;
mod consumer;
mod cpu;
mod dispatch;
mod event;
mod jobs;
pub mod lock;
mod record;
pub mod sched;
mod service;
mod thread;
mod work;

use crate::engine::echo::EchoClient;
use crate::engine::events::Events;
use crate::engine::interval::Interval;
use crate::engine::ledger::Ledger;
use crate::engine::meter::Meter;
use crate::engine::traffic::{Arrival, Traffic};
use crate::engine::Model;
use crate::error::SimError;
use crate::metrics::{Metrics, Samples};
use crate::profile::{NtCosts, Profile, Wire};
use crate::scenario::{ProcessKind, Scenario, SmpCfg, SmpService};
use adapter::Adapter;
use consumer::Consumer;
use cpu::Cpu;
use event::Ev;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rxsched_core::Nanos;
use sched::Sched;
use thread::{Role, Roster, Thread};

/// The host.
#[derive(Debug)]
pub struct Smp {
    now: Nanos,
    w: Interval,
    events: Events<Ev>,
    rng: ChaCha8Rng,
    c: NtCosts,
    wire: Wire,
    cfg: SmpCfg,
    cpus: Vec<Cpu>,
    ledger: Ledger,
    sched: Sched,
    threads: Vec<Thread>,
    quantum: Nanos,
    /// The adapter's receive queues.
    adapters: Vec<Adapter>,
    consumer: Consumer,
    traffic: Traffic,
    echo: Option<EchoClient>,
    meter: Meter,
    /// How many times the CPUs' dispatching has settled.
    settles: u64,
    /// The switch's settings came from an objective (`kernel.slo`).
    slo_switch: bool,
}

impl Model for Smp {
    fn run(mut self: Box<Self>) -> Result<(Metrics, Samples), SimError> {
        self.run_events()?;
        (*self).finish()
    }
}

impl Smp {
    /// Builds the host of a scenario of `kernel.kind = "nt"`, with its
    /// process counts spelled out ([`Scenario::expanded`]).
    pub fn new(s: &Scenario, p: Profile) -> Smp {
        let mut cfg = s.smp.clone().unwrap_or_default();
        let marks = switch_of_slo(s, &p).and_then(Result::ok);
        if let Some(m) = &marks {
            cfg.apply(m);
        }
        let n = cfg.cpus as usize;
        let w = Interval::of(&s.run);
        let mut rng = ChaCha8Rng::seed_from_u64(s.run.seed);
        let mut roster = Roster::new(n);
        roster.add_processes(&s.process, &mut rng);
        let reader = s.process.iter().rfind(|q| q.kind == ProcessKind::Reader);
        let queues = cfg.queue_count();
        let adapters = (0..queues)
            .map(|q| {
                let cpu = cfg.queue_cpu(q);
                let poll = (cfg.service != SmpService::Interrupt).then(|| {
                    let reader_rt = reader.is_some_and(|r| r.realtime.unwrap_or(false));
                    let rt = cfg.poll_realtime.unwrap_or(reader_rt);
                    let pinned = (queues > 1).then_some(cpu);
                    roster.add_poll(q as u32, pinned, rt, &mut rng)
                });
                Adapter::new(&cfg, p.nic.rx_ring, cpu, poll)
            })
            .collect();
        Smp {
            now: 0,
            w,
            events: Events::default(),
            rng,
            c: p.nt.clone().unwrap_or_default(),
            wire: p.wire.clone(),
            cpus: (0..n).map(|_| Cpu::new()).collect(),
            ledger: Ledger::new(roster.buckets, n, w),
            sched: roster.sched,
            threads: roster.threads,
            quantum: ((s.run.quantum_ms * 1e6) as Nanos).max(1),
            adapters,
            consumer: Consumer::new(&s.kernel, reader),
            traffic: Traffic::new(&s.traffic),
            echo: s.echo.as_ref().map(|e| EchoClient::new(e, &p.wire, w.w0)),
            meter: Meter::new(w.w0),
            settles: 0,
            slo_switch: marks.is_some(),
            cfg,
        }
    }

    /// Runs the event loop to the end of the run.
    fn run_events(&mut self) -> Result<(), SimError> {
        self.traffic
            .start(&self.wire, &mut self.rng, &mut self.events);
        if let Some(e) = &mut self.echo {
            e.start(0, &mut self.events);
        }
        for (q, a) in self.adapters.iter().enumerate() {
            if a.two.is_some() {
                self.events.push(a.window, Ev::Window(q as u32));
            }
        }
        // Compute threads are ready from the start; readers wait for data.
        for t in 0..self.threads.len() {
            match self.threads[t].role {
                Role::Compute | Role::Onoff { .. } => self.wake(t),
                Role::Reader => self.consumer.waiting.push_back(t),
                Role::Poll(_) => {}
            }
        }
        self.reschedule_all()?;
        while let Some((t, ev)) = self.events.pop() {
            if t > self.w.end {
                break;
            }
            self.now = t;
            self.meter.events += 1;
            match ev {
                Ev::Arrive(Arrival(s)) => {
                    let s = s as usize;
                    if let Some(p) = self.traffic.due(s, t, &mut self.events) {
                        self.enter(p);
                        self.traffic
                            .schedule(s, &self.wire, &mut self.rng, &mut self.events);
                    }
                }
                Ev::Echo(e) => {
                    let c = self.echo.as_mut().expect("an echo event has a client");
                    if let Some(p) = c.handle(e, t, &mut self.events) {
                        self.enter(p);
                    }
                }
                Ev::Done(d) => self.done(d),
                Ev::Window(q) => self.window(q as usize),
                Ev::Wake(t) => {
                    let t = t as usize;
                    if self.sched.threads[t].state == sched::State::Blocked {
                        self.wake(t);
                    }
                }
                Ev::PollAgain(q) => self.poll_again(q as usize),
            }
            self.reschedule_all()?;
        }
        self.now = self.w.end;
        Ok(())
    }
}

/// The two-level switch's settings an objective sets (`kernel.slo` on an
/// `nt` host with `smp.service = "two-level"`), from the profile's costs
/// for the largest datagram the scenario sends; `None` where the scenario
/// asks for none.
pub fn switch_of_slo(
    s: &Scenario,
    p: &Profile,
) -> Option<Result<rxsched_core::SwitchMarks, rxsched_core::SloError>> {
    let spec = s.kernel.slo.as_deref()?;
    if s.smp.as_ref().map(|c| c.service) != Some(SmpService::TwoLevel) {
        return None;
    }
    let slo = match rxsched_core::Slo::parse(spec) {
        Ok(slo) => slo,
        Err(e) => return Some(Err(e)),
    };
    let c = p.nt.clone().unwrap_or_default();
    let bytes = s.traffic.iter().map(|t| t.frame_bytes).max().unwrap_or(64);
    let frame = (c.dpc_packet + crate::engine::job::per_byte(bytes, c.dpc_per_byte)) as f64;
    // Alone, a datagram brings its interrupt, a DPC's entry (with the
    // switch's monitoring) and its own work.
    let interrupt = (c.isr + c.dpc_entry + c.monitor) as f64 + frame;
    Some(slo.switch_marks(interrupt, frame))
}
