//! What an objective (`route --slo`) set and how it moved, in a router's
//! report.

pub use crate::runtime::poller::SloChange;
use serde::{Deserialize, Serialize};

/// What an objective (`route --slo`) set, as it stood at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloReport {
    /// Frames per callback.
    pub quota: u32,
    /// M4's share of each period.
    pub cycle_limit: f64,
    /// The receive callbacks' cost per frame, as measured, in ns.
    pub rx_frame_ns: f64,
    /// Times the settings changed; of which the quota's.
    pub changes: u64,
    /// Times the quota changed.
    pub quota_changes: u64,
    /// Its settings at the start and each change as it was made, the
    /// first [`crate::runtime::poller::SLO_LOG_MAX`]: how the controller
    /// settled after a step in load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<SloChange>,
    /// With a screening stage and no hand-set `--feedback`: the M3
    /// watermarks the objective set from the stage's measured cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<SloFeedback>,
}

/// The M3 watermarks an objective keeps on the screening queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloFeedback {
    /// Input stops at this many frames queued (at the end).
    pub inhibit_at: u32,
    /// And resumes when the stage has drained the queue to this many.
    pub resume_at: Option<u32>,
    /// Or after this long, in µs.
    pub timeout_us: f64,
    /// The stage's cost per frame as measured (its CPU time over the
    /// frames it took), in ns; none until a window had frames.
    pub stage_frame_ns: Option<f64>,
    /// Times the objective set the marks (0: the starting marks, 75% and
    /// 25% of the queue, stood throughout).
    pub changes: u64,
    /// Why the marks were last left as they were, when none fitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_because: Option<String>,
}
