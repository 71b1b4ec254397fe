//! AF_XDP: a socket bound to one queue of a device, whose XDP program
//! (`bpf/xsk.bpf.c`, or a feed's) redirects frames into the receive ring of
//! the socket bound to the queue they arrived on. A router binds every
//! receive queue of its devices, each socket with its own UMEM; one
//! program per device serves them all.
//! veth offers copy mode: the kernel copies each frame into a UMEM frame
//! that user space lent it through the fill ring; transmission copies out of
//! the UMEM when the socket is kicked with `sendto`.
//!
//! Two drop points are read back: frames the device's own ring could not
//! take (before any receive work: `nic_rx_ring`, the device's `rx_dropped`
//! less the socket's drops) and frames the socket's ring could not take
//! (after the receive work: `xsk_rx_ring`, `XDP_STATISTICS`).

mod rings;
pub mod shared;
pub mod steered;

use super::{AnyRx, AnyTx, Opened, Port, Servicing, DEVICE_PRIO, NAPI_PRIO, POLL_PRIO};
use super::{Feed, Program, RxBackend, TxBackend};
use crate::bpf::{Object, XSK};
use crate::napi_threads::{NapiGate, Sched};
use crate::sys::{ifindex, SysError, SysResult};
use rings::{bind, fail, map_rings, register, Rings, Umem};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use steered::SteeredRx;

/// Sizes of a socket's memory and rings (ring sizes are powers of two).
#[derive(Debug, Clone, Copy)]
pub struct XskConfig {
    /// UMEM frames for reception (all lent to the kernel through the fill ring).
    pub rx_frames: u32,
    /// UMEM frames for transmission.
    pub tx_frames: u32,
    /// Bytes per UMEM frame (a power of two).
    pub frame_size: u32,
    /// Entries of the receive ring: frames beyond it die after the receive work.
    pub rx_ring: u32,
    /// Entries of the transmit and completion rings.
    pub tx_ring: u32,
}

/// The receive ring's default length, in frames. While input is held off
/// (M3's feedback, M4's cycle limit) the gate on the receive work leaks: a
/// receive thread the scheduler picks in the idle class runs until the
/// next tick, 2-4 ms here. A ring that holds that much receive work keeps
/// it for the router, where 512 entries dropped it after the work was
/// spent (by hand on this machine kind, top-rate flood: `--cycle-limit 50`
/// forwarded 89-108k pkts/s with 512 and 275-293k with 4,096, the compute
/// process's share unchanged; screening with feedback 394-410k and
/// 465-521k, `xsk_rx_ring` drops gone; plain polling the same with both).
pub const RX_RING: u32 = 4096;

impl XskConfig {
    /// A socket whose receive ring holds `rx_ring` frames (a power of
    /// two), with twice that many frames of memory lent to the kernel for
    /// reception (a full ring, and as much again in the fill ring).
    pub fn with_rx_ring(rx_ring: u32) -> XskConfig {
        XskConfig {
            rx_frames: 2 * rx_ring,
            tx_frames: 1024,
            frame_size: 2048,
            rx_ring,
            tx_ring: 512,
        }
    }
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig::with_rx_ring(RX_RING)
    }
}

/// An AF_XDP socket, its UMEM and rings, and the program feeding it.
struct Xsk {
    iface: String,
    frame_size: u32,
    rings: Rings,
    free_tx: Vec<u64>,
    /// Frames taken off the receive ring, on their way back to the fill
    /// ring (those it had no room for wait here for the next batch).
    back: Vec<u64>,
    /// Counters when opened: the device's `rx_dropped` and the socket's drops.
    base: (u64, u64),
    /// The same counters when last read: what is known once the device is gone.
    last: (u64, u64),
    /// The queue's protected socket, if it has one ([`steered`]).
    steered: Option<steered::Steered>,
    // Dropped in this order: the socket closes, then the program is
    // detached, then the memory is unmapped.
    fd: OwnedFd,
    prog: Arc<Mutex<Fed>>,
    umem: Umem,
}

/// What feeds a socket: the program that takes every frame, or a feed's
/// own (with its counters).
enum Fed {
    All(Object),
    Program(Program),
}

impl Fed {
    fn object(&mut self) -> &mut Object {
        match self {
            Fed::All(o) => o,
            Fed::Program(p) => &mut p.object,
        }
    }
}

impl Fed {
    /// The program for `feed` on `iface`, loaded, not yet attached.
    fn load(iface: &str, feed: &Feed) -> SysResult<Fed> {
        let idx = ifindex(iface)? as u32;
        Ok(
            match feed.program(idx, crate::sys::mac_of(iface)?, iface)? {
                Some(p) => Fed::Program(p),
                None => Fed::All(Object::load(XSK, iface)?),
            },
        )
    }

