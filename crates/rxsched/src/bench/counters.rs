//! The DUT's counters read around a trial (its threads' CPU and runs,
//! its links' drops, the kernel's own forwarding) and the drops they name.

use super::error::BenchError;
use super::proc::Running;
use rxsched_linux::lab::{Lab, Role, D0, D1, S0};
use rxsched_sim::Metrics;

/// Counters of the DUT and the sink link, read together.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Counters {
    /// CPU time of the forwarder's main thread (our router's polling or
    /// forwarding thread), if it is ours.
    pub(super) router_ns: u64,
    /// How many times that thread was put on a CPU (its wake-ups, and its
    /// returns after a preemption).
    pub(super) router_runs: u64,
    /// d0's `rx_dropped`: its veth ring (and, with AF_XDP, the socket's).
    pub(super) d0_dropped: u64,
    /// d1's `tx_dropped`: frames the sink's ring refused.
    pub(super) d1_dropped: u64,
    /// s0's `rx_dropped`: frames the sink's own ring refused.
    pub(super) s0_dropped: u64,
    /// CPU time of the DUT's receive threads.
    pub napi_ns: u64,
    /// How many times the DUT's receive threads were put on a CPU.
    pub napi_runs: u64,
    /// CPU time of the router's screening process, if it has one, and how
    /// many times it was put on a CPU.
    pub(super) screen_ns: u64,
    pub(super) screen_runs: u64,
    /// IP datagrams the DUT's kernel forwarded (`ForwDatagrams`): with
    /// our router serving, frames that reached the stack around it.
    pub(super) kernel_forwarded: u64,
}

impl Counters {
    /// Reads them now; `router` is the forwarding process, if one of ours.
    pub fn read(lab: &Lab, router: Option<&Running>) -> Result<Counters, BenchError> {
        // `ip netns exec` execs the command: the child's pid is the router's.
        let router_ns = router
            .and_then(|c| rxsched_linux::napi_threads::cpu_ns(c.pid() as i32).ok())
            .unwrap_or(0);
        let router_runs = router
            .and_then(|c| rxsched_linux::napi_threads::runs(c.pid() as i32).ok())
            .unwrap_or(0);
        // The screening process is the router's child (`rxsched screend`).
        let screend = router.and_then(|c| children(c.pid()).into_iter().next());
        let (screen_ns, screen_runs) = screend.map_or((0, 0), |p| {
            (
                rxsched_linux::napi_threads::cpu_ns(p as i32).unwrap_or(0),
                rxsched_linux::napi_threads::runs(p as i32).unwrap_or(0),
            )
        });
        let mut c = lab.in_netns(Role::Dut, || {
            let (mut napi_ns, mut napi_runs) = (0, 0);
            for i in [D0.iface, D1.iface] {
                for t in rxsched_linux::napi_threads::thread_ids(i)? {
                    napi_ns += rxsched_linux::napi_threads::cpu_ns(t)?;
                    napi_runs += rxsched_linux::napi_threads::runs(t).unwrap_or(0);
                }
            }
            Ok(Counters {
                router_ns,
                router_runs,
                d0_dropped: rxsched_linux::sys::iface_counter(D0.iface, "rx_dropped")?,
                d1_dropped: rxsched_linux::sys::iface_counter(D1.iface, "tx_dropped")?,
                s0_dropped: 0,
                napi_ns,
                napi_runs,
                screen_ns,
                screen_runs,
                kernel_forwarded: rxsched_linux::sys::ip_forwarded()?,
            })
        })?;
        // The sink's ring is read where it is, and only as well as it can be.
        c.s0_dropped = lab
            .in_netns(Role::Sink, || {
                rxsched_linux::sys::iface_counter(S0.iface, "rx_dropped")
            })
            .unwrap_or(0);
        Ok(c)
    }
}

/// IP datagrams the DUT's kernel forwarded between two readings.
pub fn kernel_forwarded(c0: &Counters, c1: &Counters) -> u64 {
    c1.kernel_forwarded.saturating_sub(c0.kernel_forwarded)
}

/// The processes `pid`'s threads started (`/proc/PID/task/*/children`).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut v: Vec<u32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    v.sort_unstable();
    v
}

/// Drops the kernel counted, where no router of ours did, and what no
/// counter claims (so that `arrived = delivered + drops`).
/// `ours`: a router of ours forwarded, and has split `d0`'s drops itself.
pub fn dut_drops(m: &mut Metrics, c0: &Counters, c1: &Counters, ours: bool) {
    let mut add = |k: &str, n: u64| {
        if n > 0 {
            *m.drops.entry(k.to_string()).or_insert(0) += n;
        }
    };
    if !ours {
        // With our router, d0's drops are already split into ring and socket.
        add("nic_rx_ring", c1.d0_dropped.saturating_sub(c0.d0_dropped));
    }
    let s0_drops = c1.s0_dropped.saturating_sub(c0.s0_dropped);
    add(
        "output_link",
        c1.d1_dropped.saturating_sub(c0.d1_dropped) + s0_drops,
    );
    let named: u64 = m.drops.values().sum();
    let rest = m.arrived.saturating_sub(m.delivered).saturating_sub(named);
    if rest > 0 {
        m.drops.insert("unattributed".into(), rest);
    }
    let over = (m.delivered + m.drops.values().sum::<u64>()).saturating_sub(m.arrived);
    if over > 0 {
        // Counters that overlap (frames counted at two points, or still
        // queued when a counter was read) are trimmed from the largest.
        if let Some((_, v)) = m.drops.iter_mut().max_by_key(|(_, v)| **v) {
            *v -= over.min(*v);
        }
    }
    m.drops.retain(|_, v| *v > 0);
}
