//! Traffic sources: constant, Poisson and bursty arrivals, serialised on
//! each input wire at line rate.

use super::events::Events;
use super::packet::Packet;
use crate::profile::Wire;
use crate::scenario::{TrafficCfg, TrafficKind};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rxsched_core::Nanos;

/// A traffic source's next frame is due (its last bit reaches the host);
/// it holds the source's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival(pub u8);

#[derive(Debug)]
struct Source {
    kind: TrafficKind,
    gap_ns: f64,
    spacing_ns: f64,
    burst: u32,
    jitter: f64,
    in_burst: u32,
    burst_start: f64,
    next_start: f64,
    bytes: u32,
    count: u64,
    sent: u64,
    port: u8,
    protected: bool,
    /// When this source's own last frame ends on the wire, in ps.
    own_free: u64,
    /// The wire time of its frame, in ps.
    frame: u64,
}

/// How close to its line rate (relative) a source's offered rate must be
/// for it to count as saturating its link: the rate's own rounding to a
/// whole packet a second at the rates the experiments name (15,356/s for
/// ATM's 15,356.85).
const SATURATED: f64 = 1e-4;

/// Picoseconds to the event queue's nanoseconds.
fn ns(ps: u64) -> Nanos {
    (ps + 500) / 1000
}

/// Every source of a run, and when each input wire is next free.
///
/// A source's frames follow each other on the wire; frames of different
/// sources on one wire are serialised when they arrive, in time order: a
/// frame whose wire was still busy with another source's when it would have
/// started arrives that much later ([`Traffic::due`]). (Booking the
/// wire when a frame is scheduled would let a source that starts late, or
/// sends rarely, hold the wire for the others until then.) Times on the
/// wire are kept in picoseconds, so that short frames on fast links keep
/// their exact rate; arrivals enter the event queue at the nearest ns.
#[derive(Debug)]
pub struct Traffic {
    sources: Vec<Source>,
    wire_free: Vec<u64>,
    next_id: u32,
}

impl Traffic {
    /// The sources a scenario describes.
    pub fn new(cfg: &[TrafficCfg]) -> Traffic {
        let sources = cfg
            .iter()
            .map(|t| {
                let start = t.start_us * 1e3;
                Source {
                    kind: t.kind,
                    gap_ns: 1e9 / t.rate_pps,
                    spacing_ns: t.spacing_us * 1e3,
                    burst: t.burst.max(1),
                    jitter: t.jitter,
                    in_burst: 0,
                    burst_start: start,
                    next_start: start,
                    bytes: t.frame_bytes,
                    count: t.count,
                    sent: 0,
                    port: t.port,
                    protected: t.protected,
                    own_free: 0,
                    frame: 0,
                }
            })
            .collect();
        Traffic {
            sources,
            wire_free: vec![0; 2],
            next_id: 0,
        }
    }

    /// How many sources there are.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Schedules every source's first arrival, in source order.
    pub fn start<E: From<Arrival>>(
        &mut self,
        wire: &Wire,
        rng: &mut ChaCha8Rng,
        ev: &mut Events<E>,
    ) {
        for s in 0..self.sources.len() {
            self.schedule(s, wire, rng, ev);
        }
    }

    /// Schedules source `s`'s next arrival, if it has one.
    pub fn schedule<E: From<Arrival>>(
        &mut self,
        s: usize,
        wire: &Wire,
        rng: &mut ChaCha8Rng,
        ev: &mut Events<E>,
    ) {
        let src = &mut self.sources[s];
        if (src.count > 0 && src.sent >= src.count) || !src.gap_ns.is_finite() {
            return;
        }
        src.sent += 1;
        let frame = wire.frame_ps(src.bytes);
        let start = ((src.next_start * 1e3).round() as u64).max(src.own_free);
        let done = start + frame;
        src.own_free = done;
        src.frame = frame;
        // A source offered at its line rate is a sender its link limits:
        // its frames follow each other with no room for the gaps a random
        // process draws (its queue at the sender would be null-recurrent,
        // idling the wire now and then where a saturated sender never
        // does), so it is paced evenly whatever its kind.
        let saturated = src.gap_ns * 1e3 <= frame as f64 * (1.0 + SATURATED);
        let kind = match src.kind {
            TrafficKind::Burst => TrafficKind::Burst,
            _ if saturated => TrafficKind::Constant,
            k => k,
        };
        match kind {
            TrafficKind::Constant => src.next_start += src.gap_ns,
            TrafficKind::Poisson => src.next_start += exponential(rng, src.gap_ns),
            TrafficKind::Jittered => {
                let j: f64 = rng.gen_range(-1.0..=1.0);
                src.next_start += src.gap_ns * (1.0 + src.jitter * j);
            }
            TrafficKind::Bursty => {
                // A burst ends after each packet with probability 1/burst,
                // so its length is geometric with mean `burst`.
                if rng.gen_range(0..src.burst) == 0 {
                    let mean = src.gap_ns * src.burst as f64;
                    src.next_start += exponential(rng, mean);
                } else {
                    src.next_start += src.spacing_ns;
                }
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
        ev.push(ns(done), Arrival(s as u8));
    }

    /// Source `s`'s frame is due at `now`: the packet that arrives, if its
    /// wire was free when it would have started (it holds the wire until
    /// now; schedule the source's next frame after entering it); else its
    /// arrival is scheduled again, after the frame that held the wire.
    pub fn due<E: From<Arrival>>(
        &mut self,
        s: usize,
        now: Nanos,
        ev: &mut Events<E>,
    ) -> Option<Packet> {
        match self.busy_until(s) {
            Some(t) => {
                ev.push(t, Arrival(s as u8));
                None
            }
            None => Some(self.packet(s, now)),
        }
    }

    /// `None` if source `s`'s wire was free when its frame due at `now`
    /// would have started, else the time it arrives instead.
    fn busy_until(&mut self, s: usize) -> Option<Nanos> {
        let src = &mut self.sources[s];
        let port = src.port as usize;
        let done = src.own_free;
        if self.wire_free[port] > done.saturating_sub(src.frame) {
            let t = self.wire_free[port] + src.frame;
            src.own_free = t;
            return Some(ns(t));
        }
        self.wire_free[port] = done;
        None
    }

    /// The packet source `s` delivers at `now`.
    fn packet(&mut self, s: usize, now: Nanos) -> Packet {
        let src = &self.sources[s];
        let p = Packet {
            id: self.next_id,
            bytes: src.bytes,
            arrived: now,
            port: src.port,
            seq: 0,
            tcp: None,
            echo: false,
            protected: src.protected,
            source: s as u8,
        };
        self.next_id = self.next_id.wrapping_add(1);
        p
    }
}

/// An exponentially distributed gap with the given mean.
pub(crate) fn exponential(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    -u.ln() * mean
}
