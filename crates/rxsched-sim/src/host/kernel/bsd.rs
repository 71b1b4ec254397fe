//! The 4.2BSD network stack and its interrupt-driven receive path (M1).
//!
//! The receive interrupt copies every frame on the ring into a kernel
//! buffer and onto `ipintrq` (interrupt batching, cut short by the M5
//! circuit breaker); IP input runs later in a software interrupt or, as in
//! Digital UNIX, a kernel thread. The [`Stack`] (IP, UDP, the driver's
//! `if_start`) is shared with the polling kernel.

use super::{Kernel, KernelReport};
use crate::engine::job::per_byte;
use crate::engine::packet::Packet;
use crate::host::cpu::{CtxId, KTHREAD, SOFT};
use crate::host::event::{Ev, Timer};
use crate::host::machine::Machine;
use crate::host::step::bsd::Step;
use crate::host::step::{self, IntrSrc};
use crate::host::users::Consumer;
use crate::profile::{Costs, Profile};
use crate::scenario::{IpLayer, KernelKind, Scenario};
use rxsched_core::{BatchStep, CircuitBreaker, DropPoint, InterruptBatch, Nanos};
use std::collections::VecDeque;

/// IP and UDP input, `ip_output` onto interface queues, and the driver's
/// `if_start` with its "transmitter active" flag.
#[derive(Debug)]
pub struct Stack {
    /// The profile's costs.
    pub c: Costs,
    oactive: Vec<bool>,
    loading: Vec<usize>,
}

impl Stack {
    /// The stack of a host with `ports` interfaces.
    pub fn new(p: &Profile, ports: usize) -> Stack {
        Stack {
            c: p.cost.clone(),
            oactive: vec![false; ports],
            loading: vec![0; ports],
        }
    }

    /// Copying a received frame into a kernel buffer and link-level input.
    pub fn rx_cost(&self, p: Packet) -> Nanos {
        let c = &self.c;
        c.rx_copy + per_byte(p.bytes, c.rx_copy_per_byte) + c.rx_link
    }

    /// The CPU cost of a stack step.
    pub fn cost(&self, step: Step) -> Nanos {
        let c = &self.c;
        match step {
            Step::RxLink(p) => self.rx_cost(p) + c.ipintrq,
            Step::TxReclaim(..) => c.tx_reclaim,
            // The driver prepares a packet for the device when `ip_output`
            // hands it over; loading prepared packets onto the ring is free.
            Step::Load(_) => 0,
            Step::IpSwitch => c.ip_switch,
            Step::IpInput(_) => c.ip_input,
            Step::IpOutput(_) => c.ip_output + c.driver_tx,
            Step::OutputDone => c.output_done,
            Step::UdpInput(_) => c.udp_input,
            Step::TcpInput(p) => tcp_cost(c, p),
            Step::Filter(_) => c.pf_filter,
        }
    }

