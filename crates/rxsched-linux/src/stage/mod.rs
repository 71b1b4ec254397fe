//! The queue into a user-level stage (the screening process, the capture
//! writer): a bounded single-producer/single-consumer ring of frames in a
//! shared-memory region, so that the stage can be a thread or a process of
//! its own, plus the two wake-ups around it.
//!
//! - The consumer sleeps on an eventfd when the ring is empty and the
//!   producer kicks it when it queues a frame (only if it sleeps).
//! - The producer, while queue-state feedback (M3) holds its input off, may
//!   ask to be kicked when the consumer has drained the ring down to a low
//!   watermark. Mogul & Ramakrishnan's monitor had no such path (§8.2: "no
//!   direct mechanism to re-enable polling when more queue space has been
//!   made available, although perhaps there should be"); this is it.
//!
//! The region also holds counters the consumer keeps (what it accepted,
//! sent, denied by rule), which the producer reads for its report.

use crate::sys::{SysError, SysResult};
use rustix::event::{eventfd, EventfdFlags};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

/// Bytes of frame a slot holds: a 9,000-byte MTU frame with its headers.
pub const SLOT_DATA: usize = 9_216;
const SLOT_HDR: usize = 24;
const SLOT: usize = SLOT_HDR + SLOT_DATA;
const MAGIC: u64 = 0x7278_7374_6167_6531; // "rxstage1"
/// `drained_at` when the producer has not asked for a kick.
const NO_KICK: u32 = u32::MAX;

/// The start of the region. Positions count frames since creation.
#[repr(C)]
struct Header {
    magic: u64,
    capacity: u32,
    counters: u32,
    /// Frames the consumer has finished with.
    head: AtomicU64,
    /// Frames the producer has queued.
    tail: AtomicU64,
    /// Bytes on the wire of the frames the producer has queued, and of
    /// those the consumer has finished with (SRP's buffering check counts
    /// bytes).
    tail_bytes: AtomicU64,
    head_bytes: AtomicU64,
    /// The consumer is (about to be) blocked on its eventfd.
    sleeping: AtomicU32,
    /// Kick the producer once the queue holds at most this many frames.
    drained_at: AtomicU32,
    /// The producer has stopped: drain what is queued and exit.
    stop: AtomicU32,
    _pad: u32,
}

/// One queued frame as the consumer sees it.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    /// The frame's bytes (cut to what the producer kept).
    pub data: &'a [u8],
    /// Its length on the wire.
    pub orig_len: u32,
    /// The output port the producer chose (routing), or 0.
    pub port: u32,
    /// When the producer took it, ns since the Unix epoch (capture) or 0.
    pub ts_ns: u64,
}

/// The descriptors another process needs to attach to a queue.
#[derive(Debug, Clone, Copy)]
pub struct StageFds {
    /// The shared-memory region (a memfd).
    pub region: RawFd,
    /// Kicks the consumer.
    pub to_consumer: RawFd,
    /// Kicks the producer.
    pub to_producer: RawFd,
}

impl StageFds {
    /// `REGION,TO_CONSUMER,TO_PRODUCER`, as passed on a command line.
    pub fn to_arg(&self) -> String {
        format!("{},{},{}", self.region, self.to_consumer, self.to_producer)
    }

    /// Parses [`StageFds::to_arg`]'s form.
    pub fn parse(s: &str) -> Option<StageFds> {
        let v: Vec<RawFd> = s.split(',').filter_map(|x| x.parse().ok()).collect();
        match v[..] {
            [region, to_consumer, to_producer] => Some(StageFds {
                region,
                to_consumer,
                to_producer,
            }),
            _ => None,
        }
    }

    /// The three descriptors as a list.
    pub fn all(&self) -> [RawFd; 3] {
        [self.region, self.to_consumer, self.to_producer]
    }
}

/// One end of a stage queue (both ends are this type; each side uses its
/// own half of the methods).
pub struct StageQueue {
    base: *mut u8,
    len: usize,
    region: OwnedFd,
    to_consumer: OwnedFd,
    to_producer: OwnedFd,
}