    /// Its XDP entry point.
    fn entry(&self) -> &'static str {
        match self {
            Fed::All(_) => "xdp_to_xsk",
            Fed::Program(p) => p.xdp,
        }
    }
}

impl Xsk {
    /// A socket on `queue` of `iface`, registered with the device's program
    /// `prog` (which the caller attaches).
    fn open(iface: &str, queue: u32, cfg: XskConfig, prog: Arc<Mutex<Fed>>) -> SysResult<Xsk> {
        let idx = ifindex(iface)? as u32;
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(fail(iface, "socket(AF_XDP)"));
        }
        // SAFETY: raw was just returned and is owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frames = cfg.rx_frames + cfg.tx_frames;
        let umem = Umem::map(frames as usize * cfg.frame_size as usize, iface)?;
        let fill_n = cfg.rx_frames.next_power_of_two();
        register(raw, &umem, &cfg, fill_n, iface)?;
        let rings = map_rings(raw, &cfg, fill_n, iface)?;
        // Lend every receive frame to the kernel before anything arrives.
        let (_, pos) = rings.fill.room();
        for i in 0..cfg.rx_frames {
            // SAFETY: the fill ring has room for every receive frame.
            unsafe { *rings.fill.addr(pos.wrapping_add(i)) = i as u64 * cfg.frame_size as u64 };
        }
        rings.fill.submit(cfg.rx_frames);
        bind(raw, idx, queue, iface)?;
        let mut x = Xsk {
            iface: iface.to_string(),
            frame_size: cfg.frame_size,
            rings,
            free_tx: (cfg.rx_frames..frames)
                .map(|i| i as u64 * cfg.frame_size as u64)
                .collect(),
            back: Vec::with_capacity(cfg.rx_ring as usize),
            base: (0, 0),
            last: (0, 0),
            steered: None,
            fd,
            prog,
            umem,
        };
        x.base = (x.device_dropped()?, x.socket_dropped()?);
        x.last = x.base;
        lock_fed(&x.prog).object().set_xsk("xsks", queue, raw)?;
        Ok(x)
    }

    /// The socket's drops: its ring was full, or the fill ring was empty.
    fn socket_dropped(&self) -> SysResult<u64> {
        rings::dropped(self.fd.as_raw_fd(), &self.iface)
    }

    /// The device's `rx_dropped`: its own ring's drops and the socket's.
    fn device_dropped(&self) -> SysResult<u64> {
        crate::sys::iface_counter(&self.iface, "rx_dropped")
    }

    fn frame(&self, addr: u64, len: usize) -> &[u8] {
        let a = (addr as usize).min(self.umem.len);
        let len = len.min(self.umem.len - a);
        // SAFETY: clamped into the UMEM, which lives as long as self.
        unsafe { std::slice::from_raw_parts(self.umem.ptr.add(a), len) }
    }

    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        let (ready, pos) = self.rings.rx.ready();
        let avail = ready.min(max.min(u32::MAX as usize) as u32);
        if avail == 0 {
            self.refill();
            return 0;
        }
        let mut n = 0;
        while n < avail {
            // SAFETY: entries up to `ready` are the kernel's finished writes.
            let d = unsafe { *self.rings.rx.xdesc(pos.wrapping_add(n)) };
            let go = f(self.frame(d.addr, d.len as usize));
            self.back.push(d.addr & !(self.frame_size as u64 - 1));
            n += 1;
            if !go {
                break;
            }
        }
        self.rings.rx.release(n);
        self.refill();
        n as usize
    }

    /// Hands the frames taken back to the kernel. The fill ring holds every
    /// receive frame, but the kernel may publish that it consumed a fill
    /// entry after the frame it filled shows on the receive ring: what has
    /// no room yet goes back on a later call.
    fn refill(&mut self) {
        if self.back.is_empty() {
            return;
        }
        let (room, fpos) = self.rings.fill.room();
        let k = (room as usize).min(self.back.len());
        for (i, a) in self.back.drain(..k).enumerate() {
            // SAFETY: i < room: the fill ring has room for these.
            unsafe { *self.rings.fill.addr(fpos.wrapping_add(i as u32)) = a };
        }
        self.rings.fill.submit(k as u32);
    }

    fn reclaim(&mut self) {
        let (n, pos) = self.rings.comp.ready();
        for i in 0..n {
            // SAFETY: completed entries are the kernel's finished writes.
            self.free_tx
                .push(unsafe { *self.rings.comp.addr(pos.wrapping_add(i)) });
        }
        self.rings.comp.release(n);
    }

    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize> {
        self.reclaim();
        let (room, pos) = self.rings.tx.room();
        let n = frames.len().min(self.free_tx.len()).min(room as usize);
        for (i, f) in frames[..n].iter().enumerate() {
            let addr = self.free_tx.pop().expect("counted above");
            let len = f.len().min(self.frame_size as usize);
            // SAFETY: addr is a transmit frame of the UMEM, len within it.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), self.umem.ptr.add(addr as usize), len);
                *self.rings.tx.xdesc(pos.wrapping_add(i as u32)) = libc::xdp_desc {
                    addr,
                    len: len as u32,
                    options: 0,
                };
            }
        }
        self.rings.tx.submit(n as u32);
        self.kick()?;
        Ok(n)
    }

    /// Copy mode transmits inside `sendto`, at most [`KICK_BATCH`] frames a
    /// call: `EAGAIN` says more are waiting, and the kick goes on until the
    /// ring is empty (a batch left behind waited there for the next frame
    /// to send: at the end of a flood, for good). A busy device (`EBUSY`,
    /// `ENOBUFS`) is not an error; what it refused goes on a later kick.
    fn kick(&self) -> SysResult<()> {
        let mut tries = 4 + self.rings.tx.size / KICK_BATCH;
        loop {
            let waiting = self.rings.tx.size - self.rings.tx.room().0;
            if waiting == 0 || tries == 0 {
                return Ok(());
            }
            tries -= 1;
            // SAFETY: a zero-length send on our own socket.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => continue,
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => return Ok(()),
                    _ => {
                        return Err(SysError {
                            what: self.iface.clone(),
                            syscall: "sendto(AF_XDP)",
                            source: e,
                        })
                    }
                }
            }
        }
    }
}

