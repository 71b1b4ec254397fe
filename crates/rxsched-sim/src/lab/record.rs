//! What a run of the lab host reports: the metrics record over the
//! measured window (rates, drops, each thread's CPU share and runs, the
//! loop's inhibits and an objective's settings), checked for conservation.

use super::{Lab, COMPUTE, NAPI, ROUTER, STAGE};
use crate::error::SimError;
use crate::metrics::{Latency, Metrics, Samples};
use rxsched_core::DropPoint;

impl Lab {
    /// The record of the measured window.
    fn metrics(&self) -> Metrics {
        let (c0, cpu0, runs0) = self.at_start.clone().unwrap_or_default();
        let (c1, cpu1, runs1) = self.snapshot();
        let secs = (self.w.end - self.w.w0) as f64 / 1e9;
        let share = |i: usize| (cpu1[i] - cpu0.get(i).copied().unwrap_or(0)) as f64 / 1e9 / secs;
        let per_s = |i: usize| (runs1[i] - runs0.get(i).copied().unwrap_or(0)) as f64 / secs;
        let mut m = Metrics {
            offered_pps: (c1.arrived - c0.arrived) as f64 / secs,
            delivered_pps: (c1.delivered - c0.delivered) as f64 / secs,
            arrived: self.arrived,
            received: self.arrived - self.drops.get(&DropPoint::NicRxRing).copied().unwrap_or(0),
            delivered: self.delivered,
            in_flight: self.in_flight(),
            latency_us: Latency::of(&self.latency),
            first_delivery_us: -1.0,
            events: self.events,
            ..Metrics::default()
        };
        m.received_pps = m.offered_pps;
        m.drops = self
            .drops
            .iter()
            .map(|(p, &n)| (p.name().to_string(), n))
            .collect();
        let mut busy = 0.0;
        let ours = self.fwd.ours();
        let stage = if self.fwd.captures() {
            "writer"
        } else {
            "screen"
        };
        let staged = self.staged();
        let threads = [
            (NAPI, "napi", true),
            (ROUTER, "router", ours),
            (COMPUTE, "user:compute", self.compute),
            (STAGE, stage, staged),
        ];
        for (i, name, here) in threads {
            if here {
                m.cpu.insert(name.to_string(), share(i));
                busy += share(i);
            }
        }
        let irq = share(cpu1.len() - 1);
        m.cpu.insert("interrupt".into(), irq);
        busy += irq;
        m.cpu.insert("idle".into(), (1.0 - busy).max(0.0));
        m.extra.insert("napi_cpu_share".into(), share(NAPI));
        m.extra.insert("napi_runs_per_s".into(), per_s(NAPI));
        if ours {
            m.extra.insert("router_runs_per_s".into(), per_s(ROUTER));
        }
        if staged {
            m.extra.insert(format!("{stage}_runs_per_s"), per_s(STAGE));
        }
        if let Some(lp) = &self.lp {
            if let Some(c) = lp.facility().slo() {
                crate::host::slo_extras(c, &mut m.extra);
            }
            m.mode_switches = lp.mode_switches();
            m.inhibits = lp
                .inhibits()
                .into_iter()
                .map(|(c, n)| (c.name().to_string(), n))
                .collect();
        }
        m
    }
}

impl crate::Model for Lab {
    fn run(mut self: Box<Self>) -> Result<(Metrics, Samples), SimError> {
        self.simulate();
        let m = self.metrics();
        let dropped: u64 = self.drops.values().sum();
        if m.arrived != m.delivered + dropped + m.in_flight {
            return Err(SimError::Invariant(format!(
                "lab: {} arrived, {} delivered, {dropped} dropped, {} in flight",
                m.arrived, m.delivered, m.in_flight
            )));
        }
        let samples = Samples {
            latency: self.latency.clone(),
            ..Samples::default()
        };
        Ok((m, samples))
    }
}
