//! The NT host's network adapter and how it is serviced, one receive
//! queue at a time: its ring, the CPU it interrupts, whether its interrupt
//! is enabled, its polling thread and its pass over the ring, and the
//! two-level switch between them (M11).

use super::sched::Tid;
use crate::engine::packet::Packet;
use crate::scenario::{SmpCfg, SmpDetector, SmpService};
use rxsched_core::{Detector, Nanos, TwoLevel};
use std::collections::VecDeque;

/// One receive queue of the adapter, and its servicing.
#[derive(Debug)]
pub(super) struct Adapter {
    /// The CPU its interrupt goes to (its ISR and DPC run there).
    pub(super) cpu: usize,
    /// Datagrams received and not yet taken.
    pub(super) ring: VecDeque<Packet>,
    pub(super) cap: usize,
    pub(super) intr_enabled: bool,
    /// The polling thread, unless servicing is by interrupts only.
    pub(super) poll: Option<Tid>,
    /// The polling thread is active (interrupts are off meanwhile).
    pub(super) polling: bool,
    pub(super) polling_since: Nanos,
    /// Time spent polling inside the measured interval.
    pub(super) polling_w: Nanos,
    pub(super) two: Option<TwoLevel>,
    /// The two-level detector's window.
    pub(super) window: Nanos,
    /// The detector asked for polling while a DPC ran: it stops at the next datagram.
    pub(super) to_polling: bool,
    /// The datagrams the polling thread took in its current pass.
    pub(super) pass: u32,
}

impl Adapter {
    /// A queue with a ring of `cap` datagrams interrupting `cpu`, serviced
    /// as `cfg` says, by the polling thread `poll` if it has one.
    pub(super) fn new(cfg: &SmpCfg, cap: u32, cpu: usize, poll: Option<Tid>) -> Adapter {
        let window = ((cfg.window_ms * 1e6) as Nanos).max(1);
        Adapter {
            cpu,
            ring: VecDeque::new(),
            cap: cap as usize,
            intr_enabled: true,
            poll,
            polling: false,
            polling_since: 0,
            polling_w: 0,
            two: (cfg.service == SmpService::TwoLevel).then(|| two_level(cfg, window)),
            window,
            to_polling: false,
            pass: 0,
        }
    }
}

/// The two-level switch `cfg` describes, judging over windows of `window`.
fn two_level(cfg: &SmpCfg, window: Nanos) -> TwoLevel {
    let d = match cfg.detector {
        SmpDetector::Cpu => Detector::CpuFraction(cfg.threshold),
        SmpDetector::Queue => Detector::QueueLength(cfg.threshold),
        SmpDetector::Rate => Detector::InterruptRate(cfg.threshold),
    };
    let t = TwoLevel::new(d, (cfg.hold_ms * 1e6) as Nanos, window)
        .with_idle_grace((cfg.idle_grace_ms * 1e6) as Nanos);
    match cfg.return_below {
        Some(f) => t.with_return_below(f),
        None => t,
    }
}
