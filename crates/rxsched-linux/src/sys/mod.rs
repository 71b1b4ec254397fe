//! Thin, checked wrappers over the system calls the dataplane needs. Every
//! error names the interface (or object) and the system call.

use rustix::io::Errno;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A failed system call, with what it was called on.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {syscall}: {source}")]
pub struct SysError {
    /// The interface, file or object.
    pub what: String,
    /// The system call.
    pub syscall: &'static str,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

/// Result of a wrapped system call.
pub type SysResult<T> = Result<T, SysError>;

/// Turns a -1 return into a [`SysError`].
pub fn check(ret: libc::c_int, what: &str, syscall: &'static str) -> SysResult<libc::c_int> {
    if ret < 0 {
        Err(SysError {
            what: what.to_string(),
            syscall,
            source: io::Error::last_os_error(),
        })
    } else {
        Ok(ret)
    }
}

/// The interface index of `name` in the current network namespace.
pub fn ifindex(name: &str) -> SysResult<i32> {
    let c = CString::new(name).map_err(|_| SysError {
        what: name.into(),
        syscall: "if_nametoindex",
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(SysError {
            what: name.into(),
            syscall: "if_nametoindex",
            source: io::Error::last_os_error(),
        });
    }
    Ok(i as i32)
}

/// An interface's state, as the router watches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkState {
    /// Its index (a device deleted and made again gets a new one).
    pub index: i32,
    /// Administratively up with its carrier on (`IFF_UP` and `IFF_RUNNING`).
    pub up: bool,
}

/// The state of interface `name` in the current network namespace, or
/// `None` if there is no such interface (any more).
pub fn link_state(name: &str) -> SysResult<Option<LinkState>> {
    let index = match ifindex(name) {
        Ok(i) => i,
        Err(e) if e.source.raw_os_error() == Some(libc::ENODEV) => return Ok(None),
        Err(e) => return Err(e),
    };
    // SAFETY: plain socket creation; the result is checked.
    let fd = check(
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
        name,
        "socket(AF_INET)",
    )?;
    // SAFETY: fd was just returned by socket and is owned here alone.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is valid; the name is copied in bounded.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name and writes ifru_flags of `req`.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODEV) {
            return Ok(None);
        }
        return Err(SysError {
            what: name.into(),
            syscall: "ioctl(SIOCGIFFLAGS)",
            source: e,
        });
    }
    // SAFETY: SIOCGIFFLAGS filled in the flags member of the union.
    let flags = i32::from(unsafe { req.ifr_ifru.ifru_flags });
    let want = libc::IFF_UP | libc::IFF_RUNNING;
    Ok(Some(LinkState {
        index,
        up: flags & want == want,
    }))
}

/// Whether an error says the device is down or gone (sending to it or
/// reading from it cannot succeed until it is back).
pub fn is_link_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV)
    )
}

/// Takes (and so clears) the pending error of socket `fd` (`SO_ERROR`).
pub fn take_socket_error(fd: RawFd) -> Option<io::Error> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: err and len are live locals of the sizes getsockopt expects.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0 && err != 0).then(|| io::Error::from_raw_os_error(err))
}

/// The hardware address of interface `name`.
pub fn mac_of(name: &str) -> SysResult<crate::wire::Mac> {
    let path = format!("/sys/class/net/{name}/address");
    let s = std::fs::read_to_string(&path).map_err(|e| SysError {
        what: name.into(),
        syscall: "read(/sys/class/net/*/address)",
        // No such file: no such device in this namespace.
        source: if e.kind() == io::ErrorKind::NotFound {
            io::Error::from_raw_os_error(libc::ENODEV)
        } else {
            e
        },
    })?;
    crate::wire::Mac::parse(&s).ok_or_else(|| SysError {
        what: name.into(),
        syscall: "read(/sys/class/net/*/address)",
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a MAC address: {s:?}"),
        ),
    })
}

/// The MTU of interface `name`.
pub fn mtu_of(name: &str) -> SysResult<usize> {
    let path = format!("/sys/class/net/{name}/mtu");
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| SysError {
            what: name.into(),
            syscall: "read(/sys/class/net/*/mtu)",
            source: io::Error::from_raw_os_error(libc::ENODEV),
        })
}

/// The IPv4 addresses of every interface of this host (of this network
/// namespace).
pub fn ipv4_addrs() -> SysResult<Vec<[u8; 4]>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    check(unsafe { libc::getifaddrs(&mut head) }, "host", "getifaddrs")?;
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: p is a node of the list getifaddrs made.
        let a = unsafe { &*p };
        if !a.ifa_addr.is_null() {
            // SAFETY: a non-null address of the family it says.
            if unsafe { (*a.ifa_addr).sa_family } as i32 == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(a.ifa_addr as *const libc::sockaddr_in) };
                out.push(sin.sin_addr.s_addr.to_ne_bytes());
            }
        }
        p = a.ifa_next;
    }
    // SAFETY: the list getifaddrs made, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// A counter of interface `name` in the calling thread's network namespace
