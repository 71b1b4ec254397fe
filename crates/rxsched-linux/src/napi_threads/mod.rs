//! Threaded NAPI: the kernel thread that does a device's receive work.
//!
//! With `/sys/class/net/DEV/threaded` set, each NAPI instance of a device
//! gets a kernel thread (`napi/DEV-ID`) that the scheduler treats like any
//! other: it can be pinned to a CPU, given a real-time priority (the
//! interrupt-driven baseline's "device priority"), or put at `SCHED_IDLE`
//! so that it runs only when nothing else wants the CPU (the polling
//! router's "interrupts disabled": frames then die on the device's ring).
//!
//! Which threads belong to a device is asked of the kernel through the
//! `netdev` generic-netlink family (`napi-get`), in the calling thread's
//! network namespace, so that devices of the same name in other namespaces
//! are never touched.

mod gate;

pub use gate::NapiGate;

use crate::sys::{ifindex, SysError, SysResult};
use std::io;

/// One NAPI instance of a device and its kernel thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NapiThread {
    /// The NAPI id.
    pub id: u32,
    /// The thread's id (0 while the device is not threaded).
    pub tid: i32,
}

fn err(what: &str, call: &'static str, e: io::Error) -> SysError {
    SysError {
        what: what.to_string(),
        syscall: call,
        source: e,
    }
}

/// Sets `/sys/class/net/DEV/threaded` (in this namespace).
pub fn set_threaded(iface: &str, on: bool) -> SysResult<()> {
    let path = format!("/sys/class/net/{iface}/threaded");
    std::fs::write(&path, if on { "1" } else { "0" })
        .map_err(|e| err(iface, "write(/sys/class/net/*/threaded)", e))
}

/// A dump of the `netdev` family's `cmd` for device `idx` (`iface`), its
/// filter attribute `attr`; `call` names it in errors.
fn netdev_dump(
    iface: &str,
    idx: u32,
    cmd: u8,
    attr: u16,
    call: &'static str,
) -> SysResult<Vec<Vec<u8>>> {
    let mut nl = genl::Socket::open().map_err(|e| err(iface, "socket(NETLINK_GENERIC)", e))?;
    let family = nl
        .family("netdev")
        .map_err(|e| err(iface, "genl CTRL_CMD_GETFAMILY(netdev)", e))?;
    nl.dump(family, cmd, &genl::u32_attr(attr, idx))
        .map_err(|e| err(iface, call, e))
}

/// The NAPI instances of `iface` (in this namespace) and their threads.
pub fn threads(iface: &str) -> SysResult<Vec<NapiThread>> {
    let idx = ifindex(iface)? as u32;
    let replies = netdev_dump(
        iface,
        idx,
        genl::NAPI_GET,
        genl::NAPI_IFINDEX,
        "genl NETDEV_CMD_NAPI_GET",
    )?;
    let mut v = Vec::new();
    for r in replies {
        let (mut id, mut tid, mut dev) = (0, 0, 0);
        for (t, d) in genl::attrs(&r) {
            match t {
                genl::NAPI_IFINDEX => dev = genl::num(d) as u32,
                genl::NAPI_ID => id = genl::num(d) as u32,
                genl::NAPI_PID => tid = genl::num(d) as i32,
                _ => {}
            }
        }
        if dev == idx {
            v.push(NapiThread { id, tid });
        }
    }
    Ok(v)
}

/// The NAPI thread of each receive queue of `iface` (in this namespace), in
/// queue order, as the kernel pairs them (`netdev` `queue-get`), or in the
/// order of their NAPI ids where the driver does not say; 0 for a queue
/// whose NAPI instance has no thread.
pub fn queue_threads(iface: &str) -> SysResult<Vec<i32>> {
    let idx = ifindex(iface)? as u32;
    let napis = threads(iface)?;
    let replies = netdev_dump(
        iface,
        idx,
        genl::QUEUE_GET,
        genl::QUEUE_IFINDEX,
        "genl NETDEV_CMD_QUEUE_GET",
    )?;
    let mut rx: Vec<(u32, u32)> = Vec::new();
    for r in replies {
        let (mut id, mut dev, mut kind, mut napi) = (0, 0, u64::MAX, 0);
        for (t, d) in genl::attrs(&r) {
            match t {
                genl::QUEUE_ID => id = genl::num(d) as u32,
                genl::QUEUE_IFINDEX => dev = genl::num(d) as u32,
                genl::QUEUE_TYPE => kind = genl::num(d),
                genl::QUEUE_NAPI_ID => napi = genl::num(d) as u32,
                _ => {}
            }
        }
        if dev == idx && kind == genl::QUEUE_TYPE_RX {
            rx.push((id, napi));
        }
    }
    rx.sort_unstable();
    if rx.is_empty() || rx.iter().any(|(_, napi)| *napi == 0) {
        // A driver that does not tell (veth does not) creates its NAPI
        // instances queue by queue, their ids ascending.
        let mut by_id = napis;
        by_id.sort_unstable_by_key(|t| t.id);
        return Ok(by_id.into_iter().map(|t| t.tid).collect());
    }
    Ok(rx
        .into_iter()
        .map(|(_, napi)| napis.iter().find(|t| t.id == napi).map_or(0, |t| t.tid))
        .collect())
}

