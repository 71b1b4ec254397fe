//! Network interfaces and the interrupt controller: receive rings that drop
//! when full, output queues, transmit rings and the wire, and interrupt
//! lines that are raised at most once until serviced.

use super::step::IntrSrc;
use crate::engine::packet::Packet;
use std::collections::VecDeque;

/// One interface.
#[derive(Debug)]
pub struct Nic {
    /// Received frames waiting for the host; a frame arriving to a full ring is dropped.
    pub rx: VecDeque<Packet>,
    /// Receive descriptors.
    pub rx_cap: usize,
    /// The protected ring (`kernel.protect`): protected sources' frames,
    /// steered apart from the rest; a frame arriving to it full is dropped.
    pub prot: VecDeque<Packet>,
    /// Its descriptors (0: the device has no protected ring).
    pub prot_cap: usize,
    /// The interface output queue (`if_snd`, or Linux's qdisc).
    pub out_q: VecDeque<Packet>,
    /// Its limit.
    pub out_cap: usize,
    /// Frames loaded onto the transmit ring.
    pub tx_ring: VecDeque<Packet>,
    /// The protected transmit ring (`kernel.protect`, `prot_cap`
    /// descriptors): the wire takes its frames first, as a NIC's priority
    /// transmit queue.
    pub tx_prot: VecDeque<Packet>,
    /// Transmit descriptors.
    pub tx_cap: usize,
    /// The frame on the wire.
    pub wire: Option<Packet>,
    /// Transmitted frames whose buffers are not yet reclaimed.
    pub done_q: VecDeque<Packet>,
}

impl Nic {
    /// An idle interface.
    pub fn new(rx_cap: u32, out_cap: u32, tx_cap: u32) -> Nic {
        Nic {
            rx: VecDeque::new(),
            rx_cap: rx_cap as usize,
            prot: VecDeque::new(),
            prot_cap: 0,
            out_q: VecDeque::new(),
            out_cap: out_cap as usize,
            tx_ring: VecDeque::new(),
            tx_prot: VecDeque::new(),
            tx_cap: tx_cap as usize,
            wire: None,
            done_q: VecDeque::new(),
        }
    }

    /// Packets the interface holds that are still in flight (a transmitted
    /// frame awaiting reclaim has been delivered).
    pub fn packets(&self) -> u64 {
        (self.rx.len() + self.prot.len() + self.out_q.len() + self.tx_ring.len()) as u64
            + self.tx_prot.len() as u64
            + self.wire.is_some() as u64
    }

    /// The interface with a protected ring of `cap` descriptors.
    pub fn with_protected_ring(mut self, cap: u32) -> Nic {
        self.prot_cap = cap as usize;
        self
    }

    /// Whether a frame waits on either receive ring.
    pub fn has_rx(&self) -> bool {
        !self.rx.is_empty() || !self.prot.is_empty()
    }

    /// The next received frame for a driver that serves both rings as one
    /// device: the protected ring's first.
    pub fn take_rx(&mut self) -> Option<Packet> {
        self.prot.pop_front().or_else(|| self.rx.pop_front())
    }

    /// Where an arriving frame goes: the protected ring for a protected
    /// frame when there is one, else the ordinary ring; `None` when that
    /// ring is full (the frame is dropped before any work).
    pub fn ring_for(&mut self, p: &Packet) -> Option<&mut VecDeque<Packet>> {
        let (ring, cap) = if p.protected && self.prot_cap > 0 {
            (&mut self.prot, self.prot_cap)
        } else {
            (&mut self.rx, self.rx_cap)
        };
        (ring.len() < cap).then_some(ring)
    }
}

/// Interrupts raised and the one being serviced. A port's line is raised
/// at most once until its handler runs.
#[derive(Debug)]
pub struct IntrController {
    pending: VecDeque<IntrSrc>,
    /// The handler running, if any.
    pub cur: Option<IntrSrc>,
    /// The running handler has done its work and is on its way out.
    pub exiting: bool,
    posted: Vec<[bool; 2]>,
    in_service: Vec<[bool; 2]>,
    /// A port's receive and transmit interrupts share one line.
    one_line: bool,
    /// A clock tick is raised and not yet taken (ticks raised meanwhile
    /// are one, as on a real line).
    tick: bool,
}

impl IntrController {
    /// A controller for `ports` interfaces; with `one_line`, a port's
    /// receive and transmit interrupts share one line: while either is
    /// posted or in service, raising the other does nothing.
    pub fn new(ports: usize, one_line: bool) -> Self {
        IntrController {
            pending: VecDeque::new(),
            cur: None,
            exiting: false,
            posted: vec![[false; 2]; ports],
            in_service: vec![[false; 2]; ports],
            one_line,
            tick: false,
        }
    }

    /// Raises `src` unless its line is already raised or being serviced.
    /// Whether the device's interrupt is enabled is the kernel's to decide first.
    pub fn raise(&mut self, src: IntrSrc) {
        if src == IntrSrc::Clock {
            self.tick = true;
            return;
        }
        if let Some((n, d)) = self.line(src) {
            if self.posted[n][d] || self.in_service[n][d] {
                return;
            }
            self.posted[n][d] = true;
        }
        self.pending.push_back(src);
    }

    fn line(&self, src: IntrSrc) -> Option<(usize, usize)> {
        match src {
            IntrSrc::Tx(n) if self.one_line => Some((n as usize, 0)),
            s => s.line(),
        }
    }

    /// Takes the raised clock tick, if any: the clock's level is above the
    /// devices', so it is served at once, whatever handler is in service.
    pub fn take_tick(&mut self) -> bool {
        std::mem::take(&mut self.tick)
    }

    /// Begins servicing the next raised device interrupt.
    pub fn begin_next(&mut self) -> Option<IntrSrc> {
        let src = self.pending.pop_front()?;
        if let Some((n, d)) = self.line(src) {
            self.posted[n][d] = false;
            self.in_service[n][d] = true;
        }
        self.cur = Some(src);
        self.exiting = false;
        Some(src)
    }

    /// The handler being serviced returns.
    pub fn end(&mut self) -> Option<IntrSrc> {
        let src = self.cur.take()?;
        if let Some((n, d)) = self.line(src) {
            self.in_service[n][d] = false;
        }
        Some(src)
    }
}
