//! A TCP connection through the host between two endpoints outside it: a
//! Reno sender behind port 0 and a receiver behind port 1 (Brustoloni et
//! al. 2000's figure 6: netperf from host A through gateway G to host B).
//!
//! Each endpoint is one CPU that does its work in order (sending a segment,
//! taking an ACK; taking a segment and sending its ACK) at a fixed cost, on
//! its own point-to-point link into the host. The sender is window-limited
//! (the smaller of its congestion window and the receiver's window) and
//! ACK-clocked; it starts in slow start, grows the window by one segment
//! per ACK there and by one per window in congestion avoidance, retransmits
//! on three duplicate ACKs with fast recovery, and on a timeout (RTO from
//! smoothed RTT, doubled on each expiry) falls back to one segment and
//! sends again from the first unacknowledged one. The receiver ACKs every
//! segment (no delayed ACKs), cumulatively, keeping out-of-order ones.
//! Everything the host does to the packets (forwarding them, dropping them
//! on a full ring or UIQ) is the host model's own.
//!
//! With `receiver = "host"` the host itself is the receiver (Brustoloni et
//! al.'s table 1): its TCP input ([`TcpFlow::host_receive`]) takes each
//! segment in order, and its ACK goes straight onto the link back to the
//! sender (one 64-byte ACK per 1,518-byte segment uses 4% of the link;
//! it does not queue behind anything in the host). The host keeps no
//! reassembly queue: a segment out of order is dropped (and ACKed).

use super::events::Events;
use super::packet::{Packet, TcpSeg};
use crate::profile::Wire;
use crate::scenario::TcpCfg;
use rxsched_core::{Nanos, MS, US};
use std::collections::{BTreeSet, VecDeque};

/// TCP/IP and Ethernet header and trailer bytes around a segment's payload.
const OVERHEAD: u32 = 58;
/// An ACK's frame (40 header bytes, padded to the minimum frame).
const ACK_FRAME: u32 = 64;
/// The longest a timeout may grow to.
const RTO_MAX: Nanos = 64_000 * MS;

/// Which of the flow's events happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TcpEv {
    /// The sender finished preparing a segment: it goes on its link.
    Sent,
    /// A frame reaches the host: from the sender (0) or the receiver (1).
    Wire(u8),
    /// The sender finished taking an ACK.
    AckDone,
    /// The receiver finished taking a segment (and sends its ACK).
    RecvDone,
    /// The retransmission timer of this generation expires.
    Rto(u64),
    /// An ACK from the host (its own TCP input) reaches the sender.
    HostAck,
}

/// Counters of the connection over the measured interval.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpStats {
    /// Payload bytes the receiver took in order.
    pub goodput_bytes: u64,
    /// Segments sent again.
    pub retransmits: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// Fast retransmits.
    pub fast_retransmits: u64,
}

/// One connection and its two endpoints.
#[derive(Debug)]
pub struct TcpFlow {
    mss: u32,
    rwnd: f64,
    send_ns: Nanos,
    ack_ns: Nanos,
    recv_ns: Nanos,
    rto_min: Nanos,
    limit: Option<u32>,
    half_duplex: bool,
    /// An ACK's extra medium time when it meets the sender's stream.
    contention: Nanos,
    wire: Wire,
    w0: Nanos,
    next_id: u32,
    // Sender.
    una: u32,
    nxt: u32,
    cwnd: f64,
    ssthresh: f64,
    dup: u32,
    recover: Option<u32>,
    rto: Nanos,
    rto_gen: u64,
    rto_armed: bool,
    srtt: Option<(f64, f64)>,
    probe: Option<(u32, Nanos)>,
    a_busy: Nanos,
    a_wire_free: Nanos,
    a_out: VecDeque<u32>,
    /// ACKs on the sender's CPU: what they acknowledge and, from the host
    /// under flow control, how far its application had read.
    a_acks: VecDeque<(u32, Option<u32>)>,
    /// Flow control: the receiver's window counts what its application has
    /// not read yet, not only what is unacknowledged; the sender knows the
    /// reading as of the last ACK (`adv_read`), the host as it happens.
    flow_control: bool,
    adv_read: u32,
    host_read: u32,
    /// The reading the host's last ACK carried.
    host_advertised: u32,
    // Receiver.
    rcv_nxt: u32,
    ooo: BTreeSet<u32>,
    b_busy: Nanos,
    b_wire_free: Nanos,
    b_in: VecDeque<u32>,
    // Frames on the links into the host, in arrival order.
    wires: [VecDeque<Packet>; 2],
    // The host's own ACKs on their way to the sender.
    h_wire_free: Nanos,
    h_acks: VecDeque<(u32, Option<u32>)>,
    stats: TcpStats,
}

