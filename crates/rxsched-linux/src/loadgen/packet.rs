//! The packet engine: generation by `sendmmsg` on an AF_PACKET socket, paced
//! in user space, and a sink on an AF_PACKET ring. It works on any
//! interface, XDP or not.

use super::{GenConfig, GenReport, LatencyUs, SinkConfig, SinkReport};
use crate::backend::packet::{PacketRing, PacketTx, RingConfig};
use crate::backend::{RxBackend, TxBackend};
use crate::sys::{self, mono_ns, SysResult};
use crate::wire::parse_probe;

/// Waits shorter than this are spun, longer ones slept.
const SPIN_BELOW_NS: f64 = 20_000.0;

/// Frames per `sendmmsg`.
const BATCH: usize = 32;

/// Sends until the count or the time is reached; never longer than `duration_s`.
pub fn generate(cfg: &GenConfig) -> SysResult<GenReport> {
    if cfg.mix.is_some() {
        return Err(crate::sys::SysError {
            what: cfg.iface.clone(),
            syscall: "configure",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a mixed stream needs the xdp engine",
            ),
        });
    }
    if let Some(c) = cfg.cpu {
        sys::pin_to_cpu(c)?;
    }
    let mut tx = PacketTx::open(&cfg.iface)?;
    let src_mac = match cfg.src_mac {
        Some(m) => m,
        None => sys::mac_of(&cfg.iface)?,
    };
    let mut bufs = vec![[0u8; 2048]; BATCH];
    let t0 = mono_ns();
    let end = t0 + (cfg.duration_s * 1e9) as u64;
    let gap = if cfg.rate_pps > 0.0 {
        1e9 / cfg.rate_pps
    } else {
        f64::INFINITY
    };
    let (mut seq, mut waits) = (0u64, 0u64);
    let mut last_send = t0;
    'outer: while cfg.count == 0 || seq < cfg.count {
        // Pace: the next frame is due at t0 + seq * gap.
        let due = t0 as f64 + seq as f64 * gap;
        loop {
            let now = mono_ns();
            if now >= end {
                break 'outer;
            }
            if now as f64 >= due {
                break;
            }
            // Sleep through any gap longer than a sleep's own overshoot
            // (tens of µs): a slow stream must leave the CPU to whatever
            // shares it (another generator); a late wake-up sends what
            // has come due in one batch.
            let wait = due - now as f64;
            if wait > SPIN_BELOW_NS {
                std::thread::sleep(std::time::Duration::from_nanos(
                    (wait - SPIN_BELOW_NS / 2.0) as u64,
                ));
            } else {
                std::hint::spin_loop();
            }
        }
        // As many frames as are due now, up to a batch.
        let now = mono_ns();
        let due_now = ((now - t0) as f64 / gap).floor() as u64 + 1;
        let mut n = (due_now.saturating_sub(seq) as usize).clamp(1, BATCH);
        if cfg.count > 0 {
            n = n.min((cfg.count - seq) as usize);
        }
        let lens: Vec<usize> = (0..n)
            .map(|i| super::probe(cfg, src_mac, seq + i as u64, now).write(&mut bufs[i]))
            .collect();
        let mut done = 0;
        while done < n {
            let frames: Vec<&[u8]> = (done..n).map(|i| &bufs[i][..lens[i]]).collect();
            let k = tx.send(&frames)?;
            done += k;
            if k == 0 {
                // Back-pressure: wait for room rather than give up.
                waits += 1;
                if mono_ns() >= end {
                    break;
                }
                sys::poll_fds(&[tx.raw_fd()], libc::POLLOUT, 10)?;
            }
        }
        seq += done as u64;
        last_send = mono_ns();
    }
    let duration_s = (last_send.max(t0 + 1) - t0) as f64 / 1e9;
    Ok(GenReport {
        engine: super::Engine::Packet,
        sent: seq,
        duration_s,
        requested_pps: cfg.rate_pps,
        achieved_pps: seq as f64 / duration_s,
        waits,
        mix_sent: None,
    })
}