/// (`/proc/thread-self/net/dev`, which follows `setns`, where `/sys` does
/// not): `rx_packets`, `rx_dropped`, `tx_packets` or `tx_dropped`.
pub fn iface_counter(name: &str, counter: &str) -> SysResult<u64> {
    let text = net_dev(name)?;
    dev_counter(&text, name, counter).ok_or_else(|| SysError {
        what: name.into(),
        syscall: "read(/proc/thread-self/net/dev)",
        source: io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {name} or no counter {counter} in this namespace"),
        ),
    })
}

/// IP datagrams the kernel of the calling thread's network namespace has
/// forwarded (`ForwDatagrams` of `/proc/thread-self/net/snmp`).
pub fn ip_forwarded() -> SysResult<u64> {
    let path = "/proc/thread-self/net/snmp";
    let text = std::fs::read_to_string(path).map_err(|e| SysError {
        what: path.into(),
        syscall: "read",
        source: e,
    })?;
    snmp_field(&text, "Ip", "ForwDatagrams").ok_or_else(|| SysError {
        what: path.into(),
        syscall: "read",
        source: io::Error::new(io::ErrorKind::InvalidData, "no Ip: ForwDatagrams in it"),
    })
}

/// Field `field` of protocol `proto` in `/proc/net/snmp`'s text: a line of
/// names and a line of values, each starting `proto:`.
fn snmp_field(text: &str, proto: &str, field: &str) -> Option<u64> {
    let tag = format!("{proto}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&tag));
    let names = lines.next()?;
    let values = lines.next()?;
    let i = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// The text of this thread's namespace's `/proc/net/dev` (`what` names
/// the reader in an error).
pub fn net_dev(what: &str) -> SysResult<String> {
    std::fs::read_to_string("/proc/thread-self/net/dev").map_err(|e| SysError {
        what: what.into(),
        syscall: "read(/proc/thread-self/net/dev)",
        source: e,
    })
}

/// A counter from the text of `/proc/net/dev` ([`net_dev`]): `rx_packets`,
/// `rx_dropped`, `tx_packets`, `tx_errors` or `tx_dropped`.
pub fn dev_counter(text: &str, name: &str, counter: &str) -> Option<u64> {
    // Columns after "NAME:": rx bytes, packets, errs, drop, fifo, frame,
    // compressed, multicast; tx bytes, packets, errs, drop, ...
    let col = match counter {
        "rx_packets" => 1,
        "rx_dropped" => 3,
        "tx_packets" => 9,
        "tx_errors" => 10,
        "tx_dropped" => 11,
        _ => return None,
    };
    let line = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(&format!("{name}:")))?;
    line.split_whitespace().nth(col)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn snmp_forwarded_datagrams() {
        let t = "Ip: Forwarding DefaultTTL InReceives ForwDatagrams\nIp: 1 64 900 466\nIcmp: InMsgs ForwDatagrams\nIcmp: 3 7\n";
        assert_eq!(super::snmp_field(t, "Ip", "ForwDatagrams"), Some(466));
        assert_eq!(super::snmp_field(t, "Icmp", "ForwDatagrams"), Some(7));
        assert_eq!(super::snmp_field(t, "Tcp", "ForwDatagrams"), None);
        assert_eq!(super::snmp_field(t, "Ip", "OutRequests"), None);
    }

    #[test]
    fn proc_net_dev_columns() {
        let t = "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    d0: 100 10 1 7 0 0 0 0 200 20 2 9 0 0 0 0\n";
        assert_eq!(super::dev_counter(t, "d0", "rx_packets"), Some(10));
        assert_eq!(super::dev_counter(t, "d0", "rx_dropped"), Some(7));
        assert_eq!(super::dev_counter(t, "d0", "tx_packets"), Some(20));
        assert_eq!(super::dev_counter(t, "d0", "tx_dropped"), Some(9));
        assert_eq!(super::dev_counter(t, "d0", "tx_errors"), Some(2));
        assert_eq!(super::dev_counter(t, "d1", "rx_dropped"), None);
    }
}

/// An AF_PACKET socket bound to one interface. `protocol` 0 receives
/// nothing (a transmit-only socket); `ETH_P_ALL` receives everything.
pub fn packet_socket(iface: &str, protocol: u16) -> SysResult<OwnedFd> {
    let idx = ifindex(iface)?;
    // SAFETY: plain socket(2) call.
    let fd = check(
        unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                (protocol as i32).to_be(),
            )
        },
        iface,
        "socket(AF_PACKET)",
    )?;
    // SAFETY: fd was just returned by socket(2) and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = idx;
    // SAFETY: sll is a valid sockaddr_ll of the given length.
    check(
        unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        },
        iface,
        "bind(AF_PACKET)",
    )?;
    Ok(fd)
}

