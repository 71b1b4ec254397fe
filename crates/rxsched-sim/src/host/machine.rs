//! Everything of a host but its kernel: the clock and event queue, the CPU,
//! the interfaces and interrupt lines, the traffic, the user processes and
//! the meters. A kernel works on a `Machine` it is handed.

use super::cpu::{Cpu, CtxId};
use super::event::Ev;
use super::nic::{IntrController, Nic};
use super::step::{IntrSrc, Step};
use super::users::Users;
use crate::engine::echo::EchoClient;
use crate::engine::events::Events;
use crate::engine::meter::Meter;
use crate::engine::packet::Packet;
use crate::engine::tcp::TcpFlow;
use crate::engine::traffic::Traffic;
use crate::profile::Profile;
use rand_chacha::ChaCha8Rng;
use rxsched_core::{DropPoint, Nanos};

/// The host's hardware, processes and measurements.
#[derive(Debug)]
pub struct Machine {
    /// The cost profile.
    pub p: Profile,
    /// Virtual time.
    pub now: Nanos,
    /// Pending events.
    pub events: Events<Ev>,
    /// The run's one random number generator.
    pub rng: ChaCha8Rng,
    /// The CPU.
    pub cpu: Cpu,
    /// Interfaces, by port.
    pub nics: Vec<Nic>,
    /// Interrupt lines.
    pub intr: IntrController,
    /// Traffic sources.
    pub traffic: Traffic,
    /// User processes.
    pub users: Users,
    /// A TCP connection through or into the host.
    pub tcp: Option<TcpFlow>,
    /// A ping-pong client the reader answers.
    pub echo: Option<EchoClient>,
    /// Counters and samples.
    pub meter: Meter,
}

impl Machine {
    /// Schedules `ev` at `t`.
    pub fn push(&mut self, t: Nanos, ev: Ev) {
        self.events.push(t, ev);
    }

    /// Raises an interrupt (the kernel has checked that it is enabled).
    pub fn raise(&mut self, src: IntrSrc) {
        self.intr.raise(src);
    }

    /// Counts a drop at `point`.
    pub fn drop(&mut self, point: DropPoint) {
        self.meter.drop(point);
    }

    /// Counts packet `p`'s drop at `point` (a protected packet's is lost).
    pub fn drop_packet(&mut self, point: DropPoint, p: &Packet) {
        self.meter.drop_packet(point, p);
    }

    /// A packet reached its final consumer.
    pub fn deliver(&mut self, p: Packet) {
        self.meter.deliver(p, self.now);
    }

    /// Context `c` goes on at once with `step`.
    pub fn carry(&mut self, c: CtxId, step: Step) {
        self.cpu.ctx[c].carry = Some(step);
    }

    /// Starts the next loaded frame of port `n` onto its wire if the wire is free.
    pub fn kick(&mut self, n: usize) {
        let nic = &mut self.nics[n];
        if nic.wire.is_some() {
            return;
        }
        let Some(p) = nic.tx_prot.pop_front().or_else(|| nic.tx_ring.pop_front()) else {
            return;
        };
        nic.wire = Some(p);
        self.meter.to_device(p, self.now);
        let t = self.now + self.p.wire.frame_ns(p.bytes);
        self.push(t, Ev::TxWireDone(n as u8));
    }

    /// Packets inside the host outside the kernel's own queues.
    pub fn packets_held(&self) -> u64 {
        self.users.packets()
            + self.nics.iter().map(Nic::packets).sum::<u64>()
            + self.cpu.packets_held()
    }
}