impl TcpFlow {
    /// The connection a scenario's `[tcp]` describes, measured from `w0`.
    pub fn new(cfg: &TcpCfg, wire: &Wire, w0: Nanos) -> TcpFlow {
        let us = |v: f64| (v * US as f64).round() as Nanos;
        TcpFlow {
            mss: cfg.mss,
            // Under flow control the window is the host's buffer, which
            // counts each segment's frame (its headers too) against it.
            rwnd: if cfg.flow_control {
                (cfg.window_bytes / (cfg.mss + OVERHEAD)).max(1) as f64
            } else {
                (cfg.window_bytes / cfg.mss).max(1) as f64
            },
            send_ns: us(cfg.sender_segment_us),
            ack_ns: us(cfg.sender_ack_us),
            recv_ns: us(cfg.receiver_segment_us),
            rto_min: (cfg.rto_min_ms * MS as f64) as Nanos,
            limit: (cfg.bytes > 0).then(|| cfg.bytes.div_ceil(cfg.mss as u64) as u32),
            half_duplex: cfg.half_duplex,
            contention: us(cfg.ack_contention_us),
            wire: wire.clone(),
            w0,
            // Far from the traffic sources' ids, which count from 0.
            next_id: 1 << 31,
            una: 0,
            nxt: 0,
            cwnd: 1.0,
            ssthresh: f64::MAX,
            dup: 0,
            recover: None,
            rto: (cfg.rto_min_ms * MS as f64).max(1000.0 * MS as f64) as Nanos,
            rto_gen: 0,
            rto_armed: false,
            srtt: None,
            probe: None,
            a_busy: 0,
            a_wire_free: 0,
            a_out: VecDeque::new(),
            a_acks: VecDeque::new(),
            flow_control: cfg.flow_control,
            adv_read: 0,
            host_read: 0,
            host_advertised: 0,
            rcv_nxt: 0,
            ooo: BTreeSet::new(),
            b_busy: 0,
            b_wire_free: 0,
            b_in: VecDeque::new(),
            wires: [VecDeque::new(), VecDeque::new()],
            h_wire_free: 0,
            h_acks: VecDeque::new(),
            stats: TcpStats::default(),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> TcpStats {
        self.stats
    }

    /// Starts the connection at `now`.
    pub fn start<E: From<TcpEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        self.a_busy = now;
        self.pump(now, ev);
    }

    fn flight(&self) -> f64 {
        (self.nxt - self.una) as f64
    }

    /// Prepares segment `seq` on the sender's CPU.
    fn prepare<E: From<TcpEv>>(&mut self, seq: u32, now: Nanos, ev: &mut Events<E>) {
        self.a_busy = self.a_busy.max(now) + self.send_ns;
        self.a_out.push_back(seq);
        ev.push(self.a_busy, TcpEv::Sent);
    }

    /// Sends what the window allows.
    fn pump<E: From<TcpEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        let win = self.cwnd.min(self.rwnd).floor().max(1.0);
        let unread_room = |f: &Self| !f.flow_control || ((f.nxt - f.adv_read) as f64) < f.rwnd;
        while self.flight() < win && unread_room(self) && self.limit.is_none_or(|l| self.nxt < l) {
            let seq = self.nxt;
            self.nxt += 1;
            self.prepare(seq, now, ev);
        }
        if self.nxt > self.una && !self.rto_armed {
            self.arm_rto(now, ev);
        }
    }

