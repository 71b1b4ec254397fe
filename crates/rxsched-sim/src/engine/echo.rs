//! A UDP ping-pong client outside the host (Brustoloni et al. 2000's
//! figure 4): it sends a datagram to the host's reader, which sends it
//! back (`[echo]`); when the reply arrives the client takes it, and after
//! its own per-round work sends the next. The round-trip time is measured
//! at the client, from sending a datagram to having its reply.
//!
//! The reply leaves the host without queueing behind anything (as the
//! TCP receiver's ACKs do: the reader's send is charged to it, and nothing
//! else is being sent).

use super::events::Events;
use super::packet::Packet;
use crate::profile::Wire;
use crate::scenario::EchoCfg;
use rxsched_core::{Nanos, US};

/// One client and its measurements.
#[derive(Debug)]
pub struct EchoClient {
    bytes: u32,
    client_ns: Nanos,
    wire: Wire,
    w0: Nanos,
    next_id: u32,
    sent_at: Nanos,
    /// Round trips finished in the measured interval, and their total.
    rounds: u64,
    total_ns: Nanos,
}

/// The client's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EchoEv {
    /// The next datagram's last bit reaches the host.
    Arrive,
    /// A reply reached the client: after its work, it sends the next.
    Reply,
}

impl EchoClient {
    /// The client a scenario's `[echo]` describes, measured from `w0`.
    pub fn new(cfg: &EchoCfg, wire: &Wire, w0: Nanos) -> EchoClient {
        EchoClient {
            bytes: cfg.frame_bytes,
            client_ns: (cfg.client_us * US as f64).round() as Nanos,
            wire: wire.clone(),
            w0,
            next_id: 1 << 30,
            sent_at: 0,
            rounds: 0,
            total_ns: 0,
        }
    }

    /// Sends the first datagram at `now`.
    pub fn start<E: From<EchoEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        self.send(now, ev);
    }

    fn send<E: From<EchoEv>>(&mut self, now: Nanos, ev: &mut Events<E>) {
        self.sent_at = now;
        ev.push(now + self.wire.frame_ns(self.bytes), EchoEv::Arrive);
    }

    /// Handles a client event; returns the datagram that reaches the host.
    pub fn handle<E: From<EchoEv>>(
        &mut self,
        e: EchoEv,
        now: Nanos,
        ev: &mut Events<E>,
    ) -> Option<Packet> {
        match e {
            EchoEv::Arrive => {
                self.next_id = self.next_id.wrapping_add(1);
                Some(Packet {
                    id: self.next_id,
                    bytes: self.bytes,
                    arrived: now,
                    port: 0,
                    protected: false,
                    seq: 0,
                    tcp: None,
                    echo: true,
                    source: super::packet::NO_SOURCE,
                })
            }
            EchoEv::Reply => {
                if self.sent_at >= self.w0 {
                    self.rounds += 1;
                    self.total_ns += now - self.sent_at;
                }
                self.send(now + self.client_ns, ev);
                None
            }
        }
    }

    /// The reader sent `p` back at `now`: it reaches the client after the
    /// wire.
    pub fn reply<E: From<EchoEv>>(&mut self, p: Packet, now: Nanos, ev: &mut Events<E>) {
        ev.push(now + self.wire.frame_ns(p.bytes), EchoEv::Reply);
    }

    /// Round trips measured, and their mean in µs.
    pub fn rtt(&self) -> (u64, f64) {
        let mean = if self.rounds > 0 {
            self.total_ns as f64 / self.rounds as f64 / 1e3
        } else {
            0.0
        };
        (self.rounds, mean)
    }
}
