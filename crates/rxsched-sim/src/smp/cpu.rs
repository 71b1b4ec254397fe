//! One CPU of the NT host: its interrupt levels (the ISR above the DPC
//! above threads), the level it runs and the job there, and the wake-ups
//! that wait for its dispatcher; and the ledger buckets of its levels.

use super::sched::Tid;
use super::work::Job;
use crate::engine::job::Runner;
use rxsched_core::Nanos;

/// The ledger's buckets for the levels, in this order; threads follow.
pub(super) const LEVEL_BUCKETS: [&str; 4] = ["idle", "isr", "dpc", "locking"];
/// Bucket numbers.
pub(super) const IDLE: usize = 0;
pub(super) const ISR: usize = 1;
pub(super) const DPC: usize = 2;
/// Idle time while a thread waits for the consumer's lock (H&J's figure 2).
pub(super) const LOCKING: usize = 3;

/// What a CPU is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Isr,
    Dpc,
    Thread(Tid),
    Idle,
}

/// A DPC's state on its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dpc {
    None,
    Queued,
    Running,
}

/// One CPU.
#[derive(Debug)]
pub(super) struct Cpu {
    /// The ISR's job, while one is raised or runs.
    pub(super) isr: Option<Job>,
    pub(super) dpc: Dpc,
    /// The DPC's job in progress.
    pub(super) dpc_job: Option<Job>,
    /// When the running DPC started, and up to when the detector has been told of it.
    pub(super) dpc_start: Nanos,
    pub(super) dpc_told: Nanos,
    pub(super) running: Level,
    pub(super) runner: Runner,
    /// Threads made ready that preempt this CPU's thread, waiting for it to
    /// drop below DPC level: NT's dispatcher runs only there.
    pub(super) deferred: Vec<Tid>,
}

impl Cpu {
    /// An idle CPU.
    pub(super) fn new() -> Cpu {
        Cpu {
            isr: None,
            dpc: Dpc::None,
            dpc_job: None,
            dpc_start: 0,
            dpc_told: 0,
            running: Level::Idle,
            runner: Runner::default(),
            deferred: Vec::new(),
        }
    }

    /// Whether an ISR or a DPC is raised or runs here.
    pub(super) fn at_interrupt_level(&self) -> bool {
        self.isr.is_some() || self.dpc != Dpc::None
    }
}
