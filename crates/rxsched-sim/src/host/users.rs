//! User processes and their scheduler: a user-level screening filter
//! (screend), a reader of a UDP socket, a packet-capture monitor (tcpdump)
//! reading the packet-filter queue, and compute-bound processes, run by
//! priority and round robin within a priority with a time quantum.

use super::cpu::{Cpu, USER0};
use super::step::user::Step;
use crate::engine::job::COMPUTE_SLICE;
use crate::engine::packet::Packet;
use crate::engine::socket::Socket;
use crate::scenario::{CaptureOutput, ProcessCfg, ProcessKind, Scenario, Scheduler};
use rxsched_core::{Nanos, PropShare, MS};
use std::collections::VecDeque;

/// Where received packets end up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    /// They are forwarded out of the other port.
    Forward,
    /// They pass through screend, then are forwarded.
    Screend,
    /// An application reads them from a UDP socket.
    Reader,
    /// The packet filter queues them for a capture process.
    Capture,
}

impl Consumer {
    /// Where a scenario's packets end up, from its processes (validation
    /// allows at most one screend, reader or tcpdump).
    pub fn of(s: &Scenario) -> Consumer {
        let has = |k| s.process.iter().any(|q| q.kind == k);
        if has(ProcessKind::Screend) {
            Consumer::Screend
        } else if has(ProcessKind::Reader) {
            Consumer::Reader
        } else if has(ProcessKind::Tcpdump) {
            Consumer::Capture
        } else {
            Consumer::Forward
        }
    }
}

#[derive(Debug)]
struct User {
    kind: ProcessKind,
    output: CaptureOutput,
    prio: u32,
    blocked: bool,
    switch_pending: bool,
    /// For a process the kernel drives (an SRP or LRP receiver): whether
    /// the kernel has work for it.
    ready: bool,
    /// `onoff`: CPU time per run, sleep per pause, CPU used in this run,
    /// and whether it is sleeping.
    on_ns: Nanos,
    off_ns: Nanos,
    used: Nanos,
    sleeping: bool,
    /// Its last step was the switch to it: it runs at least one more.
    switched_in: bool,
}

/// The processes, their queues and the scheduler's state.
#[derive(Debug)]
pub struct Users {
    procs: Vec<User>,
    /// The process that last held the CPU.
    pub cur: Option<usize>,
    since: Nanos,
    quantum: Nanos,
    /// Where packets go.
    pub consumer: Consumer,
    /// screend's input queue.
    pub screen_q: VecDeque<Packet>,
    screen_cap: usize,
    /// The packet-filter queue tcpdump reads.
    pub filter_q: VecDeque<Packet>,
    filter_cap: usize,
    /// The reader's socket receive buffer.
    pub socket: Socket,
    /// Under the proportional-share scheduler: its state, and the CPU time
    /// each process has been charged with so far.
    share: Option<(PropShare, Vec<Nanos>)>,
    /// The names of the compute processes.
    compute_names: Vec<String>,
}

impl Users {
    /// The processes of a scenario, and their names.
    pub fn new(s: &Scenario) -> (Users, Vec<String>) {
        let consumer = Consumer::of(s);
        let names: Vec<String> = s.process.iter().map(ProcessCfg::label).collect();
        let procs = s
            .process
            .iter()
            .map(|q| User {
                kind: q.kind,
                output: q.output.unwrap_or_default(),
                prio: q
                    .priority
                    .unwrap_or(if q.kind == ProcessKind::Compute { 1 } else { 0 }),
                blocked: true,
                switch_pending: false,
                ready: false,
                on_ns: q.onoff_ns().0,
                off_ns: q.onoff_ns().1,
                used: 0,
                sleeping: false,
                switched_in: false,
            })
            .collect();
        let k = &s.kernel;
        let share = (s.run.scheduler == Scheduler::Proportional).then(|| {
            let mut ps = PropShare::new(((s.run.quantum_ms * 1e6) as Nanos).max(MS / 10));
            for (i, q) in s.process.iter().enumerate() {
                ps.add(i as u32, q.reservation);
            }
            (ps, vec![0; s.process.len()])
        });
        let users = Users {
            procs,
            cur: None,
            since: 0,
            quantum: (s.run.quantum_ms * 1e6) as Nanos,
            consumer,
            screen_q: VecDeque::new(),
            screen_cap: k.screen_queue_limit as usize,
            filter_q: VecDeque::new(),
            filter_cap: k.filter_queue_limit as usize,
            socket: Socket::new(k.socket_packets, k.socket_bytes),
            share,
            compute_names: s
                .process
                .iter()
                .zip(names.iter())
                .filter(|(q, _)| q.kind == ProcessKind::Compute)
                .map(|(_, n): (_, &String)| n.clone())
                .collect(),
        };
        (users, names)
    }

