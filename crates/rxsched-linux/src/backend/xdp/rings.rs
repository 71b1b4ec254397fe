//! An AF_XDP socket's memory: the UMEM its frames live in, the four
//! rings shared with the kernel (fill, receive, transmit, completion), and
//! the socket options that register and bind them.

use super::XskConfig;
use crate::sys::{SysError, SysResult};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

/// One mapped ring shared with the kernel.
pub(super) struct Ring {
    pub(super) producer: *const AtomicU32,
    pub(super) consumer: *const AtomicU32,
    pub(super) desc: *mut u8,
    pub(super) mask: u32,
    pub(super) size: u32,
    pub(super) map: *mut libc::c_void,
    pub(super) map_len: usize,
}

/// The memory frames live in, shared with the kernel (which pins it).
pub(super) struct Umem {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

/// The four rings of a socket.
pub(super) struct Rings {
    pub(super) fill: Ring,
    pub(super) comp: Ring,
    pub(super) rx: Ring,
    pub(super) tx: Ring,
}

impl Ring {
    /// Maps a ring of `size` entries of `esize` bytes at `pgoff`.
    pub(super) fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        esize: usize,
        pgoff: u64,
        what: &str,
    ) -> SysResult<Ring> {
        let len = off.desc as usize + size as usize * esize;
        // SAFETY: mapping the ring the kernel made for this socket.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(fail(what, "mmap(AF_XDP ring)"));
        }
        let b = p as *mut u8;
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie in the mapping.
        unsafe {
            Ok(Ring {
                producer: b.add(off.producer as usize) as *const AtomicU32,
                consumer: b.add(off.consumer as usize) as *const AtomicU32,
                desc: b.add(off.desc as usize),
                mask: size - 1,
                size,
                map: p,
                map_len: len,
            })
        }
    }

    pub(super) fn prod(&self) -> &AtomicU32 {
        // SAFETY: the pointer is into the live mapping.
        unsafe { &*self.producer }
    }

    pub(super) fn cons(&self) -> &AtomicU32 {
        // SAFETY: the pointer is into the live mapping.
        unsafe { &*self.consumer }
    }

    /// Consumer side: entries ready to read, and the first one's position.
    pub(super) fn ready(&self) -> (u32, u32) {
        let c = self.cons().load(Ordering::Relaxed);
        let p = self.prod().load(Ordering::Acquire);
        (p.wrapping_sub(c), c)
    }

    /// Consumer side: hands `n` entries back.
    pub(super) fn release(&self, n: u32) {
        let c = self.cons().load(Ordering::Relaxed);
        self.cons().store(c.wrapping_add(n), Ordering::Release);
    }

    /// Producer side: free entries, and the first free position.
    pub(super) fn room(&self) -> (u32, u32) {
        let p = self.prod().load(Ordering::Relaxed);
        let c = self.cons().load(Ordering::Acquire);
        // Saturating: a consumer position published late reads as a full ring.
        (self.size.saturating_sub(p.wrapping_sub(c)), p)
    }

    /// Producer side: publishes `n` entries.
    pub(super) fn submit(&self, n: u32) {
        let p = self.prod().load(Ordering::Relaxed);
        self.prod().store(p.wrapping_add(n), Ordering::Release);
    }

    pub(super) fn addr(&self, pos: u32) -> *mut u64 {
        // SAFETY: masked into the ring's entries.
        unsafe { (self.desc as *mut u64).add((pos & self.mask) as usize) }
    }

    pub(super) fn xdesc(&self, pos: u32) -> *mut libc::xdp_desc {
        // SAFETY: masked into the ring's entries.
        unsafe { (self.desc as *mut libc::xdp_desc).add((pos & self.mask) as usize) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

impl Umem {
    pub(super) fn map(len: usize, what: &str) -> SysResult<Umem> {
        // SAFETY: an anonymous private mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(fail(what, "mmap(UMEM)"));
        }
        Ok(Umem {
            ptr: p as *mut u8,
            len,
        })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; the kernel keeps its
        // own reference to the pages until the socket is gone.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

pub(super) fn fail(what: &str, call: &'static str) -> SysError {
    SysError {
        what: what.to_string(),
        syscall: call,
        source: io::Error::last_os_error(),
    }
}

/// `setsockopt(SOL_XDP, opt)` with a value.
pub(super) fn sockopt<T>(
    fd: RawFd,
    opt: libc::c_int,
    v: &T,
    what: &str,
    call: &'static str,
) -> SysResult<()> {
    // SAFETY: v points to a live T of its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        return Err(fail(what, call));
    }
    Ok(())
}

/// Registers `umem` with socket `fd` and sizes its rings.
pub(super) fn register(
    fd: RawFd,
    umem: &Umem,
    cfg: &XskConfig,
    fill_n: u32,
    what: &str,
) -> SysResult<()> {
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr as u64,
        len: umem.len as u64,
        chunk_size: cfg.frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    sockopt(
        fd,
        libc::XDP_UMEM_REG,
        &reg,
        what,
        "setsockopt(XDP_UMEM_REG)",
    )?;
    for (opt, n, call) in [
        (
            libc::XDP_UMEM_FILL_RING,
            fill_n,
            "setsockopt(XDP_UMEM_FILL_RING)",
        ),
        (
            libc::XDP_UMEM_COMPLETION_RING,
            cfg.tx_ring,
            "setsockopt(XDP_UMEM_COMPLETION_RING)",
        ),
        (libc::XDP_RX_RING, cfg.rx_ring, "setsockopt(XDP_RX_RING)"),
        (libc::XDP_TX_RING, cfg.tx_ring, "setsockopt(XDP_TX_RING)"),
    ] {
        sockopt(fd, opt, &n, what, call)?;
    }
    Ok(())
}

/// Maps the rings of socket `fd`.
pub(super) fn map_rings(fd: RawFd, cfg: &XskConfig, fill_n: u32, what: &str) -> SysResult<Rings> {
    let off = offsets(fd, what)?;
    Ok(Rings {
        fill: Ring::map(fd, &off.fr, fill_n, 8, libc::XDP_UMEM_PGOFF_FILL_RING, what)?,
        comp: Ring::map(
            fd,
            &off.cr,
            cfg.tx_ring,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            what,
        )?,
        rx: Ring::map(
            fd,
            &off.rx,
            cfg.rx_ring,
            16,
            libc::XDP_PGOFF_RX_RING as u64,
            what,
        )?,
        tx: Ring::map(
            fd,
            &off.tx,
            cfg.tx_ring,
            16,
            libc::XDP_PGOFF_TX_RING as u64,
            what,
        )?,
    })
}

/// Binds socket `fd` to queue 0 of device `idx` in copy mode. The kernel
/// releases a closed socket's queue asynchronously: a socket of a process
/// that just exited may still hold it for a while.
pub(super) fn bind(fd: RawFd, idx: u32, queue: u32, what: &str) -> SysResult<()> {
    bind_as(fd, idx, queue, None, what)
}

/// Binds socket `fd` to `queue` of device `idx`: in copy mode with a UMEM
/// of its own, or sharing the UMEM (and, on the same queue, the fill ring)
/// of socket `shared`.
pub(super) fn bind_as(
    fd: RawFd,
    idx: u32,
    queue: u32,
    shared: Option<RawFd>,
    what: &str,
) -> SysResult<()> {
    // SAFETY: plain data; zeroed is valid.
    let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
    sa.sxdp_family = libc::AF_XDP as u16;
    sa.sxdp_ifindex = idx;
    sa.sxdp_queue_id = queue;
    match shared {
        Some(s) => {
            sa.sxdp_flags = libc::XDP_SHARED_UMEM;
            sa.sxdp_shared_umem_fd = s as u32;
        }
        None => sa.sxdp_flags = libc::XDP_COPY,
    }
    let mut tries = 0;
    // SAFETY: sa is a valid sockaddr_xdp of its size.
    while unsafe {
        libc::bind(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of_val(&sa) as u32,
        )
    } < 0
    {
        let call = if shared.is_some() {
            "bind(AF_XDP, XDP_SHARED_UMEM)"
        } else {
            "bind(AF_XDP, XDP_COPY)"
        };
        let e = fail(what, call);
        tries += 1;
        if e.source.raw_os_error() != Some(libc::EBUSY) || tries >= 100 {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}

/// Frames socket `fd` dropped since it was bound: its ring was full
/// (`rx_ring_full`), or no frame was lent to the kernel (`rx_dropped`).
pub(super) fn dropped(fd: RawFd, what: &str) -> SysResult<u64> {
    let st: libc::xdp_statistics =
        getsockopt(fd, libc::XDP_STATISTICS, what, "getsockopt(XDP_STATISTICS)")?;
    Ok(st.rx_dropped + st.rx_ring_full)
}

/// The ring offsets of socket `fd`'s mappings.
pub(super) fn offsets(fd: RawFd, what: &str) -> SysResult<libc::xdp_mmap_offsets> {
    getsockopt(
        fd,
        libc::XDP_MMAP_OFFSETS,
        what,
        "getsockopt(XDP_MMAP_OFFSETS)",
    )
}

/// `getsockopt(SOL_XDP, opt)` into a plain-data `T`.
fn getsockopt<T>(fd: RawFd, opt: libc::c_int, what: &str, call: &'static str) -> SysResult<T> {
    // SAFETY: T is one of the kernel's plain-data structs: zeroed is valid.
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut l = std::mem::size_of::<T>() as u32;
    // SAFETY: v and l are valid for the kernel to write.
    if unsafe { libc::getsockopt(fd, libc::SOL_XDP, opt, &mut v as *mut T as *mut _, &mut l) } < 0 {
        return Err(fail(what, call));
    }
    Ok(v)
}
