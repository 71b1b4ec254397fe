//! SRP's server with the demultiplexer in the polling thread (`serve
//! --backend packet`): the thread reads each frame's UDP destination port,
//! applies the core's buffering check against that consumer's unprocessed
//! input queue (UIQ) in shared memory, and queues the frame or drops it
//! there, before any protocol work. Each consumer is a process of its own
//! (`rxsched consume`) that does its own protocol work on what it is given.

use super::{protocol_work, ConsumerCfg, ConsumerReport, ServeConfig, ServeReport};
use super::{BAD, BATCH, BYTES, COUNTERS, CPU_NS, RECEIVED};
use crate::backend::{RxBackend, Wait};
use crate::runtime::{App, Poller};
use crate::stage::{StageFds, StageProcess, StageQueue};
use crate::sys::{self, SysResult};
use crate::wire::{EthernetFrame, Ipv4Packet, UdpPacket, ETHERTYPE_IPV4};
use rxsched_core::srp::{Check, Med, Pcb, Stage};
use rxsched_core::{Clock, DropPoint, Nanos, PollLoop};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The one stage the demultiplexer leaves from here: the link layer,
/// whose header (the UDP destination port) names the consumer's socket.
const LINK: Stage = Stage(0);

/// The early demultiplexer: UDP destination port to the consumer's UIQ,
/// through the core's [`Med`], behind the core's buffering check.
pub struct Demux {
    med: Med<u16>,
    check: Check,
    queues: Vec<Arc<StageQueue>>,
    uiq_drops: Vec<u64>,
    no_pcb: u64,
}

impl Demux {
    /// A demultiplexer over one UIQ of `uiq` frames per consumer; with
    /// `rcvbuf`, SRP's buffering check in bytes (frame + UIQ against the
    /// limit: a consumer copies each datagram out as it processes it, so its
    /// socket receive queue is empty), else the UIQ's frame slots bound it.
    pub fn new(consumers: &[ConsumerCfg], uiq: u32, rcvbuf: Option<u64>) -> SysResult<Demux> {
        let queues = consumers
            .iter()
            .map(|c| StageQueue::create(&format!("rxsched-uiq-{}", c.port), uiq, COUNTERS))
            .map(|q| q.map(Arc::new))
            .collect::<SysResult<Vec<_>>>()?;
        let mut med = Med::default();
        for (i, c) in consumers.iter().enumerate() {
            med.bind(LINK, c.port, Pcb(i as u32));
        }
        Ok(Demux {
            med,
            check: rcvbuf.map_or(Check::Channel(uiq), Check::Rcvbuf),
            uiq_drops: vec![0; queues.len()],
            queues,
            no_pcb: 0,
        })
    }

    /// The consumers' queues, in order.
    pub fn queues(&self) -> &[Arc<StageQueue>] {
        &self.queues
    }

    /// Frames each consumer's full UIQ refused.
    pub fn uiq_drops(&self) -> &[u64] {
        &self.uiq_drops
    }

    /// Frames no consumer owns.
    pub fn no_pcb(&self) -> u64 {
        self.no_pcb
    }
}

/// The UDP destination port of an intact-looking IPv4/UDP frame (the
/// demultiplexer's optimistic look: the consumer checks the rest).
fn udp_port(f: &[u8]) -> Option<u16> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != 17 || ip.fragment_offset() != 0 {
        return None;
    }
    Some(UdpPacket::new_checked(ip.payload()).ok()?.dst_port())
}

impl App for Demux {
    fn frame(&mut self, _port: usize, f: &[u8], _lp: &mut PollLoop, _now: Nanos) {
        let Some(Pcb(i)) = udp_port(f).and_then(|p| self.med.lookup(LINK, &p)) else {
            self.no_pcb += 1;
            return;
        };
        let (i, q) = (i as usize, &self.queues[i as usize]);
        let admitted = self
            .check
            .admits(f.len() as u32, q.len() as usize, q.queued_bytes(), 0);
        if !(admitted && q.push(f, usize::MAX, 0, 0)) {
            self.uiq_drops[i] += 1;
        }
    }
}

