//! What a router counts while it runs (readable from other threads), and
//! the report it prints at the end (its live line is in [`super::live`]).

use super::{Mode, Refused, ScreenEnd};
use crate::bpf::RouteOutcome;
use crate::rules::{Action, Decided, Rules};
use crate::screen::ScreenCounts;
use crate::sys::{self, SysResult};
use rxsched_core::{DropPoint, InhibitCause};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use strum::VariantArray;

mod slo;
pub use slo::{SloChange, SloFeedback, SloReport};

/// Counters, readable while the router runs (from another thread too).
#[derive(Debug, Default)]
pub struct Counters {
    /// Frames taken off the rings.
    pub rx: AtomicU64,
    /// Frames handed to the output interfaces.
    pub forwarded: AtomicU64,
    /// Dropped at the interrupt mode's input queue.
    pub ipintrq: AtomicU64,
    /// Dropped because an output queue was full.
    pub output_queue: AtomicU64,
    /// Dropped because the screening queue was full.
    pub screen_queue: AtomicU64,
    /// Dropped because their output port was down or gone.
    pub port_down: AtomicU64,
    /// Refused frames by reason, indexed like [`REASONS`].
    pub refused: [AtomicU64; 7],
    /// The output devices' transmit counters when the router started.
    pub devices: OnceLock<Devices>,
}

/// What one output device did not send: its `tx_dropped` and `tx_errors`
/// (as `ip -s link` shows them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRefusals {
    /// Frames the device dropped (over its MTU, its queue full, its link
    /// down: for a veth, its peer not taking them).
    pub tx_dropped: u64,
    /// Frames the device failed to send.
    pub tx_errors: u64,
}

impl DeviceRefusals {
    /// Both counts.
    pub fn total(&self) -> u64 {
        self.tx_dropped + self.tx_errors
    }
}

/// The output devices' transmit refusals, by port, and when they were
/// first read.
#[derive(Debug, Clone, Default)]
pub struct Devices(BTreeMap<String, DeviceRefusals>);

impl Devices {
    /// Reads the counters of `ports` now (a port that has disappeared
    /// reads as zero: its counters went with it).
    pub fn read(ports: &[String]) -> SysResult<Devices> {
        let text = sys::net_dev("route")?;
        let get = |p: &str, c: &str| sys::dev_counter(&text, p, c).unwrap_or(0);
        Ok(Devices(
            ports
                .iter()
                .map(|p| {
                    let r = DeviceRefusals {
                        tx_dropped: get(p, "tx_dropped"),
                        tx_errors: get(p, "tx_errors"),
                    };
                    (p.clone(), r)
                })
                .collect(),
        ))
    }

    /// What each port refused since `base`.
    pub fn since(&self, base: &Devices) -> BTreeMap<String, DeviceRefusals> {
        self.0
            .iter()
            .map(|(p, now)| {
                let b = base.0.get(p).copied().unwrap_or_default();
                let r = DeviceRefusals {
                    tx_dropped: now.tx_dropped.saturating_sub(b.tx_dropped),
                    tx_errors: now.tx_errors.saturating_sub(b.tx_errors),
                };
                (p.clone(), r)
            })
            .collect()
    }

