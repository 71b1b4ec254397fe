//! One knob instead of constants: a service-level objective (an added
//! latency to keep under at low load, and a CPU share to keep under when
//! overloaded) from which the polling facility's quota and CPU-cycle limit
//! follow, and a controller that keeps them right as the measured costs
//! move.
//!
//! **Quota.** A frame that arrives while the polling thread sleeps waits
//! for the wake-up, then for at most one round of the loop: every port's
//! receive and transmit callbacks, each with its pass overhead and at most
//! `quota` frames. So the round, with a wake-up, must fit in the latency
//! target:
//!
//! `wake + ports × (2 × pass + quota × (rx_frame + tx_frame)) ≤ latency`,
//!
//! and the quota is the largest that does (larger batches amortise the
//! pass overhead, so they forward more within the same CPU). A target below
//! `wake + pass + rx_frame`, what one frame alone takes, cannot be met and
//! is refused, saying what can.
//!
//! **Cycle limit.** The CPU share caps the polling thread's callbacks in
//! each 10 ms period (M4). The router also spends CPU the limit does not
//! see (its interrupts, switching to its thread, transmit work that is
//! never inhibited), so the limit starts at the share and is then steered
//! by the router's measured share of each period.
//!
//! **The controller and why it settles.** Per window of four M4 periods
//! (40 ms: one period's share is noisy, by a few points, with the clock
//! ticks and where the inhibits fall) it measures two things.
//! - The callbacks' cost per frame in each direction, less the known pass
//!   overhead: the first measurement replaces the starting estimate, and
//!   later ones are smoothed with an exponentially weighted mean (weight
//!   1/4 a window: a time constant of 140 ms, 95% of a step in about
//!   420 ms; with weight 1/2 the real router's quota changed 21 times in
//!   6 s under a flood, with 1/4 four to seven times); the quota is
//!   recomputed from it by the formula above. Where callbacks are timed
//!   one by one (the simulator) this part is feed-forward: the costs are
//!   the machine's and do not depend on the quota (the pass overhead is
//!   taken out so that larger batches do not lower the estimate that set
//!   them). Where M4 is charged with all the router's CPU (the real
//!   router), part of the charge comes per callback whatever its batch
//!   (receive work on a flood's excess, wake-ups), so a frame's cost falls
//!   as the quota grows and the quota climbs, a quarter at a time, to where
//!   its round fills the target (the lab's router under a 1.5 Mpps flood:
//!   21 to 54-121 in 0.6-6.6 s, `route --slo` report's `log`). Near that
//!   point a frame's cost grows about as the quota does, so the map from
//!   one estimate to the next, `c' = c + w (K / c - c)`, has slope
//!   `1 - 2w` there: taking each window whole (`w = 1`) is a cycle of
//!   period two (tried: taking a shift whole once two windows agreed made
//!   the real quota swing between 45 and 80 for the whole flood in all
//!   nine runs), a quarter (`1/2`) converges without oscillating.
//! - The router's share of the window (all its CPU: thread, interrupts).
//!   The limit moves by half the error, `limit += 0.5 × (cpu - share)`,
//!   kept between a quarter of the share and the share. While the limit
//!   binds, the share is about `a × limit + b` with `a` a little above 1
//!   (transmit and interrupt work grow with the input taken), so the error
//!   shrinks by `1 - 0.5 a` a window: monotonically, without overshoot,
//!   for any `a` below 2, and to within a point of the target in about
//!   six windows (240 ms) for `a` near 1. While it does not bind (the load is
//!   light), the limit rests at the share: the clamp is the anti-windup,
//!   so a step into overload starts from the share, not from far above.
//!
//! Deadbands keep measurement noise from dithering the settings between
//! neighbours: the quota changes by at least a quarter (or one frame), and
//! the limit moves only while the router's share is more than a point off
//! the objective.
//!
//! **Queue-state feedback's watermarks** (M3, for a stage downstream such
//! as screend that takes `stage` ns a frame out of its queue;
//! [`Slo::feedback_marks`]). Input resumes when the queue has drained to
//! what the stage takes while input restarts: a wake-up, a pass and the
//! first frame, `resume = ⌈(wake + pass + rx_frame) / stage⌉` (at least
//! 1), so that the stage never runs dry while the router had frames for it
//! (a dry stage is forwarding lost). Input stops when a frame let in would
//! wait longer than the latency target behind the frames ahead of it,
//! `inhibit = ⌊latency / stage⌋`, but never within one quota of `resume`:
//! one callback lands up to a quota of frames between two looks at the
//! queue, and a narrower band would inhibit and resume on every callback.
//! The queue's size bounds both. The timeout that resumes input in case
//! the stage hangs is twice the time a working stage takes to drain the
//! band, `2 × (inhibit − resume) × stage`: a shorter one (the paper's
//! clock tick, 1 ms, is four of screend's frames) resumes input before the
//! queue has drained, so the level hangs near the upper mark and the
//! resume mark decides nothing. This part is static: the level cycles
//! between the marks under overload (rising while input is on, falling
//! while it is off), each inhibit lasting at least the band's worth of
//! the stage's work, so the inhibits come at most once per band of frames
//! the stage takes; nothing is steered, so nothing can oscillate beyond
//! that designed cycle. At low load the queue never reaches `inhibit`.

