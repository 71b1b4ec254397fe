//! The lab: three network namespaces joined by veth pairs, in the
//! benchmarking range 198.18.0.0/15 (RFC 2544) only.
//!
//! ```text
//!  rxs-gen [g0] 198.18.0.1/24 ─── 198.18.0.2/24 [d0] rxs-dut [d1] 198.19.0.2/24 ─── 198.19.0.1/24 [s0] rxs-sink
//! ```
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
}

/// The generator's interface.
pub const G0: End = End {
    role: Role::Gen,
    iface: "g0",
    mac: Mac([0x02, 0x72, 0x78, 0, 0, 0x01]),
    ip: [198, 18, 0, 1],
};
/// The DUT's input interface.
pub const D0: End = End {
    role: Role::Dut,
    iface: "d0",
    mac: Mac([0x02, 0x72, 0x78, 0, 0, 0x02]),
    ip: [198, 18, 0, 2],
};
/// The DUT's output interface.
pub const D1: End = End {
    role: Role::Dut,
    iface: "d1",
    mac: Mac([0x02, 0x72, 0x78, 0, 1, 0x02]),
    ip: [198, 19, 0, 2],
};
/// The sink's interface.
pub const S0: End = End {
    role: Role::Sink,
    iface: "s0",
    mac: Mac([0x02, 0x72, 0x78, 0, 1, 0x01]),
    ip: [198, 19, 0, 1],
};

/// The user-space router's own address on the generator link. The generator
/// sends to it, not to `d0`'s kernel address, so the DUT kernel drops each
/// frame at once as "for another host" after the packet socket has its copy,
/// instead of running IP input on it.
pub const ROUTER_MAC: Mac = Mac([0x02, 0x72, 0x78, 0, 0, 0xf2]);
/// The address the DUT forwards to on the sink link, for the same reason:
/// the sink's packet socket sees every frame and its kernel drops them early
/// (rather than answering each UDP probe with an ICMP error).
pub const SINK_TAP_MAC: Mac = Mac([0x02, 0x72, 0x78, 0, 1, 0xf1]);

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
}

