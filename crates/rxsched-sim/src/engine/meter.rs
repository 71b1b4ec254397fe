//! What a run measures: packet counts over the whole run and over the
//! measured interval, drops by point, interrupts taken, and latencies in
//! bounded histograms (memory does not grow with simulated time).

use super::packet::Packet;
use crate::metrics::{Interrupts, Samples, TraceEvent};
use rxsched_core::{DropCounts, DropPoint, Nanos};

/// How many packets at the start of a run have their hand-to-device time kept.
const TRACE_PACKETS: u32 = 64;

/// How many step starts and ends at the start of a run are traced.
const TRACE_EVENTS: usize = 400;

/// Counters and samples of one run.
#[derive(Debug)]
pub struct Meter {
    w0: Nanos,
    /// Packets that arrived, over the whole run.
    pub arrived: u64,
    /// Packets delivered, over the whole run.
    pub delivered: u64,
    /// Arrivals in the measured interval.
    pub arrived_w: u64,
    /// Deliveries in the measured interval.
    pub delivered_w: u64,
    /// Arrivals in the measured interval that found the receive ring full.
    pub ring_drops_w: u64,
    /// Drops by point.
    pub drops: DropCounts,
    /// Interrupts taken.
    pub interrupts: Interrupts,
    /// Events processed.
    pub events: u64,
    /// Protocol work for the receiver's packets charged to someone else
    /// (the process that was interrupted, or nobody), in the measured
    /// interval, in ns: misaccounting (P5).
    pub misaccounted_ns: Nanos,
    /// Switches between user processes in the measured interval.
    pub switches_w: u64,
    first_arrival: Option<Nanos>,
    first_delivery: Option<Nanos>,
    samples: Samples,
    /// The protected sources' frames (`[[traffic]] protected`).
    pub protected: Protected,
}

/// What became of the protected sources' frames, over the whole run.
#[derive(Debug)]
pub struct Protected {
    /// Frames that arrived.
    pub sent: u64,
    /// Frames delivered.
    pub delivered: u64,
    /// Frames dropped, at any point.
    pub lost: u64,
    /// Arrival to delivery, in ns, for deliveries in the measured interval.
    pub latency: crate::metrics::Histogram,
}

impl Meter {
    /// A meter whose measured interval starts at `w0`.
    pub fn new(w0: Nanos) -> Meter {
        Meter {
            w0,
            arrived: 0,
            delivered: 0,
            arrived_w: 0,
            delivered_w: 0,
            ring_drops_w: 0,
            drops: DropCounts::default(),
            interrupts: Interrupts::default(),
            events: 0,
            misaccounted_ns: 0,
            switches_w: 0,
            first_arrival: None,
            first_delivery: None,
            samples: Samples::default(),
            protected: Protected {
                sent: 0,
                delivered: 0,
                lost: 0,
                latency: crate::metrics::histogram(),
            },
        }
    }

    /// Packet `p`'s last bit arrived at `now`.
    pub fn arrival(&mut self, p: Packet, now: Nanos) {
        self.protected.sent += p.protected as u64;
        self.arrived += 1;
        self.first_arrival.get_or_insert(now);
        if now >= self.w0 {
            self.arrived_w += 1;
        }
    }

    /// Protocol work of `ns` for the receiver was charged elsewhere at `now`.
    pub fn misaccount(&mut self, now: Nanos, ns: Nanos) {
        if now >= self.w0 {
            self.misaccounted_ns += ns;
        }
    }

    /// A user process was switched to at `now`.
    pub fn switch(&mut self, now: Nanos) {
        if now >= self.w0 {
            self.switches_w += 1;
        }
    }

    /// A packet was discarded at `point`.
    pub fn drop(&mut self, point: DropPoint) {
        self.drops.add(point);
    }

    /// Packet `p` was discarded at `point`.
    pub fn drop_packet(&mut self, point: DropPoint, p: &Packet) {
        self.protected.lost += p.protected as u64;
        self.drops.add(point);
    }

    /// Packet `p`, arriving at `now`, found its receive ring full.
    pub fn ring_drop(&mut self, p: Packet, now: Nanos) {
        self.protected.lost += p.protected as u64;
        self.drops.add(DropPoint::NicRxRing);
        if now >= self.w0 {
            self.ring_drops_w += 1;
        }
    }

    /// A packet reached its final consumer at `now`.
    pub fn deliver(&mut self, p: Packet, now: Nanos) {
        self.delivered += 1;
        if p.protected {
            self.protected.delivered += 1;
            if now >= self.w0 {
                self.protected
                    .latency
                    .record(now - p.arrived)
                    .expect("an auto-resizing histogram takes any u64");
            }
        }
        if p.id == 0 {
            self.first_delivery = Some(now - p.arrived);
        }
        if now >= self.w0 {
            self.delivered_w += 1;
            self.samples
                .latency
                .record(now - p.arrived)
                .expect("an auto-resizing histogram takes any u64");
        }
    }

    /// IP input begins for a packet at `now` (figure 7-6's latency).
    pub fn ip_input_begins(&mut self, p: Packet, now: Nanos) {
        if p.arrived >= self.w0 {
            self.samples
                .ipin_latency
                .record(now - p.arrived)
                .expect("an auto-resizing histogram takes any u64");
        }
    }

    /// A step started or ended: the first few are kept, as a kernel trace.
    pub fn trace(&mut self, ev: TraceEvent) {
        if self.samples.trace.len() < TRACE_EVENTS {
            self.samples.trace.push(ev);
        }
    }

    /// A packet started onto an output wire at `now`: the first few are
    /// traced, as in a burst figure.
    pub fn to_device(&mut self, p: Packet, now: Nanos) {
        if p.id < TRACE_PACKETS {
            let first = self.first_arrival.unwrap_or(0);
            let v = &mut self.samples.to_device_ns;
            if v.len() <= p.id as usize {
                v.resize(p.id as usize + 1, 0);
            }
            v[p.id as usize] = now - first;
        }
    }

    /// From the first packet's arrival to its delivery, in µs (-1: never delivered).
    pub fn first_delivery_us(&self) -> f64 {
        self.first_delivery.map_or(-1.0, |t| t as f64 / 1e3)
    }

    /// The samples, for figures that need more than percentiles.
    pub fn into_samples(self) -> Samples {
        self.samples
    }

    /// The samples, borrowed.
    pub fn samples(&self) -> &Samples {
        &self.samples
    }
}
