//! The helper processes and peers of the real benches: `onoff`,
//! `udp-recv`, `screend` (started by `route --screen`), `xdp-fwd`, `spin`.

use super::{json, positive};
use clap::Args;
use rxsched::error::{Error, Result};
use rxsched_linux::stage::StageFds;

/// `rxsched onoff`
pub fn onoff(cpu: Option<usize>, on_ms: f64, off_ms: f64, duration: f64) -> Result<()> {
    positive("duration", duration)?;
    for (flag, v) in [("on-ms", on_ms), ("off-ms", off_ms)] {
        if !(v.is_finite() && v > 0.0 && v <= 10_000.0) {
            return Err(Error::flag(flag, "must be a positive time of at most 10 s"));
        }
    }
    rxsched_linux::sys::signals::install();
    json(&rxsched_linux::spin::onoff(cpu, on_ms, off_ms, duration)?)
}

/// `rxsched udp-recv`
pub fn udp_recv(port: u16, rcvbuf: u32, cpu: Option<usize>, duration: f64) -> Result<()> {
    positive("duration", duration)?;
    json(&rxsched_linux::udprecv::run(port, rcvbuf, cpu, duration)?)
}

/// `rxsched screend` (started by `route --screen`)
#[derive(Args)]
pub struct ScreendArgs {
    /// The queue's descriptors, `REGION,TO_CONSUMER,TO_PRODUCER`.
    #[arg(long)]
    pub stage: String,
    /// The rule file.
    #[arg(long)]
    pub rules: String,
    /// The router's ports, in its order.
    #[arg(long, value_delimiter = ',')]
    pub ports: Vec<String>,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// `rxsched screend`
pub fn screend(a: ScreendArgs) -> Result<()> {
    let fds = StageFds::parse(&a.stage)
        .ok_or_else(|| Error::flag("stage", format!("{:?} is not REGION,IN,OUT", a.stage)))?;
    rxsched_linux::screen::process_main(fds, &a.rules, &a.ports, a.cpu).map_err(Error::Run)
}

/// `rxsched xdp-fwd`
pub fn xdp_fwd(ports: &[String], duration: f64) -> Result<()> {
    positive("duration", duration)?;
    json(&rxsched_linux::xdpfwd::run(ports, duration)?)
}

/// `rxsched spin`
pub fn spin(cpu: Option<usize>, duration: f64) -> Result<()> {
    positive("duration", duration)?;
    rxsched_linux::sys::signals::install();
    json(&rxsched_linux::spin::spin(cpu, duration)?)
}
