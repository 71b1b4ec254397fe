//! What a flood's excess costs the DUT's receive threads, with `guard` and
//! without: `real-srp-excess`, part of `bench real srp`.
//!
//! A socket that never reads is flooded at the generator's top rate, so
//! every datagram past its first few hundred is excess: dropped by the
//! kernel at the full socket buffer (after IP and UDP), or by `guard`
//! before them (in XDP, or at tc ingress). The receive threads run flat
//! out, so their CPU time over the frames they took off the ring (the rest
//! died on it, at no CPU cost) is what one excess datagram costs. The
//! three are measured in turn, pair after pair, the order rotated each
//! time: this machine's receive work runs in two states a frame apart by
//! up to twice (the pace of `calibrate --real`), and a comparison of two
//! sweeps minutes apart would measure the state as much as the guard.

use super::proc::{start, Gen};
use super::srp::{start_guard, Receiver};
use super::{result, BenchError};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::guard::GuardReport;
use rxsched_linux::lab::{Lab, Role, D0};
use rxsched_linux::loadgen::GenReport;

/// The flooded port (nobody reads it).
const PORT: u16 = 7003;
/// Offered: above what the receive threads take, so they never idle.
const RATE: f64 = 3e6;

/// Who drops the excess: the kernel (its sockets alone), or `guard` in
/// XDP or at tc ingress.
const ORDER: [Receiver; 3] = [Receiver::Linux, Receiver::Guard, Receiver::GuardTc];

/// The series of `who`'s trials.
fn series(who: Receiver) -> String {
    format!("{}-excess", who.prefix())
}

/// The DUT's counters a trial reads around its flood.
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    napi_ns: u64,
    ring_drops: u64,
    delivered: u64,
    socket_drops: u64,
}

fn read(l: &Lab) -> Result<Reading, BenchError> {
    let napi_ns = super::srp::napi_ns(l)?;
    let (delivered, socket_drops) = super::srp::udp_counts(l)?;
    let ring_drops = l.in_netns(Role::Dut, || {
        rxsched_linux::sys::iface_counter(D0.iface, "rx_dropped")
    })?;
    Ok(Reading {
        napi_ns,
        ring_drops,
        delivered,
        socket_drops,
    })
}

/// One trial: the socket flooded for `secs` with `who` dropping.
fn trial(l: &Lab, who: Receiver, pair: usize, secs: f64) -> Result<Point, BenchError> {
    // Bound in the DUT's namespace, it stays there; never read.
    let sock = l.in_netns(Role::Dut, || {
        std::net::UdpSocket::bind(("0.0.0.0", PORT)).map_err(|source| {
            rxsched_linux::sys::SysError {
                what: format!("UDP port {PORT}"),
                syscall: "bind",
                source,
            }
        })
    })?;
    let guard = start_guard(l, who, secs)?;
    let r0 = read(l)?;
    let g = start(l, Gen::new(RATE, secs).to_port(PORT).to_dut_kernel())?.finish::<GenReport>();
    let r1 = read(l)?;
    let gr = match guard {
        Some(gd) => {
            gd.interrupt();
            Some(gd.finish::<GuardReport>()?)
        }
        None => None,
    };
    drop(sock);
    let g = g?;
    let ring = r1.ring_drops.saturating_sub(r0.ring_drops);
    let taken = g.sent.saturating_sub(ring);
    let ns = (r1.napi_ns - r0.napi_ns) as f64 / taken.max(1) as f64;
    let mut p = Point::xy("pair", pair as f64, "napi_ns_per_frame", ns);
    p.set("offered_pps", g.achieved_pps);
    p.set("arrived", g.sent as f64);
    p.set("taken", taken as f64);
    p.set(
        "napi_share",
        (r1.napi_ns - r0.napi_ns) as f64 / 1e9 / g.duration_s.max(1e-9),
    );
    let guard_drops = gr.as_ref().map_or(0, |g| g.dropped);
    let socket_drops = r1.socket_drops.saturating_sub(r0.socket_drops);
    let delivered = r1.delivered.saturating_sub(r0.delivered);
    // What the socket took before it filled: still queued, unread (UDP
    // counts a datagram in `InDatagrams` when it is read).
    p.set("delivered", delivered as f64);
    p.set(
        "queued_in_socket",
        taken.saturating_sub(guard_drops + socket_drops + delivered) as f64,
    );
    let mut drops = serde_json::Map::new();
    drops.insert("nic_rx_ring".into(), ring.into());
    drops.insert(
        rxsched_core::DropPoint::SocketBuffer.name().into(),
        socket_drops.into(),
    );
    if let Some(gr) = &gr {
        let at = match gr.hook {
            rxsched_linux::guard::Hook::Tc => "guard_at_tc",
            _ => "guard_in_xdp",
        };
        drops.insert(at.into(), guard_drops.into());
    }
    p.0.insert("drops".into(), serde_json::Value::Object(drops));
    p.set("trials", 1.0);
    Ok(p)
}

/// The trials in the order they run: pair after pair, each pair the three
/// droppers with the first of the last pair moved to its end.
fn schedule(pairs: usize) -> Vec<(usize, Receiver)> {
    (0..pairs)
        .flat_map(|pair| (0..ORDER.len()).map(move |k| (pair + 1, ORDER[(pair + k) % ORDER.len()])))
        .collect()
}

/// The three droppers, `pairs` times each, in turn.
pub fn excess(
    file: &BenchFile,
    l: &Lab,
    quick: bool,
    progress: &dyn Fn(&str),
) -> Result<ResultFile, BenchError> {
    let (pairs, secs) = if quick { (2, 1.0) } else { (5, 2.0) };
    let mut out: Vec<Series> = ORDER.iter().map(|w| Series::new(&series(*w))).collect();
    let trials = schedule(pairs);
    for (n, &(pair, who)) in trials.iter().enumerate() {
        progress(&format!(
            "[{}/{}] the flood's excess dropped by {}: pair {pair}",
            n + 1,
            trials.len(),
            series(who),
        ));
        let i = ORDER.iter().position(|w| *w == who).unwrap_or(0);
        out[i].points.push(trial(l, who, pair, secs)?);
    }
    Ok(result(file, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check file names the series measured; every dropper runs once
    /// a pair, and each leads a pair in turn.
    #[test]
    fn the_check_file_names_the_series_and_every_dropper_leads_a_pair() {
        let file = BenchFile::load("real-srp-excess").unwrap();
        let names: Vec<String> = ORDER.iter().map(|d| series(*d)).collect();
        assert_eq!(file.bench.series, names);
        let s = schedule(4);
        assert_eq!(s.len(), 12);
        for pair in 1..=4 {
            let mut in_pair: Vec<String> = s
                .iter()
                .filter(|(p, _)| *p == pair)
                .map(|(_, d)| series(*d))
                .collect();
            in_pair.sort_unstable();
            let mut all = names.clone();
            all.sort_unstable();
            assert_eq!(in_pair, all, "pair {pair}");
        }
        let leads: Vec<Receiver> = s.iter().step_by(3).map(|(_, d)| *d).collect();
        assert_eq!(leads, [ORDER[0], ORDER[1], ORDER[2], ORDER[0]]);
    }
}