    /// Applies a finished stack step in context `c`. Returns true if
    /// the watched queue (screend's or the packet filter's) changed length.
    pub fn complete(&mut self, m: &mut Machine, c: CtxId, step: Step) -> bool {
        match step {
            Step::TxReclaim(n, _) => {
                let nic = &m.nics[n as usize];
                // The driver learns that the transmitter went idle only by
                // processing a completion: until then packets wait on the
                // output queue (P3).
                if nic.tx_ring.is_empty() && nic.wire.is_none() {
                    self.oactive[n as usize] = false;
                }
                self.try_start(m, c, n);
            }
            Step::Load(n) => {
                let nic = &mut m.nics[n as usize];
                if nic.tx_ring.len() < nic.tx_cap {
                    if let Some(p) = nic.out_q.pop_front() {
                        nic.tx_ring.push_back(p);
                    }
                }
                m.kick(n as usize);
            }
            Step::IpInput(p) => match m.users.consumer {
                Consumer::Forward => m.carry(c, step::Step::Bsd(Step::IpOutput(p))),
                Consumer::Reader if p.tcp.is_some() => {
                    m.carry(c, step::Step::Bsd(Step::TcpInput(p)))
                }
                Consumer::Reader => m.carry(c, step::Step::Bsd(Step::UdpInput(p))),
                // Captured packets go to the filter before IP; none reach here.
                Consumer::Capture => m.carry(c, step::Step::Bsd(Step::Filter(p))),
                Consumer::Screend => {
                    if !m.users.to_screen(p) {
                        m.drop_packet(DropPoint::ScreenQueue, &p);
                    }
                    return true;
                }
            },
            Step::IpOutput(p) => {
                // The frame is the device's now (the transmit ring is
                // loaded first); the output path's remaining work follows.
                if self.c.output_done > 0 {
                    m.carry(c, step::Step::Bsd(Step::OutputDone));
                }
                let out = 1 - p.port;
                let nic = &mut m.nics[out as usize];
                if p.protected && nic.prot_cap > 0 && nic.tx_prot.len() < nic.prot_cap {
                    // The device's protected transmit ring, which the wire
                    // serves first: the driver loads it at once.
                    nic.tx_prot.push_back(p);
                    m.kick(out as usize);
                } else if p.protected && nic.prot_cap > 0 {
                    // Its ring full: the protected class's band of the output queue
                    // (pfifo_fast's band 0): ahead of every ordinary frame,
                    // whose last one makes room when the queue is full.
                    let at = nic.out_q.iter().take_while(|q| q.protected).count();
                    if nic.out_q.len() >= nic.out_cap {
                        match nic.out_q.back().copied() {
                            Some(last) if !last.protected => {
                                nic.out_q.pop_back();
                                m.drop_packet(DropPoint::OutputQueue, &last);
                            }
                            _ => {
                                m.drop_packet(DropPoint::OutputQueue, &p);
                                return false;
                            }
                        }
                    }
                    m.nics[out as usize].out_q.insert(at, p);
                    self.try_start(m, c, out);
                } else if nic.out_q.len() >= nic.out_cap {
                    m.drop_packet(DropPoint::OutputQueue, &p);
                } else {
                    nic.out_q.push_back(p);
                    self.try_start(m, c, out);
                }
            }
            Step::UdpInput(p) => {
                if !m.users.socket.offer(p) {
                    m.drop_packet(DropPoint::SocketBuffer, &p);
                }
            }
            Step::TcpInput(p) => {
                // TCP takes only what the socket has room for: a segment
                // that does not fit is dropped unacknowledged.
                if !m.users.socket.fits(p) {
                    m.drop_packet(DropPoint::SocketBuffer, &p);
                } else if !tcp_receive(m, p) {
                    m.drop_packet(DropPoint::TcpOutOfOrder, &p);
                } else {
                    m.users.socket.push(p);
                }
            }
            Step::Filter(p) => {
                if !m.users.to_filter(p) {
                    m.drop_packet(DropPoint::FilterQueue, &p);
                }
                return true;
            }
            Step::RxLink(_) | Step::IpSwitch | Step::OutputDone => {}
        }
        false
    }

    /// `if_start`: if the transmitter is not known to be busy, load the
    /// output queue onto the ring, up to the ring's size, from context `c`.
    fn try_start(&mut self, m: &mut Machine, c: CtxId, n: u8) {
        let nic = &m.nics[n as usize];
        if !self.oactive[n as usize] && !nic.out_q.is_empty() {
            self.oactive[n as usize] = true;
            self.loading[n as usize] = nic.out_q.len().min(nic.tx_cap);
            m.cpu.ctx[c].loading = Some(n);
        }
    }

    /// The next frame context `c` loads onto a transmit ring, if it is loading one.
    pub fn driver_step(&mut self, m: &mut Machine, c: CtxId) -> Option<step::Step> {
        let n = m.cpu.ctx[c].loading?;
        let nic = &m.nics[n as usize];
        let left = &mut self.loading[n as usize];
        if *left > 0 && !nic.out_q.is_empty() && nic.tx_ring.len() < nic.tx_cap {
            *left -= 1;
            return Some(step::Step::Bsd(Step::Load(n)));
        }
        *left = 0;
        m.cpu.ctx[c].loading = None;
        None
    }
}

/// TCP input for one segment of `p.bytes`: per segment, per byte (the
/// checksum), and its ACK.
pub fn tcp_cost(c: &Costs, p: Packet) -> Nanos {
    c.tcp_input + per_byte(p.bytes, c.tcp_input_per_byte) + c.tcp_ack
}

/// The host's TCP input took `p`: its ACK goes back to the sender, and the
/// result says whether the data was next in order.
pub fn tcp_receive(m: &mut Machine, p: Packet) -> bool {
    match (m.tcp.as_mut(), p.tcp) {
        (Some(t), Some(seg)) => t.host_receive(seg.n, m.now, &mut m.events),
        _ => false,
    }
}

/// The interrupt-driven kernel (M1), or the polling kernel's driver
/// structure configured to act like it ("emulated").
#[derive(Debug)]
pub struct Bsd {
    stack: Stack,
    emulated: bool,
    ipintrq: VecDeque<Packet>,
    ipintrq_cap: usize,
    ip_ctx: CtxId,
    ip_requested: bool,
    ip_active: bool,
    /// Each port's receive handler and its circuit breaker (a driver's own).
    batch: Vec<InterruptBatch>,
    rx_enabled: Vec<bool>,
    /// One handler serves a port's receive and transmit events (LANCE).
    one_interrupt: bool,
    /// Instrumentation on the handler's return (`kernel.intr_return_probe_ns`).
    probe_ns: Nanos,
    /// Device handlers that took a frame off a receive ring, and the
    /// frames they took; whether the handler in service has taken one.
    rx_entries: u64,
    rx_taken: u64,
    took_rx: bool,
}