    /// The ports read.
    pub fn ports(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

/// Refusal reasons in counter order.
pub const REASONS: [DropPoint; 7] = [
    DropPoint::Truncated,
    DropPoint::NotIpv4,
    DropPoint::BadIhl,
    DropPoint::BadChecksum,
    DropPoint::TtlExpired,
    DropPoint::NoRoute,
    DropPoint::TooBig,
];

impl Counters {
    pub(crate) fn refuse(&self, r: Refused) {
        let p = r.drop_point();
        let i = REASONS
            .iter()
            .position(|n| *n == p)
            .expect("every refusal has a counter");
        self.refused[i].fetch_add(1, Relaxed);
    }

    /// Frames refused, for every reason.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().map(|a| a.load(Relaxed)).sum()
    }

    /// Frames dropped or refused inside the router (not on the rings).
    pub fn dropped(&self) -> u64 {
        self.ipintrq.load(Relaxed)
            + self.output_queue.load(Relaxed)
            + self.screen_queue.load(Relaxed)
            + self.port_down.load(Relaxed)
            + self.refused_total()
    }
}

/// What a router took off one receive side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueTaken {
    /// The port.
    pub port: String,
    /// Its receive queue (`protected` for a queue's protected socket).
    pub queue: String,
    /// Frames taken off it.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// What a router did, printed as JSON at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RouterReport {
    /// How it scheduled receive work.
    pub mode: Mode,
    /// Frames and bytes taken off each receive side (port and queue).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub received_by_queue: Vec<QueueTaken>,
    /// Seconds it ran.
    pub duration_s: f64,
    /// Frames taken off the rings.
    pub rx: u64,
    /// Frames the output interfaces took: those handed to them less those
    /// their devices refused ([`RouterReport::refused_by_device`]).
    pub forwarded: u64,
    /// Frames handed to an output interface that its device then refused
    /// to send, by port, read from the device's own counters over the run
    /// (so they include any of the host's own frames the device refused:
    /// on a port that carries only forwarded traffic, none). Apart from
    /// the drops: the router did its work on them.
    #[serde(default)]
    pub refused_by_device: BTreeMap<String, DeviceRefusals>,
    /// Drops by point, refusals by reason among them.
    pub drops: BTreeMap<DropPoint, u64>,
    /// Frames the devices' program handed to the kernel's stack, by
    /// reason: the host's own traffic, and what RFC 1812 asks of a router
    /// beyond forwarding (the kernel answers, rate-limited).
    #[serde(default)]
    pub to_stack: BTreeMap<RouteOutcome, u64>,
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<InhibitCause, u64>,
    /// Interrupt/poll mode switches.
    pub mode_switches: u64,
    /// Frames still inside the router when it stopped.
    pub in_flight: u64,
    /// CPU time the router's threads used, in seconds.
    pub cpu_s: f64,
    /// With M4: the cost charged per wake-up, in ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_cost_ns: Option<u64>,
    /// Two-level: switches between interrupt and polling service, and
    /// seconds spent polling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub two_level: Option<TwoLevelReport>,
    /// With `--screen`: what the screening process (or, forwarding in
    /// XDP, the program's rules) did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<ScreenReport>,
    /// What the program's screening rules decided (see
    /// [`crate::bpf::Object::route_counts`]), until the report is told the
    /// rules ([`RouterReport::add_xdp_screen`]).
    #[serde(skip)]
    pub program_screen: Vec<u64>,
    /// Why the run ended early, if it did (a port disappeared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// With one polling thread per CPU (`--cpus`): what each did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<super::threads::ThreadReport>,
    /// With `--protect-queue`: that queue and the frames taken off it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected: Option<ProtectedReport>,
    /// With `--slo`: what the objective set, as it stood at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloReport>,
}

/// What the protected queue (`route --protect-queue`) did.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProtectedReport {
    /// The protected queue's number, on every port (`--protect-queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u32>,
    /// Frames the polling thread took off the protected queues and
    /// sockets.
    pub taken: u64,
    /// Protected frames the program steered into a shared queue's
    /// protected socket (`--protect-rules`).
    #[serde(default)]
    pub steered: u64,
    /// Protected frames on a queue without a protected socket (left on its
    /// ordinary socket).
    #[serde(default)]
    pub unsteered: u64,
    /// The guard on the host's real-time budget: the share of each 10 ms
    /// the router's real-time threads may take before ordinary input
    /// waits, and how many times it held it; absent where the kernel never
    /// stops the real-time class
    /// ([`rxsched_core::PollingFacility::with_rt_guard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_guard: Option<RtGuardReport>,
}

/// From the router's program's counters
/// ([`crate::bpf::Object::route_counts`]): the protected frames steered to
/// a protected socket, and those on a queue without one.
pub fn steered_counts(program: &[u64]) -> (u64, u64) {
    let at = RouteOutcome::VARIANTS.len() + crate::bpf::SCREEN_RULES + 1;
    let get = |i: usize| program.get(at + i).copied().unwrap_or(0);
    (get(0), get(1))
}

/// The real-time budget's guard of a router with a protected queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RtGuardReport {
    /// The share of each period.
    pub share: f64,
    /// Times it held ordinary input.
    pub holds: u64,
}

impl RouterReport {
    /// Adds what the devices' program did (`counts`, summed over the
    /// ports, in [`RouteOutcome`]'s order): its handing to the stack, and
    /// its drops beside the router's own. Where the program forwards
    /// (`in_xdp`), what it took is forwarded, and what it took or dropped
    /// is the router's input.
    pub fn add_program(&mut self, counts: &[u64], in_xdp: bool) {
        for (o, n) in RouteOutcome::VARIANTS.iter().zip(counts) {
            match o.fate() {
                Some(None) if *n > 0 => *self.to_stack.entry(*o).or_default() += n,
                Some(Some(p)) => {
                    *self.drops.entry(p).or_default() += n;
                    if in_xdp {
                        self.rx += n;
                    }
                }
                None if in_xdp => {
                    self.rx += n;
                    self.forwarded += n;
                }
                _ => {}
            }
        }
        let v = RouteOutcome::VARIANTS.len();
        let screen = counts
            .get(v..(v + crate::bpf::SCREEN_RULES + 1).min(counts.len()))
            .unwrap_or_default();
        self.program_screen.resize(screen.len(), 0);
        for (a, n) in self.program_screen.iter_mut().zip(screen) {
            *a += n;
        }
    }