use crate::{Dir, Nanos};
use std::fmt;

mod stage;
mod switch;
pub use stage::StageMarks;
pub use switch::SwitchMarks;

/// M4's period, as Mogul & Ramakrishnan 1996 §7 used it: 10 ms.
pub const PERIOD_NS: Nanos = 10_000_000;
/// The largest quota the controller sets.
pub const MAX_QUOTA: u32 = 1024;
/// The smoothing weight of a new window's cost measurement.
const WEIGHT: f64 = 0.25;
/// M4 periods in one of the controller's windows.
const WINDOW_PERIODS: Nanos = 4;
/// The controller's window, in ns: the time scale an objective judges a
/// share over (and the two-level switch's hold under one).
pub const WINDOW_NS: Nanos = WINDOW_PERIODS * PERIOD_NS;
/// The cycle limit's share of the error in the router's share.
const GAIN: f64 = 0.5;
/// Fewest frames in a window for a per-frame measurement to count.
const MIN_FRAMES: u64 = 8;

/// An objective: an added latency and a CPU share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// The added latency to keep under at low load, in ns.
    pub latency_ns: Nanos,
    /// The share of one CPU to keep under when overloaded, in (0, 1].
    pub cpu: f64,
}

/// Why an objective was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct SloError(pub String);

impl fmt::Display for SloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SloError {}

/// A duration such as `200us`, `1.5ms`, `2s` or `500ns`, in ns.
fn duration_ns(v: &str) -> Option<f64> {
    let v = v.trim();
    let split = v.find(|c: char| c.is_ascii_alphabetic() || c == 'µ')?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.trim().parse().ok()?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    (n.is_finite() && n >= 0.0).then_some(n * scale)
}

impl Slo {
    /// An objective, checked: a positive latency, and a share in (0, 1].
    pub fn new(latency_ns: Nanos, cpu: f64) -> Result<Slo, SloError> {
        if latency_ns == 0 {
            return Err(SloError("latency must be more than 0".into()));
        }
        if !(cpu.is_finite() && cpu > 0.0 && cpu <= 1.0) {
            return Err(SloError(format!(
                "cpu must be a share above 0% and at most 100%, got {:.4}%",
                cpu * 100.0
            )));
        }
        Ok(Slo { latency_ns, cpu })
    }

    /// Parses `latency=200us,cpu=50%` (keys in any order, both required;
    /// the share as a percentage or a fraction such as `0.5`).
    pub fn parse(s: &str) -> Result<Slo, SloError> {
        let (mut latency, mut cpu) = (None, None);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err(SloError(format!(
                    "{part:?} is not KEY=VALUE (keys: latency, cpu)"
                )));
            };
            match k.trim() {
                "latency" => {
                    let ns = duration_ns(v).ok_or_else(|| {
                        SloError(format!(
                            "latency={v}: not a duration such as 200us, 1.5ms or 2s"
                        ))
                    })?;
                    latency = Some(ns.round() as Nanos);
                }
                "cpu" => {
                    let v = v.trim();
                    let share = match v.strip_suffix('%') {
                        Some(p) => p.trim().parse::<f64>().ok().map(|p| p / 100.0),
                        None => v.parse::<f64>().ok(),
                    }
                    .ok_or_else(|| SloError(format!("cpu={v}: not a share such as 50% or 0.5")))?;
                    cpu = Some(share);
                }
                other => {
                    return Err(SloError(format!(
                        "unknown key {other:?} (keys: latency, cpu)"
                    )))
                }
            }
        }
        let latency =
            latency.ok_or_else(|| SloError("latency is missing (latency=200us)".into()))?;
        let cpu = cpu.ok_or_else(|| SloError("cpu is missing (cpu=50%)".into()))?;
        Slo::new(latency, cpu)
    }
}

