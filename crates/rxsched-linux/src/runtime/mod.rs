//! One runtime for the real dataplane's commands (`route`, `capture`,
//! `serve`): what they are all configured with ([`RunConfig`]) and the
//! launch they share ([`RunConfig::launch`]), backend selection ([`Backend`]:
//! each backend opens its devices and schedules their receive work in one
//! function of its own, `open_all`, behind one match here), input control
//! beside the loop ([`input`]: the gate on the devices' receive work, M4's
//! charging), and the polling thread, generic over what takes each frame
//! ([`poller`]). The vocabulary of opened devices (ports, gates,
//! priorities) is the backends' and is re-exported here.
//!
//! A command builds its [`App`] (what happens to a frame), opens its
//! devices through its [`Backend`], and runs a [`Poller`] over them.

pub mod input;
pub mod poller;

pub use crate::backend::{
    AnyRx, AnyTx, Feed, Gate, NoGate, Opened, Port, Servicing, DEVICE_PRIO, KTHREAD_PRIO,
    NAPI_PRIO, POLL_PRIO,
};
pub use input::{At, InputCtl};
pub use poller::{App, Poller, Polls};

use crate::backend::packet::EpollWait;
use crate::backend::RxBackend;
use crate::links::LinkWatch;
use crate::sys::{self, SysResult};
use rxsched_core::{CycleLimit, PollLoop, PollingFacility, Quota, MS};

/// How the dataplane reaches the devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// AF_XDP sockets fed by an XDP program; receive work in threaded NAPI.
    Xdp,
    /// AF_PACKET rings and `sendmmsg`, for devices without XDP.
    Packet,
}

impl Backend {
    /// Opens `ifaces`, their sockets fed as `feed` says, and schedules
    /// their receive work as `how` says.
    /// An AF_XDP socket's receive ring holds `rx_ring` frames.
    pub fn open(
        self,
        ifaces: &[String],
        how: Servicing,
        feed: &Feed,
        rx_ring: u32,
    ) -> SysResult<Opened> {
        match self {
            Backend::Xdp if matches!(feed, Feed::Copy { .. }) => {
                let Feed::Copy { filter } = feed else {
                    unreachable!("matched above")
                };
                crate::backend::copy::open_all(ifaces, how, filter.as_ref())
            }
            Backend::Xdp if matches!(feed, Feed::Route { in_xdp: true, .. }) => {
                crate::backend::in_xdp::open_all(ifaces, how, feed)
            }
            Backend::Xdp => crate::backend::xdp::open_all(ifaces, how, feed, rx_ring),
            Backend::Packet => crate::backend::packet::open_all(ifaces, how, feed),
        }
    }

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Xdp => "xdp",
            Backend::Packet => "packet",
        }
    }

    /// The sockets it reads, as the kernel names them.
    pub fn sockets(self) -> &'static str {
        match self {
            Backend::Xdp => "AF_XDP",
            Backend::Packet => "AF_PACKET",
        }
    }
}

/// One device a receive-only command (`capture`, `serve`) opened: its
/// receive side, the gate on its receive work, its link watch, the way to
/// wait on it, and the priority the polling thread takes once the
/// command's helpers have started.
pub struct Device {
    /// The receive sides: queue 0's, then the device's other queues'.
    pub rx: Vec<AnyRx>,
    /// The gate on its receive work.
    pub gate: Box<dyn Gate>,
    /// Its link, watched.
    pub links: LinkWatch,
    /// Waiting on it (and on a stage's kick).
    pub wait: EpollWait,
    /// See [`Opened::thread_prio`].
    pub prio: Option<i32>,
}

/// What the line [`listening`] prints has between the command and its
/// devices: a script (or a test) waits for it instead of for a guessed time.
pub const LISTENING: &str = ": listening on ";

/// Says on stderr, once, that command `cmd` has opened `ifaces` and takes
/// frames now (`how`: its mode and backend), as tcpdump says "listening
/// on": `rxsched route: listening on d0, d1 (polling, AF_XDP)`. Setting up
/// (loading and verifying the programs, binding the sockets, measuring
/// the wake-up cost) takes about half a second here, and frames sent
/// before this line may meet a socket nobody reads yet.
pub fn listening(cmd: &str, ifaces: &[String], how: &str) {
    eprintln!("rxsched {cmd}{LISTENING}{} ({how})", ifaces.join(", "));
}

/// The calling thread takes `prio` (the thread that takes frames, once
/// its helpers have started: [`Opened::thread_prio`]).
pub fn take_priority(prio: Option<i32>) -> SysResult<()> {
    match prio {
        Some(p) => sys::set_fifo(p),
        None => Ok(()),
    }
}