    /// Adds what the program's screening `rules` decided (forwarding in
    /// XDP): accepted frames were forwarded and denied ones dropped at
    /// `screen_denied` (both already counted by [`Self::add_program`]);
    /// this says by which rule.
    pub fn add_xdp_screen(&mut self, rules: &Rules) {
        let by = std::mem::take(&mut self.program_screen);
        let mut counts = ScreenCounts::default();
        let n = rules.rules.len();
        let decided = by
            .iter()
            .take(n)
            .enumerate()
            .map(|(i, c)| (Decided::Rule(i), *c));
        let default = by
            .get(crate::bpf::SCREEN_RULES)
            .map(|c| (Decided::Default, *c));
        for (d, c) in decided.chain(default) {
            match d {
                Decided::Rule(i) if rules.rules[i].action == Action::Accept => counts.accepted += c,
                _ if c > 0 => {
                    counts.denied.insert(rules.label(d), c);
                }
                _ => {}
            }
        }
        counts.sent = counts.accepted;
        self.screen = Some(ScreenReport {
            at: ScreenAt::Xdp,
            pid: None,
            exit_code: None,
            queued: counts.accepted + counts.denied_total(),
            counts,
        });
    }

    /// Frames dropped at `point` (0 if none were).
    pub fn dropped(&self, point: DropPoint) -> u64 {
        self.drops.get(&point).copied().unwrap_or(0)
    }

    /// Frames dropped everywhere.
    pub fn dropped_total(&self) -> u64 {
        self.drops.values().sum()
    }

    /// Frames the output devices refused, on every port.
    pub fn refused_by_device_total(&self) -> u64 {
        self.refused_by_device.values().map(|r| r.total()).sum()
    }

    /// Every frame that arrived, by where it went: forwarded, refused by a
    /// device, dropped (on the receive rings, before the router took it, or
    /// after) or still inside: `rx` plus [`Self::dropped_before_taking`].
    pub fn accounted(&self) -> u64 {
        self.forwarded + self.refused_by_device_total() + self.dropped_total() + self.in_flight
    }

    /// Frames dropped before the router took them: on the device's
    /// receive ring (`nic_rx_ring`) or its socket's (`xsk_rx_ring`).
    pub fn dropped_before_taking(&self) -> u64 {
        self.dropped(DropPoint::NicRxRing) + self.dropped(DropPoint::XskRxRing)
    }

    /// Reconciles with the output devices: what they refused since `base`
    /// (read when the router started) is not forwarded.
    pub fn reconcile(&mut self, base: &Devices) -> SysResult<()> {
        let refused = Devices::read(&base.ports())?.since(base);
        let n: u64 = refused.values().map(|r| r.total()).sum();
        // The device counts the host's own frames too: never more than
        // the router handed over.
        let n = n.min(self.forwarded);
        self.forwarded -= n;
        self.refused_by_device = refused;
        Ok(())
    }
}

/// The two-level switch's part of a router's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TwoLevelReport {
    /// Switches either way.
    pub switches: u64,
    /// Seconds serviced by polling.
    pub polling_s: f64,
    /// How the devices were serviced when it stopped.
    pub service: rxsched_core::Service,
    /// The return mark in force when it stopped (a share of one CPU), if
    /// returning waits for a light window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_below: Option<f64>,
}

/// The screening stage's part of a router's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScreenReport {
    /// Where the rules ran: `process` (the screening process, the
    /// paper's screend) or `xdp` (the devices' program, forwarding in XDP).
    #[serde(rename = "where", default)]
    pub at: ScreenAt,
    /// The screening process's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its exit status, if it exited by itself when asked to stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Frames the router handed to it (in XDP: the frames screened).
    pub queued: u64,
    /// What it did with them.
    #[serde(flatten)]
    pub counts: ScreenCounts,
}

/// Where a router's screening rules ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScreenAt {
    /// In the screening process, behind the router's queue (what a report
    /// without `where` meant).
    #[default]
    Process,
    /// In the devices' XDP program, before any copy.
    Xdp,
}

