//! `rxsched bench real srp`: isolation between consumers on real frames.
//! One consumer is flooded at a rising offered rate while a second gets a
//! modest stream (20,000 pkts/s), both on the DUT: `rxsched serve` (SRP's
//! early demultiplexing in the device's program into one socket per
//! consumer, each consumer doing its own protocol work; and LRP's form,
//! `--lrp`) against two ordinary Linux UDP sockets (`rxsched udp-recv`),
//! whose protocol work the kernel does in its receive path for every
//! datagram before it knows whose it is, with and without `rxsched guard`
//! (the same sockets, a full one's datagrams dropped in XDP before that
//! work). One generator sends both streams,
//! the modest one's frames mixed in between the flood's as on a wire (two
//! generators on one CPU would take turns, a few milliseconds each, and
//! the modest stream would never meet the flood at the receiver's ring).

use super::proc::{start, Gen, Proc, Running};
use super::sweep::{rates, Measured, Sweep};
use super::{result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_core::DropPoint;
use rxsched_linux::guard::GuardReport;
use rxsched_linux::lab::{Lab, Role, D0};
use rxsched_linux::loadgen::GenReport;
use rxsched_linux::srp::ServeReport;
use rxsched_linux::udprecv::UdpRecvReport;
use std::time::Duration;

/// The modest consumer's offered rate.
const MODEST_PPS: f64 = 20_000.0;
/// The consumers' UDP ports.
const FLOODED: u16 = 7001;
const MODEST: u16 = 7002;

/// Who receives: SRP's server, or the kernel's sockets (guarded or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Receiver {
    Srp,
    Lrp,
    Linux,
    Guard,
    GuardTc,
}

impl Receiver {
    pub(super) fn prefix(self) -> &'static str {
        match self {
            Receiver::Srp => "srp",
            Receiver::Lrp => "lrp",
            Receiver::Linux => "linux",
            Receiver::Guard => "guard",
            Receiver::GuardTc => "guard-tc",
        }
    }
}

/// `guard` on the DUT's port for a trial of `secs`, in XDP or at tc
/// ingress as `who` says (none for the others).
pub(super) fn start_guard(
    l: &Lab,
    who: Receiver,
    secs: f64,
) -> Result<Option<Running>, BenchError> {
    let tc = match who {
        Receiver::Guard => false,
        Receiver::GuardTc => true,
        _ => return Ok(None),
    };
    Ok(Some(start(
        l,
        Proc::Guard {
            tc,
            secs: secs + 8.0,
        },
    )?))
}

/// The receive queue the modest stream is steered to when it has one of
/// its own (the lab's stand-in for a flow rule, `ethtool -N ... dst-port
/// 7002 action 1`).
const MODEST_QUEUE: u32 = 1;

/// How the modest stream reaches the DUT: mixed into the flood on one
/// ring, or on a receive queue of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Mixed,
    OwnQueue,
}

impl Path {
    /// The series' names: the receiver's prefix, and this path's.
    fn prefix(self, who: Receiver) -> String {
        match self {
            Path::Mixed => who.prefix().to_string(),
            Path::OwnQueue => format!("{}-own-queue", who.prefix()),
        }
    }
}

