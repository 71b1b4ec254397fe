//! An epoll set whose members can be armed or disarmed: the user-space
//! form of enabling and disabling a device's interrupt.

use super::{os, take_socket_error, SysResult};
use rustix::event::epoll;
use rustix::io::Errno;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// An epoll set whose members can be armed (waited on) or disarmed: the
/// user-space form of enabling and disabling a device's interrupt.
pub struct Epoll {
    fd: OwnedFd,
    fds: Vec<RawFd>,
    armed: Vec<bool>,
    /// Members whose descriptor reported an error or hang-up, with it.
    errors: Vec<(usize, io::Error)>,
    /// Members taken out of the set after a hang-up.
    gone: Vec<bool>,
}

impl Epoll {
    /// An empty set.
    pub fn new() -> SysResult<Epoll> {
        let fd = epoll::create(epoll::CreateFlags::CLOEXEC)
            .map_err(|e| os("epoll".into(), "epoll_create1", e))?;
        Ok(Epoll {
            fd,
            fds: Vec::new(),
            armed: Vec::new(),
            errors: Vec::new(),
            gone: Vec::new(),
        })
    }

    fn member(&self, token: usize) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: members are descriptors their owners keep open while the
        // set is in use (the router owns both).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fds[token]) }
    }

    /// Adds `fd` as member number `fds.len()`, disarmed; returns that number.
    pub fn add(&mut self, fd: RawFd) -> SysResult<usize> {
        let token = self.fds.len();
        self.fds.push(fd);
        self.armed.push(false);
        self.gone.push(false);
        epoll::add(
            &self.fd,
            self.member(token),
            epoll::EventData::new_u64(token as u64),
            epoll::EventFlags::empty(),
        )
        .map_err(|e| os("epoll".into(), "epoll_ctl(ADD)", e))?;
        Ok(token)
    }

    /// Arms or disarms member `token` (level-triggered readability).
    pub fn arm(&mut self, token: usize, on: bool) -> SysResult<()> {
        if self.armed[token] != on && !self.gone[token] {
            let flags = if on {
                epoll::EventFlags::IN
            } else {
                epoll::EventFlags::empty()
            };
            epoll::modify(
                &self.fd,
                self.member(token),
                epoll::EventData::new_u64(token as u64),
                flags,
            )
            .map_err(|e| os("epoll".into(), "epoll_ctl(MOD)", e))?;
            self.armed[token] = on;
        }
        Ok(())
    }

    /// Blocks in `epoll_wait` for at most `timeout_ns`; returns the members
    /// that are ready. EINTR counts as a timeout.
    ///
    /// epoll reports an error or hang-up on a member whether it is armed or
    /// not, and goes on reporting it while it stands, so a socket whose
    /// device went down would wake the thread again and again. A member's
    /// pending error is therefore taken (which clears it) and kept for
    /// [`Epoll::take_errors`]; a member that hangs up is taken out of the
    /// set. Neither counts as ready unless it is armed and has input too.
    pub fn wait(&mut self, timeout_ns: u64) -> SysResult<Vec<usize>> {
        let mut evs: Vec<epoll::Event> = Vec::with_capacity(8);
        let t = rustix::time::Timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as i64,
            tv_nsec: (timeout_ns % 1_000_000_000) as i64,
        };
        match epoll::wait(&self.fd, rustix::buffer::spare_capacity(&mut evs), Some(&t)) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(Vec::new()),
            Err(e) => return Err(os("epoll".into(), "epoll_wait", e)),
        }
        let mut ready = Vec::with_capacity(evs.len());
        for e in &evs {
            let token = e.data.u64() as usize;
            let fl = e.flags;
            if fl.contains(epoll::EventFlags::ERR) {
                let err = take_socket_error(self.fds[token])
                    .unwrap_or_else(|| io::Error::other("error reported on the descriptor"));
                self.errors.push((token, err));
            }
            if fl.contains(epoll::EventFlags::HUP) && !self.gone[token] {
                let _ = epoll::delete(&self.fd, self.member(token));
                self.gone[token] = true;
                self.errors
                    .push((token, io::Error::other("the descriptor hung up")));
            }
            if self.armed[token] && fl.contains(epoll::EventFlags::IN) {
                ready.push(token);
            }
        }
        Ok(ready)
    }

    /// The errors members reported since the last call (see [`Epoll::wait`]).
    pub fn take_errors(&mut self) -> Vec<(usize, io::Error)> {
        std::mem::take(&mut self.errors)
    }
}
