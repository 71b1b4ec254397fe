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
//! (`crate::host`), which this one shares its traffic, meter, packets and
//! events with: their published systems had one CPU, and their results do
//! not change. Work is cut into jobs as there; a job that an interrupt
//! preempts resumes later, on the same CPU (interrupt levels) or on
//! whichever CPU the thread is next placed on (threads), with exactly its
//! remaining time. Every nanosecond of every CPU is accounted to one
//! bucket, and each CPU's buckets must cover the measured interval.

pub mod lock;
pub mod sched;

use crate::host::echo::EchoClient;
use crate::host::event::{Ev, Events};
use crate::host::meter::Meter;
use crate::host::step::Packet;
use crate::host::traffic::Traffic;
use crate::metrics::{Metrics, Samples};
use crate::profile::{NtCosts, Profile};
use crate::scenario::{ProcessKind, Scenario, SmpCfg, SmpDetector, SmpService};
use crate::SimError;
use lock::Lock;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rxsched_core::{Detector, DropPoint, Nanos, Service, TwoLevel, US};
use sched::{Sched, Tid, NORMAL, REALTIME};
use std::collections::{BTreeMap, VecDeque};

/// An on-off thread's CPU time per wake-up and its sleep, by default (ms).
const ONOFF_ON_MS: f64 = 11.0;
const ONOFF_OFF_MS: f64 = 5.0;
/// A compute thread runs in slices of this length between scheduling points.
const COMPUTE_SLICE: Nanos = 500 * US;
/// A polling thread that finds nothing while the switch keeps it polling
/// (an idle grace) looks again after this long.
const POLL_IDLE: Nanos = 100 * US;

/// Events of the multiprocessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SmpEv {
    /// The job CPU `cpu` started as generation `gen` ends.
    Done { cpu: u16, gen: u64 },
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

#[derive(Debug, Clone, Copy)]
struct Job {
    kind: JobKind,
    remaining: Nanos,
}