/// A consumer: takes what its UIQ holds, does the protocol work on it and
/// counts, until the server says stop (then finishes what is queued).
pub fn consume(q: &StageQueue, stop: &dyn Fn() -> bool) -> SysResult<()> {
    let mut buf = Vec::with_capacity(2048);
    loop {
        let n = q.len().min(BATCH);
        if n == 0 {
            if q.stopping() || stop() {
                return Ok(());
            }
            q.wait_for_work(100)?;
            continue;
        }
        for k in 0..n {
            let Some(s) = q.peek_at(k) else { break };
            match protocol_work(s.data, &mut buf) {
                Some(len) => {
                    q.count(RECEIVED, 1);
                    q.count(BYTES, len as u64);
                }
                None => q.count(BAD, 1),
            }
        }
        q.pop(n);
    }
}

/// The consumer process: attaches to its UIQ by the inherited descriptors,
/// runs as an ordinary process pinned to `cpu`, consumes until told to stop,
/// and leaves its CPU time in the queue's counters.
pub fn consumer_main(fds: StageFds, cpu: Option<usize>) -> Result<(), String> {
    // SAFETY: the descriptors were inherited from the server for this.
    let q = unsafe { StageQueue::attach(fds) }.map_err(|e| e.to_string())?;
    sys::signals::install();
    if let Some(c) = cpu {
        sys::pin_to_cpu(c).map_err(|e| e.to_string())?;
    }
    sys::set_normal().map_err(|e| e.to_string())?;
    let r = consume(&q, &sys::signals::stopping).map_err(|e| e.to_string());
    q.count(CPU_NS, process_cpu_ns());
    r
}

/// This process's CPU time, all threads, in ns.
fn process_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The server over a receive backend: its polling thread and consumers.
pub struct Server<R, C, W> {
    poll: Poller<R, C, W, Demux>,
}

impl<R: RxBackend, C: Clock, W: Wait> Server<R, C, W> {
    /// A server reading `rx` (a device's receive queues) into `demux`'s
    /// UIQs.
    pub fn new(rx: Vec<R>, demux: Demux, cfg: &ServeConfig, clock: C, wait: W) -> SysResult<Self> {
        let poll = cfg
            .run
            .poller(rx, cfg.run.facility(1)?, demux, clock, wait)?;
        Ok(Server { poll })
    }

    /// The polling thread (to attach the real device's gate and link
    /// watch).
    pub fn poller_mut(&mut self) -> &mut Poller<R, C, W, Demux> {
        &mut self.poll
    }

    /// Carries out one unit of work, or sleeps once. Returns true if it slept.
    pub fn turn(&mut self, deadline: rxsched_core::Nanos) -> SysResult<bool> {
        self.poll.turn(deadline)
    }

    /// The demultiplexer.
    pub fn demux(&self) -> &Demux {
        &self.poll.app
    }

    /// Runs for the configured time, printing live counters as asked.
    pub fn run(&mut self, cfg: &ServeConfig) -> SysResult<(f64, f64)> {
        let names: Vec<String> = cfg.consumers.iter().map(|c| c.name.clone()).collect();
        let mut prev: Vec<u64> = vec![0; names.len()];
        let mut last = self.poll.clock.now();
        self.poll.run_for(
            cfg.run.duration_s,
            cfg.run.stats_every_s,
            &mut |p, now| {
                let dt = now.saturating_sub(last).max(1) as f64 / 1e9;
                let parts: Vec<String> = names
                    .iter()
                    .zip(p.app.queues())
                    .zip(&mut prev)
                    .zip(p.app.uiq_drops())
                    .map(|(((n, q), pv), d)| {
                        let r = q.counter(RECEIVED);
                        let s = format!("{n} {:.0}/s (uiq drops {d})", (r - *pv) as f64 / dt);
                        *pv = r;
                        s
                    })
                    .collect();
                last = now;
                eprintln!("serve: rx {}; {}", p.taken, parts.join(", "));
            },
            &|_| false,
        )
    }

