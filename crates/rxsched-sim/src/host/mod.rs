//! The host model: one CPU with interrupt priority levels and real
//! preemption, NICs with rings and interrupts, and the kernels that drive
//! the `rxsched-core` policies.
//!
//! Work is cut into *steps* (one packet's link-level work, IP input, a
//! reclaim, ...). Each context on the CPU runs one step at a time; a step's
//! effect happens when it completes. A higher-priority context that becomes
//! ready preempts the running step, which later resumes with exactly its
//! remaining time.

use crate::metrics::{Interrupts, Latency, Metrics, Samples};
use crate::profile::Profile;
use crate::scenario::{IpLayer, KernelKind, ProcessKind, Scenario, TrafficKind};
use crate::SimError;
use linux::LinuxState;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rxsched_core::{
    Action, CircuitBreaker, CycleLimit, DeviceId, Dir, DropCounts, DropPoint, InterruptBatch,
    Nanos, PollingFacility, QueueFeedback, Quota, US,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

mod linux;

/// How many packets at the start of a run have their hand-to-device time kept.
const TRACE_PACKETS: u32 = 64;
/// A compute-bound process runs in slices of this length between scheduling decisions.
const COMPUTE_SLICE: Nanos = 500 * US;

/// Contexts in priority order: device interrupts, the software interrupt,
/// the kernel thread (IP thread or polling thread), then user processes.
const INTR: usize = 0;
const SOFT: usize = 1;
const KTHREAD: usize = 2;
const USER0: usize = 3;

#[derive(Debug, Clone, Copy)]
struct Packet {
    id: u32,
    bytes: u32,
    arrived: Nanos,
    /// The port it arrived on; a router sends it out of the other.
    port: u8,
    /// When it was handed to a device, in frames handed over so far.
    seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(u8),
    TxWireDone(u8),
    ChunkDone(u64),
    PollWake,
    BreakerEnd(u8),
    Tick,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntrSrc {
    Rx(u8),
    Tx(u8),
    Poll(u8, Dir),
    /// Linux: a port's one interrupt line, for receive and transmit events.
    Port(u8),
    Clock,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    IntrEnter(IntrSrc),
    RxLink(Packet),
    /// Reclaim one transmitted buffer (already delivered).
    TxReclaim(u8, Packet),
    Load(u8),
    IpSwitch,
    IpInput(Packet),
    IpOutput(Packet),
    UdpInput(Packet),
    PollSwitch,
    PollCallback,
    PollRx(Packet),
    EnableIntr(u8, Dir),
    CtxSwitch,
    Screen(Packet),
    AppRead(Packet),
    Compute,
    /// Linux: receive bookkeeping and copy, in the ISR or a NAPI poll.
    RxLinux(Packet),
    /// Linux: IP forwarding, then onto the output queue.
    IpLinux(Packet),
    /// Linux: the driver hands a frame to the device.
    Xmit(u8, Packet),
}

impl Step {
    fn packet(&self) -> Option<Packet> {
        match *self {
            Step::RxLink(p)
            | Step::IpInput(p)
            | Step::IpOutput(p)
            | Step::UdpInput(p)
            | Step::PollRx(p)
            | Step::Screen(p)
            | Step::AppRead(p)
            | Step::RxLinux(p)
            | Step::IpLinux(p)
            | Step::Xmit(_, p) => Some(p),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Chunk {
    remaining: Nanos,
    step: Step,
}

#[derive(Debug, Default)]
struct Ctx {
    chunk: Option<Chunk>,
    carry: Option<Step>,
    loading: Option<u8>,
    cpu_ns: Nanos,
    bucket: usize,
}

#[derive(Debug)]
struct Nic {
    dev: DeviceId,
    rx: VecDeque<Packet>,
    rx_cap: usize,
    rx_intr_enabled: bool,
    posted: [bool; 2],
    in_service: [bool; 2],
    out_q: VecDeque<Packet>,
    out_cap: usize,
    tx_ring: VecDeque<Packet>,
    tx_cap: usize,
    wire: Option<Packet>,
    /// Transmitted frames whose buffers are not yet reclaimed.
    done_q: VecDeque<Packet>,
    oactive: bool,
    loading: usize,
    /// Linux: the line is raised for transmit completions.
    tx_irq_pending: bool,
    /// Linux: completions since the last transmit interrupt.
    since_irq: u32,
}

#[derive(Debug, Clone, Copy)]
struct Job {
    dev: DeviceId,
    dir: Dir,
    quota: Quota,
    done: u32,
    cpu0: Nanos,
}

struct Poller {
    fac: PollingFacility,
    awake: bool,
    need_switch: bool,
    job: Option<Job>,
}

struct User {
    kind: ProcessKind,
    prio: u32,
    blocked: bool,
    switch_pending: bool,
}

struct Source {
    kind: TrafficKind,
    gap_ns: f64,
    spacing_ns: f64,
    burst: u32,
    in_burst: u32,
    burst_start: f64,
    next_start: f64,
    bytes: u32,
    count: u64,
    sent: u64,
    port: u8,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Consumer {
    Forward,
    Screend,
    Reader,
}

/// One simulated host, built from a scenario and a profile.
pub struct Host {
    p: Profile,
    kind: KernelKind,
    consumer: Consumer,
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Reverse<(Nanos, u64, Ev)>>,
    rng: ChaCha8Rng,
    nics: Vec<Nic>,
    ipintrq: VecDeque<Packet>,
    ipintrq_cap: usize,
    screen_q: VecDeque<Packet>,
    screen_cap: usize,
    sock_q: VecDeque<Packet>,
    sock_bytes: u32,
    sock_cap_pkts: usize,
    sock_cap_bytes: u32,
    ctx: Vec<Ctx>,
    running: Option<usize>,
    since: Nanos,
    chunk_end: Nanos,
    gen: u64,
    intr_pending: VecDeque<IntrSrc>,
    intr_cur: Option<IntrSrc>,
    batch: InterruptBatch,
    ip_ctx: usize,
    ip_requested: bool,
    ip_active: bool,
    poll: Option<Poller>,
    linux: Option<LinuxState>,
    users: Vec<User>,
    cur_user: Option<usize>,
    user_since: Nanos,
    quantum: Nanos,
    sources: Vec<Source>,
    wire_free: Vec<Nanos>,
    next_id: u32,
    // measurement
    end: Nanos,
    w0: Nanos,
    buckets: Vec<String>,
    cpu_w: Vec<Nanos>,
    arrived: u64,
    delivered: u64,
    arrived_w: u64,
    delivered_w: u64,
    drops: DropCounts,
    interrupts: Interrupts,
    mode_switches: u64,
    first_delivery: Option<Nanos>,
    first_arrival: Option<Nanos>,
    samples: Samples,
    events: u64,
}

const IDLE_BUCKET: usize = 0;

impl Host {
    /// Builds a host ready to run.
    pub fn new(s: &Scenario, p: Profile) -> Host {
        let k = &s.kernel;
        let consumer = if s.process.iter().any(|q| q.kind == ProcessKind::Screend) {
            Consumer::Screend
        } else if s.process.iter().any(|q| q.kind == ProcessKind::Reader) {
            Consumer::Reader
        } else {
            Consumer::Forward
        };
        let mut buckets = vec!["idle".to_string(), "interrupt".into(), "softirq".into()];
        let kthread_bucket = if k.kind == KernelKind::Polling {
            "poll"
        } else {
            "kernel_thread"
        };
        buckets.push(kthread_bucket.into());
        let mut ctx: Vec<Ctx> = (0..USER0).map(|_| Ctx::default()).collect();
        ctx[INTR].bucket = 1;
        ctx[SOFT].bucket = 2;
        ctx[KTHREAD].bucket = 3;
        let mut users = Vec::new();
        for q in &s.process {
            let name = q.name.clone().unwrap_or_else(|| {
                match q.kind {
                    ProcessKind::Screend => "screend",
                    ProcessKind::Reader => "reader",
                    ProcessKind::Compute => "compute",
                }
                .to_string()
            });
            buckets.push(format!("user:{name}"));
            ctx.push(Ctx {
                bucket: buckets.len() - 1,
                ..Ctx::default()
            });
            users.push(User {
                kind: q.kind,
                prio: q
                    .priority
                    .unwrap_or(if q.kind == ProcessKind::Compute { 1 } else { 0 }),
                blocked: true,
                switch_pending: false,
            });
        }
        let mut poll = None;
        let mut linux = None;
        let n_nics = if consumer == Consumer::Reader { 1 } else { 2 };
        let mut devs = Vec::new();
        if k.kind == KernelKind::Linux {
            let (napi, reclaim) = k.linux_modes();
            let cfg = rxsched_core::NapiConfig {
                weight: k.napi_weight,
                budget_packets: k.napi_budget,
                budget_ns: (k.napi_budget_us * 1e3) as Nanos,
            };
            let mut l = LinuxState::new(
                p.linux.clone().unwrap_or_default(),
                napi,
                cfg,
                reclaim,
                k.backlog_limit,
            );
            for i in 0..n_nics {
                devs.push(l.napi.as_mut().map_or(DeviceId(i), |n| n.register()));
            }
            linux = Some(l);
        } else if k.kind == KernelKind::Polling {
            let mut fac = PollingFacility::new(k.quota);
            if k.feedback.enabled {
                let t = (k.feedback.timeout_us * 1e3) as Nanos;
                fac = fac.with_feedback(if k.feedback.min_free > 0 {
                    QueueFeedback::min_free(k.screen_queue_limit, k.feedback.min_free, t)
                } else {
                    QueueFeedback::watermarks(
                        k.screen_queue_limit,
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
            for _ in 0..n_nics {
                devs.push(fac.register(true, true));
            }
            poll = Some(Poller {
                fac,
                awake: false,
                need_switch: false,
                job: None,
            });
        } else {
            devs = (0..n_nics).map(DeviceId).collect();
        }
        let nics = devs
            .into_iter()
            .map(|dev| Nic {
                dev,
                rx: VecDeque::with_capacity(p.nic.rx_ring as usize),
                rx_cap: p.nic.rx_ring as usize,
                rx_intr_enabled: true,
                posted: [false; 2],
                in_service: [false; 2],
                out_q: VecDeque::new(),
                out_cap: k.output_queue_limit as usize,
                tx_ring: VecDeque::new(),
                tx_cap: p.nic.tx_ring as usize,
                wire: None,
                done_q: VecDeque::new(),
                oactive: false,
                loading: 0,
                tx_irq_pending: false,
                since_irq: 0,
            })
            .collect();
        let batch = if k.breaker.enabled && k.kind != KernelKind::Polling {
            InterruptBatch::with_breaker(CircuitBreaker::new(
                k.breaker.batch,
                (k.breaker.off_us * 1e3) as Nanos,
            ))
        } else {
            InterruptBatch::new()
        };
        let sources = s
            .traffic
            .iter()
            .map(|t| {
                let start = t.start_us * 1e3;
                Source {
                    kind: t.kind,
                    gap_ns: 1e9 / t.rate_pps,
                    spacing_ns: t.spacing_us * 1e3,
                    burst: t.burst.max(1),
                    in_burst: 0,
                    burst_start: start,
                    next_start: start,
                    bytes: t.frame_bytes,
                    count: t.count,
                    sent: 0,
                    port: t.port,
                }
            })
            .collect();
        let w0 = (s.run.warmup_ms * 1e6) as Nanos;
        let end = w0 + (s.run.duration_ms * 1e6) as Nanos;
        let cpu_w = vec![0; buckets.len()];
        Host {
            kind: k.kind,
            consumer,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            rng: ChaCha8Rng::seed_from_u64(s.run.seed),
            nics,
            ipintrq: VecDeque::new(),
            ipintrq_cap: k.ipintrq_limit as usize,
            screen_q: VecDeque::new(),
            screen_cap: k.screen_queue_limit as usize,
            sock_q: VecDeque::new(),
            sock_bytes: 0,
            sock_cap_pkts: k.socket_packets as usize,
            sock_cap_bytes: k.socket_bytes,
            ctx,
            running: None,
            since: 0,
            chunk_end: 0,
            gen: 0,
            intr_pending: VecDeque::new(),
            intr_cur: None,
            batch,
            ip_ctx: if k.ip_layer == IpLayer::Softirq {
                SOFT
            } else {
                KTHREAD
            },
            ip_requested: false,
            ip_active: false,
            poll,
            linux,
            users,
            cur_user: None,
            user_since: 0,
            quantum: (s.run.quantum_ms * 1e6) as Nanos,
            sources,
            wire_free: vec![0; 2],
            next_id: 0,
            end,
            w0,
            buckets,
            cpu_w,
            arrived: 0,
            delivered: 0,
            arrived_w: 0,
            delivered_w: 0,
            drops: DropCounts::default(),
            interrupts: Interrupts::default(),
            mode_switches: 0,
            first_delivery: None,
            first_arrival: None,
            samples: Samples::default(),
            events: 0,
            p,
        }
    }

    fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// Runs to the end and returns the metrics record and samples.
    pub fn run(mut self) -> Result<(Metrics, Samples), SimError> {
        let start = std::time::Instant::now();
        for s in 0..self.sources.len() {
            self.schedule_source(s);
        }
        self.reschedule();
        if self.p.cost.clock_hz > 0 && self.p.cost.clock_tick > 0 {
            self.push(1_000_000_000 / self.p.cost.clock_hz, Ev::Tick);
        }
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            if t > self.end {
                break;
            }
            self.now = t;
            self.events += 1;
            match ev {
                Ev::ChunkDone(g) => {
                    if g != self.gen {
                        continue;
                    }
                    let c = self
                        .running
                        .take()
                        .expect("a chunk completed with nothing running");
                    self.account(Some(c));
                    let step = self.ctx[c]
                        .chunk
                        .take()
                        .expect("running context has a chunk")
                        .step;
                    self.complete(c, step);
                }
                Ev::Arrive(s) => self.arrive(s as usize),
                Ev::TxWireDone(n) => self.tx_wire_done(n as usize),
                Ev::PollWake => {
                    if let Some(p) = &mut self.poll {
                        p.fac.timer(self.now);
                    }
                    self.wake_poll();
                }
                Ev::BreakerEnd(n) => {
                    if self.batch.timer(self.now) {
                        let n = n as usize;
                        self.nics[n].rx_intr_enabled = true;
                        if !self.nics[n].rx.is_empty() {
                            self.post(IntrSrc::Rx(n as u8));
                        }
                    }
                }
                Ev::Tick => {
                    self.post(IntrSrc::Clock);
                    self.push(self.now + 1_000_000_000 / self.p.cost.clock_hz, Ev::Tick);
                }
            }
            self.reschedule();
        }
        self.now = self.end;
        self.account(self.running);
        let wall_ms = start.elapsed().as_secs_f64() * 1e3;
        self.finish(wall_ms)
    }

    // ---------------------------------------------------------------- CPU

    /// Adds the time since the last switch to the running context's bucket
    /// (or idle), clipped to the measured interval.
    fn account(&mut self, c: Option<usize>) {
        let (a, b) = (self.since.max(self.w0), self.now.min(self.end));
        let bucket = c.map_or(IDLE_BUCKET, |c| self.ctx[c].bucket);
        if b > a {
            self.cpu_w[bucket] += b - a;
        }
        if let Some(c) = c {
            self.ctx[c].cpu_ns += self.now - self.since;
        }
        self.since = self.now;
    }

    fn reschedule(&mut self) {
        loop {
            let want = self.pick();
            if want.is_some() && want == self.running {
                return;
            }
            if let Some(r) = self.running.take() {
                self.account(Some(r));
                let rem = self.chunk_end.saturating_sub(self.now);
                if let Some(ch) = self.ctx[r].chunk.as_mut() {
                    ch.remaining = rem;
                }
                self.gen += 1;
            } else if want.is_some() {
                self.account(None);
            }
            match want {
                Some(c) => {
                    let rem = self.ctx[c].chunk.map_or(0, |ch| ch.remaining);
                    self.running = Some(c);
                    self.since = self.now;
                    self.chunk_end = self.now + rem;
                    self.gen += 1;
                    self.push(self.chunk_end, Ev::ChunkDone(self.gen));
                    if c >= USER0 {
                        self.cur_user = Some(c - USER0);
                    }
                    return;
                }
                None => {
                    // The idle thread runs: M4 re-enables input.
                    if !self.on_idle() {
                        return;
                    }
                }
            }
        }
    }

    /// The CPU is about to idle. Returns true if that made work runnable.
    fn on_idle(&mut self) -> bool {
        let now = self.now;
        let Some(p) = &mut self.poll else {
            return false;
        };
        let was = p.fac.input_inhibited(now).is_some();
        p.fac.idle(now);
        if was && p.fac.input_inhibited(now).is_none() {
            self.wake_poll();
            return true;
        }
        false
    }

    /// The context that should hold the CPU now, with its next chunk ready.
    fn pick(&mut self) -> Option<usize> {
        for c in [INTR, SOFT, KTHREAD] {
            if self.ensure_chunk(c) {
                return Some(c);
            }
        }
        self.pick_user()
    }

    fn ensure_chunk(&mut self, c: usize) -> bool {
        if self.ctx[c].chunk.is_some() {
            return true;
        }
        match self.next_step(c) {
            Some(step) => {
                let remaining = self.cost(step);
                self.ctx[c].chunk = Some(Chunk { remaining, step });
                true
            }
            None => false,
        }
    }

    fn user_runnable(&self, u: usize) -> bool {
        let c = &self.ctx[USER0 + u];
        c.chunk.is_some()
            || c.carry.is_some()
            || c.loading.is_some()
            || match self.users[u].kind {
                ProcessKind::Screend => !self.screen_q.is_empty(),
                ProcessKind::Reader => !self.sock_q.is_empty(),
                ProcessKind::Compute => true,
            }
    }

    fn pick_user(&mut self) -> Option<usize> {
        let n = self.users.len();
        let mut best: Option<(u32, usize)> = None;
        let first = self.cur_user.map_or(0, |c| c + 1);
        for i in 0..n {
            let u = (first + i) % n;
            if !self.user_runnable(u) {
                self.users[u].blocked = true;
                continue;
            }
            if best.is_none_or(|(p, _)| self.users[u].prio < p) {
                best = Some((self.users[u].prio, u));
            }
        }
        let (prio, mut u) = best?;
        if let Some(cur) = self.cur_user {
            let keep = self.user_runnable(cur)
                && self.users[cur].prio == prio
                && (self.ctx[USER0 + cur].chunk.is_some()
                    || self.now - self.user_since < self.quantum);
            if keep {
                u = cur;
            }
        }
        if self.cur_user != Some(u) {
            self.user_since = self.now;
            self.users[u].switch_pending = true;
        } else if self.users[u].blocked {
            self.users[u].switch_pending = true;
        }
        self.users[u].blocked = false;
        if self.ensure_chunk(USER0 + u) {
            Some(USER0 + u)
        } else {
            None
        }
    }

    fn cost(&self, step: Step) -> Nanos {
        if self.linux.is_some() {
            return self.linux_cost(step);
        }
        let c = &self.p.cost;
        let bytes = |p: Packet, per: f64| (p.bytes as f64 * per).round() as Nanos;
        match step {
            // Emulating the unmodified kernel, the interrupt handler reaches the
            // link-level code through the polling driver's receive callback.
            Step::IntrEnter(IntrSrc::Rx(_)) if self.kind == KernelKind::Emulated => {
                c.intr_dispatch + c.poll_callback
            }
            Step::IntrEnter(IntrSrc::Rx(_) | IntrSrc::Tx(_)) => c.intr_dispatch,
            Step::IntrEnter(IntrSrc::Poll(..)) => c.poll_intr,
            Step::IntrEnter(IntrSrc::Clock) => c.clock_tick,
            Step::IntrEnter(IntrSrc::Port(_)) => 0, // only the Linux kernel has ports' lines
            Step::RxLink(p) => c.rx_copy + bytes(p, c.rx_copy_per_byte) + c.rx_link + c.ipintrq,
            Step::PollRx(p) => c.rx_copy + bytes(p, c.rx_copy_per_byte) + c.rx_link,
            Step::TxReclaim(..) => c.tx_reclaim,
            // The driver prepares a packet for the device when `ip_output`
            // hands it over; loading prepared packets onto the ring is free.
            Step::Load(_) => 0,
            Step::IpSwitch => c.ip_switch,
            Step::IpInput(_) => c.ip_input,
            Step::IpOutput(_) => c.ip_output + c.driver_tx,
            Step::UdpInput(_) => c.udp_input,
            Step::PollSwitch => c.poll_switch,
            Step::PollCallback => c.poll_callback,
            Step::EnableIntr(..) => c.intr_enable,
            Step::CtxSwitch => c.context_switch,
            Step::Screen(_) => c.screend,
            Step::AppRead(p) => c.app_read + bytes(p, c.app_read_per_byte),
            Step::Compute => COMPUTE_SLICE,
            Step::RxLinux(_) | Step::IpLinux(_) | Step::Xmit(..) => 0,
        }
    }

    // ------------------------------------------------------------- steps

    /// What context `c` does next; `None` if it has nothing to do.
    fn next_step(&mut self, c: usize) -> Option<Step> {
        if let Some(s) = self.ctx[c].carry.take() {
            return Some(self.begin(s));
        }
        if let Some(n) = self.ctx[c].loading {
            let nic = &mut self.nics[n as usize];
            if nic.loading > 0 && !nic.out_q.is_empty() && nic.tx_ring.len() < nic.tx_cap {
                nic.loading -= 1;
                return Some(Step::Load(n));
            }
            nic.loading = 0;
            self.ctx[c].loading = None;
        }
        match c {
            INTR => self.next_intr(),
            SOFT if self.linux.is_some() => self.next_softirq_linux(),
            SOFT | KTHREAD if c == self.ip_ctx && self.poll.is_none() => self.next_ip(),
            KTHREAD if self.poll.is_some() => self.next_poll(),
            SOFT | KTHREAD => None,
            _ => self.next_user(c - USER0),
        }
    }

    /// Notes the start of a step that marks a point in a packet's life.
    fn begin(&mut self, s: Step) -> Step {
        if let Step::IpInput(p) = s {
            if p.arrived >= self.w0 {
                self.samples.ipin_latency_ns.push(self.now - p.arrived);
            }
        }
        s
    }

    fn next_intr(&mut self) -> Option<Step> {
        loop {
            match self.intr_cur {
                None => {
                    let src = self.intr_pending.pop_front()?;
                    if let Some((n, d)) = src_slot(src) {
                        self.nics[n].posted[d] = false;
                        self.nics[n].in_service[d] = true;
                    }
                    self.intr_cur = Some(src);
                    if let IntrSrc::Port(n) = src {
                        self.enter_isr_linux(n);
                    }
                    return Some(Step::IntrEnter(src));
                }
                Some(IntrSrc::Rx(n)) => {
                    let nic = &mut self.nics[n as usize];
                    match self.batch.next(!nic.rx.is_empty()) {
                        rxsched_core::BatchStep::Packet => {
                            let p = nic.rx.pop_front().expect("ring has a packet");
                            return Some(Step::RxLink(p));
                        }
                        rxsched_core::BatchStep::ExitDisabled(t) => {
                            nic.rx_intr_enabled = false;
                            self.push(t, Ev::BreakerEnd(n));
                        }
                        rxsched_core::BatchStep::Exit => {}
                    }
                }
                Some(IntrSrc::Tx(n)) => {
                    if let Some(p) = self.nics[n as usize].done_q.pop_front() {
                        return Some(Step::TxReclaim(n, p));
                    }
                }
                Some(IntrSrc::Port(n)) => {
                    if let Some(step) = self.next_isr_linux(n) {
                        return Some(step);
                    }
                }
                Some(_) => {}
            }
            self.finish_handler();
        }
    }

    fn finish_handler(&mut self) {
        let Some(src) = self.intr_cur.take() else {
            return;
        };
        if let Some((n, d)) = src_slot(src) {
            self.nics[n].in_service[d] = false;
        }
        match src {
            IntrSrc::Rx(n) if !self.nics[n as usize].rx.is_empty() => self.post(src),
            IntrSrc::Tx(n) if !self.nics[n as usize].done_q.is_empty() => self.post(src),
            IntrSrc::Port(n) => self.exit_isr_linux(n),
            _ => {}
        }
    }

    fn next_ip(&mut self) -> Option<Step> {
        if !self.ip_active {
            if self.ip_requested && !self.ipintrq.is_empty() {
                self.ip_active = true;
                self.ip_requested = false;
                return Some(Step::IpSwitch);
            }
            return None;
        }
        match self.ipintrq.pop_front() {
            Some(p) => Some(self.begin(Step::IpInput(p))),
            None => {
                self.ip_active = false;
                None
            }
        }
    }

    fn next_poll(&mut self) -> Option<Step> {
        let now = self.now;
        let cpu = self.ctx[KTHREAD].cpu_ns;
        let p = self.poll.as_mut()?;
        if !p.awake {
            return None;
        }
        if p.need_switch {
            p.need_switch = false;
            return Some(Step::PollSwitch);
        }
        loop {
            match p.job {
                Some(mut job) => {
                    let nic = &mut self.nics[job.dev.0];
                    let more = match job.dir {
                        Dir::Rx => !nic.rx.is_empty(),
                        Dir::Tx => !nic.done_q.is_empty(),
                    };
                    let go = more
                        && !job.quota.exhausted(job.done)
                        && (job.dir == Dir::Tx || p.fac.input_inhibited(now).is_none());
                    if go {
                        job.done += 1;
                        p.job = Some(job);
                        return Some(match job.dir {
                            Dir::Rx => Step::PollRx(nic.rx.pop_front().expect("ring has a packet")),
                            Dir::Tx => Step::TxReclaim(
                                job.dev.0 as u8,
                                nic.done_q.pop_front().expect("a completed frame"),
                            ),
                        });
                    }
                    p.fac.poll_done(job.dev, job.dir, job.done, more);
                    p.fac.charge(now, cpu - job.cpu0);
                    p.job = None;
                }
                None => match p.fac.next_action(now) {
                    Action::Poll { dev, dir, quota } => {
                        p.job = Some(Job {
                            dev,
                            dir,
                            quota,
                            done: 0,
                            cpu0: cpu,
                        });
                        return Some(Step::PollCallback);
                    }
                    Action::EnableInterrupts { dev, dir } => {
                        return Some(Step::EnableIntr(dev.0 as u8, dir));
                    }
                    Action::Idle { until } => {
                        p.awake = false;
                        if let Some(t) = until {
                            self.push(t.max(now), Ev::PollWake);
                        }
                        return None;
                    }
                },
            }
        }
    }

    fn next_user(&mut self, u: usize) -> Option<Step> {
        if std::mem::take(&mut self.users[u].switch_pending) {
            return Some(Step::CtxSwitch);
        }
        match self.users[u].kind {
            ProcessKind::Compute => Some(Step::Compute),
            ProcessKind::Screend => {
                let p = self.screen_q.pop_front()?;
                self.screen_level();
                Some(Step::Screen(p))
            }
            ProcessKind::Reader => {
                let p = self.sock_q.pop_front()?;
                self.sock_bytes -= p.bytes;
                Some(Step::AppRead(p))
            }
        }
    }

    /// Applies a completed step's effect.
    fn complete(&mut self, c: usize, step: Step) {
        if self.linux.is_some() && !matches!(step, Step::IntrEnter(_)) {
            return self.complete_linux(c, step);
        }
        match step {
            Step::IntrEnter(src) => match src {
                IntrSrc::Rx(_) => {
                    self.interrupts.rx += 1;
                    self.batch.begin();
                }
                IntrSrc::Tx(_) => self.interrupts.tx += 1,
                IntrSrc::Poll(n, dir) => {
                    match dir {
                        Dir::Rx => self.interrupts.rx += 1,
                        Dir::Tx => self.interrupts.tx += 1,
                    }
                    let dev = self.nics[n as usize].dev;
                    if let Some(p) = &mut self.poll {
                        p.fac.interrupt(dev, dir);
                    }
                    self.wake_poll();
                }
                IntrSrc::Clock | IntrSrc::Port(_) => {}
            },
            Step::RxLink(p) => {
                self.batch.handled(self.now);
                if self.ipintrq.len() >= self.ipintrq_cap {
                    self.drops.add(DropPoint::Ipintrq);
                } else {
                    self.ipintrq.push_back(p);
                    self.ip_requested = true;
                }
            }
            Step::TxReclaim(n, _) => {
                let nic = &mut self.nics[n as usize];
                // The driver learns that the transmitter went idle only by
                // processing a completion: until then packets wait on the
                // output queue (P3).
                if nic.tx_ring.is_empty() && nic.wire.is_none() {
                    nic.oactive = false;
                }
                self.try_start(c, n);
            }
            Step::Load(n) => {
                let nic = &mut self.nics[n as usize];
                if nic.tx_ring.len() < nic.tx_cap {
                    if let Some(p) = nic.out_q.pop_front() {
                        nic.tx_ring.push_back(p);
                    }
                }
                self.kick(n as usize);
            }
            Step::IpInput(p) => match self.consumer {
                Consumer::Forward => self.ctx[c].carry = Some(Step::IpOutput(p)),
                Consumer::Reader => self.ctx[c].carry = Some(Step::UdpInput(p)),
                Consumer::Screend => {
                    if self.screen_q.len() >= self.screen_cap {
                        self.drops.add(DropPoint::ScreenQueue);
                    } else {
                        self.screen_q.push_back(p);
                    }
                    self.screen_level();
                }
            },
            Step::IpOutput(p) => {
                let out = 1 - p.port;
                let nic = &mut self.nics[out as usize];
                if nic.out_q.len() >= nic.out_cap {
                    self.drops.add(DropPoint::OutputQueue);
                } else {
                    nic.out_q.push_back(p);
                    self.try_start(c, out);
                }
            }
            Step::UdpInput(p) => {
                if self.sock_q.len() >= self.sock_cap_pkts
                    || self.sock_bytes + p.bytes > self.sock_cap_bytes
                {
                    self.drops.add(DropPoint::SocketBuffer);
                } else {
                    self.sock_bytes += p.bytes;
                    self.sock_q.push_back(p);
                }
            }
            Step::PollRx(p) => self.ctx[c].carry = Some(Step::IpInput(p)),
            Step::Screen(p) => self.ctx[c].carry = Some(Step::IpOutput(p)),
            Step::AppRead(p) => self.deliver(p),
            Step::EnableIntr(n, dir) => {
                let nic = &self.nics[n as usize];
                let pending = match dir {
                    Dir::Rx => !nic.rx.is_empty(),
                    Dir::Tx => !nic.done_q.is_empty(),
                };
                let dev = nic.dev;
                if let Some(p) = &mut self.poll {
                    if pending {
                        // Level-triggered: work that came in meanwhile is seen at once.
                        p.fac.interrupt(dev, dir);
                    } else {
                        self.mode_switches += 1;
                    }
                }
            }
            Step::IpSwitch
            | Step::PollSwitch
            | Step::PollCallback
            | Step::CtxSwitch
            | Step::Compute
            | Step::RxLinux(_)
            | Step::IpLinux(_)
            | Step::Xmit(..) => {}
        }
    }

    /// `if_start`: if the transmitter is not known to be busy, load the
    /// output queue onto the ring, up to the ring's size, from context `c`.
    fn try_start(&mut self, c: usize, n: u8) {
        let nic = &mut self.nics[n as usize];
        if !nic.oactive && !nic.out_q.is_empty() {
            nic.oactive = true;
            nic.loading = nic.out_q.len().min(nic.tx_cap);
            self.ctx[c].loading = Some(n);
        }
    }

    /// Starts the next loaded packet onto the wire if the wire is free.
    fn kick(&mut self, n: usize) {
        let nic = &mut self.nics[n];
        if nic.wire.is_some() {
            return;
        }
        let Some(p) = nic.tx_ring.pop_front() else {
            return;
        };
        nic.wire = Some(p);
        if p.id < TRACE_PACKETS {
            let first = self.first_arrival.unwrap_or(0);
            let v = &mut self.samples.to_device_ns;
            if v.len() <= p.id as usize {
                v.resize(p.id as usize + 1, 0);
            }
            v[p.id as usize] = self.now - first;
        }
        let t = self.now + self.p.wire.frame_ns(p.bytes);
        self.push(t, Ev::TxWireDone(n as u8));
    }

    fn tx_wire_done(&mut self, n: usize) {
        let p = self.nics[n].wire.take().expect("a frame was on the wire");
        self.nics[n].done_q.push_back(p);
        self.deliver(p);
        self.kick(n);
        if self.linux.is_some() {
            self.linux_tx_done(n);
        } else if self.poll.is_some() {
            self.post(IntrSrc::Poll(n as u8, Dir::Tx));
        } else {
            self.post(IntrSrc::Tx(n as u8));
        }
    }

    fn deliver(&mut self, p: Packet) {
        self.delivered += 1;
        if p.id == 0 {
            self.first_delivery = Some(self.now - p.arrived);
        }
        if self.now >= self.w0 {
            self.delivered_w += 1;
            self.samples.latency_ns.push(self.now - p.arrived);
        }
    }

    /// Reports the screening queue's level to queue-state feedback (M3).
    fn screen_level(&mut self) {
        let now = self.now;
        let len = self.screen_q.len() as u32;
        let Some(p) = &mut self.poll else { return };
        let was = p.fac.input_inhibited(now).is_some();
        p.fac.queue_level(len, now);
        if was && p.fac.input_inhibited(now).is_none() {
            self.wake_poll();
        } else if !was {
            if let Some(t) = p.fac.deadline() {
                self.push(t, Ev::PollWake);
            }
        }
    }

    fn wake_poll(&mut self) {
        if let Some(p) = &mut self.poll {
            if !p.awake {
                p.awake = true;
                p.need_switch = true;
                self.mode_switches += 1;
            }
        }
    }

    /// Raises an interrupt if the device's interrupt is enabled and not
    /// already pending or being serviced.
    fn post(&mut self, src: IntrSrc) {
        if let Some((n, d)) = src_slot(src) {
            let nic = &self.nics[n];
            if nic.posted[d] || nic.in_service[d] {
                return;
            }
            let enabled = match src {
                IntrSrc::Rx(_) => nic.rx_intr_enabled,
                IntrSrc::Port(_) => true,
                IntrSrc::Poll(_, dir) => self
                    .poll
                    .as_ref()
                    .is_some_and(|p| p.fac.interrupts_enabled(nic.dev, dir)),
                _ => true,
            };
            if !enabled {
                return;
            }
            self.nics[n].posted[d] = true;
        }
        self.intr_pending.push_back(src);
    }

    // ----------------------------------------------------------- traffic

    fn schedule_source(&mut self, s: usize) {
        let src = &mut self.sources[s];
        if (src.count > 0 && src.sent >= src.count) || !src.gap_ns.is_finite() {
            return;
        }
        src.sent += 1;
        let frame = self.p.wire.frame_ns(src.bytes);
        let port = src.port as usize;
        let start = (src.next_start.round() as Nanos).max(self.wire_free[port]);
        let done = start + frame;
        self.wire_free[port] = done;
        match src.kind {
            TrafficKind::Constant => src.next_start += src.gap_ns,
            TrafficKind::Poisson => {
                let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
                src.next_start += -u.ln() * src.gap_ns;
            }
            TrafficKind::Burst => {
                src.in_burst += 1;
                if src.in_burst < src.burst {
                    src.next_start += src.spacing_ns;
                } else {
                    src.in_burst = 0;
                    src.burst_start += src.gap_ns;
                    src.next_start = src.burst_start;
                }
            }
        }
        self.push(done, Ev::Arrive(s as u8));
    }

    fn arrive(&mut self, s: usize) {
        let port = self.sources[s].port;
        let p = Packet {
            id: self.next_id,
            bytes: self.sources[s].bytes,
            arrived: self.now,
            port,
            seq: 0,
        };
        self.next_id = self.next_id.wrapping_add(1);
        self.arrived += 1;
        self.first_arrival.get_or_insert(self.now);
        if self.now >= self.w0 {
            self.arrived_w += 1;
        }
        let nic = &mut self.nics[port as usize];
        if nic.rx.len() >= nic.rx_cap {
            self.drops.add(DropPoint::NicRxRing);
        } else {
            nic.rx.push_back(p);
            if self.linux.is_some() {
                if self.linux_rx_irq_enabled(port as usize) {
                    self.post(IntrSrc::Port(port));
                }
            } else if self.poll.is_some() {
                self.post(IntrSrc::Poll(port, Dir::Rx));
            } else {
                self.post(IntrSrc::Rx(port));
            }
        }
        self.schedule_source(s);
    }

    // ------------------------------------------------------------ results

    fn in_flight(&self) -> u64 {
        let mut n = (self.ipintrq.len() + self.screen_q.len() + self.sock_q.len()) as u64;
        n += self.linux.as_ref().map_or(0, |l| l.backlog.len() as u64);
        for nic in &self.nics {
            n += (nic.rx.len() + nic.out_q.len() + nic.tx_ring.len()) as u64;
            n += nic.wire.is_some() as u64;
        }
        for c in &self.ctx {
            n += c.chunk.and_then(|ch| ch.step.packet()).is_some() as u64;
            n += c.carry.and_then(|s| s.packet()).is_some() as u64;
        }
        n
    }

    fn finish(mut self, wall_ms: f64) -> Result<(Metrics, Samples), SimError> {
        let in_flight = self.in_flight();
        let dropped = self.drops.total();
        if self.arrived != self.delivered + dropped + in_flight {
            return Err(SimError::Invariant(format!(
                "conservation violated: arrived {} != delivered {} + dropped {} + in flight {}",
                self.arrived, self.delivered, dropped, in_flight
            )));
        }
        let window = (self.end - self.w0) as f64;
        let secs = window / 1e9;
        let total: Nanos = self.cpu_w.iter().sum();
        if total != self.end - self.w0 {
            return Err(SimError::Invariant(format!(
                "CPU accounting covers {total} ns of a {} ns interval",
                self.end - self.w0
            )));
        }
        let mut cpu = BTreeMap::new();
        for (name, ns) in self.buckets.iter().zip(&self.cpu_w) {
            *cpu.entry(name.clone()).or_insert(0.0) += *ns as f64 / window;
        }
        let mut inhibits = BTreeMap::new();
        if let Some(p) = &self.poll {
            for (cause, n) in p.fac.inhibits() {
                inhibits.insert(cause.name().to_string(), n);
            }
        }
        if self.batch.deadline().is_some() || self.batch.trips() > 0 {
            inhibits.insert("circuit_breaker".to_string(), self.batch.trips());
        }
        let mut lat = self.samples.latency_ns.clone();
        let mut extra = BTreeMap::new();
        if let Some(l) = &self.linux {
            // Buffers freed after their lines were evicted (TX-128's cost).
            extra.insert("cold_reclaims".to_string(), l.cold_reclaims as f64);
        }
        let m = Metrics {
            offered_pps: self.arrived_w as f64 / secs,
            delivered_pps: self.delivered_w as f64 / secs,
            arrived: self.arrived,
            received: self.arrived - self.drops.get(DropPoint::NicRxRing),
            delivered: self.delivered,
            in_flight,
            drops: self.drops.to_map(),
            cpu,
            interrupts: std::mem::take(&mut self.interrupts),
            latency_us: Latency::of(&mut lat),
            mode_switches: self.mode_switches,
            inhibits,
            first_delivery_us: self.first_delivery.map_or(-1.0, |t| t as f64 / 1e3),
            x: None,
            events: self.events,
            wall_ms,
            extra,
        };
        Ok((m, self.samples))
    }
}

fn src_slot(src: IntrSrc) -> Option<(usize, usize)> {
    match src {
        IntrSrc::Rx(n) | IntrSrc::Poll(n, Dir::Rx) | IntrSrc::Port(n) => Some((n as usize, 0)),
        IntrSrc::Tx(n) | IntrSrc::Poll(n, Dir::Tx) => Some((n as usize, 1)),
        IntrSrc::Clock => None,
    }
}
