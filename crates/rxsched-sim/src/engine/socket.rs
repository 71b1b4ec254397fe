//! A socket's receive buffer, bounded in packets and in bytes.

use super::packet::Packet;
use std::collections::VecDeque;

/// The consumer's socket receive buffer.
#[derive(Debug, Clone)]
pub struct Socket {
    q: VecDeque<Packet>,
    bytes: u32,
    cap_packets: usize,
    cap_bytes: u32,
}

impl Socket {
    /// An empty buffer for at most `packets` packets and `bytes` bytes.
    pub fn new(packets: u32, bytes: u32) -> Socket {
        Socket {
            q: VecDeque::new(),
            bytes: 0,
            cap_packets: packets as usize,
            cap_bytes: bytes,
        }
    }

    /// Whether `p` fits.
    pub fn fits(&self, p: Packet) -> bool {
        self.q.len() < self.cap_packets && self.bytes + p.bytes <= self.cap_bytes
    }

    /// Puts `p` in; the caller has done the buffering check.
    pub fn push(&mut self, p: Packet) {
        self.bytes += p.bytes;
        self.q.push_back(p);
    }

    /// Puts `p` in if it fits; false if the buffer is full.
    pub fn offer(&mut self, p: Packet) -> bool {
        if !self.fits(p) {
            return false;
        }
        self.push(p);
        true
    }

    /// Takes the next packet out.
    pub fn pop(&mut self) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.bytes;
        Some(p)
    }

    /// Packets in the buffer.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}