    fn runnable(&self, u: usize, cpu: &Cpu) -> bool {
        cpu.busy(USER0 + u)
            || self.procs[u].ready
            || match self.procs[u].kind {
                ProcessKind::Screend => !self.screen_q.is_empty(),
                ProcessKind::Reader => !self.socket.is_empty(),
                ProcessKind::Tcpdump => !self.filter_q.is_empty(),
                ProcessKind::Compute => true,
                ProcessKind::Onoff => !self.procs[u].sleeping,
                // Driven by the kernel: runnable when it says so (`ready`).
                ProcessKind::Forwarder => false,
            }
    }

    /// The process that should run now: the best priority, round robin
    /// among equals, keeping the current one until its quantum ends or it
    /// blocks. A process that starts running pays a context switch.
    pub fn pick(&mut self, now: Nanos, cpu: &Cpu) -> Option<usize> {
        if self.share.is_some() {
            return self.pick_share(now, cpu);
        }
        let n = self.procs.len();
        let mut best: Option<(u32, usize)> = None;
        let first = self.cur.map_or(0, |c| c + 1);
        for i in 0..n {
            let u = (first + i) % n;
            if !self.runnable(u, cpu) {
                self.procs[u].blocked = true;
                continue;
            }
            if best.is_none_or(|(p, _)| self.procs[u].prio < p) {
                best = Some((self.procs[u].prio, u));
            }
        }
        let (prio, mut u) = best?;
        if let Some(cur) = self.cur {
            let keep = self.runnable(cur, cpu)
                && self.procs[cur].prio == prio
                && (cpu.ctx[USER0 + cur].job.is_some() || now - self.since < self.quantum);
            if keep {
                u = cur;
            }
        }
        if self.cur != Some(u) {
            self.since = now;
            self.procs[u].switch_pending = true;
        } else if self.procs[u].blocked {
            self.procs[u].switch_pending = true;
        }
        self.procs[u].blocked = false;
        Some(u)
    }

    /// The proportional-share choice: the current process keeps the CPU
    /// while it is in the middle of a step; otherwise the scheduler picks,
    /// having charged the current one with the CPU it used.
    fn pick_share(&mut self, now: Nanos, cpu: &Cpu) -> Option<usize> {
        let runnable: Vec<bool> = (0..self.procs.len())
            .map(|u| self.runnable(u, cpu))
            .collect();
        let (ps, charged) = self.share.as_mut().expect("proportional share");
        if let Some(cur) = self.cur {
            let used = cpu.ctx[USER0 + cur].cpu_ns;
            ps.ran(cur as u32, used - charged[cur]);
            charged[cur] = used;
        }
        for (u, r) in runnable.iter().enumerate() {
            if *r {
                ps.wake(u as u32);
            } else {
                ps.block(u as u32);
                self.procs[u].blocked = true;
            }
        }
        // A process keeps the CPU in the middle of a step, and for the
        // first step after the switch to it.
        let u = match self.cur {
            Some(c)
                if runnable[c]
                    && (cpu.ctx[USER0 + c].job.is_some() || self.procs[c].switched_in) =>
            {
                c
            }
            _ => ps.pick()? as usize,
        };
        if self.cur != Some(u) {
            self.since = now;
            self.procs[u].switch_pending = true;
        } else if self.procs[u].blocked {
            self.procs[u].switch_pending = true;
        }
        self.procs[u].blocked = false;
        Some(u)
    }

    /// Process `u` was given a step; `switch` if it is the switch to it.
    pub fn stepped(&mut self, u: usize, switch: bool) {
        self.procs[u].switched_in = switch;
    }

