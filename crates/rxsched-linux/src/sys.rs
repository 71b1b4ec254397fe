//! Thin, checked wrappers over the system calls the dataplane needs. Every
//! error names the interface (or object) and the system call.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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

/// The hardware address of interface `name`.
pub fn mac_of(name: &str) -> SysResult<crate::wire::Mac> {
    let path = format!("/sys/class/net/{name}/address");
    let s = std::fs::read_to_string(&path).map_err(|e| SysError {
        what: name.into(),
        syscall: "read(/sys/class/net/*/address)",
        source: e,
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
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        check(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            &format!("cpu {cpu}"),
            "sched_setaffinity",
        )?;
    }
    Ok(())
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

fn clock(id: libc::clockid_t) -> u64 {
    // SAFETY: ts is a valid timespec to write into.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in ns: shared by every process on the machine, so a
/// generator's send time and a sink's receive time compare directly.
pub fn mono_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// CPU time used by the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Waits for any of `fds` to be readable (or writable with `POLLOUT` in
/// `events`), for at most `timeout_ms` (-1: forever). Returns the ready mask
/// per fd. EINTR counts as a timeout.
pub fn poll_fds(fds: &[RawFd], events: i16, timeout_ms: i32) -> SysResult<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // SAFETY: p is a valid array of pollfd of the given length.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(SysError {
            what: "packet sockets".into(),
            syscall: "poll",
            source: e,
        });
    }
    Ok(p.iter()
        .map(|x| x.revents & (events | libc::POLLERR) != 0)
        .collect())
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
    // SAFETY: setns on a namespace file descriptor we hold open.
    check(
        unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) },
        name,
        "setns(CLONE_NEWNET)",
    )?;
    Ok(())
}

/// An epoll set whose members can be armed (waited on) or disarmed: the
/// user-space form of enabling and disabling a device's interrupt.
pub struct Epoll {
    fd: OwnedFd,
    fds: Vec<RawFd>,
    armed: Vec<bool>,
}

impl Epoll {
    /// An empty set.
    pub fn new() -> SysResult<Epoll> {
        // SAFETY: plain epoll_create1(2).
        let fd = check(
            unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
            "epoll",
            "epoll_create1",
        )?;
        // SAFETY: fd was just returned and is owned here.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            fds: Vec::new(),
            armed: Vec::new(),
        })
    }

    fn ctl(&self, op: i32, fd: RawFd, token: usize, events: u32) -> SysResult<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: token as u64,
        };
        // SAFETY: ev is a valid epoll_event; fd is open.
        check(
            unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) },
            "epoll",
            "epoll_ctl",
        )?;
        Ok(())
    }

    /// Adds `fd` as member number `fds.len()`, disarmed; returns that number.
    pub fn add(&mut self, fd: RawFd) -> SysResult<usize> {
        let token = self.fds.len();
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, 0)?;
        self.fds.push(fd);
        self.armed.push(false);
        Ok(token)
    }

    /// Arms or disarms member `token` (level-triggered readability).
    pub fn arm(&mut self, token: usize, on: bool) -> SysResult<()> {
        if self.armed[token] != on {
            let events = if on { libc::EPOLLIN as u32 } else { 0 };
            self.ctl(libc::EPOLL_CTL_MOD, self.fds[token], token, events)?;
            self.armed[token] = on;
        }
        Ok(())
    }

    /// Blocks in `epoll_wait` for at most `timeout_ms`; returns the members
    /// that are ready. EINTR counts as a timeout.
    pub fn wait(&self, timeout_ms: i32) -> SysResult<Vec<usize>> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: evs is a valid array of the given length.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                evs.as_mut_ptr(),
                evs.len() as i32,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Vec::new());
            }
            return Err(SysError {
                what: "epoll".into(),
                syscall: "epoll_wait",
                source: e,
            });
        }
        Ok(evs[..n as usize].iter().map(|e| e.u64 as usize).collect())
    }
}

/// Whether the process runs as root (needed for packet sockets and namespaces).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The CPUs this machine has online.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A flag set by SIGUSR1, SIGINT and SIGTERM handlers.
pub mod signals {
    use std::sync::atomic::{AtomicBool, Ordering};

    static USR1: AtomicBool = AtomicBool::new(false);
    static STOP: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_usr1(_: libc::c_int) {
        USR1.store(true, Ordering::Relaxed);
    }

    extern "C" fn on_stop(_: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
    }

    /// Installs the handlers.
    pub fn install() {
        // SAFETY: the handlers only store to atomics, which is async-signal-safe.
        unsafe {
            libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t);
            libc::signal(libc::SIGINT, on_stop as *const () as libc::sighandler_t);
            libc::signal(libc::SIGTERM, on_stop as *const () as libc::sighandler_t);
        }
    }

    /// Whether SIGUSR1 arrived since the last call.
    pub fn take_usr1() -> bool {
        USR1.swap(false, Ordering::Relaxed)
    }

    /// Whether SIGINT or SIGTERM arrived.
    pub fn stopping() -> bool {
        STOP.load(Ordering::Relaxed)
    }
}
