//! A run's record: the meter's counters, what the host adds (packets
//! still inside it, CPU shares, mode switches, inhibits, its own numbers)
//! and what the endpoints outside it measured (the echo client's round
//! trips, the TCP connection's goodput), once every packet is accounted for.

use super::echo::EchoClient;
use super::interval::Interval;
use super::meter::Meter;
use super::tcp::TcpFlow;
use crate::error::SimError;
use crate::metrics::{Latency, Metrics, Samples};
use rxsched_core::DropPoint;
use std::collections::BTreeMap;

/// What a host adds to its meter's counters to make a run's record.
#[derive(Debug, Default)]
pub struct Record {
    /// Packets still inside the host.
    pub in_flight: u64,
    /// CPU shares by bucket.
    pub cpu: BTreeMap<String, f64>,
    /// Interrupt/poll mode switches.
    pub mode_switches: u64,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<String, u64>,
    /// Kernel- or host-specific numbers.
    pub extra: BTreeMap<String, f64>,
}

/// The endpoints outside the host that measure it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outside<'a> {
    /// The ping-pong client.
    pub echo: Option<&'a EchoClient>,
    /// The TCP connection through or into the host.
    pub tcp: Option<&'a TcpFlow>,
}

/// Conservation: every packet that arrived was delivered, dropped at a
/// named point, or is still in flight.
pub fn conserved(meter: &Meter, in_flight: u64) -> Result<(), SimError> {
    let dropped = meter.drops.total();
    if meter.arrived != meter.delivered + dropped + in_flight {
        return Err(SimError::Invariant(format!(
            "conservation violated: arrived {} != delivered {} + dropped {} + in flight {}",
            meter.arrived, meter.delivered, dropped, in_flight
        )));
    }
    Ok(())
}

impl Record {
    /// The run's record and samples over the measured interval `w`; fails
    /// if packets are not conserved.
    pub fn close(
        mut self,
        meter: Meter,
        w: Interval,
        outside: Outside,
    ) -> Result<(Metrics, Samples), SimError> {
        conserved(&meter, self.in_flight)?;
        let secs = w.secs();
        if let Some(e) = outside.echo {
            let (rounds, mean) = e.rtt();
            self.extra.insert("rtt_us".into(), mean);
            self.extra.insert("round_trips".into(), rounds as f64);
        }
        if let Some(t) = outside.tcp {
            let st = t.stats();
            self.extra.insert(
                "tcp_mbps".into(),
                st.goodput_bytes as f64 * 8.0 / 1e6 / secs,
            );
            self.extra
                .insert("tcp_retransmits".into(), st.retransmits as f64);
            self.extra.insert("tcp_timeouts".into(), st.timeouts as f64);
        }
        let prot = &meter.protected;
        if prot.sent > 0 {
            let lat = Latency::of(&prot.latency);
            for (k, v) in [
                ("protected_sent", prot.sent as f64),
                ("protected_delivered", prot.delivered as f64),
                ("protected_lost", prot.lost as f64),
                ("protected_latency_p50_us", lat.p50),
                ("protected_latency_p99_us", lat.p99),
                ("protected_latency_max_us", lat.max),
            ] {
                self.extra.insert(k.into(), v);
            }
        }
        let m = Metrics {
            offered_pps: meter.arrived_w as f64 / secs,
            delivered_pps: meter.delivered_w as f64 / secs,
            received_pps: (meter.arrived_w - meter.ring_drops_w) as f64 / secs,
            arrived: meter.arrived,
            received: meter.arrived - meter.drops.get(DropPoint::NicRxRing),
            delivered: meter.delivered,
            in_flight: self.in_flight,
            drops: meter.drops.to_map(),
            cpu: self.cpu,
            interrupts: meter.interrupts.clone(),
            latency_us: Latency::of(&meter.samples().latency),
            mode_switches: self.mode_switches,
            inhibits: self.inhibits,
            first_delivery_us: meter.first_delivery_us(),
            x: None,
            events: meter.events,
            wall_ms: 0.0,
            extra: self.extra,
        };
        Ok((m, meter.into_samples()))
    }
}
