//! AF_PACKET: a `TPACKET_V3` receive ring (the kernel drops on it when it
//! is full, and says how many), transmission by `sendmmsg`, and waiting for
//! input with `epoll`.

use super::{AnyRx, AnyTx, NoGate, Opened, Port, Servicing, KTHREAD_PRIO};
use super::{Feed, Program, RxBackend, TxBackend, Wait};
use crate::sys::{check, packet_socket, setsockopt, Epoll, SysError, SysResult};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

const SOL_PACKET: i32 = 263;
const PACKET_VERSION: i32 = 10;
const PACKET_RX_RING: i32 = 5;
const PACKET_STATISTICS: i32 = 6;
const PACKET_QDISC_BYPASS: i32 = 20;
const PACKET_IGNORE_OUTGOING: i32 = 23;
const TPACKET_V3: i32 = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const ETH_P_ALL: u16 = 0x0003;
const ETH_P_IP: u16 = 0x0800;

/// `struct tpacket_req3` (linux/if_packet.h).
#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    packets: u32,
    drops: u32,
    freeze_q_cnt: u32,
}

// Offsets in `struct tpacket_block_desc` with the v1 block header.
const BLK_STATUS: usize = 8;
const BLK_NUM_PKTS: usize = 12;
const BLK_FIRST: usize = 16;
// Offsets in `struct tpacket3_hdr`.
const PKT_NEXT: usize = 0;
const PKT_SNAPLEN: usize = 12;
const PKT_MAC: usize = 24;

/// The size of a receive ring.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    /// Bytes per block (a power of two, at least a page).
    pub block_size: u32,
    /// Blocks.
    pub block_nr: u32,
    /// Largest frame.
    pub frame_size: u32,
    /// A partly filled block is handed over after this many ms.
    pub retire_ms: u32,
}

impl Default for RingConfig {
    fn default() -> Self {
        // Small blocks hand frames over soon; 256 of them hold ~7,000 minimum frames.
        RingConfig {
            block_size: 1 << 12,
            block_nr: 256,
            frame_size: 2048,
            retire_ms: 1,
        }
    }
}

/// An AF_PACKET `TPACKET_V3` receive ring on one interface.
pub struct PacketRing {
    fd: OwnedFd,
    iface: String,
    map: *mut u8,
    map_len: usize,
    cfg: RingConfig,
    block: usize,
    /// Within the current block: packets left and the offset of the next one.
    left: u32,
    next: usize,
    drops: u64,
    /// The feed's program at the device's tc ingress, if it has one (see
    /// [`PacketRing::open_fed`]).
    prog: Option<Program>,
}

// SAFETY: the mapping is owned by this value and only touched through &mut self.
unsafe impl Send for PacketRing {}

/// A classic socket filter that keeps only frames marked for another host
/// (`PACKET_OTHERHOST`): those `bpf/route.bpf.c` at tc ingress marked as
/// the router's.
const OTHERHOST_ONLY: [libc::sock_filter; 4] = [
    // A = skb->pkt_type (the ancillary load SKF_AD_PKTTYPE).
    libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: (libc::SKF_AD_OFF + libc::SKF_AD_PKTTYPE) as u32,
    },
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt: 0,
        jf: 1,
        k: libc::PACKET_OTHERHOST as u32,
    },
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: u32::MAX,
    },
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    },
];

impl PacketRing {
    /// Opens a ring on `iface` that sees incoming frames only (a copy of
    /// each: the kernel's stack gets them too).
    pub fn open(iface: &str, cfg: RingConfig) -> SysResult<PacketRing> {
        PacketRing::open_on(iface, cfg, ETH_P_ALL, false)
    }

    /// Opens a ring on `iface` fed as `feed` says. A feed with a program
    /// of its own (a router's, a server's) has it at the device's tc
    /// ingress mark the frames it takes for another host, so that the
    /// kernel's IP input drops them at once; this socket, bound to IPv4
    /// (which sees frames after tc), takes only those. The rest (the
    /// host's traffic, what RFC 1812 leaves to the stack) the kernel
    /// handles alone. Every frame is a copy of the kernel's. Taking every
    /// frame ([`Feed::All`]), the socket sees each before tc ingress, where
    /// a program (`bpf/monitor.bpf.c`'s `tc_take`) drops it; a copy of
    /// every frame ([`Feed::Copy`], whose filter then runs in user space) needs no program.
    pub fn open_fed(iface: &str, cfg: RingConfig, feed: &Feed) -> SysResult<PacketRing> {
        let idx = crate::sys::ifindex(iface)? as u32;
        if *feed == Feed::All {
            // Taking every frame: the socket's copy, then a drop at tc.
            let mut r = PacketRing::open(iface, cfg)?;
            let mut object = crate::bpf::Object::load(crate::bpf::MONITOR, iface)?;
            object.attach_tc("tc_take", iface)?;
            r.prog = Some(Program {
                object,
                xdp: "xdp_copy",
                tc: "tc_take",
                counts: crate::bpf::Object::copy_counts,
            });
            return Ok(r);
        }
        let Some(mut prog) = feed.program(idx, crate::sys::mac_of(iface)?, iface)? else {
            return PacketRing::open(iface, cfg);
        };
        let mut r = PacketRing::open_on(iface, cfg, ETH_P_IP, true)?;
        let tc = prog.tc;
        prog.object.attach_tc(tc, iface)?;
        r.prog = Some(prog);
        Ok(r)
    }

