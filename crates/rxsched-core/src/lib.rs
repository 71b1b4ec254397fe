//! Receive-livelock avoidance policies as sans-I/O state machines.
//!
//! Nothing in this crate reads a clock, makes a system call or starts a
//! thread. Time is passed in as [`Nanos`]; work is handed back as actions.
//! The simulator (`rxsched-sim`) executes an action by charging modelled
//! cost; the Linux dataplane executes it by polling a real ring.

pub mod breaker;
pub mod cycle_limit;
pub mod drops;
pub mod feedback;
pub mod interrupt;
pub mod napi;
pub mod poll_loop;
pub mod polling;
pub mod propshare;
pub mod quota;
pub mod srp;
pub mod two_level;
pub mod tx_reclaim;

pub use breaker::CircuitBreaker;
pub use cycle_limit::CycleLimit;
pub use drops::{DropCounts, DropPoint};
pub use feedback::QueueFeedback;
pub use interrupt::{BatchStep, InterruptBatch};
pub use napi::{Napi, NapiAction, NapiConfig};
pub use poll_loop::{Clock, InhibitCheck, PollLoop, Wake, Work};
pub use polling::{Action, DeviceId, Dir, PollingFacility};
pub use propshare::PropShare;
pub use quota::Quota;
pub use two_level::{Detector, Service, TwoLevel};
pub use tx_reclaim::TxReclaim;

/// Virtual or real time in nanoseconds, always passed in by the caller.
pub type Nanos = u64;

/// One millisecond in [`Nanos`].
pub const MS: Nanos = 1_000_000;
/// One microsecond in [`Nanos`].
pub const US: Nanos = 1_000;

/// Why input was inhibited; each cause is counted separately, under the
/// variant's name in snake case.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum InhibitCause {
    /// M3: a downstream queue rose above its high watermark.
    QueueFeedback,
    /// M4: the polling thread used its CPU share for this period.
    CycleLimit,
    /// M5: one interrupt handled a whole batch.
    CircuitBreaker,
}

impl InhibitCause {
    /// Every cause.
    pub const ALL: &'static [InhibitCause] = <InhibitCause as strum::VariantArray>::VARIANTS;

    /// The name used in metrics records.
    pub fn name(self) -> &'static str {
        self.into()
    }
}