/// The frames one `sendto` transmits at most in copy mode (the kernel's
/// `TX_BATCH_SIZE`, the socket's default transmit budget).
const KICK_BATCH: u32 = 32;

// SAFETY: the rings and the UMEM are mappings this value owns alone; the
// kernel's side of them is ordered by the rings' atomics, whichever thread
// holds the value. The two halves of a port share it behind a mutex.
unsafe impl Send for Xsk {}

/// The receive side of an AF_XDP port: one queue's socket. The socket on
/// queue 0 reports for the whole device (its ring drops, less every
/// socket's, and the program's counters); the others report their own
/// socket's drops only.
pub struct XskRx {
    x: Arc<Mutex<Xsk>>,
    /// Every socket on the device, this one first, for queue 0's;
    /// empty for the others.
    device: Vec<Arc<Mutex<Xsk>>>,
}

/// The transmit side of an AF_XDP port.
pub struct XskTx(Arc<Mutex<Xsk>>);

fn lock_fed(f: &Mutex<Fed>) -> MutexGuard<'_, Fed> {
    f.lock().unwrap_or_else(|e| e.into_inner())
}

/// The receive queues `iface` has (1 if its sysfs entry cannot tell).
pub fn rx_queues(iface: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

/// A device's sockets: queue 0's two halves (which share the socket: one
/// thread at a time uses it, the lock taken once per batch), the other
/// queues' receive sides, and the queues' protected sockets.
type DeviceSockets = (XskRx, XskTx, Vec<XskRx>, Vec<SteeredRx>);

/// Opens AF_XDP sockets on the first `queues` receive queues of `iface`
/// (and a protected socket on each where `feed` steers protected traffic)
/// and attaches the program that feeds them.
pub fn open(iface: &str, queues: u32, cfg: XskConfig, feed: &Feed) -> SysResult<DeviceSockets> {
    let prog = Arc::new(Mutex::new(Fed::load(iface, feed)?));
    let socks = (0..queues.max(1))
        .map(|q| {
            Ok(Arc::new(Mutex::new(Xsk::open(
                iface,
                q,
                cfg,
                prog.clone(),
            )?)))
        })
        .collect::<SysResult<Vec<_>>>()?;
    let steered = match feed {
        Feed::Route {
            steer: Some(s),
            in_xdp: false,
            ..
        } => (0..socks.len() as u32)
            .filter(|q| Some(*q) != s.except)
            .map(|q| SteeredRx::open(&socks[q as usize], q))
            .collect::<SysResult<Vec<_>>>()?,
        _ => Vec::new(),
    };
    {
        let mut f = lock_fed(&prog);
        let entry = f.entry();
        f.object().attach(entry, iface)?;
    }
    let first = XskRx {
        x: socks[0].clone(),
        device: socks.clone(),
    };
    let tx = XskTx(socks[0].clone());
    let more = socks[1..]
        .iter()
        .map(|x| XskRx {
            x: x.clone(),
            device: Vec::new(),
        })
        .collect();
    Ok((first, tx, more, steered))
}

/// Opens every one of `ifaces` for a command, each socket fed as `feed`
/// says, their receive work (the devices' NAPI threads, pinned by the lab)
/// scheduled as `how` says: a socket on every receive queue (the others
/// than queue 0 in [`Opened::more_rx`]).
pub fn open_all(ifaces: &[String], how: Servicing, feed: &Feed, rx_ring: u32) -> SysResult<Opened> {
    let (mut more_rx, mut steered_rx) = (Vec::new(), Vec::new());
    let ports = ifaces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let queues = rx_queues(p);
            let (rx, tx, more, steered) = open(p, queues, XskConfig::with_rx_ring(rx_ring), feed)?;
            more_rx.extend(more.into_iter().map(|r| (i, Box::new(r) as AnyRx)));
            steered_rx.extend(steered.into_iter().map(|r| (i, Box::new(r) as AnyRx)));
            Ok(Port {
                name: p.clone(),
                rx: Box::new(rx) as AnyRx,
                tx: Box::new(tx) as AnyTx,
                mac: crate::sys::mac_of(p)?,
                mtu: crate::sys::mtu_of(p)?,
            })
        })
        .collect::<SysResult<Vec<_>>>()?;
    let (work, thread_prio) = napi_sched(how);
    Ok(Opened {
        ports,
        more_rx,
        steered_rx,
        gate: Box::new(NapiGate::new(ifaces, work)?),
        threaded: true,
        thread_prio,
    })
}

