//! `rxsched guard`: early discard for every UDP socket on the host, with
//! no change to its applications (LRP's idea, for servers that will never
//! use SRP's or LRP's queues).
//!
//! `bpf/guard.bpf.c`, attached to an interface, looks up each arriving
//! unicast UDP datagram's socket and drops the datagram in XDP when that
//! socket's receive buffer is already over its limit: the kernel would
//! drop it there after all its protocol work, and the guard drops it
//! before any. Everything else goes on to the stack untouched. This
//! process keeps the program's set of the host's own addresses up to date
//! (a datagram for another host is never the guard's business, whatever
//! socket a wildcard lookup finds), prints a live line, and reports what
//! the program did, per reason and per socket.
//!
//! It fails safe: the socket fields are read through the kernel's BTF
//! (relocated when the program loads), and a kernel without BTF, or whose
//! `struct sock` lacks the fields, refuses the program before anything is
//! attached; `guard` says what was missing and the interface is as it was.

use crate::bpf::{Object, GUARD};
use crate::sys::{self, mono_ns, SysError, SysResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;
use strum::VariantArray;

#[cfg(test)]
mod tests;

/// Where the running kernel publishes its BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    /// In XDP, in the driver's receive path before the kernel builds an
    /// skb (native mode): the default.
    Xdp,
    /// At tc ingress (a TCX link), after the skb is built and before IP:
    /// for a device on which an XDP drop costs more than the stack's own
    /// path (a veth fed by XDP redirects).
    Tc,
}

/// What `bpf/guard.bpf.c` did with a frame, in the order of its counters.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, strum::VariantArray, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum GuardOutcome {
    /// Passed: its socket had room.
    Room,
    /// Dropped: its socket's receive buffer was over its limit.
    Full,
    /// Passed: no socket is bound to it.
    NoSocket,
    /// Passed: not addressed to this host.
    NotLocal,
    /// Passed: not UDP (or UDP behind IPv6 extension headers).
    NotUdp,
    /// Passed: an IPv4 fragment.
    Fragment,
    /// Passed: link-layer multicast or broadcast.
    Multicast,
    /// Passed: shorter than its headers (the stack drops it).
    Truncated,
    /// Passed: the socket's fields could not be read.
    Unreadable,
}

/// The drop test the program found in force (`guard_rule`): the running
/// kernel's own, chosen by the program from the kernel's BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropRule {
    /// No datagram has met a socket yet.
    NotYet,
    /// Up to Linux 6.17: the bytes queued are over the socket's limit.
    OverLimit,
    /// From Linux 6.18: the datagram does not fit, and the queue is not
    /// empty.
    NoFit,
}

/// `struct sock_key` of `bpf/guard.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct SockKey {
    family: u32,
    port: u32,
    addr: [u32; 4],
}

// SAFETY: plain integers, no padding (24 bytes, as the C struct).
unsafe impl aya::Pod for SockKey {}

/// `struct sock_count` of `bpf/guard.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SockCount {
    passed: u64,
    dropped: u64,
}

// SAFETY: plain integers, no padding.
unsafe impl aya::Pod for SockCount {}

impl SockKey {
    /// The key of a local address (port 0), as the program builds it from
    /// a frame's destination.
    fn local(a: IpAddr) -> SockKey {
        match a {
            IpAddr::V4(v4) => SockKey {
                family: libc::AF_INET as u32,
                port: 0,
                addr: [u32::from_ne_bytes(v4.octets()), 0, 0, 0],
            },
            IpAddr::V6(v6) => {
                let o = v6.octets();
                let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                SockKey {
                    family: libc::AF_INET6 as u32,
                    port: 0,
                    addr: [w(0), w(4), w(8), w(12)],
                }
            }
        }
    }

    /// The socket's local address and port, as `ss` writes them.
    fn name(&self) -> String {
        let b = |w: u32| w.to_ne_bytes();
        if self.family == libc::AF_INET6 as u32 {
            let mut o = [0u8; 16];
            for (i, w) in self.addr.iter().enumerate() {
                o[i * 4..i * 4 + 4].copy_from_slice(&b(*w));
            }
            format!("[{}]:{}", Ipv6Addr::from(o), self.port)
        } else {
            format!("{}:{}", Ipv4Addr::from(b(self.addr[0])), self.port)
        }
    }
}

/// What the guard did for one socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketCount {
    /// The socket's local address and port (`0.0.0.0:53`, `[::]:53`).
    pub socket: String,
    /// Datagrams passed on to it (it had room).
    pub passed: u64,
    /// Datagrams dropped in XDP (its buffer was over its limit).
    pub dropped: u64,
}