    /// The report, once the consumers have stopped (`exits` in consumer order).
    pub fn report(
        &mut self,
        cfg: &ServeConfig,
        pids: &[u32],
        exits: &[Option<i32>],
        duration_s: f64,
        cpu_s: f64,
    ) -> SysResult<ServeReport> {
        let p = &mut self.poll;
        let mut drops = BTreeMap::new();
        let (ring, sock) = p.ring_drops()?;
        drops.insert(DropPoint::NicRxRing, ring);
        if sock > 0 {
            drops.insert(DropPoint::XskRxRing, sock);
        }
        drops.insert(DropPoint::NoPcb, p.app.no_pcb());
        let to_stack = p.program_counts()?.get(1).copied().unwrap_or(0);
        let consumers = cfg
            .consumers
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let q = &p.app.queues()[i];
                let (received, bad) = (q.counter(RECEIVED), q.counter(BAD));
                ConsumerReport {
                    name: c.name.clone(),
                    port: c.port,
                    pid: pids.get(i).copied().unwrap_or(0),
                    queued: q.pushed(),
                    received,
                    bytes: q.counter(BYTES),
                    bad_checksum: bad,
                    uiq_drops: p.app.uiq_drops()[i],
                    in_flight: q.pushed().saturating_sub(received + bad),
                    cpu_s: q.counter(CPU_NS) as f64 / 1e9,
                    exit_code: exits.get(i).copied().flatten(),
                }
            })
            .collect();
        Ok(ServeReport {
            duration_s,
            rx: p.taken,
            drops,
            to_stack,
            consumers,
            cpu_s,
            demux: "polling-thread".into(),
            feedback_holds: None,
            discipline: "srp".into(),
            fault: p.fault().map(str::to_string),
        })
    }
}