impl Job {
    fn packet(&self) -> Option<Packet> {
        match self.kind {
            JobKind::Receive(p) | JobKind::Recv(p) => Some(p),
            _ => None,
        }
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
    since: Nanos,
    job_end: Nanos,
    gen: u64,
    last_thread: Option<Tid>,
    busy_w: Vec<Nanos>,
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
struct Smp {
    now: Nanos,
    w0: Nanos,
    end: Nanos,
    events: Events,
    rng: ChaCha8Rng,
    c: NtCosts,
    wire: crate::profile::Wire,
    cfg: SmpCfg,
    cpus: Vec<Cpu>,
    sched: Sched,
    threads: Vec<Thread>,
    buckets: Vec<String>,
    quantum: Nanos,
    // The adapter.
    ring: VecDeque<Packet>,
    ring_cap: usize,
    intr_enabled: bool,
    // The consumer's socket.
    sock: VecDeque<Packet>,
    sock_bytes: u32,
    sock_cap: (usize, u32),
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

/// Runs a scenario of `kernel.kind = "nt"`.
pub fn run(s: &Scenario, p: Profile) -> Result<(Metrics, Samples), SimError> {
    let mut h = Smp::new(s, p);
    h.run()?;
    h.finish()
}

impl Smp {
    fn new(s: &Scenario, p: Profile) -> Smp {
        let cfg = s.smp.clone().unwrap_or_default();
        let n = cfg.cpus as usize;
        let w0 = (s.run.warmup_ms * 1e6) as Nanos;
        let end = w0 + (s.run.duration_ms * 1e6) as Nanos;
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
        let ex = s.expanded();
        for q in &ex.process {
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
                since: 0,
                job_end: 0,
                gen: 0,
                last_thread: None,
                busy_w: vec![0; buckets.len()],
                deferred: Vec::new(),
            })
            .collect();
        let c = p.nt.clone().unwrap_or_default();
        Smp {
            now: 0,
            w0,
            end,
            events: Events::default(),
            rng,
            c,
            wire: p.wire.clone(),
            cpus,
            sched,
            threads,
            buckets,
            quantum: ((s.run.quantum_ms * 1e6) as Nanos).max(1),
            ring: VecDeque::new(),
            ring_cap: p.nic.rx_ring as usize,
            intr_enabled: true,
            sock: VecDeque::new(),
            sock_bytes: 0,
            sock_cap: (s.kernel.socket_packets as usize, s.kernel.socket_bytes),
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
            echo: s.echo.as_ref().map(|e| EchoClient::new(e, &p.wire, w0)),
            meter: Meter::new(w0),
            cfg,
        }
    }

    // ------------------------------------------------------------ the loop

    fn run(&mut self) -> Result<(), SimError> {
        for s in 0..self.traffic.len() {
            self.traffic
                .schedule(s, &self.wire, &mut self.rng, &mut self.events);
        }
        if let Some(e) = &mut self.echo {
            e.start(0, &mut self.events);
        }
        if self.two.is_some() {
            let w = ((self.cfg.window_ms * 1e6) as Nanos).max(1);
            self.events.push(w, Ev::Smp(SmpEv::Window));
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
            if t > self.end {
                break;
            }
            self.now = t;
            self.meter.events += 1;
            match ev {
                Ev::Arrive(s) => {
                    if let Some(t2) = self.traffic.busy_until(s as usize, t) {
                        self.events.push(t2, Ev::Arrive(s));
                        self.reschedule_all()?;
                        continue;
                    }
                    let p = self.traffic.packet(s as usize, t);
                    self.enter(p);
                    self.traffic
                        .schedule(s as usize, &self.wire, &mut self.rng, &mut self.events);
                }
                Ev::Echo(e) => {
                    let c = self.echo.as_mut().expect("an echo event has a client");
                    if let Some(p) = c.handle(e, t, &mut self.events) {
                        self.enter(p);
                    }
                }
                Ev::Smp(SmpEv::Done { cpu, gen }) => self.done(cpu as usize, gen),
                Ev::Smp(SmpEv::Window) => {
                    self.tell_dpc_time();
                    let svc = self.two.as_mut().map(|tl| tl.tick(t));
                    self.follow(svc);
                    let w = ((self.cfg.window_ms * 1e6) as Nanos).max(1);
                    self.events.push(t + w, Ev::Smp(SmpEv::Window));
                }
                Ev::Smp(SmpEv::Wake(t)) => {
                    let t = t as usize;
                    if self.sched.threads[t].state == sched::State::Blocked {
                        self.wake(t);
                    }
                }
                Ev::Smp(SmpEv::PollAgain) => {
                    if let Some(pt) = self.poll {
                        if self.polling && self.sched.threads[pt].state == sched::State::Blocked {
                            self.wake(pt);
                        }
                    }
                }
                other => {
                    return Err(SimError::Invariant(format!(
                        "the nt host got an event of another host: {other:?}"
                    )))
                }
            }
            self.reschedule_all()?;
        }
        self.now = self.end;
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
        self.polling_w += clip(self.polling_since, self.now, self.w0, self.end);
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
        let fits =
            self.sock.len() < self.sock_cap.0 && self.sock_bytes + p.bytes <= self.sock_cap.1;
        if !fits {
            self.meter.drop(DropPoint::SocketBuffer);
            return false;
        }
        self.sock_bytes += p.bytes;
        self.sock.push_back(p);
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
                    self.events
                        .push(self.now + off, Ev::Smp(SmpEv::Wake(t as u32)));
                    return None;
                }
                let slice = self.threads[t].left.min(COMPUTE_SLICE);
                self.threads[t].left -= slice;
                Some(job(JobKind::Compute, slice))
            }
            Role::Reader => match self.threads[t].phase {
                Phase::Recv => {
                    let p = self.sock.pop_front();
                    let Some(p) = p else {
                        self.waiting.push_back(t);
                        return None;
                    };
                    self.sock_bytes -= p.bytes;
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
                        self.events
                            .push(self.now + POLL_IDLE, Ev::Smp(SmpEv::PollAgain));
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
        match j.kind {
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
    fn done(&mut self, cpu: usize, gen: u64) {
        if self.cpus[cpu].gen != gen {
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
                if let JobKind::Receive(p) = j.kind {
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
            let rem = self.cpus[k].job_end.saturating_sub(self.now);
            match cur {
                Level::Isr => set_rem(&mut self.cpus[k].isr, rem),
                Level::Dpc => set_rem(&mut self.cpus[k].dpc_job, rem),
                Level::Thread(t) => set_rem(&mut self.threads[t].job, rem),
                Level::Idle => {}
            }
            let rem = match want {
                Level::Isr => self.cpus[k].isr.map(|j| j.remaining),
                Level::Dpc => self.cpus[k].dpc_job.map(|j| j.remaining),
                Level::Thread(t) => self.threads[t].job.map(|j| j.remaining),
                Level::Idle => None,
            };
            let cpu = &mut self.cpus[k];
            cpu.running = want;
            cpu.gen += 1;
            match rem {
                Some(r) => {
                    cpu.job_end = self.now + r;
                    self.events.push(
                        self.now + r,
                        Ev::Smp(SmpEv::Done {
                            cpu: k as u16,
                            gen: cpu.gen,
                        }),
                    );
                    true
                }
                None => {
                    cpu.job_end = self.now;
                    cur != Level::Idle
                }
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
        let ns = clip(cpu.since, self.now, self.w0, self.end);
        let cpu = &mut self.cpus[k];
        cpu.busy_w[bucket] += ns;
        cpu.since = self.now;
    }

    // ------------------------------------------------------------ results

    fn finish(mut self) -> Result<(Metrics, Samples), SimError> {
        for k in 0..self.cpus.len() {
            self.account(k);
        }
        if self.polling {
            self.polling_w += clip(self.polling_since, self.now, self.w0, self.end);
        }
        let window = self.end - self.w0;
        let n = self.cpus.len();
        let mut cpu = BTreeMap::new();
        let mut extra = BTreeMap::new();
        for (k, c) in self.cpus.iter().enumerate() {
            let total: Nanos = c.busy_w.iter().sum();
            if total != window {
                return Err(SimError::Invariant(format!(
                    "CPU {k}'s accounting covers {total} ns of a {window} ns interval"
                )));
            }
            for (name, ns) in self.buckets.iter().zip(&c.busy_w) {
                let share = *ns as f64 / window as f64;
                *cpu.entry(name.clone()).or_insert(0.0) += share / n as f64;
                if *ns > 0 || ["idle", "dpc", "isr"].contains(&name.as_str()) {
                    extra.insert(format!("cpu{k}.{name}"), share);
                }
            }
        }
        let held: u64 = self
            .cpus
            .iter()
            .flat_map(|c| [c.isr, c.dpc_job])
            .chain(self.threads.iter().flat_map(|t| [t.job, t.resume]))
            .flatten()
            .filter_map(|j| j.packet())
            .count() as u64;
        let in_flight = self.ring.len() as u64 + self.sock.len() as u64 + held;
        let meter = &self.meter;
        let dropped = meter.drops.total();
        if meter.arrived != meter.delivered + dropped + in_flight {
            return Err(SimError::Invariant(format!(
                "conservation violated: arrived {} != delivered {} + dropped {} + in flight {}",
                meter.arrived, meter.delivered, dropped, in_flight
            )));
        }
        let secs = window as f64 / 1e9;
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
        if let Some(e) = &self.echo {
            let (rounds, mean) = e.rtt();
            extra.insert("rtt_us".into(), mean);
            extra.insert("round_trips".into(), rounds as f64);
        }
        let parts = crate::host::meter::RecordParts {
            in_flight,
            cpu,
            mode_switches: self.two.as_ref().map_or(0, |t| t.switches()),
            inhibits: BTreeMap::new(),
            extra,
        };
        Ok(self.meter.into_record(secs, parts))
    }
}

fn job(kind: JobKind, remaining: Nanos) -> Job {
    Job { kind, remaining }
}

fn set_rem(j: &mut Option<Job>, rem: Nanos) {
    if let Some(j) = j {
        j.remaining = rem;
    }
}

fn per_byte(bytes: u32, ns: f64) -> Nanos {
    (bytes as f64 * ns).round() as Nanos
}

/// The part of `[a, b)` inside the measured interval `[w0, end)`.
fn clip(a: Nanos, b: Nanos, w0: Nanos, end: Nanos) -> Nanos {
    b.min(end).saturating_sub(a.max(w0))
}
