//! The lab: three network namespaces joined by veth pairs, in the
//! benchmarking range 198.18.0.0/15 (RFC 2544) only.
//!
//! ```text
//!  rxs-gen [g0] 198.18.0.1/24 ─── 198.18.0.2/24 [d0] rxs-dut [d1] 198.19.0.2/24 ─── 198.19.0.1/24 [s0] rxs-sink
//! ```
//!
//! IPv6 is off on the benchmark links (no router solicitations or DAD in
//! the measurements); [`Lab::ipv6_on`] turns it on, in IPv6's benchmarking
//! prefix 2001:2::/48 (RFC 5180): `2001:2::/64` on the generator's link,
//! `2001:2:0:1::/64` on the sink's, the hosts numbered as in IPv4.
//!
//! Every veth end has threaded NAPI: its receive work runs in a kernel
//! thread (`napi/d0-N`, ...) that the lab pins, `d0` and `d1`'s to the DUT
//! CPU and `g0` and `s0`'s to the generator CPU. (Without it veth does a
//! frame's receive work on the *sender's* CPU, and a DUT that borrows the
//! generator's CPU measures nothing.) GRO is on for every end, which keeps
//! each veth's NAPI instance, and so its thread, whether or not an XDP
//! program is attached. A frame beyond a veth's receive ring is dropped
//! before the receiving side spends anything on it, as on a NIC.
//!
//! The sink's receive thread runs at real-time priority [`SINK_NAPI_PRIO`],
//! above the generator, so that the sink keeps up with what the DUT sends.

mod build;
mod status;

pub use status::{cpu_net, CpuNet};

use crate::wire::Mac;
use std::process::Command;

/// The three hosts of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The traffic generator.
    Gen,
    /// The device under test.
    Dut,
    /// The sink.
    Sink,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 3] = [Role::Gen, Role::Dut, Role::Sink];

    fn suffix(self) -> &'static str {
        match self {
            Role::Gen => "gen",
            Role::Dut => "dut",
            Role::Sink => "sink",
        }
    }
}

/// The lab `rxsched lab` manages: namespaces `rxs-gen`, `rxs-dut`, `rxs-sink`.
pub const STANDARD: &str = "rxs";
/// The CPU the generator and sink run on.
pub const GEN_CPU: usize = 0;
/// The CPU the DUT runs on.
pub const DUT_CPU: usize = 1;

/// One end of a lab link.
#[derive(Debug, Clone, Copy)]
pub struct End {
    /// Which host.
    pub role: Role,
    /// Interface.
    pub iface: &'static str,
    /// Fixed, locally administered MAC, so no ARP is needed.
    pub mac: Mac,
    /// Address.
    pub ip: [u8; 4],
    /// IPv6 address, once [`Lab::ipv6_on`].
    pub ip6: &'static str,
}

/// The generator's interface.
pub const G0: End = End {
    role: Role::Gen,
    iface: "g0",
    mac: Mac([0x02, 0x72, 0x78, 0, 0, 0x01]),
    ip: [198, 18, 0, 1],
    ip6: "2001:2::1",
};
/// The DUT's input interface.
pub const D0: End = End {
    role: Role::Dut,
    iface: "d0",
    mac: Mac([0x02, 0x72, 0x78, 0, 0, 0x02]),
    ip: [198, 18, 0, 2],
    ip6: "2001:2::2",
};
/// The DUT's output interface.
pub const D1: End = End {
    role: Role::Dut,
    iface: "d1",
    mac: Mac([0x02, 0x72, 0x78, 0, 1, 0x02]),
    ip: [198, 19, 0, 2],
    ip6: "2001:2:0:1::2",
};
/// The sink's interface.
pub const S0: End = End {
    role: Role::Sink,
    iface: "s0",
    mac: Mac([0x02, 0x72, 0x78, 0, 1, 0x01]),
    ip: [198, 19, 0, 1],
    ip6: "2001:2:0:1::1",
};