/// How the devices' NAPI threads and the thread that drives them run, for
/// each way of servicing them.
pub fn napi_sched(how: Servicing) -> (Sched, Option<i32>) {
    match how {
        Servicing::Polling => (Sched::Fifo(NAPI_PRIO), Some(POLL_PRIO)),
        Servicing::TimeShared { slice_ns: None } => (Sched::Normal, None),
        Servicing::TimeShared { slice_ns: Some(ns) } => (Sched::Sliced(ns), None),
        Servicing::Interrupt => (Sched::Fifo(DEVICE_PRIO), None),
    }
}

fn lock(x: &Mutex<Xsk>) -> MutexGuard<'_, Xsk> {
    x.lock().unwrap_or_else(|e| e.into_inner())
}

impl XskRx {
    /// Frames dropped after the kernel's receive work, because the socket's
    /// ring (or fill ring) was full, since opening.
    pub fn socket_drops(&self) -> SysResult<u64> {
        sock_drops(&self.x)
    }
}

/// [`XskRx::socket_drops`] of the socket `x`.
fn sock_drops(x: &Mutex<Xsk>) -> SysResult<u64> {
    let x = lock(x);
    let now = match x.socket_dropped() {
        Ok(n) => n,
        Err(_) if crate::sys::link_state(&x.iface)?.is_none() => x.last.1,
        Err(e) => return Err(e),
    };
    Ok(now.saturating_sub(x.base.1))
}

impl RxBackend for XskRx {
    fn fd(&self) -> Option<RawFd> {
        Some(lock(&self.x).fd.as_raw_fd())
    }

    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        lock(&self.x).recv_while(max, f)
    }

    fn pending(&self) -> bool {
        lock(&self.x).rings.rx.ready().0 > 0
    }

    /// Queue 0's socket: the device's drops less every socket's (those
    /// are `xsk_rx_ring`'s); another queue's: none of its own.
    fn ring_drops(&mut self) -> SysResult<u64> {
        if self.device.is_empty() {
            return Ok(0);
        }
        let mut socks = 0;
        for s in &self.device {
            let mut x = lock(s);
            match x
                .device_dropped()
                .and_then(|d| Ok((d, x.socket_dropped()?)))
            {
                Ok(now) => x.last = now,
                // A device that has disappeared took its counters along:
                // the last reading is what is known.
                Err(_) if crate::sys::link_state(&x.iface)?.is_none() => {}
                Err(e) => return Err(e),
            }
            socks += x.last.1.saturating_sub(x.base.1);
            let iface = x.iface.clone();
            if let Some(s) = x.steered.as_mut() {
                socks += s.drops(&iface)?;
            }
        }
        let x = lock(&self.x);
        Ok(x.last.0.saturating_sub(x.base.0).saturating_sub(socks))
    }

    fn socket_drops(&mut self) -> SysResult<u64> {
        sock_drops(&self.x)
    }

    fn queued(&self) -> u64 {
        lock(&self.x).rings.rx.ready().0 as u64
    }

    /// The device's program's counters, from queue 0's socket only.
    fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        if self.device.is_empty() {
            return Ok(Vec::new());
        }
        let prog = lock(&self.x).prog.clone();
        let mut f = lock_fed(&prog);
        match &mut *f {
            Fed::All(_) => Ok(Vec::new()),
            Fed::Program(p) => p.counts(),
        }
    }
}

impl TxBackend for XskTx {
    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize> {
        if frames.is_empty() {
            return Ok(0);
        }
        lock(&self.0).send(frames)
    }

    fn fd(&self) -> Option<RawFd> {
        Some(lock(&self.0).fd.as_raw_fd())
    }

    fn share(&self) -> Option<AnyTx> {
        Some(Box::new(XskTx(self.0.clone())))
    }
}