// SAFETY: the region is shared memory whose header fields are atomics; a
// slot is written by the producer only while it is outside [head, tail) and
// read by the consumer only while inside, which the SeqCst positions order.
unsafe impl Send for StageQueue {}
// SAFETY: see above; each method touches only its side's slots.
unsafe impl Sync for StageQueue {}

fn err(what: &str, syscall: &'static str, e: impl Into<std::io::Error>) -> SysError {
    SysError {
        what: what.into(),
        syscall,
        source: e.into(),
    }
}

fn region_len(capacity: u32, counters: u32) -> usize {
    let hdr = std::mem::size_of::<Header>() + 8 * counters as usize;
    let hdr = hdr.div_ceil(64) * 64;
    hdr + capacity as usize * SLOT
}

impl StageQueue {
    /// A new queue of `capacity` frames with `counters` consumer counters.
    pub fn create(name: &str, capacity: u32, counters: u32) -> SysResult<StageQueue> {
        if capacity == 0 || capacity > 1 << 20 || counters > 1 << 16 {
            return Err(err(
                name,
                "configure",
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("a stage queue holds 1 to 1048576 frames, not {capacity}"),
                ),
            ));
        }
        let len = region_len(capacity, counters);
        let region = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| err(name, "memfd_create", e))?;
        rustix::fs::ftruncate(&region, len as u64).map_err(|e| err(name, "ftruncate", e))?;
        let q = StageQueue::map(name, region, len, new_eventfd(name)?, new_eventfd(name)?)?;
        let h = q.header_mut_raw();
        // SAFETY: the region is fresh and only this process maps it so far.
        unsafe {
            (*h).magic = MAGIC;
            (*h).capacity = capacity;
            (*h).counters = counters;
        }
        q.header().drained_at.store(NO_KICK, SeqCst);
        Ok(q)
    }

    /// Attaches to a queue another process created, by inherited
    /// descriptors (which this takes ownership of).
    ///
    /// # Safety
    /// The descriptors must be open, owned by nobody else in this process,
    /// and be a queue's region and eventfds.
    pub unsafe fn attach(fds: StageFds) -> SysResult<StageQueue> {
        let region = OwnedFd::from_raw_fd(fds.region);
        let to_consumer = OwnedFd::from_raw_fd(fds.to_consumer);
        let to_producer = OwnedFd::from_raw_fd(fds.to_producer);
        let st = rustix::fs::fstat(&region).map_err(|e| err("stage queue", "fstat", e))?;
        let len = st.st_size as usize;
        if len < std::mem::size_of::<Header>() {
            return Err(err(
                "stage queue",
                "attach",
                std::io::Error::new(std::io::ErrorKind::InvalidData, "region too small"),
            ));
        }
        let q = StageQueue::map("stage queue", region, len, to_consumer, to_producer)?;
        let h = q.header();
        if h.magic != MAGIC || region_len(h.capacity, h.counters) != len {
            return Err(err(
                "stage queue",
                "attach",
                std::io::Error::new(std::io::ErrorKind::InvalidData, "not a stage queue"),
            ));
        }
        Ok(q)
    }

    fn map(
        name: &str,
        region: OwnedFd,
        len: usize,
        to_consumer: OwnedFd,
        to_producer: OwnedFd,
    ) -> SysResult<StageQueue> {
        // SAFETY: a fresh shared mapping of the whole region.
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &region,
                0,
            )
        }
        .map_err(|e| err(name, "mmap", e))? as *mut u8;
        Ok(StageQueue {
            base,
            len,
            region,
            to_consumer,
            to_producer,
        })
    }

    fn header_mut_raw(&self) -> *mut Header {
        self.base as *mut Header
    }

    fn header(&self) -> &Header {
        // SAFETY: the region starts with a Header and lives as long as self.
        unsafe { &*(self.base as *const Header) }
    }

    fn counter_cell(&self, i: usize) -> &AtomicU64 {
        assert!(
            i < self.header().counters as usize,
            "counter {i} out of range"
        );
        // SAFETY: counters follow the header, 8-byte aligned, within the region.
        unsafe {
            &*(self
                .base
                .add(std::mem::size_of::<Header>() + 8 * i)
                .cast::<AtomicU64>())
        }
    }

    fn slot_ptr(&self, pos: u64) -> *mut u8 {
        let h = self.header();
        let i = (pos % h.capacity as u64) as usize;
        let first = region_len(0, h.counters);
        // SAFETY: slot i lies within the region (its length was checked).
        unsafe { self.base.add(first + i * SLOT) }
    }

    /// The descriptors to hand to another process.
    pub fn fds(&self) -> StageFds {
        StageFds {
            region: self.region.as_raw_fd(),
            to_consumer: self.to_consumer.as_raw_fd(),
            to_producer: self.to_producer.as_raw_fd(),
        }
    }

    /// Frames the queue holds at most.
    pub fn capacity(&self) -> u32 {
        self.header().capacity
    }

    /// Consumer counters the region holds.
    pub fn counters(&self) -> u32 {
        self.header().counters
    }

    /// Frames queued now.
    pub fn len(&self) -> u32 {
        let h = self.header();
        h.tail.load(SeqCst).saturating_sub(h.head.load(SeqCst)) as u32
    }

    /// Bytes (frames' lengths on the wire) queued now.
    pub fn queued_bytes(&self) -> u64 {
        let h = self.header();
        let head = h.head_bytes.load(SeqCst);
        h.tail_bytes.load(SeqCst).saturating_sub(head)
    }

    /// Frames queued since the queue was made.
    pub fn pushed(&self) -> u64 {
        self.header().tail.load(SeqCst)
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // ---- producer side ----

    /// Queues a frame (cut to [`SLOT_DATA`] bytes, or to `keep`), for output
    /// `port`; false if the queue is full. Kicks a sleeping consumer.
    pub fn push(&self, frame: &[u8], keep: usize, port: u32, ts_ns: u64) -> bool {
        let h = self.header();
        let tail = h.tail.load(SeqCst);
        if tail - h.head.load(SeqCst) >= h.capacity as u64 {
            return false;
        }
        let n = frame.len().min(keep).min(SLOT_DATA);
        let p = self.slot_ptr(tail);
        // SAFETY: the slot at `tail` is outside [head, tail): the consumer
        // does not read it until `tail` moves past it below.
        unsafe {
            p.cast::<u32>().write(n as u32);
            p.add(4).cast::<u32>().write(frame.len() as u32);
            p.add(8).cast::<u32>().write(port);
            p.add(16).cast::<u64>().write(ts_ns);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), p.add(SLOT_HDR), n);
        }
        h.tail_bytes.fetch_add(frame.len() as u64, SeqCst);
        h.tail.store(tail + 1, SeqCst);
        // One kick per sleep: a consumer woken but not yet running (this
        // thread may outrank it on its CPU) needs no second one.
        if h.sleeping.swap(0, SeqCst) != 0 {
            kick(&self.to_consumer);
        }
        true
    }

    /// Asks to be kicked (readable [`StageQueue::producer_fd`]) once the
    /// queue holds at most `level` frames; if it already does, kicks now.
    pub fn kick_when_drained_to(&self, level: u32) {
        self.header().drained_at.store(level, SeqCst);
        if self.len() <= level && self.take_kick_request(level) {
            kick(&self.to_producer);
        }
    }

    /// Withdraws a request to be kicked.
    pub fn no_kick(&self) {
        self.header().drained_at.store(NO_KICK, SeqCst);
    }

    /// The descriptor that becomes readable when the consumer kicks.
    pub fn producer_fd(&self) -> RawFd {
        self.to_producer.as_raw_fd()
    }

    /// Consumes a kick; true if there was one.
    pub fn take_producer_kick(&self) -> bool {
        take_kick(&self.to_producer)
    }

    /// Whether a kick waits (without consuming it).
    pub fn producer_kicked(&self) -> bool {
        readable(self.to_producer.as_fd())
    }

    /// Tells the consumer to drain what is queued and stop.
    pub fn stop(&self) {
        self.header().stop.store(1, SeqCst);
        kick(&self.to_consumer);
    }

    /// A consumer counter.
    pub fn counter(&self, i: usize) -> u64 {
        self.counter_cell(i).load(SeqCst)
    }

    // ---- consumer side ----

    /// The oldest queued frame, without removing it.
    pub fn peek(&self) -> Option<Slot<'_>> {
        self.peek_at(0)
    }

    /// The `k`th queued frame from the oldest, without removing it.
    pub fn peek_at(&self, k: u32) -> Option<Slot<'_>> {
        let h = self.header();
        let pos = h.head.load(SeqCst) + k as u64;
        if pos >= h.tail.load(SeqCst) {
            return None;
        }
        let p = self.slot_ptr(pos);
        // SAFETY: the slot is inside [head, tail), written before `tail`
        // moved past it, and not rewritten until `head` does.
        unsafe {
            let n = (p.cast::<u32>().read() as usize).min(SLOT_DATA);
            Some(Slot {
                orig_len: p.add(4).cast::<u32>().read(),
                port: p.add(8).cast::<u32>().read(),
                ts_ns: p.add(16).cast::<u64>().read(),
                data: std::slice::from_raw_parts(p.add(SLOT_HDR), n),
            })
        }
    }

    /// Removes the `n` oldest frames (after [`StageQueue::peek_at`]); kicks
    /// the producer if it asked to hear of this level.
    pub fn pop(&self, n: u32) {
        let h = self.header();
        let head = h.head.load(SeqCst);
        let n = (n as u64).min(h.tail.load(SeqCst) - head);
        let bytes: u64 = (head..head + n)
            // SAFETY: slots inside [head, tail) were written before `tail`
            // moved past them; the length is the slot's second word.
            .map(|pos| unsafe { self.slot_ptr(pos).add(4).cast::<u32>().read() } as u64)
            .sum();
        h.head_bytes.fetch_add(bytes, SeqCst);
        h.head.fetch_add(n, SeqCst);
        let want = h.drained_at.load(SeqCst);
        if want != NO_KICK && self.len() <= want && self.take_kick_request(want) {
            kick(&self.to_producer);
        }
    }

    fn take_kick_request(&self, want: u32) -> bool {
        self.header()
            .drained_at
            .compare_exchange(want, NO_KICK, SeqCst, SeqCst)
            .is_ok()
    }

    /// Whether the producer has said stop.
    pub fn stopping(&self) -> bool {
        self.header().stop.load(SeqCst) != 0
    }

    /// Blocks until a frame is queued, the producer says stop, or
    /// `timeout_ms` passes.
    pub fn wait_for_work(&self, timeout_ms: i32) -> SysResult<()> {
        let h = self.header();
        h.sleeping.store(1, SeqCst);
        if self.is_empty() && !self.stopping() {
            crate::sys::poll_fds(&[self.to_consumer.as_raw_fd()], libc::POLLIN, timeout_ms)?;
        }
        h.sleeping.store(0, SeqCst);
        take_kick(&self.to_consumer);
        Ok(())
    }

    /// Adds to a consumer counter.
    pub fn count(&self, i: usize, n: u64) {
        self.counter_cell(i).fetch_add(n, SeqCst);
    }
}

impl Drop for StageQueue {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `map`; nothing borrows it now.
        unsafe {
            let _ = munmap(self.base.cast(), self.len);
        }
    }
}

fn new_eventfd(name: &str) -> SysResult<OwnedFd> {
    eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(|e| err(name, "eventfd", e))
}

fn kick(fd: &OwnedFd) {
    // A full counter (2^64 - 2 kicks unread) cannot happen; a failed write
    // only delays the other side until its timeout.
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

fn take_kick(fd: &OwnedFd) -> bool {
    let mut b = [0u8; 8];
    matches!(rustix::io::read(fd, &mut b), Ok(8))
}

fn readable(fd: BorrowedFd<'_>) -> bool {
    crate::sys::poll_fds(&[fd.as_raw_fd()], libc::POLLIN, 0)
        .map(|v| v[0])
        .unwrap_or(false)
}

mod process;
pub use process::StageProcess;

#[cfg(test)]
mod tests;
