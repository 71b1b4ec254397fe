//! A server that computes between its receive calls, and the data cache
//! its locality plays out in (Brustoloni et al. 2000 §6, table 2).
//!
//! The server reads a request of `request` bytes from its TCP socket,
//! computes over it, sends a reply of a few bytes, and reads the next
//! request, which its client has been sending meanwhile (one request
//! ahead: with a socket buffer of one request, TCP's flow control is that
//! protocol). Under SRP, segments that arrive while it computes raise
//! SIGUIQ: by default their protocol work (TCP input, its checksum) runs
//! at once, in the signal's default action, interrupting the computation;
//! with SIGUIQ ignored it waits on the UIQ for the next receive call, just
//! before the data is copied out.
//!
//! The cache is one level of `size` bytes, least recently used, read as a
//! stack distance: a piece of memory touched again before `size` bytes of
//! other memory have been touched is still there (a hit); otherwise every
//! byte of it is a miss, costing `miss_per_byte` more than a hit. The
//! touches counted are the protocol work's on a segment (the checksum
//! reads it), the copy-out's (the segment read, the application's buffer
//! written) and the computation's over its buffer, in chunks.

use crate::scenario::ComputeKind;
use rxsched_core::Nanos;
use std::collections::HashMap;

/// The granularity of the application's buffer, in bytes.
pub const CHUNK: u64 = 16 * 1024;

/// A least-recently-used cache read by stack distance.
#[derive(Debug, Clone)]
pub struct Cache {
    size: u64,
    miss_per_byte: f64,
    /// Bytes touched so far.
    traffic: u64,
    /// Segment (by packet id) to the traffic count at its last touch.
    segments: HashMap<u32, u64>,
    /// Bytes that missed and bytes touched, for the record.
    missed: u64,
    touched: u64,
}

impl Cache {
    /// A cache of `size` bytes whose misses cost `miss_per_byte` ns each.
    pub fn new(size: u64, miss_per_byte: f64) -> Cache {
        Cache {
            size,
            miss_per_byte,
            traffic: 0,
            segments: HashMap::new(),
            missed: 0,
            touched: 0,
        }
    }

    /// Touches `bytes` last touched at traffic count `last` (`None`: never
    /// since they came from the device); returns the misses' extra cost
    /// and the new stamp.
    fn touch(&mut self, last: Option<u64>, bytes: u64) -> (Nanos, u64) {
        let hit = last.is_some_and(|t| self.traffic - t < self.size);
        self.traffic += bytes;
        self.touched += bytes;
        if hit {
            (0, self.traffic)
        } else {
            self.missed += bytes;
            (
                (bytes as f64 * self.miss_per_byte).round() as Nanos,
                self.traffic,
            )
        }
    }

    /// The protocol work reads a segment fresh from the device. Its cost
    /// is the profile's (which counts reading it from memory); the cache
    /// now holds it.
    pub fn protocol(&mut self, id: u32, bytes: u64) {
        self.traffic += bytes;
        self.segments.insert(id, self.traffic);
    }

    /// Share of the touched bytes that missed.
    pub fn miss_share(&self) -> f64 {
        self.missed as f64 / self.touched.max(1) as f64
    }
}

/// Where the server is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// In its receive calls, this many bytes of the request read.
    Reading(u64),
    /// Computing: the next of its chunk touches.
    Computing(usize),
    /// Sending the reply.
    Replying,
}

/// The server's loop and the cache its data lives in.
#[derive(Debug, Clone)]
pub struct Server {
    request: u64,
    per_byte: f64,
    /// The computation's touches of its buffer, as chunk numbers, in order.
    pattern: Vec<usize>,
    /// The buffer's chunks: the traffic count at each one's last touch.
    buffer: Vec<Option<u64>>,
    phase: Phase,
    pub cache: Cache,
    /// When each transaction (reply, computation, next request) ended.
    done: Vec<Nanos>,
    /// Time spent computing, per request.
    compute_ns: Vec<Nanos>,
    compute_started: Nanos,
}

impl Server {
    /// A server taking requests of `request` bytes and computing `kind`
    /// over them at `per_byte` ns per byte touched (hits), in `cache`.
    pub fn new(request: u64, kind: ComputeKind, per_byte: f64, cache: Cache) -> Server {
        let chunks = request.div_ceil(CHUNK).max(1) as usize;
        Server {
            request,
            per_byte,
            pattern: pattern(kind, chunks),
            buffer: vec![None; chunks],
            phase: Phase::Reading(0),
            cache,
            done: Vec::new(),
            compute_ns: Vec::new(),
            compute_started: 0,
        }
    }

    /// Whether it is in a receive call (asleep on its socket when empty).
    pub fn reading(&self) -> bool {
        matches!(self.phase, Phase::Reading(_))
    }

    /// The copy-out of a segment of `bytes` (packet `id`) into the buffer:
    /// the extra cost of its misses (the segment's, the buffer's).
    pub fn copy_out(&mut self, id: u32, bytes: u64) -> Nanos {
        let Phase::Reading(read) = self.phase else {
            return 0;
        };
        let last = self.cache.segments.remove(&id);
        let (src, _) = self.cache.touch(last, bytes);
        let chunk = ((read / CHUNK) as usize).min(self.buffer.len() - 1);
        let (dst, stamp) = self.cache.touch(self.buffer[chunk], bytes);
        self.buffer[chunk] = Some(stamp);
        src + dst
    }