/// Receives until the time is up or the traffic has stopped.
pub fn sink(cfg: &SinkConfig) -> SysResult<SinkReport> {
    if let Some(c) = cfg.cpu {
        sys::pin_to_cpu(c)?;
    }
    let mut ring = PacketRing::open(
        &cfg.iface,
        RingConfig {
            block_nr: 1024,
            ..RingConfig::default()
        },
    )?;
    crate::runtime::listening("sink", std::slice::from_ref(&cfg.iface), "AF_PACKET");
    let end = mono_ns() + (cfg.duration_s * 1e9) as u64;
    let mut t = Tally::default();
    loop {
        let now = mono_ns();
        if now >= end || sys::signals::stopping() {
            break;
        }
        if t.r.received > 0 && now.saturating_sub(t.last) as f64 > cfg.idle_s * 1e9 {
            break;
        }
        sys::poll_fds(&[ring.raw_fd()], libc::POLLIN, 50)?;
        ring.recv(usize::MAX, &mut |f| t.frame(f, mono_ns()));
    }
    let mut r = t.report();
    r.ring_drops = ring.ring_drops()?;
    Ok(r)
}

/// What the sink has seen: each probe once, by its sequence number, with
/// its one-way latency; and how the router left the frames (TTL, MACs,
/// header checksum).
struct Tally {
    r: SinkReport,
    /// Sequence numbers seen, one bit each.
    seen: Vec<u64>,
    /// Three significant digits over any range: memory does not grow with
    /// the run.
    lat: hdrhistogram::Histogram<u64>,
    first: u64,
    last: u64,
    max_seen: Option<u64>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            r: SinkReport {
                engine: super::Engine::Packet,
                ..SinkReport::default()
            },
            seen: Vec::new(),
            lat: hdrhistogram::Histogram::new(3).expect("a valid precision"),
            first: 0,
            last: 0,
            max_seen: None,
        }
    }
}

impl Tally {
    /// A frame arrived at `now`.
    fn frame(&mut self, f: &[u8], now: u64) {
        let r = &mut self.r;
        let Some((seq, sent)) = parse_probe(f) else {
            r.other += 1;
            return;
        };
        if let Ok(eth) = crate::wire::EthernetFrame::new_checked(f) {
            if let Ok(ip) = crate::wire::Ipv4Packet::new_checked(eth.payload()) {
                if r.received == 0 {
                    r.ttl_min = ip.ttl();
                    r.src_mac = eth.src().to_string();
                    r.dst_mac = eth.dst().to_string();
                }
                r.ttl_min = r.ttl_min.min(ip.ttl());
                r.ttl_max = r.ttl_max.max(ip.ttl());
                if !ip.verify_checksum() {
                    r.bad_ip_checksum += 1;
                }
            }
        }
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if w >= self.seen.len() {
            if w > 1 << 26 {
                r.other += 1;
                return;
            }
            self.seen.resize(w + 1, 0);
        }
        if self.seen[w] & (1 << b) != 0 {
            r.duplicates += 1;
            return;
        }
        self.seen[w] |= 1 << b;
        r.received += 1;
        if r.received == 1 {
            self.first = now;
        }
        self.last = now;
        if self.max_seen.is_some_and(|m| seq < m) {
            r.reordered += 1;
        }
        self.max_seen = Some(self.max_seen.map_or(seq, |m| m.max(seq)));
        self.lat
            .record(now.saturating_sub(sent))
            .expect("an auto-resizing histogram takes any u64");
    }

    /// The report of what was seen (the ring's drops are the caller's).
    fn report(self) -> SinkReport {
        let mut r = self.r;
        r.max_seq = self.max_seen.unwrap_or(0);
        if let Some(m) = self.max_seen {
            r.lost = (m + 1).saturating_sub(r.received);
        }
        r.duration_s = (self.last.saturating_sub(self.first)) as f64 / 1e9;
        r.rate_pps = if r.duration_s > 0.0 {
            r.received as f64 / r.duration_s
        } else {
            0.0
        };
        let lat = &self.lat;
        if !lat.is_empty() {
            let q = |p: f64| lat.value_at_quantile(p) as f64 / 1e3;
            r.latency_us = LatencyUs {
                p50: q(0.5),
                p90: q(0.9),
                p99: q(0.99),
                max: lat.max() as f64 / 1e3,
            };
            r.latency_samples = lat.len();
        }
        r
    }
}
