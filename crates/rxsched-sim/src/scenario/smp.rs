//! `[smp]`: the multiprocessor an `nt` kernel runs on, and how it
//! services its adapter (Hansen & Jul 1997).

use serde::{Deserialize, Serialize};

/// How an `nt` host services its network adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SmpService {
    /// Interrupts: the ISR queues a DPC on the interrupted CPU, which does
    /// the receive work.
    #[default]
    Interrupt,
    /// Interrupt-initiated polling: the DPC only wakes a polling thread,
    /// which does the receive work until the adapter is empty, then
    /// re-enables its interrupts and waits.
    Polling,
    /// M11: interrupts while the detector sees no overload, the polling
    /// thread once it has seen overload for longer than the hold time,
    /// interrupts again when the polling thread runs out of work.
    TwoLevel,
}

/// The two-level switch's overload detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SmpDetector {
    /// The DPC's share of one CPU (H&J's choice).
    #[default]
    Cpu,
    /// The mean length of the adapter's receive queue.
    Queue,
    /// Interrupts per second.
    Rate,
}

/// `[smp]`: the multiprocessor an `nt` kernel runs on and how it services
/// its adapter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmpCfg {
    /// CPUs (1 to 64).
    pub cpus: u32,
    /// The CPU the adapter interrupts (its ISR and DPC run there); with
    /// several queues, queue `q`'s interrupt goes to the CPU after it by
    /// `q`, modulo the CPUs.
    pub interrupt_cpu: u32,
    /// The adapter's receive queues (receive-side scaling: each datagram
    /// goes to one of them at random, as a hash over many flows spreads
    /// them), each with its own ring, interrupt and polling thread; 0: one
    /// per CPU. With more than one, each queue's polling thread may run
    /// only on its queue's CPU (as a Linux NAPI thread is pinned beside its
    /// interrupt).
    pub queues: u32,
    /// How the adapter is serviced.
    pub service: SmpService,
    /// Two-level: what counts as overload.
    pub detector: SmpDetector,
    /// Two-level: the detector's threshold (a share of one CPU, packets
    /// queued, or interrupts per second).
    pub threshold: f64,
    /// Two-level: how long overload must last before polling, in ms.
    pub hold_ms: f64,
    /// Two-level: the window the detector judges over, in ms.
    pub window_ms: f64,
    /// Two-level: how long the polling thread must find nothing before
    /// interrupts return, in ms (0: at the first empty poll, H&J's rule).
    pub idle_grace_ms: f64,
    /// Two-level: return to interrupts once a window's polling work is
    /// under this share of one CPU, instead of at the first empty poll
    /// (ours; unset: the paper's rule).
    pub return_below: Option<f64>,
    /// Datagrams the polling thread takes before it lets the scheduler look
    /// at its CPU (it is preemptible between them in any case).
    pub poll_quota: u32,
    /// The polling thread runs in the real-time class (default: the class
    /// of the consumer).
    pub poll_realtime: Option<bool>,
}

impl Default for SmpCfg {
    fn default() -> Self {
        // Hansen & Jul 1997 §5.1: more than 50% of one CPU for more than 2 s.
        SmpCfg {
            cpus: 2,
            interrupt_cpu: 0,
            queues: 1,
            service: SmpService::Interrupt,
            detector: SmpDetector::Cpu,
            threshold: 0.5,
            hold_ms: 2000.0,
            window_ms: 100.0,
            idle_grace_ms: 0.0,
            return_below: None,
            poll_quota: 16,
            poll_realtime: None,
        }
    }
}

impl SmpCfg {
    /// The receive queues the adapter has.
    pub fn queue_count(&self) -> usize {
        if self.queues == 0 {
            self.cpus as usize
        } else {
            self.queues as usize
        }
    }

    /// The CPU queue `q` interrupts.
    pub fn queue_cpu(&self, q: usize) -> usize {
        (self.interrupt_cpu as usize + q) % self.cpus.max(1) as usize
    }
}

impl SmpCfg {
    /// Takes the switch's settings from an objective (`kernel.slo`): the
    /// CPU detector, its threshold, hold, window and return mark.
    pub fn apply(&mut self, m: &rxsched_core::SwitchMarks) {
        self.detector = SmpDetector::Cpu;
        self.threshold = m.over;
        self.return_below = Some(m.return_below);
        self.hold_ms = m.hold_ns as f64 / 1e6;
        self.window_ms = m.window_ns as f64 / 1e6;
    }
}
