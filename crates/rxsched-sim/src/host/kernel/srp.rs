//! A receiving host under Signaled Receiver Processing (M9), or under Lazy
//! Receiver Processing (M10), driving `rxsched_core::srp`.
//!
//! The receive interrupt does only link-level work for each frame, then
//! the early demultiplexer and next-stage submit: the buffering check
//! (packet + UIQ + socket receive queue against the receive-buffer limit;
//! LRP: a channel of so many packets) and the enqueue, before any protocol
//! work. IP and UDP input run later, in the receiving process, charged to
//! it: in the kernel's default SIGUIQ action, in a caught signal's handler,
//! or inside its receive call. The receiver here is the scenario's reader.
//!
//! As a gateway (a `forwarder` process instead of a reader), the early
//! demultiplexer hands every frame to the IP forwarding stage's UIQ (a
//! queue of `ipintrq_limit` packets), and a system process runs the stage,
//! IP input and output for each packet, charged to it, under whatever share
//! the scheduler gives it (Brustoloni et al. 2000 §5.1, figure 6).

use super::bsd::{tcp_cost, tcp_receive, Stack};
use super::server::{Cache, Server};
use super::{Kernel, KernelReport};
use crate::engine::job::per_byte;
use crate::engine::packet::Packet;
use crate::host::cpu::CtxId;
use crate::host::machine::Machine;
use crate::host::step::srp::Step;
use crate::host::step::{self, bsd, user, IntrSrc};
use crate::profile::{Costs, Profile};
use crate::scenario::{KernelKind, ProcessKind, Scenario, SigDisposition};
use rxsched_core::srp::{
    Check, Delivery, Disposition, Notice, Notify, Pcb, Pid, Srp as SrpState, Submitted,
};
use rxsched_core::{DropPoint, Nanos};
use std::collections::VecDeque;

impl From<SigDisposition> for Disposition {
    fn from(d: SigDisposition) -> Disposition {
        match d {
            SigDisposition::Default => Disposition::Default,
            SigDisposition::Catch => Disposition::Catch { defer: false },
            SigDisposition::CatchDefer => Disposition::Catch { defer: true },
            SigDisposition::Block => Disposition::Block,
            SigDisposition::Ignore => Disposition::Ignore,
        }
    }
}

/// The SRP (or LRP) receiving host.
#[derive(Debug)]
pub struct Srp {
    c: Costs,
    lrp: bool,
    state: SrpState<Packet>,
    /// The reader (its index among the processes) and its socket.
    reader: Option<(usize, Pcb)>,
    /// A gateway's forwarding stage: its process and the stage's UIQ.
    forwarder: Option<(usize, Pcb)>,
    /// `ip_output`, the output queues and the driver, shared with BSD.
    stack: Stack,
    /// Packets the reader has taken off the UIQ and not yet processed.
    work: VecDeque<Packet>,
    /// Signals posted by the receive interrupt and not yet charged.
    signals_due: u32,
    /// SIGUIQ deliveries that did protocol work.
    deliveries: u64,
    /// The reader as a server of requests, and when the measurement starts.
    server: Option<Server>,
    measure_from: Nanos,
}

impl Srp {
    /// The host a scenario configures.
    pub fn new(s: &Scenario, p: &Profile, ports: usize) -> Srp {
        let lrp = s.kernel.kind == KernelKind::Lrp;
        let mut state = SrpState::default();
        let reader = s
            .process
            .iter()
            .position(|q| q.kind == ProcessKind::Reader)
            .map(|u| {
                let pid = Pid(u as u32);
                let (check, notice) = if lrp {
                    // LRP: a channel of so many packets, processed in the
                    // receive call (UDP).
                    (Check::Channel(s.kernel.socket_packets), Notice::Sync)
                } else {
                    let d = s.process[u].disposition.unwrap_or_default();
                    state.process(pid, d.into());
                    (Check::Rcvbuf(s.kernel.socket_bytes as u64), Notice::Signal)
                };
                let pcb = state.socket(&[pid], check, notice);
                // The reader starts in its receive call, asleep on the UIQ.
                state.sleep(pid, pcb);
                (u, pcb)
            });
        let forwarder = s
            .process
            .iter()
            .position(|q| q.kind == ProcessKind::Forwarder)
            .map(|u| {
                let pid = Pid(u as u32);
                state.process(pid, Disposition::Ignore);
                // The stage process sleeps on its UIQ and is woken, not signalled.
                let limit = Check::Channel(s.kernel.ipintrq_limit);
                let pcb = state.socket(&[pid], limit, Notice::Sync);
                state.sleep(pid, pcb);
                (u, pcb)
            });
        let server = reader.and_then(|(u, _)| {
            let q = &s.process[u];
            Some(Server::new(
                (q.request_kb? * 1024.0).round() as u64,
                q.compute?,
                q.compute_ns_per_byte?,
                Cache::new(p.cost.cache_bytes, p.cost.cache_miss_per_byte),
            ))
        });
        Srp {
            server,
            measure_from: (s.run.warmup_ms * 1e6) as Nanos,
            c: p.cost.clone(),
            lrp,
            state,
            reader,
            forwarder,
            stack: Stack::new(p, ports),
            work: VecDeque::new(),
            signals_due: 0,
            deliveries: 0,
        }
    }