impl Lab {
    /// The lab with namespaces `<prefix>-gen`, `-dut`, `-sink`.
    pub fn new(prefix: &str) -> Lab {
        Lab {
            prefix: prefix.to_string(),
        }
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

    /// What is missing from a lab that is partly there (a `lab up` that was
    /// interrupted, a link deleted by hand); empty when it is whole, and
    /// when it is all gone.
    pub fn problems(&self) -> Vec<String> {
        let ex = self.existing();
        if ex.is_empty() {
            return Vec::new();
        }
        let mut p = Vec::new();
        for r in Role::ALL {
            if !ex.contains(&self.ns(r)) {
                p.push(format!("namespace {} is missing", self.ns(r)));
            }
        }
        for e in [G0, D0, D1, S0] {
            let ns = self.ns(e.role);
            if !ex.contains(&ns) {
                continue;
            }
            let path = format!("/sys/class/net/{}/operstate", e.iface);
            match self.exec(e.role, "cat", &[&path]) {
                Err(_) => {
                    p.push(format!("{} is missing in {ns}", e.iface));
                    continue;
                }
                Ok(st) if st.trim() != "up" => {
                    p.push(format!("{} in {ns} is {}", e.iface, st.trim()))
                }
                Ok(_) => {}
            }
            let ip = std::net::Ipv4Addr::from(e.ip).to_string();
            let addrs = self
                .exec(e.role, "ip", &["-br", "addr", "show", "dev", e.iface])
                .unwrap_or_default();
            if !addrs.contains(&format!("{ip}/")) {
                p.push(format!("{} in {ns} lacks its address {ip}", e.iface));
            }
        }
        p
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
        // The DUT kernel forwards only when a benchmark asks for it.
        self.set_kernel_forwarding(false)?;
        self.thread_receive_work()?;
        self.raise_send_buffers()?;
        self.wait_links_up()
    }

    /// Waits (at most three seconds) until every lab link reports its
    /// carrier, so the first frame after `up` is not lost to a link
    /// still negotiating.
    fn wait_links_up(&self) -> Result<(), LabError> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        for e in [G0, D0, D1, S0] {
            let path = format!("/sys/class/net/{}/operstate", e.iface);
            loop {
                let state = self.exec(e.role, "cat", &[&path])?;
                if state.trim() == "up" {
                    break;
                }
                if std::time::Instant::now() > deadline {
                    return Err(LabError::Command {
                        cmd: format!("wait for {} to come up", e.iface),
                        msg: format!("operstate is still {:?}", state.trim()),
                    });
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        Ok(())
    }

    fn make_namespaces(&self) -> Result<(), LabError> {
        for r in Role::ALL {
            run("ip", &["netns", "add", &self.ns(r)])?;
            self.exec(r, "ip", &["link", "set", "lo", "up"])?;
            // No IPv6 chatter (router solicitations, DAD) on the benchmark links.
            for k in ["all", "default"] {
                self.exec(
                    r,
                    "sysctl",
                    &["-q", "-w", &format!("net.ipv6.conf.{k}.disable_ipv6=1")],
                )?;
            }
        }
        Ok(())
    }

    fn make_links(&self) -> Result<(), LabError> {
        for (a, b) in [(G0, D0), (D1, S0)] {
            run(
                "ip",
                &[
                    "link",
                    "add",
                    a.iface,
                    "netns",
                    &self.ns(a.role),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    b.iface,
                    "netns",
                    &self.ns(b.role),
                ],
            )?;
        }
        for e in [G0, D0, D1, S0] {
            self.exec(
                e.role,
                "ip",
                &["link", "set", e.iface, "address", &e.mac.to_string()],
            )?;
            self.exec(
                e.role,
                "ip",
                &["addr", "add", &format!("{}/24", ip4(e.ip)), "dev", e.iface],
            )?;
            self.exec(e.role, "ip", &["link", "set", e.iface, "up"])?;
        }
        Ok(())
    }

    /// Routes and static neighbours: nothing depends on ARP.
    fn address(&self) -> Result<(), LabError> {
        self.exec(
            Role::Gen,
            "ip",
            &["route", "add", "198.19.0.0/24", "via", &ip4(D0.ip)],
        )?;
        self.exec(
            Role::Sink,
            "ip",
            &["route", "add", "198.18.0.0/24", "via", &ip4(D1.ip)],
        )?;
        for (from, to, mac) in [
            (G0, D0, D0.mac),
            (D0, G0, G0.mac),
            (D1, S0, SINK_TAP_MAC),
            (S0, D1, D1.mac),
        ] {
            self.exec(
                from.role,
                "ip",
                &[
                    "neigh",
                    "replace",
                    &ip4(to.ip),
                    "lladdr",
                    &mac.to_string(),
                    "dev",
                    from.iface,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        Ok(())
    }

    /// Saves and raises the send-buffer limits for the packet engine
    /// (writable only in the initial namespace; `down` restores them).
    fn raise_send_buffers(&self) -> Result<(), LabError> {
        let state = self.state_file();
        if !std::path::Path::new(&state).exists() {
            let saved = ["net.core.wmem_max", "net.core.wmem_default"]
                .iter()
                .filter_map(|k| sysctl_get(k).map(|v| format!("{k}={v}\n")))
                .collect::<String>();
            std::fs::write(&state, saved).map_err(|e| LabError::Command {
                cmd: format!("write {state}"),
                msg: e.to_string(),
            })?;
        }
        sysctl_set("net.core.wmem_max", &WMEM.to_string())?;
        sysctl_set("net.core.wmem_default", &WMEM.to_string())
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

    /// GRO and threaded NAPI on every veth end, each NAPI thread pinned to
    /// its side's CPU, the sink's at [`SINK_NAPI_PRIO`], the others at the
    /// default priority.
    fn thread_receive_work(&self) -> Result<(), LabError> {
        for (e, cpu) in [(G0, GEN_CPU), (D0, DUT_CPU), (D1, DUT_CPU), (S0, GEN_CPU)] {
            self.in_netns(e.role, || crate::napi::set_gro(e.iface, true))?;
            self.write_sysfs(e.role, &format!("/sys/class/net/{}/threaded", e.iface), "1")?;
            if e.role == Role::Dut {
                let dir = format!("/sys/class/net/{}", e.iface);
                self.write_sysfs(
                    e.role,
                    &format!("{dir}/napi_defer_hard_irqs"),
                    &DUT_DEFER_IRQS.to_string(),
                )?;
                self.write_sysfs(
                    e.role,
                    &format!("{dir}/gro_flush_timeout"),
                    &DUT_COALESCE_NS.to_string(),
                )?;
            }
            let prio = if e.iface == S0.iface {
                crate::napi::Sched::Fifo(SINK_NAPI_PRIO)
            } else {
                crate::napi::Sched::Normal
            };
            self.in_netns(e.role, || {
                for tid in crate::napi::thread_ids(e.iface)? {
                    crate::napi::pin(tid, cpu)?;
                    crate::napi::set_sched(tid, prio)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Puts the DUT's receive threads (`d0`'s and `d1`'s) back at the
    /// default priority, as `lab up` left them; a router that was killed
    /// may have left them otherwise.
    pub fn reset_dut_receive(&self) -> Result<(), LabError> {
        for e in [D0, D1] {
            self.in_netns(e.role, || {
                for tid in crate::napi::thread_ids(e.iface)? {
                    crate::napi::set_sched(tid, crate::napi::Sched::Normal)?;
                }
                Ok(())
            })?;
        }
        Ok(())
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

    /// A human-readable account of what exists.
    pub fn status(&self) -> String {
        let mut s = String::new();
        let ex = self.existing();
        if ex.is_empty() {
            s += &format!("lab: down (no {}-* namespaces)\n", self.prefix);
        }
        let problems = self.problems();
        if !problems.is_empty() {
            s += "lab: INCOMPLETE (run `rxsched lab down`, then `rxsched lab up`):\n";
            for p in &problems {
                s += &format!("  - {p}\n");
            }
        } else if !ex.is_empty() {
            s += "lab: up\n";
        }
        for r in Role::ALL {
            let ns = self.ns(r);
            if !ex.contains(&ns) {
                continue;
            }
            s += &format!("namespace {ns}\n");
            if let Ok(out) = self.exec(r, "ip", &["-br", "addr", "show"]) {
                for l in out.lines().filter(|l| !l.starts_with("lo ")) {
                    s += &format!("  {l}\n");
                }
            }
            for e in [G0, D0, D1, S0].iter().filter(|e| e.role == r) {
                s += &self.receive_status(*e);
            }
            if r == Role::Dut {
                if let Ok(f) = self.exec(r, "sysctl", &["-n", "net.ipv4.ip_forward"]) {
                    s += &format!("  kernel forwarding (ip_forward): {}\n", f.trim());
                }
            }
        }
        let c = cpu_net();
        s += "per CPU: NET_RX softirqs / packets processed / backlog drops\n";
        for (i, n) in c.net_rx.iter().enumerate() {
            s += &format!(
                "  cpu{i}: {n} / {} / {}\n",
                c.processed.get(i).copied().unwrap_or(0),
                c.backlog_drops.get(i).copied().unwrap_or(0)
            );
        }
        if let Some(w) = sysctl_get("net.core.wmem_max") {
            s += &format!("net.core.wmem_max = {w}\n");
        }
        s
    }
}

impl Lab {
    /// Where an interface's receive work runs, and what XDP program it has.
    fn receive_status(&self, e: End) -> String {
        let mut s = String::new();
        match self.in_netns(e.role, || crate::napi::threads(e.iface)) {
            Ok(ts) => {
                for t in ts {
                    let (cpu, sched) = thread_place(t.tid);
                    s += &format!(
                        "  {} receive work: napi/{}-{} thread {} on CPU {cpu} ({sched})\n",
                        e.iface, e.iface, t.id, t.tid
                    );
                }
            }
            Err(err) => s += &format!("  {}: {err}\n", e.iface),
        }
        if e.role == Role::Dut {
            let dir = format!("/sys/class/net/{}", e.iface);
            let read = |f: &str| {
                self.exec(e.role, "cat", &[&format!("{dir}/{f}")])
                    .map(|v| v.trim().to_string())
            };
            if let (Ok(d), Ok(t)) = (read("napi_defer_hard_irqs"), read("gro_flush_timeout")) {
                s += &format!("  {} interrupt moderation: napi_defer_hard_irqs {d}, gro_flush_timeout {t} ns\n", e.iface);
            }
        }
        if let Ok(out) = self.exec(e.role, "ip", &["-d", "link", "show", e.iface]) {
            if let Some(p) = out
                .split_whitespace()
                .skip_while(|w| *w != "prog/xdp")
                .nth(2)
            {
                s += &format!("  {} XDP program id {p}\n", e.iface);
            }
        }
        s
    }
}

/// The CPU a thread may run on and its scheduling class, from `/proc`.
fn thread_place(tid: i32) -> (String, String) {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/status")).unwrap_or_default();
    let cpus = stat
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map_or("?".to_string(), |v| v.trim().to_string());
    let st = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap_or_default();
    // Fields after the command name: policy is field 41, rt priority 40.
    let f: Vec<&str> = st
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let (prio, policy) = (
        f.get(37).copied().unwrap_or("?"),
        f.get(38).copied().unwrap_or("?"),
    );
    let sched = match policy {
        "0" => "normal".to_string(),
        "1" => format!("FIFO {prio}"),
        "5" => "idle".to_string(),
        p => format!("policy {p}"),
    };
    (cpus, sched)
}

/// Per-CPU counters of the receive path.
#[derive(Debug, Clone, Default)]
pub struct CpuNet {
    /// NET_RX softirqs run, per CPU (/proc/softirqs).
    pub net_rx: Vec<u64>,
    /// Packets processed, per CPU (/proc/net/softnet_stat column 1).
    pub processed: Vec<u64>,
    /// Packets dropped at the backlog, per CPU (column 2).
    pub backlog_drops: Vec<u64>,
}

/// Reads the per-CPU receive counters.
pub fn cpu_net() -> CpuNet {
    let mut c = CpuNet::default();
    if let Ok(s) = std::fs::read_to_string("/proc/softirqs") {
        if let Some(l) = s.lines().find(|l| l.trim_start().starts_with("NET_RX:")) {
            c.net_rx = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
        }
    }
    if let Ok(s) = std::fs::read_to_string("/proc/net/softnet_stat") {
        for l in s.lines() {
            let f: Vec<u64> = l
                .split_whitespace()
                .filter_map(|x| u64::from_str_radix(x, 16).ok())
                .collect();
            c.processed.push(f.first().copied().unwrap_or(0));
            c.backlog_drops.push(f.get(1).copied().unwrap_or(0));
        }
    }
    c
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
