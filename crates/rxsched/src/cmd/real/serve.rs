//! `rxsched serve` (SRP on real frames) and its consumers (`consume`).

use super::{faulted, json, RunArgs};
use clap::Args;
use rxsched::error::{Error, Result};
use rxsched_linux::stage::StageFds;

/// `rxsched serve`
#[derive(Args)]
pub struct ServeArgs {
    /// The interface to receive on.
    #[arg(short = 'i', long = "interface")]
    pub iface: String,
    /// A consumer: `PORT` or `PORT:NAME`, its UDP destination port;
    /// repeatable (at least one).
    #[arg(long = "consumer", required = true)]
    pub consumers: Vec<String>,
    /// Each consumer's unprocessed input queue, in frames (on the xdp
    /// backend its socket's ring on each queue, rounded up to a power of
    /// two). While the feedback holds a queue its receive thread still
    /// runs for a few milliseconds at a time (an idle-class thread the
    /// scheduler picks runs to the next tick): a ring that holds that work
    /// keeps it for the consumer, where 256 entries dropped it after the
    /// work was spent.
    #[arg(long, default_value_t = 4096)]
    pub uiq: u32,
    /// SRP's buffering check in bytes: a datagram is queued only if it and
    /// the consumer's UIQ fit in this many (default: the UIQ's frame slots
    /// bound it).
    #[arg(long)]
    pub rcvbuf: Option<u64>,
    /// LRP instead of SRP (xdp backend): each consumer's socket ring is its
    /// NI channel of --uiq frames, and a datagram's protocol work is done
    /// in the receive call that takes it.
    #[arg(long)]
    pub lrp: bool,
    /// Queue-state feedback on the consumers' channels (xdp backend):
    /// `HIGH,LOW` fractions of a channel's ring at which its receive queue
    /// is held and released, or `off`.
    #[arg(long, default_value = "0.75,0.25")]
    pub feedback: String,
    /// Serve the counters in Prometheus' format at http://ADDR/metrics
    /// (as `route --metrics`; the demultiplexer in XDP).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// The runtime's flags.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `rxsched serve`
pub fn serve(a: ServeArgs) -> Result<()> {
    let run = a.run.config()?;
    if !(1..=1 << 20).contains(&a.uiq) {
        return Err(Error::flag("uiq", "must be from 1 to 1048576 frames"));
    }
    if a.rcvbuf.is_some_and(|b| !(64..=1 << 30).contains(&b)) {
        return Err(Error::flag("rcvbuf", "must be from 64 bytes to 1 GiB"));
    }
    let mut consumers = Vec::new();
    for c in &a.consumers {
        let (port, name) = match c.split_once(':') {
            Some((p, n)) => (p, n.to_string()),
            None => (c.as_str(), format!("port-{c}")),
        };
        let port: u16 = port.parse().ok().filter(|p| *p > 0).ok_or_else(|| {
            Error::flag(
                "consumer",
                format!("{c:?}: {port:?} is not a UDP port 1-65535"),
            )
        })?;
        if consumers
            .iter()
            .any(|x: &rxsched_linux::srp::ConsumerCfg| x.port == port)
        {
            return Err(Error::flag(
                "consumer",
                format!("port {port} is given twice"),
            ));
        }
        consumers.push(rxsched_linux::srp::ConsumerCfg { port, name });
    }
    let exporter = super::metrics("serve", a.metrics)?;
    let cfg = rxsched_linux::srp::ServeConfig {
        metrics: exporter.as_ref().map(|e| e.publisher()),
        run,
        iface: a.iface,
        consumers,
        uiq: a.uiq,
        rcvbuf: a.rcvbuf,
        lrp: a.lrp,
        feedback: match a.feedback.as_str() {
            "off" => None,
            f => Some(super::route::feedback(f)?),
        },
        exe: std::env::current_exe()
            .map_err(|e| Error::Run(format!("cannot find own executable: {e}")))?,
    };
    let r = rxsched_linux::srp::run(&cfg)?;
    drop(exporter);
    json(&r)?;
    faulted(r.fault)
}

/// `rxsched consume` (started by `serve`)
pub fn consume(stage: &str, cpu: Option<usize>) -> Result<()> {
    let fds = StageFds::parse(stage)
        .ok_or_else(|| Error::flag("stage", format!("{stage:?} is not REGION,IN,OUT")))?;
    rxsched_linux::srp::consumer_main(fds, cpu).map_err(Error::Run)
}
