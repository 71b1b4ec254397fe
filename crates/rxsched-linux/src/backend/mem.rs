//! In-memory backends, a clock the test moves, and a wait that steps it:
//! the router's loops run here exactly as on real sockets, without root.
//!
//! - [`ring`]: a bounded receive ring and the [`Feed`] a test pushes frames
//!   into (a frame pushed to a full ring is dropped and counted, as a NIC does);
//! - [`sink`]: a transmit side that keeps what it is given, with a room
//!   limit the test can close to make the device "full";
//! - [`wire`]: one port's transmit side feeding another's receive ring.

use super::{RxBackend, TxBackend, Wait};
use crate::sys::SysResult;
use rxsched_core::{Clock, Nanos};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Ring {
    frames: VecDeque<Vec<u8>>,
    cap: usize,
    drops: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The receive side of an in-memory ring.
#[derive(Debug)]
pub struct MemRx(Arc<Mutex<Ring>>);

/// The handle that puts frames on an in-memory ring.
#[derive(Debug, Clone)]
pub struct Feed(Arc<Mutex<Ring>>);

/// A ring of `cap` frames and the handle that feeds it.
pub fn ring(cap: usize) -> (MemRx, Feed) {
    let r = Arc::new(Mutex::new(Ring {
        cap,
        ..Ring::default()
    }));
    (MemRx(r.clone()), Feed(r))
}

impl Feed {
    /// Puts a frame on the ring; false (and counted) if the ring is full.
    pub fn push(&self, frame: Vec<u8>) -> bool {
        let mut r = lock(&self.0);
        if r.frames.len() >= r.cap {
            r.drops += 1;
            return false;
        }
        r.frames.push_back(frame);
        true
    }

    /// Frames waiting on the ring.
    pub fn len(&self) -> usize {
        lock(&self.0).frames.len()
    }

    /// Whether the ring is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RxBackend for MemRx {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        let mut n = 0;
        while n < max {
            // Take one at a time so that `f` may feed this ring again.
            let Some(frame) = lock(&self.0).frames.pop_front() else {
                break;
            };
            n += 1;
            if !f(&frame) {
                break;
            }
        }
        n
    }

    fn pending(&self) -> bool {
        !lock(&self.0).frames.is_empty()
    }

    fn ring_drops(&mut self) -> SysResult<u64> {
        Ok(lock(&self.0).drops)
    }

    fn queued(&self) -> u64 {
        lock(&self.0).frames.len() as u64
    }
}

#[derive(Debug, Default)]
struct Sent {
    frames: Vec<Vec<u8>>,
    room: usize,
}

/// A transmit side that keeps what it sends.
#[derive(Debug)]
pub struct MemTx(Target);

#[derive(Debug)]
enum Target {
    Sink(Arc<Mutex<Sent>>),
    Ring(Feed),
}

/// What a [`sink`] was given.
#[derive(Debug, Clone)]
pub struct Sink(Arc<Mutex<Sent>>);

/// A transmit side that takes up to `room` frames (see [`Sink::set_room`]).
pub fn sink(room: usize) -> (MemTx, Sink) {
    let s = Arc::new(Mutex::new(Sent {
        frames: Vec::new(),
        room,
    }));
    (MemTx(Target::Sink(s.clone())), Sink(s))
}

/// A wire: what the transmit side sends lands on a receive ring of `cap`.
pub fn wire(cap: usize) -> (MemTx, MemRx) {
    let (rx, feed) = ring(cap);
    (MemTx(Target::Ring(feed)), rx)
}

impl Sink {
    /// Takes the frames sent so far.
    pub fn take(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.0).frames)
    }

    /// How many more frames the device takes before it is "full".
    pub fn set_room(&self, room: usize) {
        lock(&self.0).room = room;
    }
}

impl TxBackend for MemTx {
    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize> {
        match &self.0 {
            Target::Sink(s) => {
                let mut s = lock(s);
                let n = frames.len().min(s.room);
                s.room -= n;
                s.frames.extend(frames[..n].iter().map(|f| f.to_vec()));
                Ok(n)
            }
            // A wire takes every frame; the far ring drops what it cannot hold.
            Target::Ring(feed) => {
                for f in frames {
                    feed.push(f.to_vec());
                }
                Ok(frames.len())
            }
        }
    }

    fn fd(&self) -> Option<RawFd> {
        None
    }
}

/// A clock that moves only when told to. Its CPU time is its time: the
/// thread that reads it is taken to be busy throughout.
#[derive(Debug, Clone, Default)]
pub struct FakeClock(Arc<AtomicU64>);

impl FakeClock {
    /// Moves the clock on by `ns`.
    pub fn advance(&self, ns: Nanos) {
        self.0.fetch_add(ns, Ordering::Relaxed);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Nanos {
        self.0.load(Ordering::Relaxed)
    }
    fn cpu_ns(&self) -> Nanos {
        self.now()
    }
}

/// Waiting in fake time: returns at once the armed ports that have input,
/// and otherwise lets the whole timeout pass on the clock.
#[derive(Debug, Clone)]
pub struct FakeWait(pub FakeClock);

impl Wait for FakeWait {
    fn add(&mut self, _port: usize, _fd: Option<RawFd>) -> SysResult<()> {
        Ok(())
    }

    fn wait(
        &mut self,
        armed: &[bool],
        ready: &dyn Fn(usize) -> bool,
        timeout_ns: u64,
    ) -> SysResult<Vec<usize>> {
        let v: Vec<usize> = (0..armed.len())
            .filter(|i| armed[*i] && ready(*i))
            .collect();
        if v.is_empty() {
            self.0.advance(timeout_ns);
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_drops_when_full_and_sink_closes() {
        let (mut rx, feed) = ring(2);
        assert!(feed.push(vec![1]) && feed.push(vec![2]));
        assert!(!feed.push(vec![3]));
        assert_eq!(rx.ring_drops().unwrap(), 1);
        let mut got = Vec::new();
        assert_eq!(rx.recv(10, &mut |f| got.push(f[0])), 2);
        assert_eq!(got, vec![1, 2]);
        let (mut tx, sink) = sink(1);
        assert_eq!(tx.send(&[&[7], &[8]]).unwrap(), 1);
        sink.set_room(5);
        assert_eq!(tx.send(&[&[8]]).unwrap(), 1);
        assert_eq!(sink.take(), vec![vec![7], vec![8]]);
    }
}