impl Bsd {
    /// The kernel a scenario configures.
    pub fn new(s: &Scenario, p: &Profile, ports: usize) -> Bsd {
        let k = &s.kernel;
        let handler = || {
            if k.breaker.enabled {
                InterruptBatch::with_breaker(CircuitBreaker::new(
                    k.breaker.batch,
                    (k.breaker.off_us * 1e3) as Nanos,
                ))
            } else {
                InterruptBatch::new()
            }
        };
        let batch = (0..ports).map(|_| handler()).collect();
        Bsd {
            stack: Stack::new(p, ports),
            emulated: k.kind == KernelKind::Emulated,
            probe_ns: k.intr_return_probe_ns,
            ipintrq: VecDeque::new(),
            ipintrq_cap: k.ipintrq_limit as usize,
            ip_ctx: if k.ip_layer == IpLayer::Softirq {
                SOFT
            } else {
                KTHREAD
            },
            ip_requested: false,
            ip_active: false,
            batch,
            rx_enabled: vec![true; ports],
            one_interrupt: p.nic.one_interrupt,
            rx_entries: 0,
            rx_taken: 0,
            took_rx: false,
        }
    }

    /// The receive handler's next frame on port `n`, if it takes one.
    fn rx_work(&mut self, m: &mut Machine, n: u8) -> Option<step::Step> {
        if !self.rx_enabled[n as usize] {
            return None;
        }
        let nic = &mut m.nics[n as usize];
        match self.batch[n as usize].next(nic.has_rx()) {
            BatchStep::Packet => {
                let p = nic.take_rx().expect("ring has a packet");
                self.rx_taken += 1;
                if !std::mem::replace(&mut self.took_rx, true) {
                    self.rx_entries += 1;
                }
                Some(step::Step::Bsd(Step::RxLink(p)))
            }
            BatchStep::ExitDisabled(t) => {
                self.rx_enabled[n as usize] = false;
                m.push(t, Ev::Timer(Timer::BreakerEnd(n)));
                None
            }
            BatchStep::Exit => None,
        }
    }

    /// The transmit handler's next completed frame on port `n`.
    fn tx_work(&mut self, m: &mut Machine, n: u8) -> Option<step::Step> {
        let p = m.nics[n as usize].done_q.pop_front()?;
        Some(step::Step::Bsd(Step::TxReclaim(n, p)))
    }

    /// IP input: one switch into the software interrupt or thread, then
    /// every packet on `ipintrq`.
    fn next_ip(&mut self, m: &mut Machine) -> Option<step::Step> {
        if !self.ip_active {
            if self.ip_requested && !self.ipintrq.is_empty() {
                self.ip_active = true;
                self.ip_requested = false;
                return Some(step::Step::Bsd(Step::IpSwitch));
            }
            return None;
        }
        match self.ipintrq.pop_front() {
            Some(p) => {
                m.meter.ip_input_begins(p, m.now);
                Some(step::Step::Bsd(Step::IpInput(p)))
            }
            None => {
                self.ip_active = false;
                None
            }
        }
    }
}

impl Kernel for Bsd {
    fn rx_arrived(&mut self, m: &mut Machine, n: u8) {
        if self.rx_enabled[n as usize] {
            m.raise(IntrSrc::Rx(n));
        }
    }

    fn tx_done(&mut self, m: &mut Machine, n: u8) {
        m.raise(IntrSrc::Tx(n));
    }

    fn isr_step(&mut self, m: &mut Machine, src: IntrSrc) -> Option<step::Step> {
        // One handler per port (LANCE's `lnintr`) looks at the receive
        // ring first and then at completed transmissions, whichever event
        // raised it, until neither has work.
        match src {
            IntrSrc::Rx(n) | IntrSrc::Tx(n) if self.one_interrupt => {
                self.rx_work(m, n).or_else(|| self.tx_work(m, n))
            }
            IntrSrc::Rx(n) => self.rx_work(m, n),
            IntrSrc::Tx(n) => self.tx_work(m, n),
            _ => None,
        }
    }