    /// NSS for a frame whose link-level work is done.
    fn submit(&mut self, m: &mut Machine, p: Packet) {
        let owner = self.reader.or(self.forwarder);
        let pcb = owner.map(|(_, pcb)| pcb);
        match self.state.submit(pcb, p, p.bytes) {
            Submitted::NoPcb(_) => m.drop(DropPoint::SocketBuffer),
            Submitted::Dropped(..) => m.drop(if self.lrp {
                DropPoint::LrpChannel
            } else {
                DropPoint::Uiq
            }),
            Submitted::Queued(_, notify) => {
                if let Some((u, _)) = owner {
                    match notify {
                        Notify::Woke(_) | Notify::Thread(_) => m.users.set_ready(u, true),
                        Notify::Signalled(_) => {
                            self.signals_due += 1;
                            m.users.set_ready(u, true);
                        }
                        Notify::Nobody => {}
                    }
                }
            }
        }
    }

    /// The forwarding stage's next step: forward what its UIQ holds, one
    /// packet at a time; sleep on it when it is empty.
    fn forwarder_step(&mut self, m: &mut Machine, u: usize, pcb: Pcb) -> Option<step::Step> {
        match self.state.take_one(pcb) {
            Some(p) => Some(step::Step::Srp(Step::Forward(p))),
            None => {
                self.state.sleep(Pid(u as u32), pcb);
                m.users.set_ready(u, false);
                None
            }
        }
    }

    /// The reader's next step: protocol work it has taken on, a pending
    /// signal, then its receive call (the UIQ's packets, then a read);
    /// `None` when it sleeps on the UIQ.
    fn reader_step(&mut self, m: &mut Machine, u: usize, pcb: Pcb) -> Option<step::Step> {
        if let Some(p) = self.work.pop_front() {
            return Some(step::Step::Srp(Step::Protocol(p)));
        }
        let pid = Pid(u as u32);
        if self.state.deliverable(pid) {
            match self.state.deliver(pid) {
                Delivery::Process { packets, handler } => {
                    self.deliveries += 1;
                    self.work.extend(packets.into_iter().map(|(_, p)| p));
                    return Some(step::Step::Srp(if handler {
                        Step::Handler
                    } else {
                        Step::Deliver
                    }));
                }
                Delivery::Deferred => return Some(step::Step::Srp(Step::Handler)),
                Delivery::Nothing => {}
            }
        }
        // A server out of its receive call: computing, then replying.
        if let Some(sv) = self.server.as_mut().filter(|sv| !sv.reading()) {
            if let Some(ns) = sv.compute_step() {
                return Some(step::Step::Srp(Step::Compute(ns)));
            }
            return sv.replying().then_some(step::Step::Srp(Step::Reply));
        }
        // The receive call. SRP first does the protocol work for every
        // packet on the UIQ (the buffering check bounds them with the
        // receive queue); LRP's UDP is lazier: it processes channel packets
        // one at a time, only while the receive queue has nothing to read.
        if !self.lrp || m.users.socket.is_empty() {
            let taken = if self.lrp {
                self.state.take_one(pcb).into_iter().collect()
            } else {
                self.state.take(pcb)
            };
            if !taken.is_empty() {
                self.work.extend(taken);
                return self
                    .work
                    .pop_front()
                    .map(|p| step::Step::Srp(Step::Protocol(p)));
            }
        }
        match m.users.socket.pop() {
            Some(p) => {
                self.state.consumed(pcb, p.bytes);
                if let Some(sv) = self.server.as_mut() {
                    let extra = sv.copy_out(p.id, u64::from(p.bytes));
                    return Some(step::Step::Srp(Step::Read(p, extra)));
                }
                Some(step::Step::User(user::Step::AppRead(p)))
            }
            None => {
                self.state.sleep(pid, pcb);
                m.users.set_ready(u, false);
                None
            }
        }
    }
}

impl Kernel for Srp {
    fn rx_arrived(&mut self, m: &mut Machine, n: u8) {
        m.raise(IntrSrc::Rx(n));
    }

    fn tx_done(&mut self, m: &mut Machine, n: u8) {
        m.raise(IntrSrc::Tx(n));
    }

    fn isr_step(&mut self, m: &mut Machine, src: IntrSrc) -> Option<step::Step> {
        if self.signals_due > 0 {
            self.signals_due -= 1;
            return Some(step::Step::Srp(Step::Signal));
        }
        match src {
            IntrSrc::Rx(n) => {
                let p = m.nics[n as usize].rx.pop_front()?;
                Some(step::Step::Srp(Step::RxLink(p)))
            }
            IntrSrc::Tx(n) => {
                let p = m.nics[n as usize].done_q.pop_front()?;
                Some(step::Step::Bsd(bsd::Step::TxReclaim(n, p)))
            }
            _ => None,
        }
    }