/// The threads of `iface`, failing if it has none (not threaded, or no NAPI).
pub fn thread_ids(iface: &str) -> SysResult<Vec<i32>> {
    let tids: Vec<i32> = threads(iface)?
        .iter()
        .map(|t| t.tid)
        .filter(|t| *t > 0)
        .collect();
    if tids.is_empty() {
        return Err(err(
            iface,
            "genl NETDEV_CMD_NAPI_GET",
            io::Error::new(
                io::Error::from_raw_os_error(libc::EOPNOTSUPP).kind(),
                "no NAPI thread: the device needs threaded NAPI (set /sys/class/net/DEV/threaded to 1; `rxsched lab up` does)",
            ),
        ));
    }
    Ok(tids)
}

/// How a NAPI thread is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sched {
    /// The default time-sharing class (one `sched_setscheduler`, as the
    /// gate toggles it: a slice the thread asked for stays, as the kernel
    /// keeps it across class changes; [`crate::sys::slice::set_time_shared`]
    /// with `None` drops it).
    Normal,
    /// Time-shared, asking for a slice of this many ns (EEVDF's
    /// `sched_runtime`): a wake-up preempts a thread with a longer slice.
    Sliced(u64),
    /// SCHED_FIFO at this priority (1–99).
    Fifo(i32),
    /// SCHED_IDLE: runs only when the CPU has nothing else to do.
    Idle,
}