/// The flood and the modest stream mixed into it, from one generator on
/// the generator CPU: to the DUT kernel's own address (`to_kernel`) or to
/// the user-space receiver's MAC. Returns the flood's report and the
/// modest stream's.
fn offer(
    l: &Lab,
    rate: f64,
    secs: f64,
    to_kernel: bool,
    path: Path,
) -> Result<(GenReport, GenReport), BenchError> {
    let to = |g: Gen| {
        if to_kernel {
            g.to_dut_kernel()
        } else {
            g.to_mac(super::proc::NOBODY_MAC)
        }
    };
    if path == Path::OwnQueue {
        // The flood from the XDP engine on the generator CPU's queue (0),
        // the modest stream through the generator's stack, steered to its
        // own queue; both generators on the generator CPU.
        l.steer_gen_stack(Some(MODEST_QUEUE))?;
        let modest = start(
            l,
            to(Gen::new(MODEST_PPS, secs).to_port(MODEST).through_stack()),
        );
        let flood =
            modest.and_then(|m| Ok((start(l, to(Gen::new(rate, secs).to_port(FLOODED)))?, m)));
        let done =
            flood.and_then(|(f, m)| Ok((f.finish::<GenReport>()?, m.finish::<GenReport>()?)));
        l.steer_gen_stack(None)?;
        return done;
    }
    let g = Gen::new(rate, secs)
        .to_port(FLOODED)
        .mixed(MODEST, MODEST_PPS);
    let flood: GenReport = start(l, to(g))?.finish()?;
    let sent = flood.mix_sent.unwrap_or(0);
    let modest = GenReport {
        sent,
        requested_pps: MODEST_PPS,
        achieved_pps: sent.saturating_sub(1) as f64 / flood.duration_s.max(1e-9),
        mix_sent: None,
        ..flood.clone()
    };
    Ok((flood, modest))
}

/// One trial's two points, taken together.
struct Consumers {
    flooded: Point,
    modest: Point,
}

/// A trial is judged by the modest consumer's point, which records the trials.
impl Measured for Consumers {
    fn steal(&self) -> f64 {
        self.modest.steal()
    }

    fn set_trials(&mut self, n: usize) {
        self.modest.set_trials(n);
    }
}

