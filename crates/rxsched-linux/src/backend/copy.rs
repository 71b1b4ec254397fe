//! Passive copies for a monitor: an XDP program (`bpf/monitor.bpf.c`)
//! copies each frame into a BPF ring buffer and passes it on to the
//! kernel's stack, as `tcpdump` leaves the host its frames. The monitor's
//! polling thread reads the ring buffer (its descriptor is readable while
//! records wait).
//!
//! Input control acts on the copies, not on the host's traffic. The ring
//! buffer is the monitor's receive ring: an inhibit stops the thread
//! reading it, copies wait there, and once it is full the program passes
//! frames on uncopied (`copy_ring`), before the copy's work, as a full
//! receive ring drops frames before any work. The receive work itself is
//! the host's, which its own traffic needs: no gate holds it off, and none
//! of its CPU time is charged to the monitor's cycle limit. (An earlier
//! form stopped copying while input was inhibited; with a filter queue of
//! 1,024 frames that threw away copies the 2 MiB ring buffer had room for,
//! and wrote a third fewer frames beside a compute process.)
//!
//! Drop points: `nic_rx_ring` (the device's `rx_dropped`, before any
//! copy) and `copy_ring` (the ring buffer was full).

use super::{
    AnyRx, AnyTx, DeviceDrops, NoGate, Opened, Port, RxBackend, Servicing, TxBackend, KTHREAD_PRIO,
};
use crate::bpf::{Object, MONITOR};
use crate::sys::{self, SysError, SysResult};
use aya::maps::{MapData, RingBuf};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes before a copy's frame in its record: its length, and the receive
/// queue it came in on.
const HEADER: usize = 8;
/// The ring buffer's size (`copy_ring`'s `max_entries` in the program).
pub const RING_BYTES: u64 = 1 << 21;
/// The record of a short frame: the ring buffer's 8-byte header, the
/// copy's header, and the smallest size class (128 bytes).
pub const SHORT_RECORD_BYTES: u64 = 8 + HEADER as u64 + 128;
/// Unread bytes at which a copy wakes the reader (`WAKE_BYTES`).
pub const WAKE_BYTES: u64 = 64 << 10;
/// The program wakes the reader at least this often while copies flow
/// (`WAKE_NS` in `bpf/monitor.bpf.c`), but not for a copy that follows
/// the last wake-up closely: the reader looks again this soon on its own.
const LOOK_AGAIN_NS: u64 = 1_000_000;
/// How long after its last copy the reader keeps looking on its own.
const FLOWING_NS: u64 = 100_000_000;

/// The receive side of a passive port: the ring buffer of copies.
pub struct CopyRx {
    ring: RingBuf<MapData>,
    prog: Arc<Mutex<Object>>,
    drops: DeviceDrops,
    /// When the reader last took a copy (monotonic ns).
    took_at: u64,
}

fn lock(o: &Mutex<Object>) -> MutexGuard<'_, Object> {
    o.lock().unwrap_or_else(|e| e.into_inner())
}

impl CopyRx {
    /// Attaches the copying program to `iface`, with the capture filter
    /// `filter` set before it sees a frame.
    pub fn open(iface: &str, filter: Option<&crate::pcap_filter::Program>) -> SysResult<CopyRx> {
        let mut o = Object::load(MONITOR, iface)?;
        if let Some(p) = filter {
            o.setup_filter(p)?;
        }
        let ring = o.take_ring("copy_ring")?;
        let drops = DeviceDrops::open(iface)?;
        o.attach("xdp_copy", iface)?;
        Ok(CopyRx {
            ring,
            prog: Arc::new(Mutex::new(o)),
            drops,
            took_at: 0,
        })
    }
}

impl RxBackend for CopyRx {
    fn fd(&self) -> Option<RawFd> {
        Some(self.ring.as_raw_fd())
    }

    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        self.recv_tagged(max, &mut |frame, _| f(frame))
    }

    fn recv_tagged(&mut self, max: usize, f: &mut dyn FnMut(&[u8], Option<u32>) -> bool) -> usize {
        let mut n = 0;
        while n < max {
            let Some(rec) = self.ring.next() else { break };
            let word = |at: usize| {
                rec.get(at..at + 4)
                    .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            };
            let (len, queue) = (word(0) as usize, word(4));
            let frame = rec.get(HEADER..).unwrap_or_default();
            let go = f(&frame[..len.min(frame.len())], Some(queue));
            n += 1;
            if !go {
                break;
            }
        }
        if n > 0 {
            self.took_at = sys::mono_ns();
        }
        n
    }

    fn max_sleep_ns(&self, _charging: bool) -> Option<u64> {
        (sys::mono_ns().saturating_sub(self.took_at) < FLOWING_NS).then_some(LOOK_AGAIN_NS)
    }

    fn pending(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.ring.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no waiting.
        unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 }
    }

    fn ring_drops(&mut self) -> SysResult<u64> {
        self.drops.read()
    }

    fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        lock(&self.prog).copy_counts()
    }
}

/// A port this process does not transmit on (a passive monitor's, or a
/// router's that forwards in XDP).
pub struct NoTx(pub String);

impl TxBackend for NoTx {
    fn send(&mut self, _frames: &[&[u8]]) -> SysResult<usize> {
        Err(SysError {
            what: self.0.clone(),
            syscall: "send",
            source: io::Error::new(
                io::ErrorKind::Unsupported,
                "this port's frames are not sent from user space",
            ),
        })
    }
    fn fd(&self) -> Option<RawFd> {
        None
    }
}

/// Opens every one of `ifaces` passively. The thread that reads the
/// copies runs as the packet backend's does (`how`).
pub fn open_all(
    ifaces: &[String],
    how: Servicing,
    filter: Option<&crate::pcap_filter::Program>,
) -> SysResult<Opened> {
    let ports = ifaces
        .iter()
        .map(|p| {
            let rx = CopyRx::open(p, filter)?;
            Ok(Port {
                name: p.clone(),
                rx: Box::new(rx) as AnyRx,
                tx: Box::new(NoTx(p.clone())) as AnyTx,
                mac: sys::mac_of(p)?,
                mtu: sys::mtu_of(p)?,
            })
        })
        .collect::<SysResult<Vec<_>>>()?;
    Ok(Opened {
        ports,
        more_rx: Vec::new(),
        steered_rx: Vec::new(),
        gate: Box::new(NoGate),
        threaded: false,
        thread_prio: (how == Servicing::Polling).then_some(KTHREAD_PRIO),
    })
}
