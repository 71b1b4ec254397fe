//! A router that forwards in XDP (`route --forward-in xdp`): the devices'
//! program (`bpf/route.bpf.c`) forwards what the kernel's tables route,
//! with `bpf_redirect`, as `xdp-fwd` does, and no frame crosses into user
//! space. The polling thread keeps the policy: the devices' receive work
//! (the NAPI threads the program runs in) runs when and as much as the
//! thread lets it, through their scheduling ([`NapiGate`]), and M4 charges
//! their CPU time to the router. There is no queue between stages to
//! watch, so no M3.
//!
//! Drop points: `nic_rx_ring` (the device's `rx_dropped`) and the
//! program's own (`other_host`, `truncated`, `bad_ihl`).

use super::xdp::napi_sched;
use super::{
    copy::NoTx, AnyRx, AnyTx, DeviceDrops, Feed, Gate, Opened, Port, Program, RxBackend, Servicing,
};
use crate::napi_threads::NapiGate;
use crate::sys::{self, SysResult};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// How often the polling thread looks at the receive work's CPU time (M4
/// charges it) while it has no frames of its own to wake it.
const LOOK_NS: u64 = 1_000_000;

/// A port whose frames the program forwards: nothing to receive, its
/// program's counters and its device's ring drops to read.
pub struct InXdp {
    prog: Program,
    /// A descriptor that never becomes readable, for the thread's wait:
    /// no frame comes this way.
    quiet: OwnedFd,
    drops: DeviceDrops,
}

impl InXdp {
    /// Attaches `feed`'s program to `iface`, forwarding in XDP.
    pub fn open(iface: &str, feed: &Feed) -> SysResult<InXdp> {
        Self::open_with(iface, feed, |_| Ok(()))
    }

    /// [`InXdp::open`], with `before` setting up the program's maps (the
    /// sockets it redirects to) before it is attached.
    pub fn open_with(
        iface: &str,
        feed: &Feed,
        before: impl FnOnce(&mut crate::bpf::Object) -> SysResult<()>,
    ) -> SysResult<InXdp> {
        let idx = sys::ifindex(iface)? as u32;
        let mut prog = feed
            .program(idx, sys::mac_of(iface)?, iface)?
            .ok_or_else(|| sys::SysError {
                what: iface.into(),
                syscall: "configure",
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "forwarding in XDP needs the router's program",
                ),
            })?;
        let drops = DeviceDrops::open(iface)?;
        before(&mut prog.object)?;
        let entry = prog.xdp;
        prog.object.attach(entry, iface)?;
        let quiet =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).map_err(|e| {
                sys::SysError {
                    what: iface.into(),
                    syscall: "eventfd",
                    source: e.into(),
                }
            })?;
        Ok(InXdp { prog, quiet, drops })
    }
}

impl RxBackend for InXdp {
    fn fd(&self) -> Option<RawFd> {
        Some(self.quiet.as_raw_fd())
    }
    fn recv_while(&mut self, _max: usize, _f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        0
    }
    fn pending(&self) -> bool {
        false
    }
    fn ring_drops(&mut self) -> SysResult<u64> {
        self.drops.read()
    }
    fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        self.prog.counts()
    }
    /// With M4 the thread looks at the receive work's CPU time every
    /// [`LOOK_NS`]; without, it has nothing to look at (an idle router
    /// that looked every millisecond took 3% of a CPU).
    fn max_sleep_ns(&self, charging: bool) -> Option<u64> {
        charging.then_some(LOOK_NS)
    }
}

/// The NAPI threads' gate, their wake-ups charged too: the forwarding is
/// theirs, and the polling thread wakes only to look (each of their
/// wake-ups is a device interrupt or timer on the CPU, which the kernel
/// charges to whatever it interrupted).
struct Woken(NapiGate);

impl Gate for Woken {
    fn set(&mut self, open: bool) -> SysResult<()> {
        self.0.set(open)
    }
    fn cpu_ns(&self) -> SysResult<u64> {
        self.0.cpu_ns()
    }
    fn wakeups(&self) -> SysResult<u64> {
        self.0.runs()
    }
}

/// The gate on `ifaces`' receive work when the program does the work (their
/// NAPI threads, scheduled as `how` says, their wake-ups charged), and the
/// priority of the thread that keeps the policy.
pub fn gate(ifaces: &[String], how: Servicing) -> SysResult<(Box<dyn Gate>, Option<i32>)> {
    let (work, thread_prio) = napi_sched(how);
    Ok((Box::new(Woken(NapiGate::new(ifaces, work)?)), thread_prio))
}

/// Opens every one of `ifaces` to forward in XDP, their receive work
/// scheduled as `how` says.
pub fn open_all(ifaces: &[String], how: Servicing, feed: &Feed) -> SysResult<Opened> {
    let ports = ifaces
        .iter()
        .map(|p| {
            Ok(Port {
                name: p.clone(),
                rx: Box::new(InXdp::open(p, feed)?) as AnyRx,
                tx: Box::new(NoTx(p.clone())) as AnyTx,
                mac: sys::mac_of(p)?,
                mtu: sys::mtu_of(p)?,
            })
        })
        .collect::<SysResult<Vec<_>>>()?;
    let (gate, thread_prio) = gate(ifaces, how)?;
    Ok(Opened {
        ports,
        more_rx: Vec::new(),
        steered_rx: Vec::new(),
        gate,
        threaded: true,
        thread_prio,
    })
}
