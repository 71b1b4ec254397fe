//! The XDP engine. The generator runs `bpf/gen.bpf.c` with
//! BPF_PROG_TEST_RUN in live-frames mode: one long call in which the
//! program paces, stamps and transmits every frame out of the interface,
//! ended by a signal. The sink attaches `bpf/sink.bpf.c` at tc ingress,
//! which counts and checks every probe where it arrives, and reads its maps
//! at the end.

use super::{template, GenConfig, GenReport, LatencyUs, SinkConfig, SinkReport};
use crate::bpf::{run_live, Object, GEN, SINK};
use crate::sys::{self, mono_ns, SysError, SysResult};
use crate::wire::Mac;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

// The generator stays in the normal scheduling class. At a real-time
// priority it would use 95% of its CPU and meet the kernel's real-time
// throttling, which then stops every real-time thread on that CPU for the
// rest of the second, the sink's receive thread included (its ring
// overflows). The sink's receive thread is real-time and preempts it.
/// Kernel batch of the live-frames run (16 or more loses nothing to
/// per-batch overhead on this kernel).
const BATCH: u32 = 64;
/// A deficit beyond this is forgiven instead of sent in a burst that would
/// overflow the receiver's ring.
const MAX_LAG_NS: u64 = 100_000;

/// `struct gen_cfg` of `bpf/gen.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct GenState {
    interval_fp: u64,
    max_lag_fp: u64,
    limit: u64,
    next_fp: u64,
    sent: u64,
    first_ns: u64,
    last_ns: u64,
    forgiven: u64,
    mix_interval_fp: u64,
    mix_next_fp: u64,
    mix_sent: u64,
}

// SAFETY: plain integers, no padding.
unsafe impl aya::Pod for GenState {}

/// The 42-byte header template of `bpf/gen.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Header([u8; 42]);

// SAFETY: plain bytes.
unsafe impl aya::Pod for Header {}

