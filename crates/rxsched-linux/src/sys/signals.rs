//! Flags set by the SIGUSR1, SIGINT and SIGTERM handlers, and a way to
//! interrupt another thread's blocking system call.

use std::sync::atomic::{AtomicBool, Ordering};

static USR1: AtomicBool = AtomicBool::new(false);
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    USR1.store(true, Ordering::Relaxed);
}

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handlers.
pub fn install() {
    // SAFETY: the handlers only store to atomics, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_stop as *const () as libc::sighandler_t);
    }
}

extern "C" fn on_wake(_: libc::c_int) {}

/// Makes SIGUSR2 interrupt a blocking system call in the thread it is
/// sent to (EINTR, no restart), and do nothing else: the way to end a
/// long `bpf(BPF_PROG_TEST_RUN)` from another thread.
pub fn install_wake() {
    // SAFETY: plain data; the handler does nothing.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_wake as *const () as libc::sighandler_t;
        sa.sa_flags = 0;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
    }
}

/// Interrupts thread `t`'s blocking system call (see [`install_wake`]).
pub fn wake(t: &std::thread::JoinHandle<impl Send>) {
    use std::os::unix::thread::JoinHandleExt;
    // SAFETY: signalling a live thread of this process.
    unsafe { libc::pthread_kill(t.as_pthread_t(), libc::SIGUSR2) };
}

/// Whether SIGUSR1 arrived since the last call.
pub fn take_usr1() -> bool {
    USR1.swap(false, Ordering::Relaxed)
}

/// Whether SIGINT or SIGTERM arrived.
pub fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}