    fn open_on(
        iface: &str,
        cfg: RingConfig,
        protocol: u16,
        otherhost: bool,
    ) -> SysResult<PacketRing> {
        let fd = packet_socket(iface, protocol)?;
        let raw = fd.as_raw_fd();
        if otherhost {
            let prog = libc::sock_fprog {
                len: OTHERHOST_ONLY.len() as u16,
                filter: OTHERHOST_ONLY.as_ptr() as *mut libc::sock_filter,
            };
            setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                &prog,
                iface,
                "setsockopt(SO_ATTACH_FILTER)",
            )?;
        }
        setsockopt(
            raw,
            SOL_PACKET,
            PACKET_VERSION,
            &TPACKET_V3,
            iface,
            "setsockopt(PACKET_VERSION)",
        )?;
        // Our own transmissions on this interface are not input.
        setsockopt(
            raw,
            SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            &1i32,
            iface,
            "setsockopt(PACKET_IGNORE_OUTGOING)",
        )?;
        let req = TpacketReq3 {
            block_size: cfg.block_size,
            block_nr: cfg.block_nr,
            frame_size: cfg.frame_size,
            frame_nr: cfg.block_size / cfg.frame_size * cfg.block_nr,
            retire_blk_tov: cfg.retire_ms,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        setsockopt(
            raw,
            SOL_PACKET,
            PACKET_RX_RING,
            &req,
            iface,
            "setsockopt(PACKET_RX_RING)",
        )?;
        let map_len = cfg.block_size as usize * cfg.block_nr as usize;
        // SAFETY: mapping the ring the kernel just allocated for this socket.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
                raw,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(SysError {
                what: iface.into(),
                syscall: "mmap(PACKET_RX_RING)",
                source: io::Error::last_os_error(),
            });
        }
        let mut ring = PacketRing {
            fd,
            iface: iface.to_string(),
            map: map as *mut u8,
            map_len,
            cfg,
            block: 0,
            left: 0,
            next: 0,
            drops: 0,
            prog: None,
        };
        ring.ring_drops()?; // reset the kernel's counters
        ring.drops = 0;
        Ok(ring)
    }

    fn block_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: i < block_nr, so the offset is inside the mapping.
        unsafe { self.map.add(i * self.cfg.block_size as usize) }
    }

    fn read_u32(p: *const u8, off: usize) -> u32 {
        // SAFETY: callers pass pointers inside the mapping with room for the field.
        unsafe { std::ptr::read_volatile(p.add(off) as *const u32) }
    }

    fn block_ready(&self, i: usize) -> bool {
        let st = Self::read_u32(self.block_ptr(i), BLK_STATUS);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        st & TP_STATUS_USER != 0
    }

    fn release_block(&mut self) {
        let b = self.block_ptr(self.block);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: the status word is inside the current block.
        unsafe { std::ptr::write_volatile(b.add(BLK_STATUS) as *mut u32, TP_STATUS_KERNEL) };
        self.block = (self.block + 1) % self.cfg.block_nr as usize;
        self.left = 0;
        self.next = 0;
    }

    /// The interface name.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The socket, to wait on for input.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl RxBackend for PacketRing {
    fn fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        let mut n = 0;
        while n < max {
            if self.left == 0 {
                if !self.block_ready(self.block) {
                    break;
                }
                let b = self.block_ptr(self.block);
                self.left = Self::read_u32(b, BLK_NUM_PKTS);
                self.next = Self::read_u32(b, BLK_FIRST) as usize;
                if self.left == 0 {
                    self.release_block();
                    continue;
                }
            }
            let b = self.block_ptr(self.block);
            // SAFETY: the kernel wrote packet headers at these offsets inside
            // the block, and the block is ours until released.
            let (frame, next) = unsafe {
                let h = b.add(self.next);
                let mac = std::ptr::read_volatile(h.add(PKT_MAC) as *const u16) as usize;
                let len = Self::read_u32(h, PKT_SNAPLEN) as usize;
                let bound = self.cfg.block_size as usize - self.next;
                let len = len.min(bound.saturating_sub(mac));
                (
                    std::slice::from_raw_parts(h.add(mac), len),
                    Self::read_u32(h, PKT_NEXT) as usize,
                )
            };
            let go = f(frame);
            n += 1;
            self.left -= 1;
            if self.left == 0 {
                self.release_block();
            } else {
                self.next += next;
            }
            if !go {
                break;
            }
        }
        n
    }

    fn pending(&self) -> bool {
        self.left > 0 || self.block_ready(self.block)
    }

    fn ring_drops(&mut self) -> SysResult<u64> {
        let mut st = TpacketStatsV3::default();
        let mut len = std::mem::size_of::<TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: st and len are valid for the kernel to write.
        check(
            unsafe {
                libc::getsockopt(
                    self.fd.as_raw_fd(),
                    SOL_PACKET,
                    PACKET_STATISTICS,
                    &mut st as *mut _ as *mut libc::c_void,
                    &mut len,
                )
            },
            &self.iface,
            "getsockopt(PACKET_STATISTICS)",
        )?;
        // The kernel resets its counters on every read: keep the sum.
        self.drops += st.drops as u64;
        Ok(self.drops)
    }

    fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        match &mut self.prog {
            Some(p) => p.counts(),
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `open`.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// Transmission through `sendmmsg` on an AF_PACKET socket that receives nothing.
pub struct PacketTx {
    fd: OwnedFd,
    iface: String,
}

impl PacketTx {
    /// Opens a transmit socket on `iface`, bypassing the qdisc.
    pub fn open(iface: &str) -> SysResult<PacketTx> {
        let fd = packet_socket(iface, 0)?;
        setsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_QDISC_BYPASS,
            &1i32,
            iface,
            "setsockopt(PACKET_QDISC_BYPASS)",
        )?;
        Ok(PacketTx {
            fd,
            iface: iface.to_string(),
        })
    }

    /// The socket, to wait on for room.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl TxBackend for PacketTx {
    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize> {
        if frames.is_empty() {
            return Ok(0);
        }
        let mut iov: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain data; zeroed is valid, and each points at one iovec above.
        let mut msgs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        // SAFETY: msgs and the iovecs they point to live across the call.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as u32,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(0),
                _ => Err(SysError {
                    what: self.iface.clone(),
                    syscall: "sendmmsg",
                    source: e,
                }),
            };
        }
        Ok(r as usize)
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