/// What the polling loop's work costs, as measured (or, in the simulator,
/// as the profile says).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SloCosts {
    /// A received frame, taken and processed to completion, in ns.
    pub rx_frame_ns: f64,
    /// A sent frame reclaimed, in ns.
    pub tx_frame_ns: f64,
    /// A callback's own overhead, in ns.
    pub pass_ns: f64,
    /// From a frame's interrupt to the polling thread running, in ns.
    pub wake_ns: f64,
    /// Ports the loop serves, each with a receive and a transmit callback.
    pub ports: u32,
}

impl SloCosts {
    /// Costs for a router that has measured nothing yet but its wake-up
    /// (`wake_ns`), over `ports` ports: frame costs that make a round of a
    /// quota of 1 fill the latency target, so that the quota starts at 1,
    /// the safe end for latency, until the controller's first window has
    /// measured the frames. Refused, saying so, when the wake-up alone
    /// takes the whole target.
    pub fn unmeasured(slo: Slo, wake_ns: f64, ports: u32) -> Result<SloCosts, SloError> {
        let budget = slo.latency_ns as f64 - wake_ns;
        if budget <= 0.0 {
            return Err(SloError(format!(
                "latency={:.1}us cannot be met: a wake-up of the polling thread alone costs {:.1} us here; ask for more",
                slo.latency_ns as f64 / 1e3,
                wake_ns / 1e3
            )));
        }
        let ports = ports.max(1);
        let per = budget / f64::from(ports) / 2.0;
        Ok(SloCosts {
            rx_frame_ns: per,
            tx_frame_ns: per,
            pass_ns: 0.0,
            wake_ns,
            ports,
        })
    }

    /// The least added latency a frame can have: a wake-up, a pass and
    /// the frame itself.
    pub fn floor_ns(&self) -> f64 {
        self.wake_ns + self.pass_ns + self.rx_frame_ns
    }

    /// The largest quota whose round, with a wake-up, fits in `latency_ns`
    /// (at least 1).
    pub fn quota_for(&self, latency_ns: Nanos) -> u32 {
        let ports = f64::from(self.ports.max(1));
        let budget = latency_ns as f64 - self.wake_ns - ports * 2.0 * self.pass_ns;
        let per = ports * (self.rx_frame_ns + self.tx_frame_ns).max(1.0);
        let q = (budget / per).floor();
        if q.is_finite() {
            (q.max(1.0) as u32).min(MAX_QUOTA)
        } else {
            1
        }
    }
}

/// The constants an objective sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SloSettings {
    /// Frames per callback.
    pub quota: u32,
    /// M4: the share of each period the callbacks may use.
    pub cycle_limit: f64,
    /// M4's period, in ns.
    pub period_ns: Nanos,
}

impl Slo {
    /// The settings for these costs, or why the objective cannot be met.
    pub fn settings(&self, c: &SloCosts) -> Result<SloSettings, SloError> {
        let floor = c.floor_ns();
        if (self.latency_ns as f64) < floor {
            return Err(SloError(format!(
                "latency={:.1}us cannot be met: one frame alone takes {:.1} us here (a wake-up {:.1} us, a pass {:.1} us, the frame {:.1} us); ask for {:.0}us or more",
                self.latency_ns as f64 / 1e3,
                floor / 1e3,
                c.wake_ns / 1e3,
                c.pass_ns / 1e3,
                c.rx_frame_ns / 1e3,
                (floor / 1e3).ceil()
            )));
        }
        Ok(SloSettings {
            quota: c.quota_for(self.latency_ns),
            cycle_limit: self.cpu,
            period_ns: PERIOD_NS,
        })
    }
}