/// Sends `cfg`'s frames from an XDP program; see the module doc.
pub fn generate(cfg: &GenConfig) -> SysResult<GenReport> {
    if let Some(c) = cfg.cpu {
        sys::pin_to_cpu(c)?;
    }
    let src_mac = match cfg.src_mac {
        Some(m) => m,
        None => sys::mac_of(&cfg.iface)?,
    };
    let frame = template(cfg, src_mac);
    let mut hdr = [0u8; 42];
    hdr.copy_from_slice(&frame[..42]);
    let mut obj = Object::load(GEN, "generator")?;
    let prog = obj.prog_fd("xdp_gen")?;
    obj.set("gen_hdr", 0, Header(hdr))?;
    let interval_fp = |rate: f64| ((1e9 / rate * 1024.0).round() as u64).max(1);
    let mut mix_interval_fp = 0;
    if let Some((port, rate)) = cfg.mix {
        let mixed = template(
            &GenConfig {
                dst_port: port,
                ..cfg.clone()
            },
            src_mac,
        );
        hdr.copy_from_slice(&mixed[..42]);
        obj.set("gen_hdr", 1, Header(hdr))?;
        mix_interval_fp = interval_fp(rate);
    }
    obj.set(
        "gen_cfg",
        0,
        GenState {
            interval_fp: interval_fp(cfg.rate_pps),
            max_lag_fp: MAX_LAG_NS << 10,
            limit: cfg.count,
            mix_interval_fp,
            ..GenState::default()
        },
    )?;
    let ifindex = sys::ifindex(&cfg.iface)? as u32;
    sys::signals::install_wake();
    let stop = Arc::new(AtomicBool::new(false));
    let runner = {
        let stop = stop.clone();
        std::thread::spawn(move || -> std::io::Result<()> {
            while !stop.load(Ordering::Relaxed) {
                match run_live(prog, &frame, ifindex, u32::MAX, BATCH) {
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    r => r?,
                }
            }
            Ok(())
        })
    };
    let end = mono_ns() + (cfg.duration_s * 1e9) as u64;
    while mono_ns() < end && !sys::signals::stopping() && !runner.is_finished() {
        std::thread::sleep(Duration::from_millis(10));
        if cfg.count > 0 && obj.get::<GenState>("gen_cfg", 0)?.sent >= cfg.count {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    while !runner.is_finished() {
        sys::signals::wake(&runner);
        std::thread::sleep(Duration::from_millis(1));
    }
    runner
        .join()
        .expect("the generator thread does not panic")
        .map_err(|e| SysError {
            what: cfg.iface.clone(),
            syscall: "bpf(BPF_PROG_TEST_RUN, XDP live frames)",
            source: e,
        })?;
    let st: GenState = obj.get("gen_cfg", 0)?;
    let duration_s = (st.last_ns.saturating_sub(st.first_ns)).max(1) as f64 / 1e9;
    Ok(GenReport {
        engine: super::Engine::Xdp,
        sent: st.sent,
        duration_s,
        requested_pps: cfg.rate_pps,
        achieved_pps: st.sent.saturating_sub(1) as f64 / duration_s,
        waits: st.forgiven,
        mix_sent: cfg.mix.map(|_| st.mix_sent),
    })
}

/// `struct sink_state` of `bpf/sink.bpf.c`: one per CPU.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct SinkState {
    probes: u64,
    other: u64,
    reordered: u64,
    bad_csum: u64,
    bytes: u64,
    next_seq: u64,
    ttl_min: u64,
    ttl_max: u64,
    first_ns: u64,
    last_ns: u64,
    timed: u64,
    /// Latency histogram (see `lat_bucket` in the program).
    lat: [u64; LAT_BUCKETS as usize],
}

// SAFETY: plain integers, no padding.
unsafe impl aya::Pod for SinkState {}

impl SinkState {
    /// The CPUs' states combined.
    fn combine(cpus: &[SinkState]) -> SinkState {
        let sum = |f: fn(&SinkState) -> u64| cpus.iter().map(f).sum();
        let max = |f: fn(&SinkState) -> u64| cpus.iter().map(f).max().unwrap_or(0);
        SinkState {
            probes: sum(|s| s.probes),
            other: sum(|s| s.other),
            reordered: sum(|s| s.reordered),
            bad_csum: sum(|s| s.bad_csum),
            bytes: sum(|s| s.bytes),
            next_seq: max(|s| s.next_seq),
            ttl_min: max(|s| s.ttl_min),
            ttl_max: max(|s| s.ttl_max),
            first_ns: cpus
                .iter()
                .map(|s| s.first_ns)
                .filter(|v| *v > 0)
                .min()
                .unwrap_or(0),
            last_ns: max(|s| s.last_ns),
            timed: sum(|s| s.timed),
            lat: std::array::from_fn(|i| cpus.iter().map(|s| s.lat[i]).sum()),
        }
    }

    fn read(obj: &mut Object) -> SysResult<SinkState> {
        Ok(SinkState::combine(
            &obj.per_cpu::<SinkState>("sink_stats", 0)?,
        ))
    }
}

/// The latency histogram's shape (see `lat_bucket` in the program).
const SUB_BITS: u32 = 5;
const LAT_BUCKETS: u32 = 64 << SUB_BITS;

/// The middle of latency bucket `i`, in ns.
fn bucket_ns(i: u32) -> f64 {
    if i < 2 << SUB_BITS {
        return i as f64;
    }
    let e = (i >> SUB_BITS) + SUB_BITS - 1;
    let sub = (i & ((1 << SUB_BITS) - 1)) as u64;
    let lo = ((1u64 << SUB_BITS) + sub) << (e - SUB_BITS);
    lo as f64 + (1u64 << (e - SUB_BITS)) as f64 / 2.0
}

/// Counts the probes arriving on `cfg.iface` with an XDP program until the
/// time is up or the traffic has stopped.
pub fn sink(cfg: &SinkConfig) -> SysResult<SinkReport> {
    if let Some(c) = cfg.cpu {
        sys::pin_to_cpu(c)?;
    }
    let mut obj = Object::load(SINK, &cfg.iface)?;
    obj.set("sink_cfg", 0, cfg.latency_every.max(1) - 1)?;
    let drops0 = sys::iface_counter(&cfg.iface, "rx_dropped")?;
    // At tc ingress by default: what the router sends arrives as socket
    // buffers, and veth would copy each one to run an XDP program on it (on
    // the CPU the generator shares). Frames that arrive as XDP frames are
    // cheapest to count in XDP.
    if cfg.tc_hook {
        obj.attach_tc("tc_sink", &cfg.iface)?;
    } else {
        obj.attach("xdp_sink", &cfg.iface)?;
    }
    let hook = if cfg.tc_hook {
        "counting at tc ingress"
    } else {
        "counting in XDP"
    };
    crate::runtime::listening("sink", std::slice::from_ref(&cfg.iface), hook);
    let start = mono_ns();
    let end = start + (cfg.duration_s * 1e9) as u64;
    let (mut seen, mut last_change) = (0, start);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = mono_ns();
        let st = SinkState::read(&mut obj)?;
        let n = st.probes + st.other;
        if n != seen {
            (seen, last_change) = (n, now);
        }
        let idle = seen > 0 && now.saturating_sub(last_change) as f64 > cfg.idle_s * 1e9;
        if now >= end || idle || sys::signals::stopping() {
            break;
        }
    }
    let st = SinkState::read(&mut obj)?;
    let mut r = SinkReport {
        engine: super::Engine::Xdp,
        received: st.probes,
        other: st.other,
        reordered: st.reordered,
        bad_ip_checksum: st.bad_csum,
        max_seq: st.next_seq.saturating_sub(1),
        lost: st.next_seq.saturating_sub(st.probes),
        ttl_min: if st.ttl_min > 0 {
            (256 - st.ttl_min) as u8
        } else {
            0
        },
        ttl_max: st.ttl_max as u8,
        duration_s: st.last_ns.saturating_sub(st.first_ns) as f64 / 1e9,
        latency_samples: st.timed,
        ..SinkReport::default()
    };
    r.rate_pps = if r.duration_s > 0.0 {
        r.received as f64 / r.duration_s
    } else {
        0.0
    };
    r.latency_us = latency(&st.lat);
    let mac = |o: &mut Object, i: u32| -> SysResult<String> {
        let v: u64 = o.get("sink_macs", i)?;
        let b = v.to_be_bytes();
        Ok(Mac([b[2], b[3], b[4], b[5], b[6], b[7]]).to_string())
    };
    r.dst_mac = mac(&mut obj, 0)?;
    r.src_mac = mac(&mut obj, 1)?;
    r.ring_drops = sys::iface_counter(&cfg.iface, "rx_dropped")?.saturating_sub(drops0);
    Ok(r)
}