/// What `rxsched guard` reports at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuardReport {
    /// The interface it guarded.
    pub interface: String,
    /// Where the program ran.
    pub hook: Hook,
    /// Seconds attached.
    pub duration_s: f64,
    /// Frames by what the program did with them.
    pub outcomes: BTreeMap<GuardOutcome, u64>,
    /// Datagrams dropped because their socket was full (`outcomes.full`).
    pub dropped: u64,
    /// Per socket, most dropped first.
    pub sockets: Vec<SocketCount>,
    /// The host's addresses the guard knew at the end.
    pub local_addresses: usize,
    /// The drop test in force.
    pub drop_rule: DropRule,
}

/// The guard attached to one interface; detached when dropped (or when
/// the process exits, however it exits).
pub struct Guard {
    obj: Object,
    iface: String,
    hook: Hook,
    local: Vec<SockKey>,
}

impl Guard {
    /// Loads the program (its socket fields relocated against the kernel's
    /// BTF: `btf`, or the running kernel's, /sys/kernel/btf/vmlinux), fills
    /// its set of local addresses, and attaches it to `iface` at `hook`.
    /// Any failure comes before the attachment: nothing changes.
    pub fn attach(iface: &str, btf: Option<&Path>, hook: Hook) -> SysResult<Guard> {
        sys::ifindex(iface)?;
        let path = btf.unwrap_or(Path::new(VMLINUX_BTF));
        let btf = aya::Btf::parse_file(path, aya::Endianness::default()).map_err(|e| SysError {
            what: path.display().to_string(),
            syscall: "open",
            source: io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "no kernel BTF here ({e}): guard cannot read a socket's receive buffer, and attached nothing"
                ),
            ),
        })?;
        let mut obj =
            Object::load_with_btf(GUARD, "guard (bpf/guard.bpf.c)", &btf).map_err(refused)?;
        if hook == Hook::Xdp {
            obj.prog_fd("guard").map_err(refused)?;
        }
        let mut g = Guard {
            obj,
            iface: iface.to_string(),
            hook,
            local: Vec::new(),
        };
        g.refresh_local()?;
        match hook {
            Hook::Xdp => g.obj.attach("guard", iface)?,
            // Loads and attaches: a refused load attaches nothing either.
            Hook::Tc => g.obj.attach_tc("tc_guard", iface).map_err(refused)?,
        }
        Ok(g)
    }

    /// Brings the program's set of local addresses up to date with the
    /// namespace's.
    pub fn refresh_local(&mut self) -> SysResult<()> {
        let mut now: Vec<SockKey> = local_addresses()?.into_iter().map(SockKey::local).collect();
        now.sort_by_key(|k| (k.family, k.addr));
        now.dedup();
        let what = self.obj_name();
        let map = self.obj.map("guard_local")?;
        let mut m: aya::maps::HashMap<&mut aya::maps::MapData, SockKey, u8> =
            map.try_into().map_err(|e| map_err(&what, e))?;
        for k in &self.local {
            if !now.contains(k) {
                let _ = m.remove(k);
            }
        }
        for k in &now {
            if !self.local.contains(k) {
                m.insert(k, 1, 0).map_err(|e| map_err(&what, e))?;
            }
        }
        self.local = now;
        Ok(())
    }

    fn obj_name(&self) -> String {
        format!("guard on {}", self.iface)
    }

    /// The program's counters, per outcome.
    pub fn outcomes(&mut self) -> SysResult<BTreeMap<GuardOutcome, u64>> {
        let mut m = BTreeMap::new();
        for (i, o) in GuardOutcome::VARIANTS.iter().enumerate() {
            let v: u64 = self
                .obj
                .per_cpu::<u64>("guard_stats", i as u32)?
                .iter()
                .sum();
            m.insert(*o, v);
        }
        Ok(m)
    }

    /// The program's counts per socket, most dropped first.
    pub fn sockets(&mut self) -> SysResult<Vec<SocketCount>> {
        let what = self.obj_name();
        let map = self.obj.map("guard_sockets")?;
        let m: aya::maps::PerCpuHashMap<&mut aya::maps::MapData, SockKey, SockCount> =
            map.try_into().map_err(|e| map_err(&what, e))?;
        let mut v = Vec::new();
        for item in m.iter() {
            let (k, per_cpu) = item.map_err(|e| map_err(&what, e))?;
            let (passed, dropped) = per_cpu
                .iter()
                .fold((0, 0), |(p, d), c| (p + c.passed, d + c.dropped));
            v.push(SocketCount {
                socket: k.name(),
                passed,
                dropped,
            });
        }
        v.sort_by(|a, b| b.dropped.cmp(&a.dropped).then(a.socket.cmp(&b.socket)));
        Ok(v)
    }

    /// The report so far, `duration_s` after attaching.
    pub fn report(&mut self, duration_s: f64) -> SysResult<GuardReport> {
        let outcomes = self.outcomes()?;
        Ok(GuardReport {
            interface: self.iface.clone(),
            hook: self.hook,
            duration_s,
            dropped: outcomes.get(&GuardOutcome::Full).copied().unwrap_or(0),
            outcomes,
            sockets: self.sockets()?,
            local_addresses: self.local.len(),
            drop_rule: match self.obj.get::<u32>("guard_rule", 0)? {
                1 => DropRule::OverLimit,
                2 => DropRule::NoFit,
                _ => DropRule::NotYet,
            },
        })
    }
}