    /// A segment was read: returns true if that completed the request,
    /// and the computation begins at `now`.
    pub fn read(&mut self, bytes: u64, now: Nanos) -> bool {
        let Phase::Reading(read) = self.phase else {
            return false;
        };
        let read = read + bytes;
        if read >= self.request {
            self.phase = Phase::Computing(0);
            self.compute_started = now;
            true
        } else {
            self.phase = Phase::Reading(read);
            false
        }
    }

    /// The computation's next touch, with its cost; `None` once it is done
    /// (the server then replies).
    pub fn compute_step(&mut self) -> Option<Nanos> {
        let Phase::Computing(i) = self.phase else {
            return None;
        };
        let Some(&chunk) = self.pattern.get(i) else {
            self.phase = Phase::Replying;
            return None;
        };
        self.phase = Phase::Computing(i + 1);
        let bytes = CHUNK.min(self.request);
        let (miss, stamp) = self.cache.touch(self.buffer[chunk], bytes);
        self.buffer[chunk] = Some(stamp);
        Some((bytes as f64 * self.per_byte).round() as Nanos + miss)
    }

    /// Whether the reply is due.
    pub fn replying(&self) -> bool {
        self.phase == Phase::Replying
    }

    /// The reply went out at `now`: the transaction is done, and the next
    /// request's receive calls begin.
    pub fn replied(&mut self, now: Nanos) {
        self.compute_ns.push(now - self.compute_started);
        self.done.push(now);
        self.phase = Phase::Reading(0);
    }

    /// The mean time a transaction took, and the mean time computing and
    /// replying, over those that ended at or after `from`, in ms (the
    /// first transaction, which began with the run, is left out).
    pub fn means(&self, from: Nanos) -> Option<(f64, f64)> {
        let idx: Vec<usize> = (1..self.done.len())
            .filter(|&i| self.done[i] >= from)
            .collect();
        if idx.is_empty() {
            return None;
        }
        let n = idx.len() as f64;
        let span: Nanos = idx.iter().map(|&i| self.done[i] - self.done[i - 1]).sum();
        let c: Nanos = idx.iter().map(|&i| self.compute_ns[i]).sum();
        Some((span as f64 / n / 1e6, c as f64 / n / 1e6))
    }
}

/// The chunks a computation touches over a buffer of `n` chunks, in order.
fn pattern(kind: ComputeKind, n: usize) -> Vec<usize> {
    match kind {
        // Five averages of the data: one pass.
        ComputeKind::Averages => (0..n).collect(),
        // Two sets of four vectors, the 16 inner products of one of each:
        // a_i and b_j read together, for every i and j.
        ComputeKind::Products => {
            let v = (n / 8).max(1);
            let vector = |k: usize| (k * v..((k + 1) * v).min(n)).collect::<Vec<_>>();
            let mut out = Vec::new();
            for i in 0..4 {
                for j in 4..8 {
                    out.extend(vector(i));
                    out.extend(vector(j));
                }
            }
            out
        }
        // Selecting the n-th largest by partition: a pass over the data,
        // then over the half that holds it, and so on.
        ComputeKind::Select => {
            let mut out = Vec::new();
            let mut len = n;
            while len > 0 {
                out.extend(0..len);
                len /= 2;
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touch_within_the_cache_size_hits_and_a_later_one_misses() {
        let mut c = Cache::new(100, 2.0);
        let (m, t) = c.touch(None, 10);
        assert_eq!(m, 20, "fresh memory misses");
        let (m, _) = c.touch(Some(t), 10);
        assert_eq!(m, 0, "touched again at once: a hit");
        c.touch(None, 100);
        let (m, _) = c.touch(Some(t), 10);
        assert_eq!(m, 20, "100 bytes of other traffic since: evicted");
        assert!((c.miss_share() - 120.0 / 130.0).abs() < 1e-9);
    }

    #[test]
    fn the_patterns_touch_what_each_computation_reads() {
        assert_eq!(pattern(ComputeKind::Averages, 32).len(), 32);
        // 16 products, each reading two vectors of 4 chunks.
        assert_eq!(pattern(ComputeKind::Products, 32).len(), 16 * 2 * 4);
        // 32 + 16 + 8 + 4 + 2 + 1.
        assert_eq!(pattern(ComputeKind::Select, 32).len(), 63);
    }

    #[test]
    fn the_loop_reads_a_request_computes_over_it_and_replies() {
        let mut s = Server::new(
            2 * CHUNK,
            ComputeKind::Averages,
            1.0,
            Cache::new(1 << 20, 3.0),
        );
        assert!(s.reading());
        assert!(s.copy_out(7, CHUNK) > 0, "a segment never processed misses");
        assert!(!s.read(CHUNK, 0));
        s.cache.protocol(8, CHUNK);
        let warm = s.copy_out(8, CHUNK);
        assert!(s.read(CHUNK, 5));
        // Just processed: only the buffer's fresh chunk misses.
        assert_eq!(warm, (CHUNK as f64 * 3.0) as Nanos);
        // The buffer was just written: computing over it hits.
        assert_eq!(s.compute_step(), Some(CHUNK as Nanos));
        assert_eq!(s.compute_step(), Some(CHUNK as Nanos));
        assert_eq!(s.compute_step(), None);
        assert!(s.replying());
        s.replied(100);
        assert!(s.reading());
    }
}