    fn isr_exit(&mut self, m: &mut Machine, src: IntrSrc) {
        let (IntrSrc::Rx(n) | IntrSrc::Tx(n)) = src else {
            return;
        };
        let nic = &m.nics[n as usize];
        let (rx, tx) = (nic.has_rx(), !nic.done_q.is_empty());
        let one = self.one_interrupt;
        let serves = |s: IntrSrc| one || s == src;
        if rx && serves(IntrSrc::Rx(n)) {
            self.rx_arrived(m, n);
        }
        if tx && serves(IntrSrc::Tx(n)) {
            m.raise(IntrSrc::Tx(n));
        }
    }

    fn driver_step(&mut self, m: &mut Machine, c: CtxId) -> Option<step::Step> {
        self.stack.driver_step(m, c)
    }

    fn next_step(&mut self, m: &mut Machine, c: CtxId) -> Option<step::Step> {
        if c == self.ip_ctx {
            self.next_ip(m)
        } else {
            None
        }
    }

    fn complete(&mut self, m: &mut Machine, c: CtxId, step: step::Step) {
        match step {
            step::Step::IntrEnter(IntrSrc::Rx(n)) => {
                m.meter.interrupts.rx += 1;
                self.took_rx = false;
                self.batch[n as usize].begin();
            }
            step::Step::IntrEnter(IntrSrc::Tx(n)) => {
                m.meter.interrupts.tx += 1;
                self.took_rx = false;
                if self.one_interrupt {
                    self.batch[n as usize].begin();
                }
            }
            step::Step::Bsd(Step::RxLink(p)) => {
                self.batch[p.port as usize].handled(m.now);
                if m.users.consumer == Consumer::Capture {
                    // The packet filter runs in the receive interrupt (§8.1).
                    m.carry(c, step::Step::Bsd(Step::Filter(p)));
                } else if self.ipintrq.len() >= self.ipintrq_cap {
                    m.drop_packet(DropPoint::Ipintrq, &p);
                } else {
                    self.ipintrq.push_back(p);
                    self.ip_requested = true;
                }
            }
            step::Step::Bsd(s) => {
                if m.users.consumer == Consumer::Reader
                    && matches!(
                        s,
                        Step::IpSwitch | Step::IpInput(_) | Step::UdpInput(_) | Step::TcpInput(_)
                    )
                    && !m.users.interrupted_is_reader(&m.cpu)
                {
                    // IP and UDP input for the reader, at interrupt level,
                    // billed to whichever process it interrupted (P5).
                    let ns = self.stack.cost(s);
                    m.meter.misaccount(m.now, ns);
                }
                self.stack.complete(m, c, s);
            }
            _ => {}
        }
    }

    fn cost(&self, m: &Machine, step: step::Step) -> Nanos {
        let c = &self.stack.c;
        match step {
            // A captured packet is not queued for IP.
            step::Step::Bsd(Step::RxLink(p)) if m.users.consumer == Consumer::Capture => {
                self.stack.rx_cost(p)
            }
            // Emulating the unmodified kernel, the interrupt handler reaches the
            // link-level code through the polling driver's receive callback.
            step::Step::IntrEnter(IntrSrc::Rx(_)) if self.emulated => {
                c.intr_dispatch + c.poll_callback
            }
            step::Step::IntrEnter(IntrSrc::Clock) => c.clock_tick,
            step::Step::IntrEnter(_) => c.intr_dispatch,
            step::Step::IntrExit(IntrSrc::Rx(_) | IntrSrc::Tx(_)) => c.intr_exit + self.probe_ns,
            step::Step::Bsd(s) => self.stack.cost(s),
            _ => 0,
        }
    }

    fn timer(&mut self, m: &mut Machine, t: Timer) {
        // Each port's breaker closes on its own timer.
        if let Timer::BreakerEnd(n) = t {
            if self.batch[n as usize].timer(m.now) {
                self.rx_enabled[n as usize] = true;
                if m.nics[n as usize].has_rx() {
                    self.rx_arrived(m, n);
                }
            }
        }
    }

    fn screened(&mut self, p: Packet) -> Option<step::Step> {
        Some(step::Step::Bsd(Step::IpOutput(p)))
    }

    fn in_flight(&self) -> u64 {
        self.ipintrq.len() as u64
    }

    fn report(&self) -> KernelReport {
        let mut r = KernelReport::default();
        // Interrupt batching (§6.3: "at high input rates very few interrupts
        // are actually taken"): handler invocations that took frames off a
        // receive ring, per frame taken, over the whole run.
        r.extra.insert(
            "rx_interrupts_per_frame".to_string(),
            self.rx_entries as f64 / self.rx_taken.max(1) as f64,
        );
        if self
            .batch
            .iter()
            .any(|b| b.deadline().is_some() || b.trips() > 0)
        {
            let trips = self.batch.iter().map(InterruptBatch::trips).sum();
            r.inhibits.insert("circuit_breaker".to_string(), trips);
        }
        r
    }
}
