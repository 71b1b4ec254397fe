//! A process of ours that consumes a stage queue.

use super::StageQueue;
use crate::sys::{SysError, SysResult};

/// A process of ours that consumes a stage queue (the screening process,
/// an SRP consumer): `exe` run with the queue's descriptors inherited and
/// `--stage` naming them; it dies with the thread that started it.
pub struct StageProcess {
    child: std::process::Child,
}

impl StageProcess {
    /// Starts `exe ARGS --stage FDS` consuming `q`.
    pub fn spawn(exe: &std::path::Path, args: &[String], q: &StageQueue) -> SysResult<Self> {
        use std::os::unix::process::CommandExt;
        let fds = q.fds();
        let mut cmd = std::process::Command::new(exe);
        cmd.args(args).args(["--stage", &fds.to_arg()]);
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        let keep = fds.all();
        // SAFETY: between fork and exec the closure calls only fcntl and
        // prctl, which are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                for fd in keep {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| SysError {
            what: format!("{} {}", exe.display(), args.first().map_or("", |a| a)),
            syscall: "execve",
            source: e,
        })?;
        Ok(StageProcess { child })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Tells the process to finish what is queued and waits for it (up to
    /// `grace`, then kills it). Returns its exit status if it exited by itself.
    pub fn stop(mut self, q: &StageQueue, grace: std::time::Duration) -> Option<i32> {
        q.stop();
        let t0 = std::time::Instant::now();
        while t0.elapsed() < grace {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}
