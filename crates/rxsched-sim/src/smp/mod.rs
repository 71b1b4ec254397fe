//! A multiprocessor host after Windows NT 4.0, for Hansen & Jul 1997
//! (`kernel.kind = "nt"`): any number of CPUs, each with its own interrupt
//! levels (an ISR above the DPC above threads); one network adapter whose
//! interrupt goes to one configured CPU; threads scheduled across the CPUs
//! by [`sched`]; a lock the consumer's threads may share ([`lock`]); and
//! three ways of servicing the adapter: interrupts (ISR and DPC),
//! interrupt-initiated polling (the DPC only wakes a polling thread), and
//! the two-level switch between them (`rxsched_core::TwoLevel`, M11).
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

pub mod lock;
pub mod sched;

use crate::engine::echo::{EchoClient, EchoEv};
use crate::engine::events::Events;
use crate::engine::interval::Interval;
use crate::engine::job::{per_byte, Done, Job as EngineJob, Runner, COMPUTE_SLICE};
use crate::engine::ledger::Ledger;
use crate::engine::meter::Meter;
use crate::engine::packet::Packet;
use crate::engine::record::{Outside, Record};
use crate::engine::socket::Socket;
use crate::engine::traffic::{Arrival, Traffic};
use crate::engine::Model;
use crate::error::SimError;
use crate::metrics::{Metrics, Samples};
use crate::profile::{NtCosts, Profile};
use crate::scenario::{ProcessKind, Scenario, SmpCfg, SmpDetector, SmpService};
use lock::Lock;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rxsched_core::{Detector, DropPoint, Nanos, Service, TwoLevel, US};
use sched::{Sched, Tid, NORMAL, REALTIME};
use std::collections::{BTreeMap, VecDeque};

/// An on-off thread's CPU time per wake-up and its sleep, by default (ms).
const ONOFF_ON_MS: f64 = 11.0;
const ONOFF_OFF_MS: f64 = 5.0;
/// A polling thread that finds nothing while the switch keeps it polling
/// (an idle grace) looks again after this long.
const POLL_IDLE: Nanos = 100 * US;

/// Events of the multiprocessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// Traffic source `s` delivers a frame's last bit.
    Arrive(u8),
    /// An event of the ping-pong client.
    Echo(EchoEv),
    /// A CPU's job ends (stale if the CPU switched since).
    Done(Done),
    /// The two-level detector's window closes.
    Window,
    /// The polling thread, idle in its grace period, looks again.
    PollAgain,
    /// An on-off thread's sleep ends.
    Wake(u32),
}

/// What a CPU is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Isr,
    Dpc,
    Thread(Tid),
    Idle,
}

/// A piece of work.
#[derive(Debug, Clone, Copy)]
enum JobKind {
    Isr,
    /// Entering a DPC (or a polling pass), with the monitoring if any.
    Entry,
    /// The receive work for one datagram, in the DPC or the polling thread.
    Receive(Packet),
    /// Readying a thread the receive work woke.
    Wake,
    /// A CPU switches to this thread.
    Switch,
    /// The consumer's receive call.
    Recv(Packet),
    /// The consumer's work inside its lock.
    Critical,
    /// The consumer's work outside its lock.
    Work,
    /// A slice of a compute thread.
    Compute,
}

type Job = EngineJob<JobKind>;

impl JobKind {
    fn packet(&self) -> Option<Packet> {
        match *self {
            JobKind::Receive(p) | JobKind::Recv(p) => Some(p),
            _ => None,
        }
    }
}

impl From<Arrival> for Ev {
    fn from(a: Arrival) -> Ev {
        Ev::Arrive(a.0)
    }
}

impl From<Done> for Ev {
    fn from(d: Done) -> Ev {
        Ev::Done(d)
    }
}

impl From<EchoEv> for Ev {
    fn from(e: EchoEv) -> Ev {
        Ev::Echo(e)
    }
}

/// A DPC's state on its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dpc {
    None,
    Queued,
    Running,
}

#[derive(Debug)]
struct Cpu {
    isr: Option<Job>,
    dpc: Dpc,
    dpc_job: Option<Job>,
    /// When the running DPC started, and up to when the detector has been told of it.
    dpc_start: Nanos,
    dpc_told: Nanos,
    running: Level,
    runner: Runner,
    last_thread: Option<Tid>,
    /// Threads made ready that preempt this CPU's thread, waiting for it to
    /// drop below DPC level: NT's dispatcher runs only there.
    deferred: Vec<Tid>,
}

