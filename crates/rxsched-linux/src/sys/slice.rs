//! A time-shared thread's slice under EEVDF (`sched_setattr` with
//! `sched_runtime` on a SCHED_OTHER thread, Linux 6.12 and later).
//!
//! EEVDF gives each runnable thread a virtual deadline one slice after it
//! became eligible; a thread woken with a shorter slice than the running
//! one's has the earlier deadline and preempts it at once instead of
//! waiting for the running thread's slice (the kernel's default: 1.4 ms
//! on the lab's 2-vCPU machine) to end.
//! A CPU group's weight buys a share of the CPU over time; the slice is
//! what lets a woken receive path run before its ring overflows.

use super::{SysError, SysResult};

/// The shortest slice the kernel keeps for a thread, in ns (100 µs).
pub const MIN_NS: u64 = 100_000;
/// The longest, in ns (100 ms).
pub const MAX_NS: u64 = 100_000_000;

/// The failed call's error, built only on failure (the gate calls these
/// each time it opens).
fn os_err(tid: i32, syscall: &'static str) -> SysError {
    SysError {
        what: format!("thread {tid}"),
        syscall,
        source: std::io::Error::last_os_error(),
    }
}

/// `struct sched_attr` as `sched_setattr(2)` takes it (its first version,
/// 56 bytes; the utilisation clamps are left unset).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

const SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;

fn get(tid: i32) -> SysResult<SchedAttr> {
    let mut a = SchedAttr::default();
    // SAFETY: a is a writable sched_attr of SIZE bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            SIZE,
            0u32,
        )
    };
    if r < 0 {
        return Err(os_err(tid, "sched_getattr"));
    }
    Ok(a)
}

/// The slice thread `tid` (0: the calling thread) runs with, in ns, its own or the kernel's
/// default (`None`: the thread is not time-shared, or the kernel keeps no
/// slice per thread).
pub fn slice(tid: i32) -> SysResult<Option<u64>> {
    let a = get(tid)?;
    Ok((a.policy == libc::SCHED_OTHER as u32 && a.runtime > 0).then_some(a.runtime))
}

/// Makes thread `tid` (0: the calling thread) time-shared (SCHED_OTHER),
/// keeping its nice value, with a slice of `ns` (the kernel clamps it to
/// 0.1-100 ms), or the kernel's default slice (`None`).
pub fn set_time_shared(tid: i32, ns: Option<u64>) -> SysResult<()> {
    let mut a = get(tid)?;
    a.size = SIZE;
    a.policy = libc::SCHED_OTHER as u32;
    a.flags = 0;
    a.priority = 0;
    a.runtime = ns.unwrap_or(0);
    a.deadline = 0;
    a.period = 0;
    // SAFETY: a is a valid sched_attr of SIZE bytes.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0u32) };
    if r < 0 {
        return Err(os_err(tid, "sched_setattr"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The struct is the kernel's first version of `sched_attr`.
    #[test]
    fn the_attr_is_the_kernel_s_first_version() {
        assert_eq!(SIZE, 56);
    }

    /// A thread's own slice is read back as set, where the kernel keeps one
    /// (6.12 and later); an older kernel says so and the test passes.
    #[test]
    fn a_thread_s_slice_reads_back_as_set_and_resets() {
        if !crate::sys::is_root() {
            eprintln!(
                "skipped: setting a thread's slice needs CAP_SYS_NICE (run the tests as root)"
            );
            return;
        }
        let h = std::thread::spawn(|| {
            let tid = rustix::thread::gettid().as_raw_nonzero().get();
            let before = slice(tid).unwrap();
            set_time_shared(0, Some(200_000)).unwrap();
            let set = slice(tid).unwrap();
            set_time_shared(tid, None).unwrap();
            (before, set, slice(tid).unwrap())
        });
        let (before, after, reset) = h.join().unwrap();
        assert_eq!(reset, before, "back to the default slice");
        match after {
            Some(ns) => {
                assert_eq!(ns, 200_000);
                assert_ne!(before, after, "the default slice is not 200 µs");
            }
            None => eprintln!(
                "skipped: this kernel keeps no per-thread slice (Linux 6.12 or later does)"
            ),
        }
    }
}
