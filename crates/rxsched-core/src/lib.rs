//! Receive-livelock avoidance policies as sans-I/O state machines.
//!
//! Nothing in this crate reads a clock, makes a system call or starts a
//! thread. Time is passed in as [`Nanos`]; work is handed back as actions.
//! The simulator (`rxsched-sim`) executes an action by charging modelled
//! cost; the Linux dataplane executes it by polling a real ring. The same
//! objects can drive a loop of your own over AF_XDP, DPDK or a NIC driver.
//!
//! The policies, by the names of the designs they come from: the polling
//! facility ([`PollingFacility`], M2) with its quota ([`Quota`]), queue-state
//! feedback ([`QueueFeedback`], M3) and CPU-cycle limit ([`CycleLimit`], M4);
//! the polling thread that turns the facility's actions into work
//! ([`PollLoop`]); the circuit breaker ([`CircuitBreaker`], M5) and the
//! interrupt handler's batch ([`InterruptBatch`]); NAPI ([`Napi`], M7) and
//! transmit reclaim ([`TxReclaim`], M8); SRP and LRP ([`srp`], M9, M10) with
//! proportional share ([`PropShare`]); the two-level interrupt/polling
//! switch ([`TwoLevel`], M11); the general-purpose tasks' turns between
//! rounds of polling ([`GpTurns`], M12); and the named drop points
//! ([`DropPoint`]).
//!
//! # Driving the polling loop
//!
//! A driver owns the devices, the clock and the thread; [`PollLoop`] owns
//! every decision. The calls, and what each answer obliges the driver to do:
//!
//! 1. [`PollLoop::register`] each device once, in a fixed order: device
//!    `d` is [`DeviceId`]`(d)`. Its interrupts start enabled.
//! 2. When a device with its interrupt enabled
//!    ([`PollLoop::interrupts_enabled`]) has work, call
//!    [`PollLoop::interrupt`]. [`Wake::Now`] means the thread was asleep:
//!    make it runnable.
//! 3. While the thread runs, ask [`PollLoop::next`] and carry the
//!    [`Work`] out:
//!    - [`Work::Switch`]: the thread was woken (charge a context switch, if
//!      you model one).
//!    - [`Work::Poll`] `{ dev, dir, budget }`: one callback. Before each
//!      packet, call [`PollLoop::proceed`]; handle the packet only if it says
//!      true, and stop at the first false, at `budget`, or when the device
//!      has nothing more. Then report with [`PollLoop::done`]`(n, more, ..)`
//!      (`more`: work is still waiting there) before asking for more work.
//!      Take the batch off the ring in one ring operation: the answers come
//!      per packet, the ring needs touching only per batch.
//!    - [`Work::EnableInterrupts`]: re-enable the device's interrupt, then
//!      call [`PollLoop::enabled`] with whether work was already waiting
//!      (interrupts are level-triggered).
//!    - [`Work::Idle`] `{ until }`: sleep until an interrupt (step 2) or
//!      until `until`, and then call [`PollLoop::timer`].
//!
//!    [`PollLoop::next`] returns `None` while the thread sleeps.
//! 4. With queue-state feedback (M3), report the watched queue's length
//!    with [`PollLoop::queue_level`] whenever it changes; [`Wake::At`]`(t)`
//!    asks for [`PollLoop::timer`] at `t` (the inhibit's timeout), and
//!    [`Wake::Now`] that the thread, asleep behind the inhibit, run again.
//! 5. With the cycle limit (M4), give the thread's CPU time through
//!    [`Clock::cpu_ns`] (it is read around each callback), charge work done
//!    on the thread's behalf elsewhere with [`PollLoop::charge`], and call
//!    [`PollLoop::idle`] whenever the CPU idles.
//!
//! A loop over one fake device whose ring holds seven frames, with a quota
//! of three:
//!
//! ```
//! use rxsched_core::{Clock, Dir, Nanos, PollLoop, PollingFacility, Quota, Wake, Work};
//! use std::collections::VecDeque;
//!
//! struct Clk(Nanos);
//! impl Clock for Clk {
//!     fn now(&self) -> Nanos { self.0 }
//!     fn cpu_ns(&self) -> Nanos { self.0 }
//! }
//!
//! let mut ring: VecDeque<u32> = (0..7).collect();
//! let mut lp = PollLoop::new(PollingFacility::new(Quota::Limited(3)));
//! let dev = lp.register(true, false);
//! let mut clock = Clk(0);
//!
//! // Frames arrived with the interrupt enabled: the thread wakes.
//! assert!(lp.interrupts_enabled(dev, Dir::Rx));
//! assert_eq!(lp.interrupt(dev, Dir::Rx), Wake::Now);
//!
//! let mut handled = Vec::new();
//! let mut batches = Vec::new();
//! while let Some(work) = lp.next(&clock) {
//!     match work {
//!         Work::Switch => {}
//!         Work::Poll { budget, .. } => {
//!             let mut n = 0;
//!             while !ring.is_empty() && lp.proceed(clock.0) {
//!                 handled.push(ring.pop_front().unwrap());
//!                 clock.0 += 1_000; // each frame costs 1 µs
//!                 n += 1;
//!             }
//!             assert!(n <= budget);
//!             batches.push(n);
//!             lp.done(n, !ring.is_empty(), &clock);
//!         }
//!         Work::EnableInterrupts { dev, dir } => lp.enabled(dev, dir, !ring.is_empty()),
//!         Work::Idle { until } => assert_eq!(until, None),
//!     }
//! }
//! assert_eq!(handled, (0..7).collect::<Vec<_>>());
//! assert_eq!(batches, vec![3, 3, 1]);
//! // Drained: the thread sleeps and the device is back on interrupts.
//! assert!(!lp.awake() && lp.interrupts_enabled(dev, Dir::Rx));
//! ```

#![warn(missing_docs)]

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
pub mod slo;
pub mod srp;
pub mod turns;
pub mod two_level;
pub mod tx_reclaim;

pub use breaker::CircuitBreaker;
pub use cycle_limit::{CycleLimit, RtGuard};
pub use drops::{DropCounts, DropPoint};
pub use feedback::QueueFeedback;
pub use interrupt::{BatchStep, InterruptBatch};
pub use napi::{Napi, NapiAction, NapiConfig};
pub use poll_loop::{Clock, InhibitCheck, PollLoop, Wake, Work};
pub use polling::{Action, DeviceId, Dir, PollingFacility};
pub use propshare::PropShare;
pub use quota::Quota;
pub use slo::{
    FeedbackMarks, Slo, SloController, SloCosts, SloError, SloSettings, StageMarks, SwitchMarks,
};
pub use turns::GpTurns;
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
    /// The host's real-time budget: a polling thread whose threads run in
    /// the real-time class keeps them under the share the kernel lets that
    /// class take, so that the kernel never stops them itself (see
    /// [`RtGuard`]).
    RtBudget,
    /// M12: a round of polling is over and general-purpose tasks have
    /// their quantum (see [`GpTurns`]).
    GpTurn,
}

impl InhibitCause {
    /// Every cause.
    pub const ALL: &'static [InhibitCause] = <InhibitCause as strum::VariantArray>::VARIANTS;

    /// The name used in metrics records.
    pub fn name(self) -> &'static str {
        self.into()
    }
}