/// The end hosts' transmit offloads the lab turns off. A veth hands its
/// peer what the sender's stack made: TCP and UDP checksums left for a NIC
/// to finish (CHECKSUM_PARTIAL) and segments larger than the MTU, which no
/// real wire carries and which a router that forwards raw frames passes on
/// broken. (The DUT's own devices keep their checksums for the stack to
/// finish: the kernel's forwarding copes, and rxsched's sockets see frames
/// before GRO. They lose TSO: see [`DUT_OFFLOADS_OFF`].)
pub const WIRE_OFFLOADS: [crate::napi_threads::Offload; 2] = [
    crate::napi_threads::Offload::TxChecksum,
    crate::napi_threads::Offload::Tso,
];

/// The DUT's transmit offloads the lab turns off: TSO. A veth whose sender
/// has TSO on gives a socket buffer it sends (everything the kernel
/// forwards, and the AF_XDP router's copy-mode transmissions) not to its
/// peer's NAPI thread but to the receive backlog of the *sending* CPU, so
/// the sink's whole receive work (its stack and its tc program) ran on the
/// DUT's CPU, charged to whatever sent: the kernel's forwarding and the
/// router paid for the sink where the XDP forwarders, whose frames veth
/// always queues for the peer's NAPI, did not. Without TSO every frame the
/// DUT sends is received in the sink's own thread, on the generator's CPU,
/// as a second host would receive it. (The DUT's own TCP then segments in
/// software, as on a NIC without TSO.)
pub const DUT_OFFLOADS_OFF: [crate::napi_threads::Offload; 1] = [crate::napi_threads::Offload::Tso];

/// Receive-interrupt moderation on the DUT's devices, as a NIC's
/// `rx-usecs`: after a NAPI poll that found work, the device's interrupt
/// stays masked and NAPI polls again after [`DUT_COALESCE_NS`], up to this
/// many times, before it waits for an interrupt again. Without it every
/// frame at low load costs a cross-CPU wake-up of the receive thread, which
/// in this VM takes about as much CPU as forwarding the frame.
pub const DUT_DEFER_IRQS: u32 = 2;
/// See [`DUT_DEFER_IRQS`]: 50 µs, a common NIC coalescing time.
pub const DUT_COALESCE_NS: u64 = 50_000;

/// The real-time priority of the sink's receive thread: above the XDP
/// generator's (10) on the shared CPU.
pub const SINK_NAPI_PRIO: i32 = 60;

/// Socket send buffers large enough that the packet engine's generator is
/// not throttled by the receiver's back-pressure (REAL.md, "Sender
/// back-pressure").
const WMEM: u64 = 16 * 1024 * 1024;

/// A lab step that failed: the command and what it said.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Not root.
    #[error("the lab needs root (CAP_NET_ADMIN): run it with sudo")]
    NotRoot,
    /// A command failed.
    #[error("`{cmd}` failed: {msg}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its error output.
        msg: String,
    },
}