impl RouterReport {
    /// The report of a run of `mode` from its counters; `ring_drops` is what
    /// the receive rings dropped.
    pub fn new(mode: Mode, c: &Counters, ring_drops: u64, in_flight: u64) -> RouterReport {
        let mut drops = BTreeMap::new();
        drops.insert(DropPoint::NicRxRing, ring_drops);
        drops.insert(DropPoint::Ipintrq, c.ipintrq.load(Relaxed));
        drops.insert(DropPoint::OutputQueue, c.output_queue.load(Relaxed));
        if c.screen_queue.load(Relaxed) > 0 {
            drops.insert(DropPoint::ScreenQueue, c.screen_queue.load(Relaxed));
        }
        if c.port_down.load(Relaxed) > 0 {
            drops.insert(DropPoint::PortDown, c.port_down.load(Relaxed));
        }
        for (p, n) in REASONS.iter().zip(&c.refused) {
            drops.insert(*p, n.load(Relaxed));
        }
        RouterReport {
            mode,
            received_by_queue: Vec::new(),
            duration_s: 0.0,
            rx: c.rx.load(Relaxed),
            forwarded: c.forwarded.load(Relaxed),
            refused_by_device: BTreeMap::new(),
            drops,
            to_stack: BTreeMap::new(),
            inhibits: BTreeMap::new(),
            mode_switches: 0,
            in_flight,
            cpu_s: 0.0,
            wake_cost_ns: None,
            two_level: None,
            screen: None,
            program_screen: Vec::new(),
            fault: None,
            threads: Vec::new(),
            protected: None,
            slo: None,
        }
    }

    /// Adds what the screening stage behind `end` did: the frames it sent
    /// are the router's output, its denials and output refusals are drops
    /// (`screen_denied`, `output_queue`), and what its queue still holds is
    /// in flight.
    pub fn add_screen(&mut self, end: &ScreenEnd, pid: u32, exit_code: Option<i32>) {
        let counts = ScreenCounts::read(&end.queue, &end.rules);
        let queued = end.queue.pushed();
        self.forwarded += counts.sent;
        *self.drops.entry(DropPoint::OutputQueue).or_default() += counts.tx_dropped;
        self.drops
            .insert(DropPoint::ScreenDenied, counts.denied_total());
        self.drops.entry(DropPoint::ScreenQueue).or_insert(0);
        // Handed over and not yet judged: queued, or being screened.
        self.in_flight += queued.saturating_sub(counts.accepted + counts.denied_total());
        self.screen = Some(ScreenReport {
            at: ScreenAt::Process,
            pid: Some(pid),
            exit_code,
            queued,
            counts,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(taken: u64, not_ours: u64, arp: u64) -> Vec<u64> {
        RouteOutcome::VARIANTS
            .iter()
            .map(|o| match o {
                RouteOutcome::Taken => taken,
                RouteOutcome::NotOurs => not_ours,
                RouteOutcome::Arp => arp,
                _ => 0,
            })
            .collect()
    }

    /// Forwarding in XDP, what the program took is the router's input and
    /// output; its drops are input too; what it handed the stack is not.
    #[test]
    fn the_program_s_forwarding_is_the_router_s_when_in_xdp() {
        let c = Counters::default();
        let mut r = RouterReport::new(Mode::Polling, &c, 0, 0);
        r.add_program(&counts(90, 7, 3), true);
        assert_eq!((r.rx, r.forwarded), (97, 90));
        assert_eq!(r.dropped(DropPoint::OtherHost), 7);
        assert_eq!(r.to_stack.get(&RouteOutcome::Arp), Some(&3));
        assert_eq!(r.rx, r.accounted());
        // In user space the sockets count what was taken.
        let mut u = RouterReport::new(Mode::Polling, &c, 0, 0);
        u.add_program(&counts(90, 7, 3), false);
        assert_eq!((u.rx, u.forwarded), (0, 0));
        assert_eq!(u.dropped(DropPoint::OtherHost), 7);
    }

    /// A device's refusals since the base, port by port; a port read only
    /// now counts from zero.
    #[test]
    fn device_refusals_are_counted_since_the_start() {
        let r = |d, e| DeviceRefusals {
            tx_dropped: d,
            tx_errors: e,
        };
        let base = Devices([("d1".to_string(), r(5, 1))].into_iter().collect());
        let now = Devices(
            [("d1".to_string(), r(9, 1)), ("d2".to_string(), r(2, 0))]
                .into_iter()
                .collect(),
        );
        let since = now.since(&base);
        assert_eq!(since["d1"], r(4, 0));
        assert_eq!(since["d2"], r(2, 0));
        assert_eq!(since.values().map(|x| x.total()).sum::<u64>(), 6);
    }
}