/// Percentiles from the program's latency histogram.
fn latency(counts: &[u64]) -> LatencyUs {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return LatencyUs::default();
    }
    let at = |p: f64| {
        let rank = ((total - 1) as f64 * p).round() as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return bucket_ns(i as u32) / 1e3;
            }
        }
        0.0
    };
    LatencyUs {
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        max: at(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(probes: u64, next_seq: u64, first_ns: u64, bucket: usize) -> SinkState {
        let mut lat = [0u64; LAT_BUCKETS as usize];
        lat[bucket] = probes;
        SinkState {
            probes,
            other: 1,
            reordered: 0,
            bad_csum: 0,
            bytes: 62 * probes,
            next_seq,
            ttl_min: 256 - 63,
            ttl_max: 63,
            first_ns,
            last_ns: first_ns + 10,
            timed: probes,
            lat,
        }
    }

    /// CPUs' states add up counts, take the highest sequence number and
    /// the earliest first arrival of a CPU that saw any.
    #[test]
    fn states_of_cpus_combine() {
        let c = SinkState::combine(&[
            state(10, 40, 500, 3),
            state(0, 0, 0, 0),
            state(30, 31, 700, 9),
        ]);
        assert_eq!((c.probes, c.other, c.timed), (40, 3, 40));
        assert_eq!((c.next_seq, c.first_ns, c.last_ns), (40, 500, 710));
        assert_eq!((c.lat[3], c.lat[9]), (10, 30));
        // Percentiles from the combined histogram: p50 and p99 in bucket 9.
        let l = latency(&c.lat);
        assert_eq!((l.p50, l.p99), (bucket_ns(9) / 1e3, bucket_ns(9) / 1e3));
        assert_eq!(latency(&[0; 4]).p99, 0.0);
    }

    /// The user-space inverse of the program's bucket function: every
    /// value falls in the bucket whose middle is within 3% of it.
    #[test]
    fn buckets_invert_the_program() {
        let bucket = |ns: u64| -> u32 {
            if ns < 1 << SUB_BITS {
                return ns as u32;
            }
            let e = 63 - ns.leading_zeros();
            let idx = ((e - SUB_BITS + 1) << SUB_BITS) + ((ns >> (e - SUB_BITS)) & 31) as u32;
            idx.min(LAT_BUCKETS - 1)
        };
        for ns in [
            0u64,
            5,
            31,
            32,
            63,
            64,
            100,
            1000,
            12_345,
            999_999,
            5_000_000_000,
        ] {
            let mid = bucket_ns(bucket(ns));
            let err = (mid - ns as f64).abs() / (ns as f64).max(1.0);
            assert!(err <= 0.032, "{ns}: bucket middle {mid}");
        }
    }
}