    fn isr_exit(&mut self, m: &mut Machine, src: IntrSrc) {
        // More frames arrived (or finished) while the handler ran.
        match src {
            IntrSrc::Rx(n) if !m.nics[n as usize].rx.is_empty() => m.raise(src),
            IntrSrc::Tx(n) if !m.nics[n as usize].done_q.is_empty() => m.raise(src),
            _ => {}
        }
    }

    fn driver_step(&mut self, m: &mut Machine, c: CtxId) -> Option<step::Step> {
        self.stack.driver_step(m, c)
    }

    fn next_step(&mut self, _m: &mut Machine, _c: CtxId) -> Option<step::Step> {
        None
    }

    fn owns_user(&self, u: usize) -> bool {
        self.reader.or(self.forwarder).is_some_and(|(r, _)| r == u)
    }

    fn user_step(&mut self, m: &mut Machine, u: usize) -> Option<step::Step> {
        if let Some((_, pcb)) = self.forwarder.filter(|(r, _)| *r == u) {
            return self.forwarder_step(m, u, pcb);
        }
        let (_, pcb) = self.reader.filter(|(r, _)| *r == u)?;
        self.reader_step(m, u, pcb)
    }

    fn complete(&mut self, m: &mut Machine, c: CtxId, step: step::Step) {
        match step {
            step::Step::IntrEnter(IntrSrc::Rx(_)) => m.meter.interrupts.rx += 1,
            step::Step::IntrEnter(IntrSrc::Tx(_)) => m.meter.interrupts.tx += 1,
            step::Step::Srp(Step::Forward(p)) => {
                if let Some((_, pcb)) = self.forwarder {
                    self.state.processed(pcb, p.bytes, 0);
                }
                self.stack.complete(m, c, bsd::Step::IpOutput(p));
            }
            step::Step::Bsd(s) => {
                self.stack.complete(m, c, s);
            }
            step::Step::Srp(Step::RxLink(p)) => self.submit(m, p),
            step::Step::Srp(Step::Read(p, _)) => {
                m.deliver(p);
                if let Some(t) = m.tcp.as_mut() {
                    t.host_consumed(m.now, &mut m.events);
                }
                if let Some(sv) = self.server.as_mut() {
                    sv.read(u64::from(p.bytes), m.now);
                }
            }
            step::Step::Srp(Step::Reply) => {
                if let Some(sv) = self.server.as_mut() {
                    sv.replied(m.now);
                }
            }
            step::Step::Srp(Step::Protocol(p)) => {
                let Some((u, pcb)) = self.reader else { return };
                if p.tcp.is_some() && !tcp_receive(m, p) {
                    self.state.processed(pcb, p.bytes, 0);
                    m.drop(DropPoint::TcpOutOfOrder);
                    return;
                }
                // The packet joins the socket's receive queue: it still
                // counts against the buffer, now there instead of the UIQ.
                self.state.processed(pcb, p.bytes, p.bytes);
                if let Some(sv) = self.server.as_mut() {
                    sv.cache.protocol(p.id, u64::from(p.bytes));
                }
                m.users.socket.push(p);
                m.users.set_ready(u, true);
            }
            _ => {}
        }
    }

    fn cost(&self, _m: &Machine, step: step::Step) -> Nanos {
        let c = &self.c;
        match step {
            step::Step::IntrEnter(IntrSrc::Clock) => c.clock_tick,
            step::Step::IntrEnter(_) => c.intr_dispatch,
            step::Step::IntrExit(_) => c.intr_exit,
            step::Step::Srp(s) => match s {
                Step::RxLink(p) => {
                    c.rx_copy + per_byte(p.bytes, c.rx_copy_per_byte) + c.rx_link + c.srp_demux
                }
                Step::Signal => c.srp_signal,
                Step::Deliver => c.srp_deliver,
                Step::Handler => c.srp_deliver + c.srp_handler,
                Step::Protocol(p) if p.tcp.is_some() => c.ip_input + tcp_cost(c, p),
                Step::Protocol(_) => c.ip_input + c.udp_input,
                Step::Forward(_) => c.ip_input + c.ip_output + c.driver_tx,
                Step::Read(_, extra) => c.tcp_read + extra,
                Step::Compute(ns) => ns,
                // A reply of a few bytes: a segment out, as an ACK goes.
                Step::Reply => c.tcp_ack,
            },
            step::Step::Bsd(s) => self.stack.cost(s),
            _ => 0,
        }
    }

    fn screened(&mut self, _p: Packet) -> Option<step::Step> {
        None
    }

    fn in_flight(&self) -> u64 {
        self.state.queued() + self.work.len() as u64
    }

    fn report(&self) -> KernelReport {
        let mut r = KernelReport::default();
        let c = self.state.counts();
        r.extra.insert("srp_signals".into(), c.signals as f64);
        r.extra.insert("srp_wakeups".into(), c.wakeups as f64);
        r.extra
            .insert("srp_deliveries".into(), self.deliveries as f64);
        if let Some(sv) = &self.server {
            if let Some((t, c)) = sv.means(self.measure_from) {
                r.extra.insert("transaction_ms".into(), t);
                r.extra.insert("compute_ms".into(), c);
            }
            r.extra
                .insert("cache_miss_share".into(), sv.cache.miss_share());
        }
        r
    }
}