/// `setsockopt` with a plain value.
pub fn setsockopt<T>(
    fd: RawFd,
    level: i32,
    name: i32,
    val: &T,
    what: &str,
    syscall: &'static str,
) -> SysResult<()> {
    // SAFETY: val points to a live T of the given size.
    check(
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                val as *const T as *const libc::c_void,
                std::mem::size_of::<T>() as u32,
            )
        },
        what,
        syscall,
    )?;
    Ok(())
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> SysResult<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(os(format!("cpu {cpu}"), "sched_setaffinity", Errno::INVAL));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| os(format!("cpu {cpu}"), "sched_setaffinity", e))
}

/// A [`SysError`] from a rustix error.
fn os(what: String, syscall: &'static str, e: Errno) -> SysError {
    SysError {
        what,
        syscall,
        source: e.into(),
    }
}

/// Makes the calling thread SCHED_FIFO at `prio`.
pub fn set_fifo(prio: i32) -> SysResult<()> {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: p is a valid sched_param.
    check(
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) },
        "this thread",
        "sched_setscheduler(SCHED_FIFO)",
    )?;
    Ok(())
}

/// The share of each period the kernel lets the real-time class take on a
/// CPU before it stops it (`sched_rt_runtime_us` over
/// `sched_rt_period_us`); `None` when it never does (a runtime of -1).
pub fn rt_budget() -> SysResult<Option<f64>> {
    let read = |name: &str| -> SysResult<i64> {
        let path = format!("/proc/sys/kernel/{name}");
        let text = std::fs::read_to_string(&path).map_err(|source| SysError {
            what: path.clone(),
            syscall: "read",
            source,
        })?;
        text.trim().parse().map_err(|_| SysError {
            what: path,
            syscall: "read",
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a number: {text:?}"),
            ),
        })
    };
    let runtime = read("sched_rt_runtime_us")?;
    let period = read("sched_rt_period_us")?;
    Ok((runtime >= 0 && period > 0).then(|| (runtime as f64 / period as f64).min(1.0)))
}

/// Makes the calling thread an ordinary time-shared one (SCHED_OTHER),
/// whatever it inherited.
pub fn set_normal() -> SysResult<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: p is a valid sched_param.
    check(
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) },
        "this thread",
        "sched_setscheduler(SCHED_OTHER)",
    )?;
    Ok(())
}

fn clock(id: rustix::time::ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(id);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in ns: shared by every process on the machine, so a
/// generator's send time and a sink's receive time compare directly.
pub fn mono_ns() -> u64 {
    clock(rustix::time::ClockId::Monotonic)
}

/// CPU time used by the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock(rustix::time::ClockId::ThreadCPUTime)
}

/// How many times the calling thread has blocked (and so been woken):
/// its voluntary context switches.
pub fn thread_wakeups() -> u64 {
    // SAFETY: ru is valid for the kernel to write.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD and a valid rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_nvcsw as u64
}

/// Waits for any of `fds` to be readable (or writable with `POLLOUT` in
/// `events`), for at most `timeout_ms`. Returns the ready mask per fd.
/// EINTR counts as a timeout.
pub fn poll_fds(fds: &[RawFd], events: i16, timeout_ms: i32) -> SysResult<Vec<bool>> {
    use rustix::event::{PollFd, PollFlags};
    let flags = PollFlags::from_bits_truncate(events as u16);
    // SAFETY: the caller's descriptors stay open across the call.
    let borrowed: Vec<_> = fds
        .iter()
        .map(|fd| unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) })
        .collect();
    let mut p: Vec<PollFd> = borrowed.iter().map(|fd| PollFd::new(fd, flags)).collect();
    let timeout = rustix::time::Timespec {
        tv_sec: (timeout_ms / 1000) as i64,
        tv_nsec: (timeout_ms % 1000) as i64 * 1_000_000,
    };
    match rustix::event::poll(&mut p, Some(&timeout)) {
        Ok(_) => Ok(p
            .iter()
            .map(|x| x.revents().intersects(flags | PollFlags::ERR))
            .collect()),
        Err(Errno::INTR) => Ok(vec![false; fds.len()]),
        Err(e) => Err(os("packet sockets".into(), "poll", e)),
    }
}

/// Moves the calling thread into network namespace `name` (as made by
/// `ip netns add`). Other threads stay where they are.
pub fn enter_netns(name: &str) -> SysResult<()> {
    let path = format!("/var/run/netns/{name}");
    let f = std::fs::File::open(&path).map_err(|e| SysError {
        what: path.clone(),
        syscall: "open",
        source: e,
    })?;
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(|e| os(name.into(), "setns(CLONE_NEWNET)", e))
}

/// Whether the process runs as root (needed for packet sockets and namespaces).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The CPUs this machine has online.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

mod epoll;
pub mod signals;
pub mod slice;
pub mod steal;

pub use epoll::Epoll;
pub use steal::{cpu_steal_ns, StallWatch, Stalls};

/// The real clock: CLOCK_MONOTONIC, and the calling thread's CPU time as
/// the cycle counter of M4.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonoClock;

impl rxsched_core::Clock for MonoClock {
    fn now(&self) -> rxsched_core::Nanos {
        mono_ns()
    }
    fn cpu_ns(&self) -> rxsched_core::Nanos {
        thread_cpu_ns()
    }
}