/// What a thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Reader,
    Compute,
    /// Runs `on` of CPU, sleeps `off`, and again.
    Onoff {
        on: Nanos,
        off: Nanos,
    },
    Poll,
}

/// Where a reader thread is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Next: a receive call.
    Recv,
    /// Next: take the lock.
    Lock,
    /// Waiting for the lock (it is handed over on release).
    LockWait,
    /// Holding the lock: next the critical section.
    Critical,
    /// Next: the work outside the lock.
    Work,
}

#[derive(Debug)]
struct Thread {
    role: Role,
    bucket: usize,
    job: Option<Job>,
    phase: Phase,
    switch: bool,
    quantum_from: Nanos,
    /// When it blocked on the lock, if it waits for it.
    lock_since: Option<Nanos>,
    /// A job it was preempted in, to resume after the switch back to it.
    resume: Option<Job>,
    /// An on-off thread's CPU time left before it sleeps.
    left: Nanos,
    /// Its wake-up waits on a CPU's dispatcher.
    deferred: bool,
}

impl Thread {
    fn new(role: Role, bucket: usize) -> Thread {
        Thread {
            role,
            bucket,
            job: None,
            phase: Phase::Recv,
            switch: false,
            quantum_from: 0,
            lock_since: None,
            resume: None,
            left: 0,
            deferred: false,
        }
    }
}

/// Bucket numbers.
const IDLE: usize = 0;
const ISR: usize = 1;
const DPC: usize = 2;
const LOCKING: usize = 3;