/// What one trial of the two consumers saw.
/// Losses by the point that counted them.
type Named = Vec<(&'static str, u64)>;

struct Received {
    /// The flood's generator.
    flood: GenReport,
    /// The modest stream's generator.
    modest: GenReport,
    /// Datagrams each consumer took: (flooded, modest).
    got: (u64, u64),
    /// Each consumer's losses at a point its receiver counts for it
    /// (its UIQ or channel, its socket buffer, the guard's drops for its
    /// socket): (flooded, modest). The rest died where they are not told
    /// apart by consumer (the device's ring, shared by both).
    named: (Named, Named),
    /// The kernel's sockets: the DUT's receive threads' CPU time per
    /// datagram that reached UDP or was dropped by the guard, in ns.
    napi_ns_per_datagram: Option<f64>,
    /// Datagrams the guard dropped in XDP.
    guard_dropped: Option<u64>,
}

/// The UDP datagrams the DUT's stack took in so far (delivered, or
/// dropped by UDP: `InDatagrams + InErrors` of its `/proc/net/snmp`).
fn udp_in(l: &Lab) -> Result<u64, BenchError> {
    let (delivered, dropped) = udp_counts(l)?;
    Ok(delivered + dropped)
}

/// The DUT's UDP datagrams so far: delivered to a socket (`InDatagrams`)
/// and dropped by UDP, mostly at full socket buffers (`InErrors`).
pub(super) fn udp_counts(l: &Lab) -> Result<(u64, u64), BenchError> {
    Ok(l.in_netns(Role::Dut, || {
        let text = std::fs::read_to_string("/proc/thread-self/net/snmp").map_err(|e| {
            rxsched_linux::sys::SysError {
                what: "/proc/thread-self/net/snmp".into(),
                syscall: "read",
                source: e,
            }
        })?;
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("Udp: ")).collect();
        let (Some(names), Some(values)) = (rows.first(), rows.get(1)) else {
            return Ok((0, 0));
        };
        let col = |want: &str| {
            names
                .split_whitespace()
                .position(|n| n == want)
                .and_then(|i| values.split_whitespace().nth(i))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok((col("InDatagrams"), col("InErrors")))
    })?)
}

/// The CPU time the DUT's receive threads (d0's NAPI threads) used so far.
pub(super) fn napi_ns(l: &Lab) -> Result<u64, BenchError> {
    Ok(l.in_netns(Role::Dut, || {
        let mut ns = 0;
        for t in rxsched_linux::napi_threads::thread_ids(D0.iface)? {
            ns += rxsched_linux::napi_threads::cpu_ns(t)?;
        }
        Ok(ns)
    })?)
}

/// Both consumers receiving while the generators offer.
fn receive(
    l: &Lab,
    who: Receiver,
    path: Path,
    rate: f64,
    secs: f64,
) -> Result<Received, BenchError> {
    let ((flood, modest), got, named) = match who {
        Receiver::Srp | Receiver::Lrp => {
            let consumers = vec![(FLOODED, "flooded"), (MODEST, "modest")];
            let srv = start(
                l,
                Proc::Serve {
                    consumers,
                    lrp: who == Receiver::Lrp,
                    secs: secs + 8.0,
                },
            )?;
            let g = offer(l, rate, secs, false, path)?;
            std::thread::sleep(Duration::from_millis(300));
            srv.interrupt();
            let r: ServeReport = srv.finish()?;
            // Its consumers report in the order of `--consumer`.
            let got = |i: usize| r.consumers.get(i).map_or(0, |c| c.received);
            let point = if who == Receiver::Lrp {
                DropPoint::LrpChannel
            } else {
                DropPoint::Uiq
            };
            let named = |i: usize| -> Named {
                vec![(point.name(), r.consumers.get(i).map_or(0, |c| c.uiq_drops))]
            };
            (g, (got(0), got(1)), (named(0), named(1)))
        }
        Receiver::Linux | Receiver::Guard | Receiver::GuardTc => {
            let guard = start_guard(l, who, secs)?;
            let recv = |port| {
                start(
                    l,
                    Proc::UdpRecv {
                        port,
                        secs: secs + 2.0,
                    },
                )
            };
            let (a, b) = (recv(FLOODED)?, recv(MODEST)?);
            let (udp0, napi0) = (udp_in(l)?, napi_ns(l)?);
            let g = offer(l, rate, secs, true, path)?;
            let (udp1, napi1) = (udp_in(l)?, napi_ns(l)?);
            let (a, b): (UdpRecvReport, UdpRecvReport) = (a.finish()?, b.finish()?);
            let gr = match guard {
                Some(gd) => {
                    gd.interrupt();
                    Some(gd.finish::<GuardReport>()?)
                }
                None => None,
            };
            let dropped = gr.as_ref().map(|g| g.dropped);
            let named = |r: &UdpRecvReport| -> Named {
                // The guard's drops for this consumer's socket, by port.
                let port = format!(":{}", r.port);
                let guarded = gr.as_ref().map_or(0, |g| {
                    g.sockets
                        .iter()
                        .filter(|s| s.socket.ends_with(&port))
                        .map(|s| s.dropped)
                        .sum()
                });
                vec![
                    (DropPoint::SocketBuffer.name(), r.socket_drops),
                    ("guard_in_xdp", guarded),
                ]
            };
            let datagrams = (udp1 - udp0) + dropped.unwrap_or(0);
            let per = (datagrams > 0).then(|| (napi1 - napi0) as f64 / datagrams as f64);
            return Ok(Received {
                flood: g.0,
                modest: g.1,
                got: (a.received, b.received),
                named: (named(&a), named(&b)),
                napi_ns_per_datagram: per,
                guard_dropped: dropped,
            });
        }
    };
    Ok(Received {
        flood,
        modest,
        got,
        named,
        napi_ns_per_datagram: None,
        guard_dropped: None,
    })
}

/// One point for both consumers.
fn trial(
    l: &Lab,
    who: Receiver,
    path: Path,
    rate: f64,
    secs: f64,
) -> Result<Consumers, BenchError> {
    l.reset_dut_receive()?;
    let r = receive(l, who, path, rate, secs)?;
    // Both points stand at the flood's offered rate.
    let point = |gen: &GenReport, got: u64, named: &Named| {
        let (sent, got) = (gen.sent as f64, got as f64);
        let d = gen.duration_s.max(1e-9);
        let mut p = Point::xy(
            "offered_pps",
            r.flood.achieved_pps,
            "delivered_pps",
            got / d,
        );
        p.set("sent", sent);
        p.set("received", got);
        p.set("kept", if sent > 0.0 { got / sent } else { 0.0 });
        p.set("arrived", sent);
        let mut drops = serde_json::Map::new();
        let mut counted = 0.0;
        for (k, n) in named.iter().filter(|(_, n)| *n > 0) {
            drops.insert(k.to_string(), (*n as f64).into());
            counted += *n as f64;
        }
        drops.insert(
            "not_received".into(),
            (sent - got - counted).max(0.0).into(),
        );
        p.0.insert("drops".into(), serde_json::Value::Object(drops));
        if let Some(ns) = r.napi_ns_per_datagram {
            p.set("napi_ns_per_datagram", ns);
        }
        if let Some(d) = r.guard_dropped {
            p.set("guard_dropped", d as f64);
        }
        p
    };
    Ok(Consumers {
        flooded: point(&r.flood, r.got.0, &r.named.0),
        modest: point(&r.modest, r.got.1, &r.named.1),
    })
}

/// Who receives and how the modest stream arrives, series by series: every
/// receiver with the stream mixed into the flood, then SRP and Linux with
/// it on a queue of its own where the lab has one (`own_queue`), and the
/// same under guard: a shared ring drops before any program can tell whose
/// a frame is, so guard can keep a modest socket's datagrams only once
/// they arrive on a ring the flood does not fill.
fn receivers(own_queue: bool) -> Vec<(Receiver, Path)> {
    let mixed = [
        Receiver::Srp,
        Receiver::Lrp,
        Receiver::Linux,
        Receiver::Guard,
        Receiver::GuardTc,
    ]
    .map(|w| (w, Path::Mixed));
    let own = [Receiver::Srp, Receiver::Linux, Receiver::Guard].map(|w| (w, Path::OwnQueue));
    let own = if own_queue { &own[..] } else { &[] };
    mixed.iter().chain(own).copied().collect()
}

/// The reservation's TCP stream through the router is iperf3's, beside
/// onoff processes pinned to the DUT CPU.
pub const TOOLS: super::Tools = &[("iperf3", "iperf3"), super::TASKSET];

/// Runs the isolation benchmark: `real-srp`, then `real-srp-excess`,
/// `real-srp-reservation` and `real-srp-tcp`.
pub fn srp(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-srp")?;
    let excess_file = BenchFile::load("real-srp-excess")?;
    let queues = super::protect::dut_queues(&opts.lab)?;
    let l = &opts.lab.clone().with_queues(queues);
    let (rates, secs) = rates(opts.quick);
    let receivers = receivers(queues > MODEST_QUEUE);
    if queues <= MODEST_QUEUE {
        progress(&format!(
            "the modest stream on a receive queue of its own needs a lab with {} queues (rxsched lab down && rxsched lab up --queues 2): series srp-own-queue-*, linux-own-queue-* and guard-own-queue-* skipped",
            MODEST_QUEUE + 1
        ));
    }
    let mut sweep = Sweep::over_rates(receivers.len(), &rates, progress);
    let mut series = Vec::new();
    for (who, path) in receivers {
        let prefix = path.prefix(who);
        let what = format!("{prefix} with one consumer flooded");
        let points = sweep.points(&what, |r| trial(l, who, path, r, secs))?;
        let (mut flooded, mut modest) = (
            Series::new(&format!("{prefix}-flooded")),
            Series::new(&format!("{prefix}-modest")),
        );
        for c in points {
            flooded.points.push(c.flooded);
            modest.points.push(c.modest);
        }
        series.push(flooded);
        series.push(modest);
    }
    let isolation = result(&file, series);
    let mut out = vec![
        isolation,
        super::excess::excess(&excess_file, l, opts.quick, progress)?,
    ];
    out.extend(super::reservation::reservation(opts, progress)?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check files name the series these benches measure.
    #[test]
    fn the_check_files_name_the_series_measured() {
        let isolation = BenchFile::load("real-srp").unwrap();
        let measured: Vec<String> = receivers(true)
            .into_iter()
            .flat_map(|(w, p)| ["flooded", "modest"].map(|c| format!("{}-{c}", p.prefix(w))))
            .collect();
        assert_eq!(isolation.bench.series, measured);
    }
}