/// [`super::run`] with the demultiplexer in the polling thread, the
/// consumers started first as ordinary processes.
pub(super) fn run(cfg: &ServeConfig) -> SysResult<ServeReport> {
    let demux = Demux::new(&cfg.consumers, cfg.uiq, cfg.rcvbuf)?;
    let mut procs = Vec::new();
    for q in demux.queues() {
        let mut args = vec!["consume".to_string()];
        if let Some(c) = cfg.run.cpu {
            args.extend(["--cpu".to_string(), c.to_string()]);
        }
        procs.push(StageProcess::spawn(&cfg.exe, &args, q)?);
    }
    let pids: Vec<u32> = procs.iter().map(|p| p.pid()).collect();
    let queues: Vec<Arc<StageQueue>> = demux.queues().to_vec();
    // The consumers' datagrams come to the server; the host keeps the rest.
    let udp = cfg.consumers.iter().map(|c| c.port).collect();
    let dev = cfg
        .run
        .open_one("serve", &cfg.iface, &crate::backend::Feed::Serve { udp })?;
    let mut srv = Server::new(dev.rx, demux, cfg, sys::MonoClock, dev.wait)?;
    srv.poller_mut().attach(dev.gate, dev.links)?;
    crate::runtime::take_priority(dev.prio)?;
    let how = format!(
        "demultiplexing in user space, {}",
        cfg.run.backend.sockets()
    );
    crate::runtime::listening("serve", std::slice::from_ref(&cfg.iface), &how);
    let (d, c) = srv.run(cfg)?;
    let exits: Vec<Option<i32>> = procs
        .into_iter()
        .zip(&queues)
        .map(|(p, q)| p.stop(q, Duration::from_secs(2)))
        .collect();
    srv.report(cfg, &pids, &exits, d, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::mem::{self, FakeClock, FakeWait};
    use crate::runtime::RunConfig;
    use crate::wire::UdpProbe;
    use rxsched_core::MS;

    fn frame(dport: u16, seq: u64) -> Vec<u8> {
        UdpProbe {
            frame_len: 100,
            dst_ip: [198, 18, 0, 2],
            ports: (9000, dport),
            seq,
            ..UdpProbe::default()
        }
        .to_vec()
    }

    fn cfg() -> ServeConfig {
        ServeConfig {
            run: RunConfig {
                backend: crate::runtime::Backend::Packet,
                quota: rxsched_core::Quota::Limited(8),
                duration_s: 1.0,
                ..RunConfig::default()
            },
            iface: "mem0".into(),
            consumers: vec![
                ConsumerCfg {
                    port: 7001,
                    name: "flooded".into(),
                },
                ConsumerCfg {
                    port: 7002,
                    name: "modest".into(),
                },
            ],
            uiq: 16,
            rcvbuf: None,
            exe: "rxsched".into(),
            lrp: false,
            feedback: None,
            metrics: None,
        }
    }

    /// A flooded consumer's excess dies at its own UIQ, before any work;
    /// the modest one loses nothing; frames no consumer owns are counted;
    /// a corrupted frame is refused by the consumer's checksum; and every
    /// frame taken is accounted for.
    #[test]
    fn early_demultiplexing_isolates_consumers() {
        let c = cfg();
        let (rx, feed) = mem::ring(4096);
        let clock = FakeClock::default();
        let demux = Demux::new(&c.consumers, c.uiq, c.rcvbuf).unwrap();
        let mut srv =
            Server::new(vec![rx], demux, &c, clock.clone(), FakeWait(clock.clone())).unwrap();
        let queues: Vec<_> = srv.demux().queues().to_vec();
        let mut fed = 0u64;
        for round in 0..20u64 {
            for i in 0..40 {
                feed.push(frame(7001, round * 100 + i));
                fed += 1;
            }
            let mut bad = frame(7002, round);
            if round == 7 {
                bad[14 + 10] ^= 0xff; // the IPv4 header checksum
            }
            feed.push(bad);
            feed.push(frame(5555, round));
            fed += 2;
            for _ in 0..200 {
                srv.turn(clock.now() + MS).unwrap();
            }
            // The consumers run between bursts (the modest one keeps up;
            // the flooded one takes only what its UIQ held).
            for q in &queues {
                q.stop();
                consume(q, &|| true).unwrap();
            }
        }
        let r = srv
            .report(&c, &[1, 2], &[Some(0), Some(0)], 1.0, 0.0)
            .unwrap();
        let (flood, modest) = (&r.consumers[0], &r.consumers[1]);
        assert_eq!(modest.received, 19);
        assert_eq!(modest.bad_checksum, 1);
        assert_eq!(modest.uiq_drops, 0);
        assert_eq!(flood.received, 20 * 16, "its UIQ holds 16 a burst");
        assert_eq!(flood.uiq_drops, 20 * (40 - 16));
        assert_eq!(r.drops[&DropPoint::NoPcb], 20);
        let accounted: u64 = r.drops.values().sum::<u64>()
            + r.consumers
                .iter()
                .map(|c| c.received + c.bad_checksum + c.uiq_drops + c.in_flight)
                .sum::<u64>();
        assert_eq!(r.rx, fed);
        assert_eq!(accounted, fed, "{r:?}");
    }

    /// With `rcvbuf`, SRP's buffering check counts bytes: a frame that
    /// would take the UIQ past the limit dies there, before any work, and
    /// room made by the consumer lets the next one in.
    #[test]
    fn the_buffering_check_counts_bytes_with_rcvbuf() {
        let mut c = cfg();
        let len = frame(7001, 0).len() as u64;
        c.rcvbuf = Some(3 * len);
        let mut d = Demux::new(&c.consumers, c.uiq, c.rcvbuf).unwrap();
        let mut lp = rxsched_core::PollLoop::new(c.run.facility(1).unwrap());
        for i in 0..5 {
            d.frame(0, &frame(7001, i), &mut lp, 0);
        }
        assert_eq!(d.queues()[0].len(), 3, "three frames fit in the limit");
        assert_eq!(d.uiq_drops()[0], 2);
        d.queues()[0].pop(1);
        d.frame(0, &frame(7001, 5), &mut lp, 0);
        assert_eq!((d.queues()[0].len(), d.uiq_drops()[0]), (3, 2));
        assert_eq!(
            d.queues()[1].len(),
            0,
            "the other consumer's UIQ is its own"
        );
    }

    #[test]
    fn protocol_work_checks_both_checksums() {
        let mut buf = Vec::new();
        let mut f = frame(7001, 1);
        assert_eq!(protocol_work(&f, &mut buf), Some(100 - 14 - 20 - 8));
        // A UDP checksum that does not match the payload.
        f[14 + 20 + 6] = 0x12;
        f[14 + 20 + 7] = 0x34;
        assert_eq!(protocol_work(&f, &mut buf), None);
    }
}
