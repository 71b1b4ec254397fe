//! The simulation engine both hosts run on: the event queue
//! ([`events`], generic over each host's own events), packets, traffic
//! sources, the endpoints outside the host (the echo client, the TCP
//! connection), the meter, jobs on a CPU with their completion events and
//! preemption ([`job`]), the per-CPU [`ledger`] that accounts every
//! nanosecond of the measured interval, a socket's receive buffer, and the
//! run's [`record`] with its conservation check. [`Model`] is what a
//! simulated host is to the rest of the crate.
//!
//! The engine knows neither host: `crate::host` (one CPU, the kernels of
//! the uniprocessor papers) and `crate::smp` (an NT multiprocessor) each
//! build their own event type and loop from these parts.

pub mod echo;
pub mod events;
pub mod interval;
pub mod job;
pub mod ledger;
pub mod meter;
pub mod packet;
pub mod record;
pub mod socket;
pub mod tcp;
pub mod traffic;

use crate::error::SimError;
use crate::metrics::{Metrics, Samples};

/// A simulated host, built and ready to run.
pub trait Model: std::fmt::Debug {
    /// Runs to the end and returns the metrics record (with `wall_ms` 0:
    /// the model reads no clock) and samples.
    fn run(self: Box<Self>) -> Result<(Metrics, Samples), SimError>;
}