/// Queue-state feedback's thresholds an objective sets (see the module's
/// notes), in queue entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackMarks {
    /// Input stops when the queue holds this many frames.
    pub inhibit_at: u32,
    /// Input resumes when the queue has drained to this many.
    pub resume_at: u32,
    /// Or after this long inhibited, in case the stage hangs, in ns.
    pub timeout_ns: Nanos,
}

impl Slo {
    /// M3's watermarks for a stage that takes `stage_frame_ns` a frame out
    /// of a queue of `capacity`, downstream of a polling loop with these
    /// costs taking `quota` frames a callback; or why none fit.
    pub fn feedback_marks(
        &self,
        c: &SloCosts,
        quota: u32,
        stage_frame_ns: f64,
        capacity: u32,
    ) -> Result<FeedbackMarks, SloError> {
        if stage_frame_ns.is_nan() || stage_frame_ns <= 0.0 || capacity == 0 {
            return Err(SloError(format!(
                "feedback needs a stage that takes time per frame ({stage_frame_ns} ns) and a queue ({capacity} entries)"
            )));
        }
        let restart = c.wake_ns + c.pass_ns + c.rx_frame_ns;
        let resume_at = ((restart / stage_frame_ns).ceil() as u32).max(1);
        if resume_at >= capacity {
            return Err(SloError(format!(
                "feedback cannot keep the stage busy: it drains {resume_at} frames while input restarts ({:.1} us), and its queue holds {capacity}",
                restart / 1e3
            )));
        }
        let by_latency = (self.latency_ns as f64 / stage_frame_ns).floor() as u32;
        let inhibit_at = by_latency
            .max(resume_at.saturating_add(quota.max(1)))
            .min(capacity);
        let band = f64::from(inhibit_at - resume_at);
        Ok(FeedbackMarks {
            inhibit_at,
            resume_at,
            timeout_ns: (2.0 * band * stage_frame_ns).round() as Nanos,
        })
    }
}

/// Keeps an objective's settings right as the measured costs move (see the
/// module's notes for why it settles without oscillating).
#[derive(Debug, Clone)]
pub struct SloController {
    slo: Slo,
    costs: SloCosts,
    settings: SloSettings,
    /// The router's share of the last window.
    share: f64,
    window_start: Option<(Nanos, Nanos)>,
    rx: (Nanos, u64, u64),
    tx: (Nanos, u64, u64),
    /// Whether each direction's cost per frame has been measured yet.
    measured: (bool, bool),
    /// CPU charged to M4 this window (all the router's, where the caller
    /// charges it so).
    charged: Nanos,
    changes: u64,
    quota_changes: u64,
    last_change: Option<Nanos>,
    /// Whether the quota last moved up (`Some(true)`) or down.
    last_move: Option<bool>,
    /// Whether the last window asked the quota to turn back.
    turn_asked: bool,
}

impl SloController {
    /// A controller starting from `costs`, or why the objective cannot be met.
    pub fn new(slo: Slo, costs: SloCosts) -> Result<SloController, SloError> {
        let settings = slo.settings(&costs)?;
        Ok(SloController {
            slo,
            costs,
            settings,
            share: 0.0,
            window_start: None,
            rx: (0, 0, 0),
            tx: (0, 0, 0),
            measured: (false, false),
            charged: 0,
            changes: 0,
            quota_changes: 0,
            last_change: None,
            last_move: None,
            turn_asked: false,
        })
    }

    /// The settings now.
    pub fn settings(&self) -> SloSettings {
        self.settings
    }

    /// The objective.
    pub fn slo(&self) -> Slo {
        self.slo
    }

    /// The costs as estimated now.
    pub fn costs(&self) -> SloCosts {
        self.costs
    }

    /// Whether a received frame's cost has been measured (else
    /// [`SloController::costs`] holds the starting estimate).
    pub fn rx_measured(&self) -> bool {
        self.measured.0
    }

    /// The router's share of the last window the controller closed.
    pub fn share(&self) -> f64 {
        self.share
    }

    /// How many times the settings changed.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// How many times the quota changed.
    pub fn quota_changes(&self) -> u64 {
        self.quota_changes
    }