/// Schedules thread `tid` as `s`.
pub fn set_sched(tid: i32, s: Sched) -> SysResult<()> {
    let (policy, prio) = match s {
        Sched::Normal => (libc::SCHED_OTHER, 0),
        Sched::Sliced(ns) => return crate::sys::slice::set_time_shared(tid, Some(ns)),
        Sched::Fifo(p) => (libc::SCHED_FIFO, p),
        Sched::Idle => (libc::SCHED_IDLE, 0),
    };
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: p is a valid sched_param; tid names a thread (or fails).
    let r = unsafe { libc::sched_setscheduler(tid, policy, &p) };
    if r < 0 {
        return Err(err(
            &format!("thread {tid}"),
            "sched_setscheduler",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Pins thread `tid` to `cpu`.
pub fn pin(tid: i32, cpu: usize) -> SysResult<()> {
    if tid <= 0 {
        return Err(err(
            &format!("thread {tid}"),
            "sched_setaffinity",
            io::Error::from_raw_os_error(libc::ESRCH),
        ));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let pid = rustix::process::Pid::from_raw(tid);
    rustix::thread::sched_setaffinity(pid, &set)
        .map_err(|e| err(&format!("thread {tid}"), "sched_setaffinity", e.into()))
}

/// CPU time thread `tid` has used, in ns. A NAPI thread is a kernel thread,
/// so the leader of its own thread group: its process CPU clock is readable
/// with one `clock_gettime` (`/proc/TID/schedstat` is the fallback).
pub fn cpu_ns(tid: i32) -> SysResult<u64> {
    // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), linux/posix-timers.h.
    let id = ((!(tid as libc::clockid_t)) << 3) | 2;
    // SAFETY: ts is valid for the kernel to write.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a clock id and a valid timespec.
    if unsafe { libc::clock_gettime(id, &mut ts) } == 0 {
        return Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
    }
    schedstat_ns(tid)
}

/// CPU time thread `tid` has used, in ns (`/proc/TID/schedstat`): the
/// thread's alone, where [`cpu_ns`] of a process's first thread is the
/// whole process's.
pub fn schedstat_ns(tid: i32) -> SysResult<u64> {
    schedstat(tid, 0)
}

/// How many times thread `tid` has been put on a CPU (`/proc/TID/schedstat`).
pub fn runs(tid: i32) -> SysResult<u64> {
    schedstat(tid, 2)
}

/// Field `i` of `/proc/TID/schedstat`: CPU time, wait time, timeslices.
fn schedstat(tid: i32, i: usize) -> SysResult<u64> {
    let path = format!("/proc/{tid}/schedstat");
    let s = std::fs::read_to_string(&path).map_err(|e| err(&path, "read", e))?;
    s.split_whitespace()
        .nth(i)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| err(&path, "read", io::Error::from(io::ErrorKind::InvalidData)))
}

/// An offload a device's driver may do, as ethtool names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// Generic receive offload (ETHTOOL_SGRO). A veth keeps its NAPI
    /// instance, and so its thread, only while GRO is on or an XDP program
    /// is attached.
    Gro,
    /// Transmit checksumming (ETHTOOL_STXCSUM): with it on, a local sender
    /// leaves TCP and UDP checksums for the device to finish, which a veth
    /// never does; a frame on a real wire carries them complete.
    TxChecksum,
    /// TCP segmentation offload (ETHTOOL_STSO): with it on, a local
    /// sender hands a veth frames larger than its MTU.
    Tso,
}

impl Offload {
    fn cmd(self) -> (u32, &'static str) {
        match self {
            Offload::Gro => (0x2c, "ioctl(SIOCETHTOOL, ETHTOOL_SGRO)"),
            Offload::TxChecksum => (0x17, "ioctl(SIOCETHTOOL, ETHTOOL_STXCSUM)"),
            Offload::Tso => (0x1f, "ioctl(SIOCETHTOOL, ETHTOOL_STSO)"),
        }
    }
}

/// Turns `offload` on or off for `iface`.
pub fn set_offload(iface: &str, offload: Offload, on: bool) -> SysResult<()> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let (cmd, call) = offload.cmd();
    let mut v = EthtoolValue {
        cmd,
        data: on as u32,
    };
    // SAFETY: an ifreq is plain data; zeroed is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(iface.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = &mut v as *mut EthtoolValue as *mut libc::c_char;
    // SAFETY: a plain datagram socket for the ioctl, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(err(iface, "socket", io::Error::last_os_error()));
    }
    // SAFETY: ifr and the value it points to live across the call.
    let r = unsafe { libc::ioctl(fd, SIOCETHTOOL, &mut ifr) };
    let e = io::Error::last_os_error();
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    if r < 0 {
        return Err(err(iface, call, e));
    }
    Ok(())
}

/// Just enough generic netlink for one dump of the `netdev` family.
mod genl {
    use std::io;

    const GENL_ID_CTRL: u16 = 0x10;
    const CTRL_CMD_GETFAMILY: u8 = 3;
    const CTRL_ATTR_FAMILY_ID: u16 = 1;
    const CTRL_ATTR_FAMILY_NAME: u16 = 2;
    /// NETDEV_CMD_NAPI_GET.
    pub const NAPI_GET: u8 = 11;
    /// NETDEV_A_NAPI_IFINDEX.
    pub const NAPI_IFINDEX: u16 = 1;
    /// NETDEV_A_NAPI_ID.
    pub const NAPI_ID: u16 = 2;
    /// NETDEV_A_NAPI_PID.
    pub const NAPI_PID: u16 = 4;
    /// NETDEV_CMD_QUEUE_GET.
    pub const QUEUE_GET: u8 = 10;
    /// NETDEV_A_QUEUE_ID.
    pub const QUEUE_ID: u16 = 1;
    /// NETDEV_A_QUEUE_IFINDEX.
    pub const QUEUE_IFINDEX: u16 = 2;
    /// NETDEV_A_QUEUE_TYPE.
    pub const QUEUE_TYPE: u16 = 3;
    /// NETDEV_QUEUE_TYPE_RX.
    pub const QUEUE_TYPE_RX: u64 = 0;
    /// NETDEV_A_QUEUE_NAPI_ID.
    pub const QUEUE_NAPI_ID: u16 = 4;

    /// A netlink attribute holding a u32.
    pub fn u32_attr(t: u16, v: u32) -> Vec<u8> {
        attr(t, &v.to_ne_bytes())
    }

    fn attr(t: u16, data: &[u8]) -> Vec<u8> {
        let mut b = Vec::with_capacity(4 + data.len() + 3);
        b.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&t.to_ne_bytes());
        b.extend_from_slice(data);
        b.resize(b.len().next_multiple_of(4), 0);
        b
    }

    /// The attributes of a message body, as (type, payload).
    pub fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
        let mut v = Vec::new();
        while b.len() >= 4 {
            let l = u16::from_ne_bytes([b[0], b[1]]) as usize;
            let t = u16::from_ne_bytes([b[2], b[3]]) & 0x3fff;
            if l < 4 || l > b.len() {
                break;
            }
            v.push((t, &b[4..l]));
            b = &b[l.next_multiple_of(4).min(b.len())..];
        }
        v
    }

    /// An unsigned attribute payload of any width.
    pub fn num(d: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        let n = d.len().min(8);
        a[..n].copy_from_slice(&d[..n]);
        u64::from_ne_bytes(a)
    }

    /// A NETLINK_GENERIC socket.
    pub struct Socket {
        fd: std::os::fd::OwnedFd,
        seq: u32,
    }

    impl Socket {
        pub fn open() -> io::Result<Socket> {
            use std::os::fd::FromRawFd;
            // SAFETY: plain socket(2).
            let fd = unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    libc::NETLINK_GENERIC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: fd was just returned and is owned here.
            Ok(Socket {
                fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
                seq: 0,
            })
        }

        /// Sends one request; returns the bodies (after the genl header) of
        /// every reply up to the end of the dump or the acknowledgement.
        fn request(
            &mut self,
            family: u16,
            cmd: u8,
            flags: u16,
            body: &[u8],
        ) -> io::Result<Vec<Vec<u8>>> {
            use std::os::fd::AsRawFd;
            self.seq += 1;
            let mut m = Vec::with_capacity(20 + body.len());
            m.extend_from_slice(&((20 + body.len()) as u32).to_ne_bytes());
            m.extend_from_slice(&family.to_ne_bytes());
            let f = flags | libc::NLM_F_REQUEST as u16 | libc::NLM_F_ACK as u16;
            m.extend_from_slice(&f.to_ne_bytes());
            m.extend_from_slice(&self.seq.to_ne_bytes());
            m.extend_from_slice(&0u32.to_ne_bytes());
            m.extend_from_slice(&[cmd, 1, 0, 0]);
            m.extend_from_slice(body);
            // SAFETY: m is a valid buffer of its length.
            if unsafe { libc::send(self.fd.as_raw_fd(), m.as_ptr().cast(), m.len(), 0) } < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut out = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                // SAFETY: buf is a valid buffer of its length.
                let n = unsafe {
                    libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0)
                };
                if n < 0 {
                    return Err(io::Error::last_os_error());
                }
                let mut b = &buf[..n as usize];
                while b.len() >= 16 {
                    let l = (u32::from_ne_bytes(b[0..4].try_into().expect("4 bytes")) as usize)
                        .clamp(16, b.len());
                    let t = u16::from_ne_bytes([b[4], b[5]]);
                    if t == libc::NLMSG_ERROR as u16 && l >= 20 {
                        let e = i32::from_ne_bytes(b[16..20].try_into().expect("4 bytes"));
                        return if e == 0 {
                            Ok(out)
                        } else {
                            Err(io::Error::from_raw_os_error(-e))
                        };
                    }
                    if t == libc::NLMSG_DONE as u16 {
                        return Ok(out);
                    }
                    if l > 20 {
                        out.push(b[20..l].to_vec());
                    }
                    b = &b[l.next_multiple_of(4).min(b.len())..];
                }
            }
        }

        /// The id of generic-netlink family `name`.
        pub fn family(&mut self, name: &str) -> io::Result<u16> {
            let mut n = name.as_bytes().to_vec();
            n.push(0);
            let body = attr(CTRL_ATTR_FAMILY_NAME, &n);
            for r in self.request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, &body)? {
                if let Some((_, d)) = attrs(&r)
                    .into_iter()
                    .find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID)
                {
                    return Ok(num(d) as u16);
                }
            }
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no genl family {name}"),
            ))
        }

        /// A dump request of `cmd` with `body` as its filter.
        pub fn dump(&mut self, family: u16, cmd: u8, body: &[u8]) -> io::Result<Vec<Vec<u8>>> {
            self.request(family, cmd, libc::NLM_F_DUMP as u16, body)
        }
    }
}
