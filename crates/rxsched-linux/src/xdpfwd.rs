//! `rxsched xdp-fwd`: the lab's fastest forwarder, as a peer for the
//! user-space router: `bpf/fwd.bpf.c` on each input port forwards IPv4 in
//! XDP with the kernel's FIB and neighbour table and `bpf_redirect`. The
//! kernel's `ip_forward` must be on (the FIB lookup checks it). The
//! programs stay attached while this process lives.

use crate::bpf::{Object, FWD};
use crate::sys::{self, mono_ns, SysResult};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the programs did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct XdpFwdReport {
    /// Seconds attached.
    pub duration_s: f64,
    /// Frames forwarded in XDP.
    pub forwarded: u64,
    /// Frames passed on to the kernel (not IPv4, TTL expiring).
    pub passed: u64,
    /// Frames the FIB had no route or neighbour for (passed on too).
    pub no_fib: u64,
}

/// Attaches the forwarder to `ports` for `duration_s` seconds (or until a
/// stop signal), then reports.
pub fn run(ports: &[String], duration_s: f64) -> SysResult<XdpFwdReport> {
    sys::signals::install();
    let mut objs = Vec::new();
    for p in ports {
        let mut o = Object::load(FWD, p)?;
        o.attach("xdp_fwd", p)?;
        objs.push(o);
    }
    crate::runtime::listening("xdp-fwd", ports, "forwarding in XDP by the kernel's FIB");
    let t0 = mono_ns();
    let end = t0 + (duration_s * 1e9) as u64;
    while mono_ns() < end && !sys::signals::stopping() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut r = XdpFwdReport {
        duration_s: (mono_ns() - t0) as f64 / 1e9,
        forwarded: 0,
        passed: 0,
        no_fib: 0,
    };
    for o in &mut objs {
        r.forwarded += o.per_cpu::<u64>("fwd_stats", 0)?.iter().sum::<u64>();
        r.passed += o.per_cpu::<u64>("fwd_stats", 1)?.iter().sum::<u64>();
        r.no_fib += o.per_cpu::<u64>("fwd_stats", 2)?.iter().sum::<u64>();
    }
    Ok(r)
}
