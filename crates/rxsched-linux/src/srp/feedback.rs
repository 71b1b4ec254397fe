//! Queue-state feedback (M3) for SRP's channels, queue by queue. With the
//! demultiplexer in XDP, a flooded consumer's excess dies when its ring is
//! full, but only after the device's receive work on it: on veth that
//! work costs several times the consumer's protocol work, so a flood that
//! keeps the ring full takes the CPU from the consumer it floods. Here a
//! thread watches every channel's ring: when one on a receive queue is
//! above `high` of its size, that queue's NAPI thread is put at
//! `SCHED_IDLE` (its frames then die on the device's ring, before any
//! work), and when every channel on the queue is at or below `low` it gets
//! its priority back. Each consumer kicks the thread as soon as it has
//! drained its ring to `low`, so input resumes without waiting for a look.
//!
//! Isolation between consumers follows the queues: consumers whose
//! datagrams share a queue with a flood lose frames with it while the
//! queue is held; a consumer that must not be disturbed gets a queue of its
//! own (the NIC's flow steering; in the lab, the sending CPU picks it).

use crate::backend::xdp::shared::Level;
use crate::napi_threads::{set_sched, Sched};
use crate::sys::{self, SysError, SysResult};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// How often the thread looks while a queue has been held in the last
/// second (a 256-frame ring fills in about 250 µs at 1 Mpps).
const LOOK_HOT_NS: i32 = 100_000;
/// How often it looks otherwise.
const LOOK_COLD_MS: i32 = 10;

/// One receive queue under feedback: its NAPI thread and its channels.
pub struct Queue {
    /// The queue's NAPI thread.
    pub tid: i32,
    /// Each consumer's channel on it.
    pub levels: Vec<Level>,
    /// Whether the queue is held (read by its consumers, to kick).
    pub held: Arc<AtomicBool>,
}

/// What a consumer needs to kick the thread.
#[derive(Clone)]
pub struct Kick {
    fd: Arc<OwnedFd>,
}

impl Kick {
    /// A kick.
    pub fn new() -> SysResult<Kick> {
        let fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| SysError {
            what: "feedback".into(),
            syscall: "eventfd",
            source: e.into(),
        })?;
        Ok(Kick { fd: Arc::new(fd) })
    }

    /// Wakes the thread.
    pub fn kick(&self) {
        let _ = rustix::io::write(&*self.fd, &1u64.to_ne_bytes());
    }
}

/// The thresholds, as fractions of a channel's ring.
#[derive(Debug, Clone, Copy)]
pub struct Marks {
    /// Hold the queue when a channel on it is above this.
    pub high: f64,
    /// Release it when every channel on it is at or below this.
    pub low: f64,
}

impl Marks {
    /// The low mark of a ring of `size` frames, in frames.
    pub fn low_frames(&self, size: u32) -> u32 {
        (self.low * size as f64) as u32
    }

    fn high_frames(&self, size: u32) -> u32 {
        ((self.high * size as f64) as u32).max(1)
    }
}

/// What the thread did.
#[derive(Debug, Default)]
pub struct Counts {
    /// Times a queue was held.
    pub holds: AtomicU64,
    /// Times the thread looked.
    pub looks: AtomicU64,
}

/// The feedback thread's work.
pub struct Feedback {
    /// The queues it watches.
    pub queues: Vec<Queue>,
    /// Its marks.
    pub marks: Marks,
    /// What wakes it.
    pub kick: Kick,
    /// How a released queue's NAPI thread runs.
    pub open: Sched,
    /// Its real-time priority (above the NAPI threads').
    pub prio: Option<i32>,
    /// Its CPU.
    pub cpu: Option<usize>,
}

/// The feedback thread's loop, until `stop`; queues are released as it
/// leaves.
pub fn run(fb: Feedback, stop: Arc<AtomicBool>, counts: Arc<Counts>) -> SysResult<()> {
    let Feedback {
        queues,
        marks,
        kick,
        open,
        prio,
        cpu,
    } = fb;
    if let Some(c) = cpu {
        sys::pin_to_cpu(c)?;
    }
    crate::runtime::take_priority(prio)?;
    let mut last_hold: Option<u64> = None;
    let result = (|| -> SysResult<()> {
        while !stop.load(Relaxed) {
            counts.looks.fetch_add(1, Relaxed);
            let now = sys::mono_ns();
            for q in &queues {
                let held = q.held.load(Relaxed);
                if !held
                    && q.levels
                        .iter()
                        .any(|l| l.frames() >= marks.high_frames(l.size()))
                {
                    set_sched(q.tid, Sched::Idle)?;
                    q.held.store(true, Relaxed);
                    counts.holds.fetch_add(1, Relaxed);
                    last_hold = Some(now);
                } else if held
                    && q.levels
                        .iter()
                        .all(|l| l.frames() <= marks.low_frames(l.size()))
                {
                    set_sched(q.tid, open)?;
                    q.held.store(false, Relaxed);
                }
            }
            let hot = last_hold.is_some_and(|t| now.saturating_sub(t) < 1_000_000_000);
            let mut pfd = libc::pollfd {
                fd: kick.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: if hot {
                    LOOK_HOT_NS as libc::c_long
                } else {
                    LOOK_COLD_MS as libc::c_long * 1_000_000
                },
            };
            // SAFETY: one valid pollfd, a valid timeout, no signal mask.
            unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
            let mut b = [0u8; 8];
            let _ = rustix::io::read(&*kick.fd, &mut b);
        }
        Ok(())
    })();
    for q in &queues {
        let _ = set_sched(q.tid, open);
        q.held.store(false, Relaxed);
    }
    result
}
