//! What the lab looks like: what exists, what is missing, where each
//! link's receive work runs, and the per-CPU receive counters.

use super::*;

impl Lab {
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

    /// Where an interface's receive work runs, and what XDP program it has.
    pub(super) fn receive_status(&self, e: End) -> String {
        let mut s = String::new();
        match self.in_netns(e.role, || crate::napi_threads::threads(e.iface)) {
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