/// What every command on real devices is configured with.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// How it reaches the devices.
    pub backend: Backend,
    /// Frames per polling callback.
    pub quota: Quota,
    /// M4: input may use this share of each 10 ms.
    pub cycle_limit: Option<f64>,
    /// M4: what each wake-up of the polling thread costs the task it
    /// interrupts beyond the CPU time it is charged with, in ns (see
    /// [`crate::wakecost`]); `None`: measured at launch when M4 is on.
    pub wake_cost_ns: Option<u64>,
    /// The CPU every thread (and helper process) runs on.
    pub cpu: Option<usize>,
    /// Stop after this many seconds.
    pub duration_s: f64,
    /// Print live counters this often (0: only on SIGUSR1).
    pub stats_every_s: f64,
    /// An objective that sets the quota and M4's limit instead (the
    /// limit then starts at its CPU share; see [`RunConfig::facility`]).
    pub slo: Option<rxsched_core::Slo>,
    /// Entries of each AF_XDP socket's receive ring (a power of two).
    pub rx_ring: u32,
}

impl Default for RunConfig {
    /// The command line's defaults: AF_XDP, 32 frames per callback, no
    /// cycle limit, no pinning, a minute, no live counters.
    fn default() -> Self {
        RunConfig {
            backend: Backend::Xdp,
            quota: Quota::Limited(32),
            cycle_limit: None,
            wake_cost_ns: None,
            cpu: None,
            duration_s: 60.0,
            stats_every_s: 0.0,
            slo: None,
            rx_ring: crate::backend::xdp::RX_RING,
        }
    }
}

impl RunConfig {
    /// The launch every command shares, before any helper starts or any
    /// thread takes a real-time priority: stop signals, pinning to
    /// [`RunConfig::cpu`], and with M4 the wake-up cost measured on that
    /// CPU unless given (the measurement's loop must be preemptible).
    /// Returns the configuration with the cost filled in.
    pub fn launch(&self) -> SysResult<RunConfig> {
        sys::signals::install();
        if let Some(c) = self.cpu {
            sys::pin_to_cpu(c)?;
        }
        let mut c = self.clone();
        if (c.cycle_limit.is_some() || c.slo.is_some()) && c.wake_cost_ns.is_none() {
            // SAFETY: sched_getcpu has no preconditions.
            let here = unsafe { libc::sched_getcpu() }.max(0) as usize;
            c.wake_cost_ns = Some(crate::wakecost::measure(c.cpu.unwrap_or(here))?);
        }
        Ok(c)
    }

    /// Opens `iface` for a receive-only command named `who`, its socket
    /// fed as `feed` says, its receive work owned by the polling thread.
    pub fn open_one(&self, who: &'static str, iface: &str, feed: &Feed) -> SysResult<Device> {
        let ifaces = [iface.to_string()];
        let o = self
            .backend
            .open(&ifaces, Servicing::Polling, feed, self.rx_ring)?;
        let first = o.ports.into_iter().next().expect("one port opened").rx;
        let rx = std::iter::once(first)
            .chain(o.more_rx.into_iter().map(|(_, r)| r))
            .collect();
        Ok(Device {
            rx,
            gate: o.gate,
            links: LinkWatch::new(who, &ifaces, sys::mono_ns())?,
            wait: EpollWait::new()?,
            prio: o.thread_prio,
        })
    }

    /// The polling facility: the quota, and M4 over 10 ms periods if on;
    /// or, with an objective over `ports` ports, both set by its
    /// controller ([`rxsched_core::slo`]).
    ///
    /// M4 here charges everything the router takes (its thread, its
    /// receive threads and its wake-ups, see [`input`]), so the limit is
    /// the objective's share itself, and a frame's cost is that charge
    /// over the frames received. The quota starts at 1, the safe end for
    /// latency: the frame costs are not known until the first window has
    /// measured them (the measured wake-up cost stands in for the
    /// wake-up's latency), and the controller sets the quota they allow
    /// from then on.
    pub fn facility(&self, ports: usize) -> SysResult<PollingFacility> {
        let Some(slo) = self.slo else {
            let fac = PollingFacility::new(self.quota);
            return Ok(match self.cycle_limit {
                Some(share) => fac.with_cycle_limit(CycleLimit::new(10 * MS, share)),
                None => fac,
            });
        };
        let wake = self.wake_cost_ns.unwrap_or(0) as f64;
        let bad = |e: rxsched_core::SloError| crate::sys::SysError {
            what: "--slo".into(),
            syscall: "objective",
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e.0),
        };
        let costs = rxsched_core::SloCosts::unmeasured(slo, wake, ports as u32).map_err(bad)?;
        let c = rxsched_core::SloController::new(slo, costs).map_err(bad)?;
        Ok(PollingFacility::new(self.quota).with_slo(c))
    }

    /// A polling thread over `rx` serving `app`, its loop built from
    /// `fac` (this configuration's [`RunConfig::facility`], with M3 added
    /// where the command watches a queue).
    pub fn poller<R: RxBackend, C: rxsched_core::Clock, W: crate::backend::Wait, A: App>(
        &self,
        rx: Vec<R>,
        fac: PollingFacility,
        app: A,
        clock: C,
        wait: W,
    ) -> SysResult<Poller<R, C, W, A>> {
        Poller::new(
            rx,
            PollLoop::new(fac),
            app,
            clock,
            wait,
            self.cycle_limit,
            self.wake_cost_ns,
        )
    }
}