/// A load the kernel refused, said as the guard's safe failure.
fn refused(mut e: SysError) -> SysError {
    let why = e.source.to_string();
    // 195896080 (0xbad2310) is the call a failed field relocation leaves.
    let hint = if why.contains("195896080") || why.contains("relocat") {
        "the kernel BTF has no struct sock with sk_rcvbuf, sk_backlog.rmem_alloc and sk_receive_queue"
    } else {
        "the kernel refused the program (root, and a kernel with BPF socket lookups in XDP, are needed)"
    };
    e.source = io::Error::new(
        e.source.kind(),
        format!("{why}; {hint}: guard attached nothing"),
    );
    e
}

fn map_err(what: &str, e: impl std::fmt::Display) -> SysError {
    SysError {
        what: what.to_string(),
        syscall: "bpf(BPF_MAP_*)",
        source: io::Error::other(e.to_string()),
    }
}

/// Every address of every interface of this network namespace.
pub fn local_addresses() -> SysResult<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    sys::check(
        unsafe { libc::getifaddrs(&mut head) },
        "this namespace's addresses",
        "getifaddrs",
    )?;
    let mut v = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr of the family it says.
            unsafe {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        v.push(IpAddr::V4(Ipv4Addr::from(sa.sin_addr.s_addr.to_ne_bytes())));
                    }
                    libc::AF_INET6 => {
                        let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        v.push(IpAddr::V6(Ipv6Addr::from(sa.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(v)
}

/// Guards `iface` at `hook` (with the kernel BTF at `btf`, if given) for
/// `duration_s` seconds (or until a stop signal),
/// printing a live line every `every_s` seconds (0: none), then reports.
pub fn run(
    iface: &str,
    hook: Hook,
    btf: Option<&Path>,
    duration_s: f64,
    every_s: f64,
) -> SysResult<GuardReport> {
    sys::signals::install();
    let mut g = Guard::attach(iface, btf, hook)?;
    let at = match hook {
        Hook::Xdp => "dropping for full UDP sockets in XDP",
        Hook::Tc => "dropping for full UDP sockets at tc ingress",
    };
    crate::runtime::listening("guard", &[iface.to_string()], at);
    let t0 = mono_ns();
    let end = t0.saturating_add((duration_s * 1e9) as u64);
    let mut next_refresh = t0 + 1_000_000_000;
    let every = (every_s * 1e9) as u64;
    let mut next_line = t0 + every;
    let mut prev = (0u64, 0u64, t0);
    while mono_ns() < end && !sys::signals::stopping() {
        std::thread::sleep(Duration::from_millis(20));
        let now = mono_ns();
        if now >= next_refresh {
            g.refresh_local()?;
            next_refresh = now + 1_000_000_000;
        }
        if every > 0 && now >= next_line {
            let o = g.outcomes()?;
            let dropped = o[&GuardOutcome::Full];
            let passed: u64 = o.values().sum::<u64>() - dropped;
            let dt = (now - prev.2).max(1) as f64 / 1e9;
            eprintln!(
                "guard {iface}: passed {:.0}/s dropped (socket full) {:.0}/s; dropped {dropped} in all",
                (passed - prev.0) as f64 / dt,
                (dropped - prev.1) as f64 / dt,
            );
            prev = (passed, dropped, now);
            next_line = now + every;
        }
    }
    g.report((mono_ns() - t0) as f64 / 1e9)
}
