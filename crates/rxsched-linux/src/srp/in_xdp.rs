//! SRP's early demultiplexing in the device's program (`serve` on the xdp
//! backend). `bpf/serve.bpf.c` redirects each datagram into an AF_XDP
//! socket of the consumer that owns its UDP port, one per consumer on
//! every receive queue, all of a queue's sockets sharing its UMEM
//! ([`crate::backend::xdp::shared`]). No thread of the server touches a
//! frame before its consumer does: a flooded consumer's excess dies when
//! its own ring is full, in the device's receive work and before any copy,
//! and each consumer's protocol work is done by its own thread, charged to
//! it.
//!
//! The polling thread keeps the policy over the receive work, as it does
//! for a router that forwards in XDP ([`crate::backend::in_xdp`]): the
//! devices' NAPI threads run as it schedules them, and with M4 their CPU
//! time and wake-ups are charged to it.
//!
//! Two disciplines for the consumers: SRP's (woken by its socket, it does
//! the protocol work on all that is queued, a batch at a time) and LRP's
//! (`lrp`: the socket's ring is the consumer's NI channel of `uiq` frames,
//! and the protocol work on a datagram is done in the receive call that
//! takes it, one datagram per call).

use super::feedback::{self, Kick, Marks};
use super::{protocol_work, ConsumerReport, ServeConfig, ServeReport, BATCH};
use crate::backend::in_xdp::{self, InXdp};
use crate::backend::xdp::{napi_sched, rx_queues, shared};
use crate::backend::{Feed, RxBackend, Servicing};
use crate::bpf::Object;
use crate::links::LinkWatch;
use crate::runtime::{App, Poller};
use crate::sys::{self, SysError, SysResult};
use rxsched_core::{DropPoint, Nanos, PollLoop};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What a consumer thread has done so far.
#[derive(Default)]
struct Tally {
    received: AtomicU64,
    bytes: AtomicU64,
    bad: AtomicU64,
    cpu_ns: AtomicU64,
    tid: AtomicU64,
    /// Its channels' drops and queued frames, as it last looked (every
    /// [`LOOK_NS`] and at the end), for `--metrics`.
    drops: AtomicU64,
    queued: AtomicU64,
}

/// How often a consumer thread notes its channels' drops and levels.
const LOOK_NS: u64 = 200_000_000;

impl Tally {
    /// Notes `chans`' drops, levels and this thread's CPU time.
    fn look(&self, chans: &[shared::Channel]) {
        let drops = chans.iter().map(|c| c.drops().unwrap_or(0)).sum();
        let queued = chans.iter().map(|c| u64::from(c.queued())).sum();
        self.drops.store(drops, Relaxed);
        self.queued.store(queued, Relaxed);
        self.cpu_ns.store(sys::thread_cpu_ns(), Relaxed);
    }
}

/// The polling thread's app: no frame comes its way.
struct Policy;

impl App for Policy {
    fn frame(&mut self, _port: usize, _f: &[u8], _lp: &mut PollLoop, _now: Nanos) {}
}

fn invalid(what: &str, msg: String) -> SysError {
    SysError {
        what: what.into(),
        syscall: "configure",
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, msg),
    }
}

/// How a consumer tells the feedback thread it has drained its channel on
/// a held queue.
struct Drained {
    /// Per channel: whether its queue is held, and its low mark in frames.
    held: Vec<(Arc<AtomicBool>, u32)>,
    kick: Kick,
}

