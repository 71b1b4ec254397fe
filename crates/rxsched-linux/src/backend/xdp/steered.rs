//! A queue's protected socket: a second AF_XDP socket bound to the same
//! queue, sharing the queue's socket's UMEM and fill ring
//! (`XDP_SHARED_UMEM`), into whose receive ring the router's program
//! steers the frames its protection rules mark (`bpf/route.bpf.c`). The
//! flood fills the queue's ordinary ring; this one holds protected frames
//! only, and the polling thread serves it first. Frames it takes go back
//! on the queue's fill ring, under the queue's socket's lock.

use super::rings::{bind_as, dropped, fail, offsets, sockopt, Ring};
use super::{lock, lock_fed, Xsk};
use crate::backend::RxBackend;
use crate::bpf::Object;
use crate::sys::{ifindex, SysError, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

/// Entries of a protected socket's receive ring: the protected class is
/// small (control traffic), and what waits here is served first.
pub const STEERED_RING: u32 = 256;

/// A queue's protected socket, held by the queue's socket (which reports
/// the device's drops less every socket's, this one's too).
pub(super) struct Steered {
    pub(super) fd: OwnedFd,
    /// Its drops when opened, and when last read.
    pub(super) base: u64,
    pub(super) last: u64,
}

impl Steered {
    /// Its drops since opened (the last reading once the device is gone):
    /// its ring was full, or the queue's fill ring was empty.
    pub(super) fn drops(&mut self, iface: &str) -> SysResult<u64> {
        match dropped(self.fd.as_raw_fd(), iface) {
            Ok(n) => self.last = n,
            Err(_) if crate::sys::link_state(iface)?.is_none() => {}
            Err(e) => return Err(e),
        }
        Ok(self.last.saturating_sub(self.base))
    }
}

/// The receive side of a queue's protected socket.
pub struct SteeredRx {
    // Unmapped before the queue's socket (which closes the socket) may go.
    rx: Ring,
    fd: RawFd,
    x: Arc<Mutex<Xsk>>,
}

// SAFETY: the ring is a mapping this value owns alone, ordered against
// the kernel by its atomics; the UMEM and fill ring are used under the
// queue's socket's lock.
unsafe impl Send for SteeredRx {}

impl SteeredRx {
    /// Opens the protected socket of the queue whose socket is `x`, and
    /// registers it where the queue's program steers protected frames.
    pub(super) fn open(x: &Arc<Mutex<Xsk>>, queue: u32) -> SysResult<SteeredRx> {
        let mut g = lock(x);
        let iface = g.iface.clone();
        let slot = Object::consumer_slot(1, queue).ok_or_else(|| SysError {
            what: iface.clone(),
            syscall: "configure",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("queue {queue} is past the protected sockets the program holds"),
            ),
        })?;
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(fail(&iface, "socket(AF_XDP)"));
        }
        // SAFETY: raw was just returned and is owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let ring = STEERED_RING;
        sockopt(
            raw,
            libc::XDP_RX_RING,
            &ring,
            &iface,
            "setsockopt(XDP_RX_RING)",
        )?;
        let off = offsets(raw, &iface)?;
        let rx = Ring::map(
            raw,
            &off.rx,
            ring,
            std::mem::size_of::<libc::xdp_desc>(),
            libc::XDP_PGOFF_RX_RING as u64,
            &iface,
        )?;
        bind_as(
            raw,
            ifindex(&iface)? as u32,
            queue,
            Some(g.fd.as_raw_fd()),
            &iface,
        )?;
        let base = dropped(raw, &iface)?;
        lock_fed(&g.prog).object().set_xsk("xsks", slot, raw)?;
        g.steered = Some(Steered {
            fd,
            base,
            last: base,
        });
        drop(g);
        Ok(SteeredRx {
            rx,
            fd: raw,
            x: x.clone(),
        })
    }
}

impl RxBackend for SteeredRx {
    fn fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }

    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        let mut x = lock(&self.x);
        let mask = !(x.frame_size as u64 - 1);
        let (ready, pos) = self.rx.ready();
        let avail = ready.min(max.min(u32::MAX as usize) as u32);
        let mut n = 0;
        while n < avail {
            // SAFETY: entries up to `ready` are the kernel's finished writes.
            let d = unsafe { *self.rx.xdesc(pos.wrapping_add(n)) };
            let go = f(x.frame(d.addr, d.len as usize));
            x.back.push(d.addr & mask);
            n += 1;
            if !go {
                break;
            }
        }
        self.rx.release(n);
        x.refill();
        n as usize
    }

    fn pending(&self) -> bool {
        self.rx.ready().0 > 0
    }

    /// None of its own: the queue's socket reports the device's ring.
    fn ring_drops(&mut self) -> SysResult<u64> {
        Ok(0)
    }

    /// Its ring was full, or the queue's fill ring was empty.
    fn socket_drops(&mut self) -> SysResult<u64> {
        let mut x = lock(&self.x);
        let iface = x.iface.clone();
        x.steered.as_mut().map_or(Ok(0), |s| s.drops(&iface))
    }

    fn queued(&self) -> u64 {
        self.rx.ready().0 as u64
    }
}