    /// When the settings last changed.
    pub fn last_change(&self) -> Option<Nanos> {
        self.last_change
    }

    /// A callback in `dir` handled `frames` at a cost of `ns`.
    pub fn callback(&mut self, dir: Dir, frames: u32, ns: Nanos) {
        let acc = match dir {
            Dir::Rx => &mut self.rx,
            Dir::Tx => &mut self.tx,
        };
        acc.0 += ns;
        acc.1 += u64::from(frames);
        acc.2 += 1;
    }

    /// M4 was charged `ns`. Where callbacks are not timed one by one (they
    /// come with a cost of 0) and the caller charges M4 with all the
    /// router's CPU (its thread, its receive threads, its wake-ups), that
    /// is what a frame costs: the window's charge over its received frames.
    pub fn charged(&mut self, ns: Nanos) {
        self.charged += ns;
    }

    /// At `now`, the router having used `router_ns` of CPU so far (its
    /// thread and its interrupts): closes a window every four periods and
    /// returns the settings when they changed.
    pub fn tick(&mut self, now: Nanos, router_ns: Nanos) -> Option<SloSettings> {
        let Some((t0, cpu0)) = self.window_start else {
            self.window_start = Some((now, router_ns));
            self.reset();
            return None;
        };
        let elapsed = now.saturating_sub(t0);
        if elapsed < WINDOW_PERIODS * self.settings.period_ns {
            return None;
        }
        let smooth = |old: f64, new: f64| old + WEIGHT * (new - old);
        let per_frame = |(ns, frames, calls): (Nanos, u64, u64), pass: f64| {
            (frames >= MIN_FRAMES)
                .then(|| ((ns as f64 - calls as f64 * pass) / frames as f64).max(0.0))
        };
        // Untimed callbacks: the whole charge goes to the frames received.
        if self.rx.0 == 0 && self.tx.0 == 0 && self.charged > 0 {
            self.rx.0 = self.charged + self.rx.2 * self.costs.pass_ns as Nanos;
        }
        // The first measurement replaces the starting estimate outright.
        if let Some(f) = per_frame(self.rx, self.costs.pass_ns) {
            let old = self.costs.rx_frame_ns;
            self.costs.rx_frame_ns = if self.measured.0 { smooth(old, f) } else { f };
            self.measured.0 = true;
        }
        if let Some(f) = per_frame(self.tx, self.costs.pass_ns) {
            let old = self.costs.tx_frame_ns;
            self.costs.tx_frame_ns = if self.measured.1 { smooth(old, f) } else { f };
            self.measured.1 = true;
        }
        self.share = router_ns.saturating_sub(cpu0) as f64 / elapsed as f64;
        self.window_start = Some((now, router_ns));
        self.reset();
        let mut next = self.settings;
        let q = self.costs.quota_for(self.slo.latency_ns);
        let cur = self.settings.quota;
        // A quarter of the quota (one frame at least) moves it; turning
        // back takes a frame more, asked by two windows in a row, so that
        // one window's noise (a frame is a large step at a quota of 1 or 2)
        // cannot flip it to and fro.
        let step = (cur / 4).max(1);
        let turns = self.last_move.is_some_and(|up| up != (q > cur));
        let asked = q.abs_diff(cur) >= step + u32::from(turns);
        if asked && (!turns || self.turn_asked) {
            next.quota = q;
            self.last_move = Some(q > cur);
        }
        self.turn_asked = asked && turns;
        let (cpu, error) = (self.slo.cpu, self.slo.cpu - self.share);
        let limit = (self.settings.cycle_limit + GAIN * error).clamp(cpu / 4.0, cpu);
        if error.abs() > 0.01 && limit != self.settings.cycle_limit {
            next.cycle_limit = limit;
        }
        (next != self.settings).then(|| {
            self.quota_changes += u64::from(next.quota != self.settings.quota);
            self.settings = next;
            self.changes += 1;
            self.last_change = Some(now);
            next
        })
    }

    fn reset(&mut self) {
        self.rx = (0, 0, 0);
        self.tx = (0, 0, 0);
        self.charged = 0;
    }
}

#[cfg(test)]
mod tests;