/// A consumer thread: pinned as the server is, at normal priority, it
/// takes its datagrams from its sockets (one per queue) and does their
/// protocol work until told to stop, then finishes what is queued. Returns
/// its sockets, for their counts.
fn consumer(
    mut chans: Vec<shared::Channel>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    lrp: bool,
    cpu: Option<usize>,
    drained: Option<Drained>,
) -> SysResult<Vec<shared::Channel>> {
    if let Some(c) = cpu {
        sys::pin_to_cpu(c)?;
    }
    sys::set_normal()?;
    // SAFETY: gettid has no preconditions.
    tally.tid.store(unsafe { libc::gettid() } as u64, Relaxed);
    let per_call = if lrp { 1 } else { BATCH };
    let mut buf = Vec::with_capacity(2048);
    let mut fds: Vec<libc::pollfd> = chans
        .iter()
        .map(|c| libc::pollfd {
            fd: c.fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut next_look = sys::mono_ns() + LOOK_NS;
    loop {
        let (mut got, mut ok, mut bytes) = (0, 0u64, 0u64);
        for ch in &mut chans {
            got += ch.take(per_call, &mut |f| {
                if let Some(n) = protocol_work(f, &mut buf) {
                    ok += 1;
                    bytes += n as u64;
                }
            });
        }
        tally.received.fetch_add(ok, Relaxed);
        tally.bytes.fetch_add(bytes, Relaxed);
        tally.bad.fetch_add(got as u64 - ok, Relaxed);
        if let Some(d) = &drained {
            let low = chans
                .iter()
                .zip(&d.held)
                .any(|(c, (held, low))| held.load(Relaxed) && c.queued() <= *low);
            if low {
                d.kick.kick();
            }
        }
        if sys::mono_ns() >= next_look {
            tally.look(&chans);
            next_look += LOOK_NS;
        }
        if got == 0 {
            if stop.load(Relaxed) {
                break;
            }
            // SAFETY: fds is a valid array of its length.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        }
    }
    tally.cpu_ns.store(sys::thread_cpu_ns(), Relaxed);
    Ok(chans)
}

/// Runs the server with the demultiplexer in XDP until its duration is
/// over, a stop signal arrives or the interface disappears.
pub fn run(cfg: &ServeConfig) -> SysResult<ServeReport> {
    let iface = cfg.iface.as_str();
    if cfg.rcvbuf.is_some() {
        return Err(invalid(
            iface,
            "--rcvbuf (the buffering check in bytes) needs the demultiplexer in user space: --backend packet"
                .into(),
        ));
    }
    if cfg.feedback.is_some() && cfg.run.cycle_limit.is_some() {
        return Err(invalid(
            iface,
            "--cycle-limit and the channels' feedback both schedule the receive work: give --feedback off with --cycle-limit".into(),
        ));
    }
    let ring = cfg.uiq.next_power_of_two();
    let queues = rx_queues(iface);
    let n = cfg.consumers.len();
    if Object::consumer_slot(n - 1, queues - 1).is_none() {
        return Err(invalid(
            iface,
            format!("{n} consumers on {queues} queues: the program has room for 16 consumers on 64 queues"),
        ));
    }
    let mut chans: Vec<Vec<shared::Channel>> = (0..n).map(|_| Vec::new()).collect();
    for q in 0..queues {
        for (c, ch) in shared::open(iface, q, n, ring)?.into_iter().enumerate() {
            chans[c].push(ch);
        }
    }
    let udp = cfg.consumers.iter().map(|c| c.port).collect();
    let rx = InXdp::open_with(iface, &Feed::Serve { udp }, |o| {
        for (c, socks) in chans.iter().enumerate() {
            for (q, ch) in socks.iter().enumerate() {
                let slot = Object::consumer_slot(c, q as u32).expect("checked above");
                o.set_xsk("xsks", slot, ch.fd())?;
            }
        }
        Ok(())
    })?;
    let ifaces = [cfg.iface.clone()];
    let (gate, prio) = in_xdp::gate(&ifaces, Servicing::Polling)?;
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(feedback::Counts::default());
    let (held, fb) = match cfg.feedback {
        Some((high, low)) => {
            let (held, fb) = start_feedback(
                iface,
                &chans,
                Marks { high, low },
                prio,
                cfg,
                &stop,
                &counts,
            )?;
            (held, Some(fb))
        }
        None => (Vec::new(), None),
    };
    let tallies: Vec<Arc<Tally>> = (0..n).map(|_| Arc::default()).collect();
    let threads: Vec<_> = chans
        .into_iter()
        .zip(&tallies)
        .zip(&cfg.consumers)
        .map(|((ch, t), c)| {
            let (t, stop, lrp, cpu) = (t.clone(), stop.clone(), cfg.lrp, cfg.run.cpu);
            let drained = fb.as_ref().map(|(kick, marks, _)| Drained {
                held: held
                    .iter()
                    .zip(&ch)
                    .map(|(h, c): (&Arc<AtomicBool>, &shared::Channel)| {
                        (h.clone(), marks.low_frames(c.level().size()))
                    })
                    .collect(),
                kick: kick.clone(),
            });
            std::thread::Builder::new()
                .name(format!("consumer-{}", c.port))
                .spawn(move || consumer(ch, t, stop, lrp, cpu, drained))
                .map_err(|e| SysError {
                    what: c.name.clone(),
                    syscall: "clone",
                    source: e,
                })
        })
        .collect::<SysResult<_>>()?;
    let mut poll = cfg.run.poller(
        vec![rx],
        cfg.run.facility(1)?,
        Policy,
        sys::MonoClock,
        crate::backend::packet::EpollWait::new()?,
    )?;
    poll.attach(gate, LinkWatch::new("serve", &ifaces, sys::mono_ns())?)?;
    crate::runtime::take_priority(prio)?;
    crate::runtime::listening("serve", &ifaces, "demultiplexing in XDP");
    let names: Vec<&str> = cfg.consumers.iter().map(|c| c.name.as_str()).collect();
    let mut prev = vec![0u64; n];
    let mut last = sys::mono_ns();
    let mut cadence =
        crate::metrics::Cadence::new(cfg.run.stats_every_s, cfg.metrics.is_some(), last);
    let (duration_s, cpu_s) = poll.run_for(
        cfg.run.duration_s,
        cadence.every_s(),
        &mut |p, now| {
            if let Some(m) = &cfg.metrics {
                let looked: Vec<(u64, u64)> = tallies
                    .iter()
                    .map(|t| (t.drops.load(Relaxed), t.queued.load(Relaxed)))
                    .collect();
                let cpu_s = sys::thread_cpu_ns() as f64 / 1e9;
                if let Ok(r) = report(cfg, p, &tallies, &looked, &[], 0.0, cpu_s) {
                    m.publish(crate::metrics::serve_page(&r, &cfg.iface));
                }
            }
            if !cadence.line_due(now) {
                return;
            }
            let dt = now.saturating_sub(last).max(1) as f64 / 1e9;
            let parts: Vec<String> = names
                .iter()
                .zip(&tallies)
                .zip(&mut prev)
                .map(|((name, t), p)| {
                    let r = t.received.load(Relaxed);
                    let s = format!("{name} {:.0}/s", (r - *p) as f64 / dt);
                    *p = r;
                    s
                })
                .collect();
            last = now;
            eprintln!("serve: {}", parts.join(", "));
        },
        &|_| false,
    )?;
    stop.store(true, Relaxed);
    if let Some((_, _, t)) = fb {
        match t.join() {
            Ok(r) => r?,
            Err(_) => return Err(invalid(iface, "the feedback thread panicked".into())),
        }
    }
    let mut exits = Vec::new();
    let mut socks = Vec::new();
    for t in threads {
        match t.join() {
            Ok(Ok(ch)) => {
                exits.push(Some(0));
                socks.push(ch);
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                exits.push(None);
                socks.push(Vec::new());
            }
        }
    }
    let looked: Vec<(u64, u64)> = socks
        .iter()
        .map(|chans| {
            let drops = chans.iter().map(|c| c.drops()).sum::<SysResult<u64>>()?;
            let queued = chans.iter().map(|c| u64::from(c.queued())).sum();
            Ok((drops, queued))
        })
        .collect::<SysResult<_>>()?;
    let mut r = report(cfg, &mut poll, &tallies, &looked, &exits, duration_s, cpu_s)?;
    if cfg.feedback.is_some() {
        r.feedback_holds = Some(counts.holds.load(Relaxed));
    }
    Ok(r)
}

/// The feedback thread and what it shares: each queue's held flag (in
/// queue order), the kick, the marks, and the thread.
#[allow(clippy::type_complexity)]
fn start_feedback(
    iface: &str,
    chans: &[Vec<shared::Channel>],
    marks: Marks,
    prio: Option<i32>,
    cfg: &ServeConfig,
    stop: &Arc<AtomicBool>,
    counts: &Arc<feedback::Counts>,
) -> SysResult<(
    Vec<Arc<AtomicBool>>,
    (Kick, Marks, std::thread::JoinHandle<SysResult<()>>),
)> {
    let tids = crate::napi_threads::queue_threads(iface)?;
    let nq = chans.first().map_or(0, Vec::len);
    let mut queues = Vec::new();
    for q in 0..nq {
        let tid = tids.get(q).copied().filter(|t| *t > 0).ok_or_else(|| {
            invalid(
                iface,
                format!("queue {q} has no NAPI thread: feedback needs threaded NAPI (set /sys/class/net/{iface}/threaded to 1; `rxsched lab up` does)"),
            )
        })?;
        queues.push(feedback::Queue {
            tid,
            levels: chans.iter().map(|c| c[q].level()).collect(),
            held: Arc::new(AtomicBool::new(false)),
        });
    }
    let held = queues.iter().map(|q| q.held.clone()).collect();
    let kick = Kick::new()?;
    let fb = feedback::Feedback {
        queues,
        marks,
        kick: kick.clone(),
        open: napi_sched(Servicing::Polling).0,
        prio,
        cpu: cfg.run.cpu,
    };
    let (stop, counts) = (stop.clone(), counts.clone());
    let t = std::thread::Builder::new()
        .name("feedback".into())
        .spawn(move || feedback::run(fb, stop, counts))
        .map_err(|e| SysError {
            what: "feedback".into(),
            syscall: "clone",
            source: e,
        })?;
    Ok((held, (kick, marks, t)))
}

/// The report, once the consumers have stopped: each consumer's drops are
/// its sockets' (its ring was full), the device's ring's the rest of the
/// device's drops.
fn report<C: rxsched_core::Clock, W: crate::backend::Wait>(
    cfg: &ServeConfig,
    poll: &mut Poller<InXdp, C, W, Policy>,
    tallies: &[Arc<Tally>],
    looked: &[(u64, u64)],
    exits: &[Option<i32>],
    duration_s: f64,
    cpu_s: f64,
) -> SysResult<ServeReport> {
    let mut consumers = Vec::new();
    let mut sock_drops = 0;
    for (i, c) in cfg.consumers.iter().enumerate() {
        let t = &tallies[i];
        // Each consumer's channels' drops and queued frames.
        let (drops, queued) = looked.get(i).copied().unwrap_or((0, 0));
        sock_drops += drops;
        let (received, bad) = (t.received.load(Relaxed), t.bad.load(Relaxed));
        consumers.push(ConsumerReport {
            name: c.name.clone(),
            port: c.port,
            pid: t.tid.load(Relaxed) as u32,
            queued: received + bad + queued,
            received,
            bytes: t.bytes.load(Relaxed),
            bad_checksum: bad,
            uiq_drops: drops,
            in_flight: queued,
            cpu_s: t.cpu_ns.load(Relaxed) as f64 / 1e9,
            exit_code: exits.get(i).copied().flatten(),
        });
    }
    let counts = poll.rx[0].program_counts()?;
    let device = poll.rx[0].ring_drops()?;
    let mut drops = BTreeMap::new();
    drops.insert(DropPoint::NicRxRing, device.saturating_sub(sock_drops));
    Ok(ServeReport {
        duration_s,
        rx: counts.first().copied().unwrap_or(0),
        drops,
        to_stack: counts.get(1).copied().unwrap_or(0),
        consumers,
        cpu_s,
        demux: "xdp".into(),
        feedback_holds: None,
        discipline: if cfg.lrp { "lrp" } else { "srp" }.into(),
        fault: poll.fault().map(str::to_string),
    })
}
