//! Packet I/O behind small traits, in the style of smoltcp's `phy`: the
//! router and the tools are written against [`RxBackend`] and
//! [`TxBackend`], and the same code runs on
//!
//! - [`xdp`]: AF_XDP sockets fed by an XDP program (copy mode);
//! - [`packet`]: AF_PACKET `TPACKET_V3` receive rings and `sendmmsg`;
//! - [`mem`]: in-memory rings and a clock the test moves, so that the
//!   router's loops are tested without root or a network;
//! - [`fault`]: a middleware wrapper that drops, corrupts, truncates,
//!   reorders or delays frames on their way in.
//!
//! How a thread waits for a receive "interrupt" is a backend matter too:
//! [`Wait`] is `epoll` on real sockets and a step of fake time in memory.

pub mod fault;
pub mod mem;
pub mod packet;
pub mod xdp;

use crate::sys::SysResult;
use std::os::fd::RawFd;

/// Receiving frames.
pub trait RxBackend {
    /// The descriptor that becomes readable when frames wait (the
    /// "interrupt"), if the backend has one.
    fn fd(&self) -> Option<RawFd>;
    /// Hands at most `max` waiting frames to `f`, one ring operation for
    /// the batch, stopping early once `f` returns false (the frame it was
    /// given is taken); returns how many it handed over.
    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize;
    /// Hands at most `max` waiting frames to `f`; returns how many.
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        self.recv_while(max, &mut |frame| {
            f(frame);
            true
        })
    }
    /// Whether a frame waits now.
    fn pending(&self) -> bool;
    /// Frames dropped because the ring was full, since opening.
    fn ring_drops(&mut self) -> SysResult<u64>;
    /// Frames dropped after the kernel's receive work because a socket's
    /// ring was full (AF_XDP's `xsk_rx_ring`), since opening.
    fn socket_drops(&mut self) -> SysResult<u64> {
        Ok(0)
    }
    /// Frames waiting on the ring now, if the backend can tell.
    fn queued(&self) -> u64 {
        0
    }
}

/// Transmitting frames.
pub trait TxBackend {
    /// Sends the frames; returns how many the device took. A full device
    /// queue is not an error: the frames not taken are for the caller to
    /// keep or drop.
    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize>;
    /// The descriptor to wait on for room (POLLOUT), if the backend has one.
    fn fd(&self) -> Option<RawFd>;
}

/// Blocking until a receive "interrupt": one of the armed ports has input.
pub trait Wait {
    /// Registers port `i`'s receive descriptor (in port order, once each).
    fn add(&mut self, port: usize, fd: Option<RawFd>) -> SysResult<()>;
    /// Blocks until an armed port may have input, or for `timeout_ns`.
    /// `ready` tells whether a port has input now (backends without a
    /// descriptor are asked this way). Returns the ports to look at.
    fn wait(
        &mut self,
        armed: &[bool],
        ready: &dyn Fn(usize) -> bool,
        timeout_ns: u64,
    ) -> SysResult<Vec<usize>>;
    /// Errors the ports' descriptors reported while waiting, by port,
    /// since the last call (a device that went down, a socket hung up).
    fn take_errors(&mut self) -> Vec<(usize, std::io::Error)> {
        Vec::new()
    }
}

impl<B: RxBackend + ?Sized> RxBackend for Box<B> {
    fn fd(&self) -> Option<RawFd> {
        (**self).fd()
    }
    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        (**self).recv_while(max, f)
    }
    fn pending(&self) -> bool {
        (**self).pending()
    }
    fn ring_drops(&mut self) -> SysResult<u64> {
        (**self).ring_drops()
    }
    fn socket_drops(&mut self) -> SysResult<u64> {
        (**self).socket_drops()
    }
    fn queued(&self) -> u64 {
        (**self).queued()
    }
}

impl<B: TxBackend + ?Sized> TxBackend for Box<B> {
    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize> {
        (**self).send(frames)
    }
    fn fd(&self) -> Option<RawFd> {
        (**self).fd()
    }
}
