//! `rxsched guard`: early discard in XDP for full UDP sockets, for
//! applications nobody will change.

use super::{json, positive};
use clap::{Args, ValueEnum};
use rxsched_linux::guard::Hook;

/// `--hook`
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HookArg {
    /// In XDP, before the kernel builds an skb (native mode).
    Xdp,
    /// At tc ingress, after the skb is built and before IP (for a device
    /// whose XDP drop costs more than it saves: `bench real srp` measures
    /// both against the kernel's own drop, `real-srp-excess`).
    Tc,
}
use rxsched::error::{Error, Result};

/// `rxsched guard`
#[derive(Args)]
pub struct GuardArgs {
    /// The interface whose arriving UDP to guard.
    #[arg(short = 'i', long = "interface")]
    pub iface: String,
    /// Where the program runs.
    #[arg(long, value_enum, default_value = "xdp")]
    pub hook: HookArg,
    /// Seconds to stay attached (default: until interrupted).
    #[arg(long)]
    pub duration: Option<f64>,
    /// The kernel's BTF, for a kernel that publishes it elsewhere than
    /// /sys/kernel/btf/vmlinux (the socket fields are read through it).
    #[arg(long, value_name = "FILE")]
    pub btf: Option<std::path::PathBuf>,
    /// Seconds between live lines on standard error (0: none).
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
}

/// `rxsched guard`
pub fn guard(a: GuardArgs) -> Result<()> {
    if let Some(d) = a.duration {
        positive("duration", d)?;
    }
    if !(a.interval.is_finite() && a.interval >= 0.0) {
        return Err(Error::flag(
            "interval",
            "must be 0 or a positive number of seconds",
        ));
    }
    let secs = a.duration.unwrap_or(f64::INFINITY);
    let hook = match a.hook {
        HookArg::Xdp => Hook::Xdp,
        HookArg::Tc => Hook::Tc,
    };
    json(&rxsched_linux::guard::run(
        &a.iface,
        hook,
        a.btf.as_deref(),
        secs,
        a.interval,
    )?)
}
