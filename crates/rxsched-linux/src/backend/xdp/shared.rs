//! Sockets that share one queue's UMEM: one per consumer, so that the
//! device's program can demultiplex frames into each consumer's own
//! receive ring (SRP's early demultiplexing, `serve` on XDP). The first
//! socket registers the UMEM and its fill ring; the others bind with
//! `XDP_SHARED_UMEM` and have a receive ring only. The kernel takes frames
//! for all of them from the one fill ring, so every consumer hands the
//! frames it is done with back to it, under a lock, once per batch.
//!
//! A consumer's ring is its channel: when it is full, the kernel drops the
//! frame in the device's receive work before copying it, counted by that
//! socket alone (`XDP_STATISTICS`).

use super::rings::{bind_as, dropped, fail, map_rings, offsets, register, sockopt, Ring, Umem};
use super::XskConfig;
use crate::sys::{ifindex, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

/// Bytes per UMEM frame.
const FRAME: u32 = 2048;

/// A queue's shared memory: the UMEM and its fill ring.
struct QueueMem {
    iface: String,
    /// The fill ring, and frames waiting for room on it.
    fill: Mutex<(Ring, Vec<u64>)>,
    /// The socket that registered the UMEM (the first consumer's).
    primary: OwnedFd,
    umem: Umem,
}

// SAFETY: the fill ring is used under its mutex; the UMEM's frames are
// each owned by one side at a time, as the rings say.
unsafe impl Send for QueueMem {}
// SAFETY: as above.
unsafe impl Sync for QueueMem {}

/// One consumer's socket on one queue: its receive ring over the queue's
/// shared memory.
pub struct Channel {
    rx: Arc<RxRing>,
    /// Its own socket; `None` for the first consumer, whose socket is the
    /// queue's primary.
    own: Option<OwnedFd>,
    /// Its drops when opened.
    base: u64,
    /// Frames taken from its ring, on their way back to the fill ring.
    back: Vec<u64>,
    mem: Arc<QueueMem>,
}

/// A channel's receive ring, shared with its [`Level`] views.
struct RxRing(Ring);

// SAFETY: the channel alone consumes from the ring; a `Level` only reads
// its two positions, which are atomics.
unsafe impl Send for RxRing {}
// SAFETY: as above.
unsafe impl Sync for RxRing {}

/// How full a channel's ring is, readable from another thread while the
/// kernel fills it and the consumer drains it.
#[derive(Clone)]
pub struct Level(Arc<RxRing>);

impl Level {
    /// Frames on the ring.
    pub fn frames(&self) -> u32 {
        self.0 .0.ready().0
    }

    /// Its entries.
    pub fn size(&self) -> u32 {
        self.0 .0.size
    }
}

/// Opens `consumers` sockets on `queue` of `iface` sharing one UMEM, each
/// with a receive ring of `ring` entries (a power of two). The caller
/// registers each socket's descriptor where the device's program finds it.
pub fn open(iface: &str, queue: u32, consumers: usize, ring: u32) -> SysResult<Vec<Channel>> {
    let idx = ifindex(iface)? as u32;
    let socket = || -> SysResult<OwnedFd> {
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(fail(iface, "socket(AF_XDP)"));
        }
        // SAFETY: raw was just returned and is owned here.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    };
    // Every consumer's ring may be full at once, with a ring's worth more
    // lent to the kernel.
    let frames = (consumers as u32 + 1) * ring;
    let cfg = XskConfig {
        rx_frames: frames,
        tx_frames: 0,
        frame_size: FRAME,
        rx_ring: ring,
        tx_ring: 64,
    };
    let primary = socket()?;
    let umem = Umem::map(frames as usize * FRAME as usize, iface)?;
    let fill_n = frames.next_power_of_two();
    register(primary.as_raw_fd(), &umem, &cfg, fill_n, iface)?;
    let rings = map_rings(primary.as_raw_fd(), &cfg, fill_n, iface)?;
    let (_, pos) = rings.fill.room();
    for i in 0..frames {
        // SAFETY: the fill ring has room for every frame.
        unsafe { *rings.fill.addr(pos.wrapping_add(i)) = i as u64 * FRAME as u64 };
    }
    rings.fill.submit(frames);
    bind_as(primary.as_raw_fd(), idx, queue, None, iface)?;
    let base = dropped(primary.as_raw_fd(), iface)?;
    let mem = Arc::new(QueueMem {
        iface: iface.to_string(),
        fill: Mutex::new((rings.fill, Vec::new())),
        primary,
        umem,
    });
    let mut out = vec![Channel {
        rx: Arc::new(RxRing(rings.rx)),
        own: None,
        base,
        back: Vec::with_capacity(ring as usize),
        mem: mem.clone(),
    }];
    for _ in 1..consumers {
        let fd = socket()?;
        sockopt(
            fd.as_raw_fd(),
            libc::XDP_RX_RING,
            &ring,
            iface,
            "setsockopt(XDP_RX_RING)",
        )?;
        let off = offsets(fd.as_raw_fd(), iface)?;
        let rx = Ring::map(
            fd.as_raw_fd(),
            &off.rx,
            ring,
            16,
            libc::XDP_PGOFF_RX_RING as u64,
            iface,
        )?;
        bind_as(
            fd.as_raw_fd(),
            idx,
            queue,
            Some(mem.primary.as_raw_fd()),
            iface,
        )?;
        out.push(Channel {
            rx: Arc::new(RxRing(rx)),
            base: dropped(fd.as_raw_fd(), iface)?,
            own: Some(fd),
            back: Vec::with_capacity(ring as usize),
            mem: mem.clone(),
        });
    }
    Ok(out)
}

impl Channel {
    /// Its socket's descriptor (to register with the program and to wait on).
    pub fn fd(&self) -> RawFd {
        self.own.as_ref().unwrap_or(&self.mem.primary).as_raw_fd()
    }

    /// Frames waiting on its ring.
    pub fn queued(&self) -> u32 {
        self.rx.0.ready().0
    }

    /// A view of its ring's level, for another thread.
    pub fn level(&self) -> Level {
        Level(self.rx.clone())
    }

    /// Takes up to `max` frames off its ring, each given to `f` in place,
    /// and hands them back to the kernel. Returns how many.
    pub fn take(&mut self, max: u32, f: &mut dyn FnMut(&[u8])) -> u32 {
        let rx = &self.rx.0;
        let (ready, pos) = rx.ready();
        let n = ready.min(max);
        let umem = &self.mem.umem;
        for i in 0..n {
            // SAFETY: entries up to `ready` are the kernel's finished writes.
            let d = unsafe { *rx.xdesc(pos.wrapping_add(i)) };
            let a = (d.addr as usize).min(umem.len);
            let len = (d.len as usize).min(umem.len - a);
            // SAFETY: clamped into the UMEM; the frame is ours until it is
            // back on the fill ring.
            f(unsafe { std::slice::from_raw_parts(umem.ptr.add(a), len) });
            self.back.push(d.addr & !(FRAME as u64 - 1));
        }
        rx.release(n);
        self.give_back();
        n
    }

    /// Hands the frames taken back on the queue's fill ring (those without
    /// room wait for the next call: the kernel may publish a fill entry's
    /// consumption after the frame it filled shows on a receive ring).
    fn give_back(&mut self) {
        if self.back.is_empty() {
            return;
        }
        let mut g = self.mem.fill.lock().unwrap_or_else(|e| e.into_inner());
        let (fill, waiting) = &mut *g;
        waiting.append(&mut self.back);
        let (room, pos) = fill.room();
        let k = (room as usize).min(waiting.len());
        for (i, a) in waiting.drain(..k).enumerate() {
            // SAFETY: i < room.
            unsafe { *fill.addr(pos.wrapping_add(i as u32)) = a };
        }
        fill.submit(k as u32);
    }

    /// Frames its socket dropped since it was opened: its ring was full,
    /// or the queue's fill ring was empty.
    pub fn drops(&self) -> SysResult<u64> {
        Ok(dropped(self.fd(), &self.mem.iface)?.saturating_sub(self.base))
    }
}
