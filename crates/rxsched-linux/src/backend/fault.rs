//! A middleware receive backend that damages what passes through it, as
//! smoltcp's `FaultInjector` does: frames are dropped, corrupted,
//! truncated, reordered or delayed, each with its own probability, from a
//! seeded generator so that a failing test replays exactly.

use super::RxBackend;
use crate::sys::SysResult;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

/// Probabilities of each fault, per frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// The frame vanishes (counted in [`FaultStats::dropped`]).
    pub drop: f64,
    /// One byte is flipped.
    pub corrupt: f64,
    /// The frame is cut short.
    pub truncate: f64,
    /// The frame swaps places with the next one.
    pub reorder: f64,
    /// The frame is held back for `delay_turns` receive calls.
    pub delay: f64,
    /// How long a delayed frame is held, in receive calls.
    pub delay_turns: u32,
}

/// What the injector did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Frames it dropped.
    pub dropped: u64,
    /// Frames it corrupted.
    pub corrupted: u64,
    /// Frames it truncated.
    pub truncated: u64,
    /// Frames it reordered.
    pub reordered: u64,
    /// Frames it delayed.
    pub delayed: u64,
}

/// A receive backend wrapped with faults.
pub struct FaultInjector<R> {
    inner: R,
    faults: Faults,
    rng: ChaCha8Rng,
    /// Frames held back, with the receive call they are released on.
    held: VecDeque<(u64, Vec<u8>)>,
    turn: u64,
    stats: FaultStats,
    shared: Arc<Mutex<FaultStats>>,
}

/// A handle on an injector's counts that outlives moving it into a router.
#[derive(Debug, Clone, Default)]
pub struct FaultHandle(Arc<Mutex<FaultStats>>);

impl FaultHandle {
    /// What the injector has done so far.
    pub fn stats(&self) -> FaultStats {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<R: RxBackend> FaultInjector<R> {
    /// Wraps `inner`; `seed` fixes every choice.
    pub fn new(inner: R, faults: Faults, seed: u64) -> Self {
        FaultInjector {
            inner,
            faults,
            rng: ChaCha8Rng::seed_from_u64(seed),
            held: VecDeque::new(),
            turn: 0,
            stats: FaultStats::default(),
            shared: Arc::default(),
        }
    }

    /// A handle on its counts.
    pub fn handle(&self) -> FaultHandle {
        FaultHandle(self.shared.clone())
    }

    /// What it has done so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// Frames held back now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Damages one frame; `None` if it is dropped or held back.
    fn damage(&mut self, mut frame: Vec<u8>) -> Option<Vec<u8>> {
        let f = self.faults;
        if self.rng.gen_bool(f.drop.clamp(0.0, 1.0)) {
            self.stats.dropped += 1;
            return None;
        }
        if !frame.is_empty() && self.rng.gen_bool(f.corrupt.clamp(0.0, 1.0)) {
            let i = self.rng.gen_range(0..frame.len());
            frame[i] ^= 1 << self.rng.gen_range(0..8);
            self.stats.corrupted += 1;
        }
        if !frame.is_empty() && self.rng.gen_bool(f.truncate.clamp(0.0, 1.0)) {
            let n = self.rng.gen_range(0..frame.len());
            frame.truncate(n);
            self.stats.truncated += 1;
        }
        if self.rng.gen_bool(f.reorder.clamp(0.0, 1.0)) {
            // Released after the next frame of this or a later call.
            self.held.push_back((self.turn, frame));
            self.stats.reordered += 1;
            return None;
        }
        if self.rng.gen_bool(f.delay.clamp(0.0, 1.0)) {
            self.held
                .push_back((self.turn + f.delay_turns.max(1) as u64, frame));
            self.stats.delayed += 1;
            return None;
        }
        Some(frame)
    }

    fn release(&mut self, strictly_before: bool) -> Option<Vec<u8>> {
        let turn = self.turn;
        let i = self.held.iter().position(|(t, _)| {
            if strictly_before {
                *t < turn
            } else {
                *t <= turn
            }
        })?;
        self.held.remove(i).map(|(_, f)| f)
    }
}

impl<R: RxBackend> RxBackend for FaultInjector<R> {
    fn fd(&self) -> Option<RawFd> {
        self.inner.fd()
    }

    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        self.turn += 1;
        let mut n = 0;
        let mut go = true;
        while go && n < max {
            // Frames whose time has come go first.
            if let Some(frame) = self.release(true) {
                go = f(&frame);
                n += 1;
                continue;
            }
            let mut got = None;
            if self.inner.recv(1, &mut |fr| got = Some(fr.to_vec())) == 0 {
                break;
            }
            if let Some(frame) = got.and_then(|fr| self.damage(fr)) {
                go = f(&frame);
                n += 1;
                // A reordered frame comes right after the one behind it.
                if go && n < max {
                    if let Some(held) = self.release(false) {
                        go = f(&held);
                        n += 1;
                    }
                }
            }
        }
        *self.shared.lock().unwrap_or_else(|e| e.into_inner()) = self.stats;
        n
    }

    fn pending(&self) -> bool {
        self.inner.pending() || self.held.iter().any(|(t, _)| *t <= self.turn)
    }

    fn ring_drops(&mut self) -> SysResult<u64> {
        self.inner.ring_drops()
    }

    fn queued(&self) -> u64 {
        self.inner.queued() + self.held.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::mem;

    fn drain(rx: &mut impl RxBackend) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..100 {
            rx.recv(usize::MAX, &mut |f| out.push(f.to_vec()));
        }
        out
    }

    #[test]
    fn every_frame_is_delivered_dropped_or_held() {
        let (rx, feed) = mem::ring(10_000);
        for i in 0..2000u32 {
            feed.push(i.to_be_bytes().to_vec());
        }
        let faults = Faults {
            drop: 0.1,
            reorder: 0.1,
            delay: 0.1,
            delay_turns: 3,
            ..Faults::default()
        };
        let mut fi = FaultInjector::new(rx, faults, 7);
        let out = drain(&mut fi);
        let s = fi.stats();
        assert_eq!(out.len() as u64 + s.dropped + fi.held() as u64, 2000);
        assert!(
            s.dropped > 100 && s.reordered > 100 && s.delayed > 100,
            "{s:?}"
        );
        let in_order = out.windows(2).filter(|w| w[0] < w[1]).count();
        assert!(in_order < out.len() - 1, "nothing was reordered");
    }

    #[test]
    fn corruption_and_truncation_change_frames_and_replay_by_seed() {
        let run = |seed| {
            let (rx, feed) = mem::ring(100);
            for _ in 0..50 {
                feed.push(vec![0u8; 64]);
            }
            let faults = Faults {
                corrupt: 0.5,
                truncate: 0.3,
                ..Faults::default()
            };
            let mut fi = FaultInjector::new(rx, faults, seed);
            (drain(&mut fi), fi.stats())
        };
        let (a, sa) = run(1);
        assert_eq!(run(1).0, a);
        assert!(sa.corrupted > 0 && sa.truncated > 0);
        assert!(a.iter().any(|f| f.len() < 64));
        assert!(a.iter().any(|f| f.len() == 64 && f.iter().any(|b| *b != 0)));
    }
}