    /// An `onoff` process ran a slice of `ns` at `now`; if that ends its
    /// run, it sleeps, and this returns when it wakes.
    pub fn ran(&mut self, u: usize, ns: Nanos, now: Nanos) -> Option<Nanos> {
        let p = &mut self.procs[u];
        p.used += ns;
        if p.used < p.on_ns {
            return None;
        }
        p.used = 0;
        p.sleeping = true;
        Some(now + p.off_ns)
    }

    /// A sleeping `onoff` process wakes.
    pub fn wake(&mut self, u: usize) {
        self.procs[u].sleeping = false;
    }

    /// Process `u`'s next step, and whether it took a packet off the
    /// watched queue (whose level feeds back to the kernel).
    pub fn next(&mut self, u: usize) -> (Option<Step>, bool) {
        if std::mem::take(&mut self.procs[u].switch_pending) {
            return (Some(Step::CtxSwitch), false);
        }
        match self.procs[u].kind {
            ProcessKind::Compute => (Some(Step::Compute), false),
            ProcessKind::Onoff => {
                let p = &self.procs[u];
                if p.sleeping {
                    return (None, false);
                }
                let left = p.on_ns - p.used;
                (Some(Step::Run(left.min(COMPUTE_SLICE))), false)
            }
            ProcessKind::Screend => match self.screen_q.pop_front() {
                Some(p) => (Some(Step::Screen(p)), true),
                None => (None, false),
            },
            ProcessKind::Reader => match self.socket.pop() {
                Some(p) => (Some(Step::AppRead(p)), false),
                None => (None, false),
            },
            ProcessKind::Tcpdump => match self.filter_q.pop_front() {
                Some(p) => (Some(Step::Capture(p, self.procs[u].output)), true),
                None => (None, false),
            },
            ProcessKind::Forwarder => (None, false),
        }
    }

    /// Whether the process that interrupt-level work interrupted (the one
    /// holding the CPU, mid-step) is the reader: the one whose packets it is.
    pub fn interrupted_is_reader(&self, cpu: &Cpu) -> bool {
        self.cur.is_some_and(|u| {
            self.procs[u].kind == ProcessKind::Reader && cpu.ctx[USER0 + u].job.is_some()
        })
    }

    /// Whether CPU bucket `name` (`user:<name>`) is a compute process's.
    pub fn is_compute_bucket(&self, name: &str) -> bool {
        name.strip_prefix("user:")
            .is_some_and(|n| self.compute_names.iter().any(|c| c == n))
    }

    /// How many processes there are.
    pub fn len(&self) -> usize {
        self.procs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// The kernel has work for process `u` (true), or it sleeps (false).
    pub fn set_ready(&mut self, u: usize, ready: bool) {
        self.procs[u].ready = ready;
    }

    /// A kernel thread took the CPU from process `u`: it pays a context
    /// switch to get it back.
    pub fn switched_out(&mut self, u: usize) {
        self.procs[u].switch_pending = true;
    }

    /// Whether process `u` pays a context switch before its next step
    /// (and clears it).
    pub fn take_switch(&mut self, u: usize) -> bool {
        std::mem::take(&mut self.procs[u].switch_pending)
    }

    /// The length of the queue queue-state feedback watches (screend's or
    /// the packet filter's).
    pub fn watched_len(&self) -> usize {
        match self.consumer {
            Consumer::Capture => self.filter_q.len(),
            _ => self.screen_q.len(),
        }
    }

    /// Offers a packet to the packet-filter queue; false if it is full.
    pub fn to_filter(&mut self, p: Packet) -> bool {
        if self.filter_q.len() >= self.filter_cap {
            return false;
        }
        self.filter_q.push_back(p);
        true
    }

    /// Offers a packet to screend's queue; false if the queue is full.
    pub fn to_screen(&mut self, p: Packet) -> bool {
        if self.screen_q.len() >= self.screen_cap {
            return false;
        }
        self.screen_q.push_back(p);
        true
    }

    /// Packets waiting in the processes' queues.
    pub fn packets(&self) -> u64 {
        (self.screen_q.len() + self.socket.len() + self.filter_q.len()) as u64
    }
}