/// Opens every one of `ifaces` for a command. The kernel's receive work
/// for a packet socket runs in its softirq, which nothing here schedules:
/// no gate, and a polling thread takes the kernel-thread priority
/// ([`KTHREAD_PRIO`]) as the paper's did.
pub fn open_all(ifaces: &[String], how: Servicing, feed: &Feed) -> SysResult<Opened> {
    let ports = ifaces
        .iter()
        .map(|p| {
            let rx = PacketRing::open_fed(p, RingConfig::default(), feed)?;
            Ok(Port {
                name: p.clone(),
                rx: Box::new(rx) as AnyRx,
                tx: Box::new(PacketTx::open(p)?) as AnyTx,
                mac: crate::sys::mac_of(p)?,
                mtu: crate::sys::mtu_of(p)?,
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

/// Waiting on the receive descriptors with `epoll`: a port's "interrupt"
/// is enabled while its descriptor is armed (level-triggered).
pub struct EpollWait {
    epoll: Epoll,
}

impl EpollWait {
    /// An empty set.
    pub fn new() -> SysResult<EpollWait> {
        Ok(EpollWait {
            epoll: Epoll::new()?,
        })
    }
}

impl Wait for EpollWait {
    fn add(&mut self, port: usize, fd: Option<RawFd>) -> SysResult<()> {
        let fd = fd.ok_or_else(|| SysError {
            what: format!("port {port}"),
            syscall: "epoll_ctl",
            source: io::Error::new(io::ErrorKind::Unsupported, "the backend has no descriptor"),
        })?;
        let token = self.epoll.add(fd)?;
        debug_assert_eq!(token, port);
        Ok(())
    }

    fn wait(
        &mut self,
        armed: &[bool],
        _ready: &dyn Fn(usize) -> bool,
        timeout_ns: u64,
    ) -> SysResult<Vec<usize>> {
        for (i, on) in armed.iter().enumerate() {
            self.epoll.arm(i, *on)?;
        }
        self.epoll.wait(timeout_ns)
    }

    fn take_errors(&mut self) -> Vec<(usize, io::Error)> {
        self.epoll.take_errors()
    }
}