/// The host.
#[derive(Debug)]
pub struct Smp {
    now: Nanos,
    w: Interval,
    events: Events<Ev>,
    rng: ChaCha8Rng,
    c: NtCosts,
    wire: crate::profile::Wire,
    cfg: SmpCfg,
    cpus: Vec<Cpu>,
    ledger: Ledger,
    sched: Sched,
    threads: Vec<Thread>,
    quantum: Nanos,
    // The adapter.
    ring: VecDeque<Packet>,
    ring_cap: usize,
    intr_enabled: bool,
    // The consumer's socket.
    sock: Socket,
    waiting: VecDeque<Tid>,
    lock: Lock,
    lock_us: Nanos,
    work_us: Nanos,
    lock_blocked_ns: Nanos,
    // Servicing.
    poll: Option<Tid>,
    /// The polling thread is active (interrupts are off meanwhile).
    polling: bool,
    polling_since: Nanos,
    polling_w: Nanos,
    two: Option<TwoLevel>,
    /// The detector asked for polling while a DPC ran: it stops at the next datagram.
    to_polling: bool,
    /// The datagrams the polling thread took in its current pass.
    pass: u32,
    traffic: Traffic,
    echo: Option<EchoClient>,
    meter: Meter,
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
        let cfg = s.smp.clone().unwrap_or_default();
        let n = cfg.cpus as usize;
        let w = Interval::of(&s.run);
        let mut rng = ChaCha8Rng::seed_from_u64(s.run.seed);
        let mut sched = Sched::new(n);
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut buckets: Vec<String> = ["idle", "isr", "dpc", "locking"]
            .iter()
            .map(|b| b.to_string())
            .collect();
        let mut threads = Vec::new();
        let mut reader_rt = false;
        let (mut lock_us, mut work_us) = (0, 0);
        for q in &s.process {
            let name = q.name.clone().unwrap_or_else(|| q.kind.name().to_string());
            let rt = q.realtime.unwrap_or(false);
            let prio = match q.nt_priority {
                Some(p) => p as u8,
                None if rt => REALTIME,
                None => NORMAL,
            };
            let mask = match &q.affinity {
                Some(cpus) => cpus.iter().fold(0u64, |m, &c| m | 1u64 << c),
                None => all,
            };
            let ideal = match (q.cpu, &q.affinity) {
                (Some(c), _) => c as usize,
                (None, Some(cpus)) => cpus[0] as usize,
                (None, None) => rng.gen_range(0..n),
            };
            let (role, count) = match q.kind {
                ProcessKind::Reader => {
                    reader_rt = rt;
                    lock_us = (q.lock_us.unwrap_or(0.0) * 1e3) as Nanos;
                    work_us = (q.work_us.unwrap_or(0.0) * 1e3) as Nanos;
                    (Role::Reader, q.threads.unwrap_or(1))
                }
                ProcessKind::Onoff => {
                    let on = (q.on_ms.unwrap_or(ONOFF_ON_MS) * 1e6) as Nanos;
                    let off = (q.off_ms.unwrap_or(ONOFF_OFF_MS) * 1e6) as Nanos;
                    (Role::Onoff { on, off }, 1)
                }
                _ => (Role::Compute, 1),
            };
            for i in 0..count {
                let mut cpu = (ideal + i as usize) % n;
                if mask & (1 << cpu) == 0 {
                    cpu = ideal;
                }
                sched.add(prio, mask, cpu);
                buckets.push(if count > 1 {
                    format!("user:{name}#{i}")
                } else {
                    format!("user:{name}")
                });
                threads.push(Thread::new(role, buckets.len() - 1));
            }
        }
        let poll = (cfg.service != SmpService::Interrupt).then(|| {
            let rt = cfg.poll_realtime.unwrap_or(reader_rt);
            let ideal = rng.gen_range(0..n);
            let t = sched.add(if rt { REALTIME } else { NORMAL }, all, ideal);
            buckets.push("poll".into());
            threads.push(Thread::new(Role::Poll, buckets.len() - 1));
            t
        });
        let two = (cfg.service == SmpService::TwoLevel).then(|| {
            let d = match cfg.detector {
                SmpDetector::Cpu => Detector::CpuFraction(cfg.threshold),
                SmpDetector::Queue => Detector::QueueLength(cfg.threshold),
                SmpDetector::Rate => Detector::InterruptRate(cfg.threshold),
            };
            let t = TwoLevel::new(
                d,
                (cfg.hold_ms * 1e6) as Nanos,
                ((cfg.window_ms * 1e6) as Nanos).max(1),
            )
            .with_idle_grace((cfg.idle_grace_ms * 1e6) as Nanos);
            match cfg.return_below {
                Some(f) => t.with_return_below(f),
                None => t,
            }
        });
        let cpus = (0..n)
            .map(|_| Cpu {
                isr: None,
                dpc: Dpc::None,
                dpc_job: None,
                dpc_start: 0,
                dpc_told: 0,
                running: Level::Idle,
                runner: Runner::default(),
                last_thread: None,
                deferred: Vec::new(),
            })
            .collect();
        let c = p.nt.clone().unwrap_or_default();
        Smp {
            now: 0,
            w,
            events: Events::default(),
            rng,
            c,
            wire: p.wire.clone(),
            cpus,
            ledger: Ledger::new(buckets, n, w),
            sched,
            threads,
            quantum: ((s.run.quantum_ms * 1e6) as Nanos).max(1),
            ring: VecDeque::new(),
            ring_cap: p.nic.rx_ring as usize,
            intr_enabled: true,
            sock: Socket::new(s.kernel.socket_packets, s.kernel.socket_bytes),
            waiting: VecDeque::new(),
            lock: Lock::default(),
            lock_us,
            work_us,
            lock_blocked_ns: 0,
            poll,
            polling: false,
            polling_since: 0,
            polling_w: 0,
            two,
            to_polling: false,
            pass: 0,
            traffic: Traffic::new(&s.traffic),
            echo: s.echo.as_ref().map(|e| EchoClient::new(e, &p.wire, w.w0)),
            meter: Meter::new(w.w0),
            cfg,
        }
    }

    // ------------------------------------------------------------ the loop

    fn run_events(&mut self) -> Result<(), SimError> {
        for s in 0..self.traffic.len() {
            self.traffic
                .schedule(s, &self.wire, &mut self.rng, &mut self.events);
        }
        if let Some(e) = &mut self.echo {
            e.start(0, &mut self.events);
        }
        if self.two.is_some() {
            let w = ((self.cfg.window_ms * 1e6) as Nanos).max(1);
            self.events.push(w, Ev::Window);
        }
        // Compute threads are ready from the start; readers wait for data.
        for t in 0..self.threads.len() {
            match self.threads[t].role {
                Role::Compute | Role::Onoff { .. } => self.wake(t),
                Role::Reader => self.waiting.push_back(t),
                Role::Poll => {}
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
                Ev::Arrive(s) => {
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
                Ev::Window => {
                    self.tell_dpc_time();
                    let svc = self.two.as_mut().map(|tl| tl.tick(t));
                    self.follow(svc);
                    let w = ((self.cfg.window_ms * 1e6) as Nanos).max(1);
                    self.events.push(t + w, Ev::Window);
                }
                Ev::Wake(t) => {
                    let t = t as usize;
                    if self.sched.threads[t].state == sched::State::Blocked {
                        self.wake(t);
                    }
                }
                Ev::PollAgain => {
                    if let Some(pt) = self.poll {
                        if self.polling && self.sched.threads[pt].state == sched::State::Blocked {
                            self.wake(pt);
                        }
                    }
                }
            }
            self.reschedule_all()?;
        }
        self.now = self.w.end;
        Ok(())
    }

    /// A datagram's last cell arrived: onto the adapter's ring, and an
    /// interrupt if they are enabled.
    fn enter(&mut self, p: Packet) {
        self.meter.arrival(self.now);
        if self.ring.len() >= self.ring_cap {
            self.meter.ring_drop(self.now);
            return;
        }
        self.ring.push_back(p);
        if let Some(tl) = &mut self.two {
            if self.cfg.detector == SmpDetector::Queue {
                let svc = tl.queue_length(self.now, self.ring.len() as u32);
                let svc = Some(svc);
                self.follow(svc);
            }
        }
        if self.intr_enabled {
            self.interrupt();
            if let Some(tl) = &mut self.two {
                if self.cfg.detector == SmpDetector::Rate {
                    let svc = tl.interrupt(self.now);
                    self.follow(Some(svc));
                }
            }
        }
    }

    // ------------------------------------------------------ the two levels

    /// Tells the detector how long the DPC has run since it was last told.
    fn tell_dpc_time(&mut self) {
        let k = self.cfg.interrupt_cpu as usize;
        if self.cpus[k].dpc != Dpc::Running || self.cfg.detector != SmpDetector::Cpu {
            return;
        }
        let from = self.cpus[k].dpc_start.max(self.cpus[k].dpc_told);
        self.cpus[k].dpc_told = self.now;
        if let Some(tl) = &mut self.two {
            let svc = tl.dpc_ran(self.now, self.now - from);
            self.follow(Some(svc));
        }
    }

    /// Acts on the switch's answer: polling takes over (at the DPC's next
    /// datagram if one runs).
    fn follow(&mut self, svc: Option<Service>) {
        if svc == Some(Service::Polling) && !self.polling {
            let k = self.cfg.interrupt_cpu as usize;
            if self.cpus[k].dpc == Dpc::Running {
                self.to_polling = true;
            } else {
                self.start_polling();
            }
        }
    }

    fn start_polling(&mut self) {
        self.to_polling = false;
        self.intr_enabled = false;
        self.polling = true;
        self.polling_since = self.now;
        self.pass = 0;
        if let Some(pt) = self.poll {
            if self.sched.threads[pt].state == sched::State::Blocked {
                self.wake(pt);
            }
        }
    }

    fn stop_polling(&mut self) {
        self.polling = false;
        self.polling_w += self.w.clip(self.polling_since, self.now);
        self.enable_interrupts();
    }

    fn enable_interrupts(&mut self) {
        self.intr_enabled = true;
        if !self.ring.is_empty() {
            // The adapter interrupts at once for what waits.
            self.interrupt();
        }
    }

    /// The adapter interrupts its CPU and masks its interrupts until the
    /// receive work re-enables them.
    fn interrupt(&mut self) {
        self.intr_enabled = false;
        let k = self.cfg.interrupt_cpu as usize;
        self.cpus[k].isr = Some(job(JobKind::Isr, self.c.isr));
        self.meter.interrupts.rx += 1;
    }

    // ------------------------------------------------------------- threads

    /// Thread `t` becomes ready. If it would preempt the thread of a CPU
    /// that is busy at interrupt level, it waits for that CPU's dispatcher,
    /// which runs when the CPU drops below DPC level.
    fn wake(&mut self, t: Tid) {
        if self.threads[t].deferred {
            return;
        }
        if let Some(k) = self.sched.would_preempt(t) {
            if self.cpus[k].isr.is_some() || self.cpus[k].dpc != Dpc::None {
                self.threads[t].deferred = true;
                self.cpus[k].deferred.push(t);
                return;
            }
        }
        if let Some(pl) = self.sched.wake(t) {
            self.placed(t, pl.cpu);
            if let Some(v) = pl.preempted {
                self.threads[v].switch = true;
                if let Some(c) = pl.moved_to {
                    self.placed(v, c);
                }
            }
        }
    }

    /// Thread `t` was put on `cpu`.
    fn placed(&mut self, t: Tid, cpu: usize) {
        self.threads[t].quantum_from = self.now;
        if self.cpus[cpu].last_thread != Some(t) {
            self.threads[t].switch = true;
        }
    }

    /// The thread on `cpu` blocks; whoever the CPU takes next is placed.
    fn block(&mut self, cpu: usize) {
        if let Some(next) = self.sched.block(cpu) {
            self.placed(next, cpu);
        }
    }

    /// A datagram for the consumer: into its socket (or dropped there), and
    /// a waiting reader thread woken. Returns whether one was woken.
    fn socket_in(&mut self, p: Packet) -> bool {
        if !self.sock.offer(p) {
            self.meter.drop(DropPoint::SocketBuffer);
            return false;
        }
        match self.waiting.pop_front() {
            Some(t) => {
                self.wake(t);
                true
            }
            None => false,
        }
    }

    /// The next job of thread `t` (on `cpu`), or `None` if it blocks.
    fn next_job(&mut self, t: Tid) -> Option<Job> {
        let c = &self.c;
        if std::mem::take(&mut self.threads[t].switch) {
            return Some(job(JobKind::Switch, c.context_switch));
        }
        match self.threads[t].role {
            Role::Compute => Some(job(JobKind::Compute, COMPUTE_SLICE)),
            Role::Onoff { on, off } => {
                if self.threads[t].left == 0 {
                    // Its time is used: it sleeps, then wants `on` again.
                    self.threads[t].left = on;
                    self.events.push(self.now + off, Ev::Wake(t as u32));
                    return None;
                }
                let slice = self.threads[t].left.min(COMPUTE_SLICE);
                self.threads[t].left -= slice;
                Some(job(JobKind::Compute, slice))
            }
            Role::Reader => match self.threads[t].phase {
                Phase::Recv => {
                    let Some(p) = self.sock.pop() else {
                        self.waiting.push_back(t);
                        return None;
                    };
                    let mut cost = c.recv + per_byte(p.bytes, c.recv_per_byte);
                    if p.echo {
                        cost += c.send + per_byte(p.bytes, c.send_per_byte);
                    }
                    Some(job(JobKind::Recv(p), cost))
                }
                Phase::Lock => {
                    // Idle time is `locking` while a thread waits: close
                    // every CPU's account before that can change.
                    self.account_all();
                    if self.lock.acquire(t, self.now) {
                        self.threads[t].phase = Phase::Critical;
                        Some(job(JobKind::Critical, self.c.lock + self.lock_us))
                    } else {
                        self.threads[t].phase = Phase::LockWait;
                        self.threads[t].lock_since = Some(self.now);
                        None
                    }
                }
                Phase::Critical => Some(job(JobKind::Critical, self.c.lock + self.lock_us)),
                Phase::LockWait => None,
                Phase::Work => Some(job(JobKind::Work, self.work_us)),
            },
            Role::Poll => {
                if !self.polling {
                    return None;
                }
                if self.pass == 0 || self.pass > self.cfg.poll_quota {
                    // A new pass over the adapter, with its entry cost.
                    self.pass = 1;
                    let entry = c.dpc_entry;
                    if let Some(tl) = &mut self.two {
                        tl.poll_ran(self.now, entry);
                    }
                    return Some(job(JobKind::Entry, entry));
                }
                if let Some(p) = self.ring.pop_front() {
                    self.pass += 1;
                    if let Some(tl) = &mut self.two {
                        tl.polled(self.now, true);
                    }
                    let cost = c.dpc_packet + per_byte(p.bytes, c.dpc_per_byte);
                    if let Some(tl) = &mut self.two {
                        tl.poll_ran(self.now, cost);
                    }
                    return Some(job(JobKind::Receive(p), cost));
                }
                // Out of work.
                let svc = self.two.as_mut().map(|tl| tl.polled(self.now, false));
                match svc {
                    Some(Service::Polling) => {
                        // Still polling (a grace period): look again shortly.
                        self.events.push(self.now + POLL_IDLE, Ev::PollAgain);
                    }
                    _ => self.stop_polling(),
                }
                self.pass = 0;
                None
            }
        }
    }

    /// Thread `t`'s job ended on `cpu`.
    fn thread_done(&mut self, t: Tid, cpu: usize, j: Job) {
        match j.work {
            JobKind::Recv(p) => {
                self.meter.deliver(p, self.now);
                if p.echo {
                    if let Some(e) = &mut self.echo {
                        e.reply(p, self.now, &mut self.events);
                    }
                }
                self.threads[t].phase = if self.lock_us > 0 {
                    Phase::Lock
                } else if self.work_us > 0 {
                    Phase::Work
                } else {
                    Phase::Recv
                };
            }
            JobKind::Critical => {
                self.account_all();
                if let Some(w) = self.lock.release(self.now) {
                    let since = self.threads[w].lock_since.take().unwrap_or(self.now);
                    self.lock_blocked_ns += self.now - since;
                    self.threads[w].phase = Phase::Critical;
                    self.wake(w);
                }
                self.threads[t].phase = if self.work_us > 0 {
                    Phase::Work
                } else {
                    Phase::Recv
                };
            }
            JobKind::Work => self.threads[t].phase = Phase::Recv,
            JobKind::Receive(p) if self.socket_in(p) => {
                self.threads[t].job = Some(job(JobKind::Wake, self.c.wake));
            }
            _ => {}
        }
        // The polling thread has taken its quota: it yields its CPU to a
        // ready thread of its priority (NT's SwitchToThread), if one waits.
        if self.threads[t].role == Role::Poll
            && self.pass > self.cfg.poll_quota
            && self.threads[t].job.is_none()
        {
            self.pass = 0;
            if self.rotate(t, cpu) {
                return;
            }
        }
        // A scheduling point: the quantum.
        if self.now - self.threads[t].quantum_from >= self.quantum
            && self.threads[t].job.is_none()
            && !self.rotate(t, cpu)
        {
            self.threads[t].quantum_from = self.now;
        }
    }

    /// Thread `t` on `cpu` lets a ready thread of its priority have the
    /// CPU, if one may; it is then made ready itself (and may take an idle
    /// CPU at once). Returns whether `cpu` now holds another thread.
    fn rotate(&mut self, t: Tid, cpu: usize) -> bool {
        let next = self.sched.quantum_end(cpu);
        for (m, c) in self.sched.take_moved() {
            self.threads[m].switch = true;
            self.placed(m, c);
        }
        match next {
            Some(n) if n != t => {
                self.placed(n, cpu);
                true
            }
            _ => false,
        }
    }

    // --------------------------------------------------------- interrupts

    /// The DPC's next job on `cpu`, or `None` when it is done.
    fn dpc_next(&mut self, cpu: usize) -> Option<Job> {
        let c = &self.c;
        if self.cpus[cpu].dpc == Dpc::Queued {
            self.cpus[cpu].dpc = Dpc::Running;
            self.cpus[cpu].dpc_start = self.now;
            self.cpus[cpu].dpc_told = self.now;
            let monitor = if self.two.is_some() { c.monitor } else { 0 };
            // Interrupt-initiated polling: the DPC only wakes the thread.
            let signal = if self.cfg.service == SmpService::Polling {
                c.wake
            } else {
                0
            };
            return Some(job(JobKind::Entry, c.dpc_entry + monitor + signal));
        }
        // What waits is the polling thread's once it has taken over.
        if self.cfg.service == SmpService::Polling || self.to_polling || self.polling {
            return None;
        }
        let p = self.ring.pop_front()?;
        Some(job(
            JobKind::Receive(p),
            c.dpc_packet + per_byte(p.bytes, c.dpc_per_byte),
        ))
    }

    /// The DPC on `cpu` has finished its work.
    fn dpc_end(&mut self, cpu: usize) {
        self.tell_dpc_time();
        self.cpus[cpu].dpc = Dpc::None;
        if self.cfg.service == SmpService::Polling {
            // Interrupt-initiated polling: the DPC has woken the thread; the
            // adapter's interrupts stay off until it runs dry.
            self.start_polling();
            return;
        }
        if self.to_polling {
            self.start_polling();
            return;
        }
        if !self.polling {
            self.enable_interrupts();
        }
    }

    /// The job `cpu` was running ended.
    fn done(&mut self, d: Done) {
        let cpu = d.cpu as usize;
        if !self.cpus[cpu].runner.current(d) {
            return;
        }
        let level = self.cpus[cpu].running;
        self.account(cpu);
        self.cpus[cpu].running = Level::Idle;
        match level {
            Level::Isr => {
                self.cpus[cpu].isr = None;
                if self.cpus[cpu].dpc == Dpc::None {
                    self.cpus[cpu].dpc = Dpc::Queued;
                }
            }
            Level::Dpc => {
                let j = self.cpus[cpu].dpc_job.take().expect("a DPC job ran");
                if let JobKind::Receive(p) = j.work {
                    if self.socket_in(p) {
                        self.cpus[cpu].dpc_job = Some(job(JobKind::Wake, self.c.wake));
                    }
                }
            }
            Level::Thread(t) => {
                let j = self.threads[t].job.take().expect("a thread job ran");
                self.cpus[cpu].last_thread = Some(t);
                if let Some(r) = self.threads[t].resume.take() {
                    // The switch back to a preempted job: it goes on.
                    self.threads[t].job = Some(r);
                    return;
                }
                self.thread_done(t, cpu, j);
            }
            Level::Idle => {}
        }
    }

    // ----------------------------------------------------------- dispatch

    fn reschedule_all(&mut self) -> Result<(), SimError> {
        // Waking a thread can change another CPU: go round until nothing does.
        for _ in 0..4 * self.cpus.len() + 4 {
            let mut changed = false;
            for k in 0..self.cpus.len() {
                changed |= self.reschedule(k);
            }
            if !changed {
                self.sched.check().map_err(SimError::Invariant)?;
                return Ok(());
            }
        }
        Err(SimError::Invariant(
            "the CPUs' dispatching did not settle".into(),
        ))
    }

    /// Gives CPU `k` to its highest level with work. Returns whether the
    /// CPU started something new.
    fn reschedule(&mut self, k: usize) -> bool {
        {
            let want = self.want(k);
            let cur = self.cpus[k].running;
            if want == cur {
                return false;
            }
            // Preempt what runs: it keeps its remaining time.
            self.account(k);
            let cpu = &mut self.cpus[k];
            let running = match cur {
                Level::Isr => cpu.isr.as_mut(),
                Level::Dpc => cpu.dpc_job.as_mut(),
                Level::Thread(t) => self.threads[t].job.as_mut(),
                Level::Idle => None,
            };
            cpu.runner.preempt(self.now, running);
            let next = match want {
                Level::Isr => cpu.isr.as_ref(),
                Level::Dpc => cpu.dpc_job.as_ref(),
                Level::Thread(t) => self.threads[t].job.as_ref(),
                Level::Idle => None,
            };
            cpu.running = want;
            match next {
                Some(j) => {
                    let (t, done) = cpu.runner.start(k as u16, self.now, j);
                    self.events.push(t, done);
                    true
                }
                None => cur != Level::Idle,
            }
        }
    }

    /// What CPU `k` should run now, with its job ready.
    fn want(&mut self, k: usize) -> Level {
        if self.cpus[k].isr.is_some() {
            return Level::Isr;
        }
        loop {
            if self.cpus[k].dpc == Dpc::None {
                break;
            }
            if self.cpus[k].dpc_job.is_some() {
                return Level::Dpc;
            }
            match self.dpc_next(k) {
                Some(j) => {
                    self.cpus[k].dpc_job = Some(j);
                    return Level::Dpc;
                }
                None => {
                    if self.cpus[k].dpc == Dpc::Running {
                        self.dpc_end(k);
                    }
                    if self.cpus[k].dpc == Dpc::Queued {
                        continue;
                    }
                    if self.cpus[k].isr.is_some() {
                        return Level::Isr;
                    }
                    break;
                }
            }
        }
        // Back at thread level: the dispatcher readies what waited for it.
        for t in std::mem::take(&mut self.cpus[k].deferred) {
            self.threads[t].deferred = false;
            if self.sched.threads[t].state == sched::State::Blocked {
                self.wake(t);
            }
        }
        for _ in 0..=self.threads.len() {
            let Some(t) = self.sched.on(k) else {
                return Level::Idle;
            };
            let th = &mut self.threads[t];
            if th.switch && th.job.is_some() && th.resume.is_none() {
                // Back on a CPU in the middle of a job: the switch first.
                th.switch = false;
                th.resume = th.job.take();
                th.job = Some(job(JobKind::Switch, self.c.context_switch));
            }
            if self.threads[t].job.is_none() {
                let j = self.next_job(t);
                self.threads[t].job = j;
            }
            if self.threads[t].job.is_some() {
                return Level::Thread(t);
            }
            // It has nothing to do: it blocks, and the CPU takes another.
            self.block(k);
        }
        Level::Idle
    }

    /// Closes every CPU's account up to now.
    fn account_all(&mut self) {
        for k in 0..self.cpus.len() {
            self.account(k);
        }
    }

    /// Adds the time since the last change on CPU `k` to what it ran.
    fn account(&mut self, k: usize) {
        let cpu = &self.cpus[k];
        let bucket = match cpu.running {
            Level::Isr => ISR,
            Level::Dpc => DPC,
            Level::Thread(t) => self.threads[t].bucket,
            Level::Idle if self.lock.contended_now() => LOCKING,
            Level::Idle => IDLE,
        };
        self.ledger.account(k, bucket, self.now);
    }

    // ------------------------------------------------------------ results

    fn finish(mut self) -> Result<(Metrics, Samples), SimError> {
        for k in 0..self.cpus.len() {
            self.account(k);
        }
        if self.polling {
            self.polling_w += self.w.clip(self.polling_since, self.now);
        }
        let cpu = self.ledger.shares().map_err(SimError::Invariant)?;
        let window = self.w.len();
        let n = self.cpus.len();
        let mut extra = BTreeMap::new();
        for k in 0..n {
            for (name, ns) in self.ledger.names().iter().zip(self.ledger.busy(k)) {
                if *ns > 0 || ["idle", "dpc", "isr"].contains(&name.as_str()) {
                    extra.insert(format!("cpu{k}.{name}"), *ns as f64 / window as f64);
                }
            }
        }
        let held: u64 = self
            .cpus
            .iter()
            .flat_map(|c| [c.isr, c.dpc_job])
            .chain(self.threads.iter().flat_map(|t| [t.job, t.resume]))
            .flatten()
            .filter_map(|j| j.work.packet())
            .count() as u64;
        let in_flight = self.ring.len() as u64 + self.sock.len() as u64 + held;
        let user: f64 = cpu
            .iter()
            .filter(|(k, _)| k.starts_with("user:"))
            .map(|(_, v)| v)
            .sum();
        // Shares of the whole machine's capacity, n CPUs.
        extra.insert("user_share".into(), user);
        extra.insert("cpus".into(), n as f64);
        extra.insert(
            "dpc_share_of_one_cpu".into(),
            cpu.get("dpc").copied().unwrap_or(0.0) * n as f64,
        );
        extra.insert(
            "polling_share".into(),
            self.polling_w as f64 / window as f64,
        );
        extra.insert("polling_now".into(), f64::from(u8::from(self.polling)));
        if let Some(tl) = &self.two {
            extra.insert("two_level_switches".into(), tl.switches() as f64);
        }
        let lock_ns = self.lock.waited_ns + self.lock.waiting_ns(self.now);
        let blocked_ns = self.lock_blocked_ns
            + self
                .threads
                .iter()
                .filter_map(|t| t.lock_since)
                .map(|s| self.now - s)
                .sum::<Nanos>();
        extra.insert("lock_wait_ns".into(), lock_ns as f64);
        extra.insert("lock_blocked_ns".into(), blocked_ns as f64);
        extra.insert(
            "lock_contention".into(),
            self.lock.contended as f64 / self.lock.acquired.max(1) as f64,
        );
        for (i, th) in self.sched.threads.iter().enumerate() {
            if self.threads[i].role == Role::Reader {
                extra.insert("reader_cpu".into(), th.last as f64);
                break;
            }
        }
        let record = Record {
            in_flight,
            cpu,
            mode_switches: self.two.as_ref().map_or(0, |t| t.switches()),
            inhibits: BTreeMap::new(),
            extra,
        };
        let outside = Outside {
            echo: self.echo.as_ref(),
            tcp: None,
        };
        record.close(self.meter, self.w, outside)
    }
}

fn job(work: JobKind, remaining: Nanos) -> Job {
    Job { work, remaining }
}