fn ip4(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// Runs a command; returns its standard output.
pub fn run(prog: &str, args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| LabError::Command {
            cmd: format!("{prog} {}", args.join(" ")),
            msg: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(LabError::Command {
            cmd: format!("{prog} {}", args.join(" ")),
            msg: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ip netns exec NS prog args...`.
pub fn in_ns(ns: &str, prog: &str, args: &[&str]) -> Result<String, LabError> {
    let mut a = vec!["netns", "exec", ns, prog];
    a.extend_from_slice(args);
    run("ip", &a)
}

/// A lab: three namespaces named `<prefix>-gen`, `<prefix>-dut`, `<prefix>-sink`.
#[derive(Debug, Clone)]
pub struct Lab {
    prefix: String,
    queues: u32,
}

impl Lab {
    /// The lab with namespaces `<prefix>-gen`, `-dut`, `-sink`.
    pub fn new(prefix: &str) -> Lab {
        Lab {
            prefix: prefix.to_string(),
            queues: 1,
        }
    }

    /// The same lab with `n` receive and transmit queues on every veth end
    /// (each receive queue its own NAPI thread). A veth hands a frame sent
    /// by XDP to the peer's queue numbered by the sending CPU (modulo the
    /// queues), so a generator on CPU 1 fills queue 1.
    pub fn with_queues(mut self, n: u32) -> Lab {
        self.queues = n.max(1);
        self
    }

    /// Receive queues per veth end.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// The lab `rxsched lab` manages.
    pub fn standard() -> Lab {
        Lab::new(STANDARD)
    }

    /// The namespace of a role.
    pub fn ns(&self, r: Role) -> String {
        format!("{}-{}", self.prefix, r.suffix())
    }

    fn state_file(&self) -> String {
        format!("/run/rxsched-lab-{}.state", self.prefix)
    }

    /// Runs a command in a role's namespace.
    pub fn exec(&self, r: Role, prog: &str, args: &[&str]) -> Result<String, LabError> {
        in_ns(&self.ns(r), prog, args)
    }

    /// The lab's namespaces that exist now.
    pub fn existing(&self) -> Vec<String> {
        let mine: Vec<String> = Role::ALL.iter().map(|r| self.ns(*r)).collect();
        run("ip", &["netns", "list"])
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| mine.iter().any(|m| m == n))
            .map(str::to_string)
            .collect()
    }

    /// Whether the whole lab is up: every namespace, link and address.
    pub fn is_up(&self) -> bool {
        self.existing().len() == Role::ALL.len() && self.problems().is_empty()
    }

    fn write_sysfs(&self, r: Role, path: &str, value: &str) -> Result<(), LabError> {
        self.exec(r, "sh", &["-c", &format!("echo {value} > {path}")])
            .map(|_| ())
    }

    /// Builds the lab (after clearing any leftovers of an earlier one).
    pub fn up(&self) -> Result<(), LabError> {
        if !crate::sys::is_root() {
            return Err(LabError::NotRoot);
        }
        self.down()?;
        self.make_namespaces()?;
        self.make_links()?;
        self.address()?;
        // The DUT is a router: its kernel forwards what nothing takes, and
        // what rxsched hands it (RFC 1812's errors, unresolved next hops).
        self.set_kernel_forwarding(true)?;
        self.thread_receive_work()?;
        self.raise_send_buffers()?;
        self.wait_links_up()?;
        self.resolve_neighbours()
    }

    /// Has the DUT learn its neighbours' MACs, and they its, by ARP, as a
    /// router learns them from its first traffic (the entries are
    /// ordinary dynamic ones); returns once the DUT has both.
    pub fn resolve_neighbours(&self) -> Result<(), LabError> {
        let want = [G0.ip, S0.ip];
        for _ in 0..50 {
            let have = self.in_netns(Role::Dut, || {
                let s =
                    std::net::UdpSocket::bind("0.0.0.0:0").map_err(|e| crate::sys::SysError {
                        what: "lab".into(),
                        syscall: "bind(UDP)",
                        source: e,
                    })?;
                // The discard port: nothing answers, the kernel ARPs first.
                for ip in want {
                    let _ = s.send_to(&[0], (std::net::Ipv4Addr::from(ip), 9));
                }
                Ok(std::fs::read_to_string("/proc/thread-self/net/arp").unwrap_or_default())
            })?;
            let complete = |ip: [u8; 4]| {
                let a = std::net::Ipv4Addr::from(ip).to_string();
                have.lines()
                    .any(|l| l.split_whitespace().next() == Some(&a) && l.contains("0x2"))
            };
            if want.iter().all(|ip| complete(*ip)) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Err(LabError::Command {
            cmd: "resolve neighbours".into(),
            msg: "the DUT did not learn g0's and s0's MACs within 1 s".into(),
        })
    }

    /// Runs `f` in a thread inside `role`'s network namespace.
    pub fn in_netns<T: Send>(
        &self,
        role: Role,
        f: impl FnOnce() -> crate::sys::SysResult<T> + Send,
    ) -> Result<T, LabError> {
        let ns = self.ns(role);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                crate::sys::enter_netns(&ns)?;
                f()
            })
            .join()
            .expect("a lab thread does not panic")
        })
        .map_err(|e| LabError::Command {
            cmd: format!("in namespace {ns}"),
            msg: e.to_string(),
        })
    }

    /// Puts the DUT's receive threads (`d0`'s and `d1`'s) back at the
    /// default priority and slice, as `lab up` left them; a router that
    /// was killed may have left them otherwise.
    pub fn reset_dut_receive(&self) -> Result<(), LabError> {
        for e in [D0, D1] {
            self.in_netns(e.role, || {
                for tid in crate::napi_threads::thread_ids(e.iface)? {
                    crate::sys::slice::set_time_shared(tid, None)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Sends everything the generator's own stack sends (ping, a TCP
    /// connection: not the generator's XDP frames, which go on the queue of
    /// the CPU that sends them) on `g0`'s transmit queue `queue`, so that
    /// it arrives on the DUT's receive queue `queue`: the lab's stand-in for
    /// a NIC's flow rule (`ethtool -N ... action Q`) steering a control
    /// plane to a queue of its own. Transmit steering (XPS) maps every CPU
    /// to that queue; `None` clears it, as `lab up` leaves it (the kernel
    /// then picks a queue by the flow's hash).
    pub fn steer_gen_stack(&self, queue: Option<u32>) -> Result<(), LabError> {
        self.steer_stack(Role::Gen, G0.iface, queue)
    }

    /// [`Lab::steer_gen_stack`] for the sink's own stack (`s0`, into the
    /// DUT's `d1`): what it answers (ping's echo replies, a TCP
    /// connection's ACKs) arrives on the DUT's receive queue `queue`, as a
    /// NIC's flow rule steers a control plane's frames both ways.
    pub fn steer_sink_stack(&self, queue: Option<u32>) -> Result<(), LabError> {
        self.steer_stack(Role::Sink, S0.iface, queue)
    }

    /// Transmit steering of `iface`'s stack, in `role`'s namespace.
    fn steer_stack(&self, role: Role, iface: &str, queue: Option<u32>) -> Result<(), LabError> {
        if let Some(q) = queue.filter(|q| *q >= self.queues) {
            return Err(LabError::Command {
                cmd: format!("steer {iface}'s stack to its queue {q}"),
                msg: format!("{iface} has {} transmit queues", self.queues),
            });
        }
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let all = format!("{:x}", (1u64 << cpus.min(63)) - 1);
        for q in 0..self.queues {
            let mask = if queue == Some(q) { all.as_str() } else { "0" };
            let path = format!("/sys/class/net/{iface}/queues/tx-{q}/xps_cpus");
            self.write_sysfs(role, &path, mask)?;
        }
        Ok(())
    }

    /// Turns IPv6 on on the lab's links: addresses in 2001:2::/48 (without
    /// duplicate address detection, so they are usable at once), the end
    /// hosts' routes through the DUT, and the DUT kernel's IPv6 forwarding.
    /// Neighbours are found by neighbour discovery. `lab down` takes it
    /// away with the namespaces.
    pub fn ipv6_on(&self) -> Result<(), LabError> {
        for e in [G0, D0, D1, S0] {
            let key = format!("net.ipv6.conf.{}.disable_ipv6=0", e.iface);
            self.exec(e.role, "sysctl", &["-q", "-w", &key])?;
            let a = format!("{}/64", e.ip6);
            self.exec(
                e.role,
                "ip",
                &["-6", "addr", "add", &a, "dev", e.iface, "nodad"],
            )?;
        }
        self.exec(
            Role::Gen,
            "ip",
            &["-6", "route", "add", "2001:2:0:1::/64", "via", D0.ip6],
        )?;
        self.exec(
            Role::Sink,
            "ip",
            &["-6", "route", "add", "2001:2::/64", "via", D1.ip6],
        )?;
        self.exec(
            Role::Dut,
            "sysctl",
            &["-q", "-w", "net.ipv6.conf.all.forwarding=1"],
        )?;
        self.resolve_neighbours_v6()
    }

    /// Waits for the link-local addresses' duplicate address detection to
    /// end (until then the hosts answer neighbour discovery late), then has
    /// the DUT find its neighbours by neighbour discovery, as
    /// [`Lab::resolve_neighbours`] does by ARP.
    fn resolve_neighbours_v6(&self) -> Result<(), LabError> {
        let mut settled = false;
        for _ in 0..150 {
            let mut tentative = String::new();
            for r in Role::ALL {
                tentative += &self.exec(r, "ip", &["-6", "addr", "show", "tentative"])?;
            }
            if tentative.trim().is_empty() {
                settled = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let want = [G0.ip6, S0.ip6];
        for _ in 0..100 {
            if !settled {
                break;
            }
            self.in_netns(Role::Dut, || {
                let s = std::net::UdpSocket::bind("[::]:0").map_err(|e| crate::sys::SysError {
                    what: "lab".into(),
                    syscall: "bind(UDP6)",
                    source: e,
                })?;
                // The discard port: nothing answers, the kernel solicits first.
                for ip in want {
                    let a: std::net::Ipv6Addr = ip.parse().expect("the lab's own address");
                    let _ = s.send_to(&[0], (a, 9));
                }
                Ok(())
            })?;
            let neigh = self.exec(Role::Dut, "ip", &["-6", "neigh", "show"])?;
            let known = |ip: &str| {
                neigh.lines().any(|l| {
                    l.split_whitespace().next() == Some(ip)
                        && l.contains("lladdr")
                        && !l.contains("FAILED")
                })
            };
            if want.iter().all(|ip| known(ip)) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Err(LabError::Command {
            cmd: "resolve IPv6 neighbours".into(),
            msg: "duplicate address detection did not end within 3 s, or the DUT did not \
                  learn g0's and s0's MACs within 2 s"
                .into(),
        })
    }

    /// Turns the DUT kernel's own IPv4 forwarding on or off.
    pub fn set_kernel_forwarding(&self, on: bool) -> Result<(), LabError> {
        self.exec(
            Role::Dut,
            "sysctl",
            &["-q", "-w", &format!("net.ipv4.ip_forward={}", on as u8)],
        )
        .map(|_| ())
    }

    /// Removes everything the lab made; harmless when nothing is there.
    pub fn down(&self) -> Result<(), LabError> {
        if !crate::sys::is_root() {
            return Err(LabError::NotRoot);
        }
        let ex = self.existing();
        // The links go first: a process still running in a namespace keeps
        // it (and its devices) alive after `ip netns del`, and a router there
        // stops only when its devices vanish. Deleting one end of a veth
        // pair deletes both.
        for e in [G0, D1] {
            if ex.contains(&self.ns(e.role)) {
                let _ = self.exec(e.role, "ip", &["link", "del", e.iface]);
            }
        }
        for ns in ex {
            run("ip", &["netns", "del", &ns])?;
        }
        // The benchmarks' CPU groups.
        crate::cgroup::remove_ours();
        let state = self.state_file();
        if let Ok(saved) = std::fs::read_to_string(&state) {
            for line in saved.lines() {
                if let Some((k, v)) = line.split_once('=') {
                    sysctl_set(k, v)?;
                }
            }
            let _ = std::fs::remove_file(&state);
        }
        Ok(())
    }
}

fn sysctl_get(key: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/")))
        .ok()
        .map(|s| s.trim().to_string())
}

fn sysctl_set(key: &str, v: &str) -> Result<(), LabError> {
    std::fs::write(format!("/proc/sys/{}", key.replace('.', "/")), v).map_err(|e| {
        LabError::Command {
            cmd: format!("sysctl {key}={v}"),
            msg: e.to_string(),
        }
    })
}