    fn arm_rto<E: From<TcpEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        self.rto_gen += 1;
        self.rto_armed = true;
        ev.push(now + self.rto, TcpEv::Rto(self.rto_gen));
    }

    fn packet(&mut self, port: u8, bytes: u32, tcp: TcpSeg, now: Nanos) -> Packet {
        self.next_id = self.next_id.wrapping_add(1);
        Packet {
            id: self.next_id,
            bytes,
            arrived: now,
            port,
            seq: 0,
            tcp: Some(tcp),
            echo: false,
            protected: false,
            source: super::packet::NO_SOURCE,
        }
    }

    /// Puts a frame on link `dir` into the host; it arrives when its last
    /// bit does.
    fn send_to_host<E: From<TcpEv>>(
        &mut self,
        dir: usize,
        mut p: Packet,
        now: Nanos,
        ev: &mut Events<E>,
    ) {
        let free = if dir == 0 || self.half_duplex {
            &mut self.a_wire_free
        } else {
            &mut self.b_wire_free
        };
        let t = (*free).max(now) + self.wire.frame_ns(p.bytes);
        *free = t;
        p.arrived = t;
        self.wires[dir].push_back(p);
        ev.push(t, TcpEv::Wire(dir as u8));
    }

    /// The host sent `p` out of port `n`: the endpoint behind it takes it.
    pub fn from_host<E: From<TcpEv>>(&mut self, n: u8, p: Packet, now: Nanos, ev: &mut Events<E>) {
        match (n, p.tcp) {
            (0, Some(TcpSeg { ack: true, n })) => {
                self.a_busy = self.a_busy.max(now) + self.ack_ns;
                self.a_acks.push_back((n, None));
                ev.push(self.a_busy, TcpEv::AckDone);
            }
            (1, Some(TcpSeg { ack: false, n })) => {
                self.b_busy = self.b_busy.max(now) + self.recv_ns;
                self.b_in.push_back(n);
                ev.push(self.b_busy, TcpEv::RecvDone);
            }
            _ => {}
        }
    }

    /// Handles one of the flow's events; returns a frame that reaches the
    /// host now, if any.
    pub fn handle<E: From<TcpEv>>(
        &mut self,
        e: TcpEv,
        now: Nanos,
        ev: &mut Events<E>,
    ) -> Option<Packet> {
        match e {
            TcpEv::Sent => {
                let seq = self.a_out.pop_front()?;
                if self.probe.is_none() && seq + 1 == self.nxt {
                    self.probe = Some((seq, now));
                }
                let tcp = TcpSeg { ack: false, n: seq };
                let p = self.packet(0, self.mss + OVERHEAD, tcp, now);
                self.send_to_host(0, p, now, ev);
            }
            TcpEv::Wire(dir) => return self.wires[dir as usize].pop_front(),
            TcpEv::AckDone => {
                let (n, read) = self.a_acks.pop_front()?;
                self.on_ack(n, read, now, ev);
            }
            TcpEv::RecvDone => {
                let seq = self.b_in.pop_front()?;
                self.on_segment(seq, now, ev);
            }
            TcpEv::Rto(gen) if gen == self.rto_gen && self.rto_armed => self.timeout(now, ev),
            TcpEv::Rto(_) => {}
            TcpEv::HostAck => {
                let n = self.h_acks.pop_front()?;
                self.a_busy = self.a_busy.max(now) + self.ack_ns;
                self.a_acks.push_back(n);
                ev.push(self.a_busy, TcpEv::AckDone);
            }
        }
        None
    }

    /// The host's TCP input took segment `seq` at `now`: it ACKs what it
    /// has in order. Returns whether the segment was the next in order
    /// (its data joins the socket; otherwise the host drops it).
    pub fn host_receive<E: From<TcpEv>>(
        &mut self,
        seq: u32,
        now: Nanos,
        ev: &mut Events<E>,
    ) -> bool {
        let in_order = seq == self.rcv_nxt;
        if in_order {
            self.rcv_nxt += 1;
            if now >= self.w0 {
                self.stats.goodput_bytes += self.mss as u64;
            }
        }
        self.host_ack(now, ev);
        in_order
    }

    /// The host's ACK (with its window) onto the link back to the sender.
    fn host_ack<E: From<TcpEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        // On a hub, an ACK that finds a segment on the wire, or the sender
        // with one ready, contends with the next segment for the medium.
        let contends = self.half_duplex && (self.a_wire_free > now || !self.a_out.is_empty());
        let free = if self.half_duplex {
            &mut self.a_wire_free
        } else {
            &mut self.h_wire_free
        };
        let extra = if contends { self.contention } else { 0 };
        let t = (*free).max(now) + self.wire.frame_ns(ACK_FRAME) + extra;
        *free = t;
        let read = self.flow_control.then_some(self.host_read);
        self.host_advertised = self.host_read;
        self.h_acks.push_back((self.rcv_nxt, read));
        ev.push(t, TcpEv::HostAck);
    }

    /// The host's application read one more segment. Under flow control
    /// the host sends a window update (an ACK of nothing new), as BSD's
    /// TCP does, when the window it last advertised was closed or the
    /// reading has opened it by two segments since.
    pub fn host_consumed<E: From<TcpEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        self.host_read += 1;
        let closed = (self.rcv_nxt - self.host_advertised) as f64 >= self.rwnd;
        if self.flow_control && (closed || self.host_read - self.host_advertised >= 2) {
            self.host_ack(now, ev);
        }
    }

    fn on_segment<E: From<TcpEv>>(&mut self, seq: u32, now: Nanos, ev: &mut Events<E>) {
        let before = self.rcv_nxt;
        if seq == self.rcv_nxt {
            self.rcv_nxt += 1;
            while self.ooo.remove(&self.rcv_nxt) {
                self.rcv_nxt += 1;
            }
        } else if seq > self.rcv_nxt {
            self.ooo.insert(seq);
        }
        if now >= self.w0 {
            self.stats.goodput_bytes += (self.rcv_nxt - before) as u64 * self.mss as u64;
        }
        let ack = TcpSeg {
            ack: true,
            n: self.rcv_nxt,
        };
        let p = self.packet(1, ACK_FRAME, ack, now);
        self.send_to_host(1, p, now, ev);
    }

    fn on_ack<E: From<TcpEv>>(
        &mut self,
        n: u32,
        read: Option<u32>,
        now: Nanos,
        ev: &mut Events<E>,
    ) {
        // A window that opened is news even when nothing new is acknowledged.
        let update = read.is_some_and(|r| r > self.adv_read);
        if let Some(r) = read {
            self.adv_read = self.adv_read.max(r);
        }
        if n > self.una {
            if let Some((seq, sent)) = self.probe {
                if n > seq {
                    self.rtt_sample((now - sent) as f64);
                    self.probe = None;
                }
            }
            let acked = (n - self.una) as f64;
            self.una = n;
            self.dup = 0;
            match self.recover {
                // Reno leaves fast recovery on the first new ACK.
                Some(_) => {
                    self.recover = None;
                    self.cwnd = self.ssthresh;
                }
                None if self.cwnd < self.ssthresh => self.cwnd += acked,
                None => self.cwnd += acked / self.cwnd,
            }
            self.rto_armed = false;
            if self.nxt < self.una {
                self.nxt = self.una;
            }
        } else if n == self.una && self.nxt > self.una && !update {
            self.dup += 1;
            if self.dup == 3 && self.recover.is_none() {
                self.ssthresh = (self.flight() / 2.0).max(2.0);
                self.cwnd = self.ssthresh + 3.0;
                self.recover = Some(self.nxt);
                self.stats.retransmits += 1;
                self.stats.fast_retransmits += 1;
                self.probe = None;
                self.prepare(self.una, now, ev);
            } else if self.recover.is_some() {
                self.cwnd += 1.0;
            }
        }
        self.pump(now, ev);
    }

    fn rtt_sample(&mut self, r: f64) {
        let (srtt, var) = match self.srtt {
            None => (r, r / 2.0),
            Some((s, v)) => (0.875 * s + 0.125 * r, 0.75 * v + 0.25 * (s - r).abs()),
        };
        self.srtt = Some((srtt, var));
        self.rto = ((srtt + 4.0 * var) as Nanos).clamp(self.rto_min, RTO_MAX);
    }

    fn timeout<E: From<TcpEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        self.stats.timeouts += 1;
        self.ssthresh = (self.flight() / 2.0).max(2.0);
        self.cwnd = 1.0;
        self.dup = 0;
        self.recover = None;
        self.probe = None;
        self.rto = (self.rto * 2).min(RTO_MAX);
        self.rto_armed = false;
        // Go back to the first unacknowledged segment.
        self.stats.retransmits += (self.nxt - self.una) as u64;
        self.nxt = self.una;
        self.pump(now, ev);
    }
}
