//! The gate a polling router drives on its devices' receive threads.

use super::{cpu_ns, queue_threads, runs, set_sched, thread_ids, Sched};
use crate::sys::SysResult;

/// A device's receive work as a polling router drives it: open, its NAPI
/// threads run at a real-time priority just below the polling thread
/// (they run when the thread blocks waiting for input, and are held off
/// while it works); closed (input inhibited by M3 or M4), they run only
/// when the CPU is otherwise idle, and frames die on the device's ring.
///
/// The scheduler runs a real-time thread until it blocks, and a flooded
/// queue's thread never does: at one priority for all, every other
/// queue's receive work waited until the flood paused (ping's replies
/// through a router flooded on another port took 260 ms at the median).
/// So the gate keeps the device round robin in the threads' order too:
/// the threads of the receive sides the polling thread took frames from
/// since it last slept yield to the others (one priority lower) until it
/// takes from the others ([`NapiGate::yield_served`], given the sides'
/// order by [`NapiGate::sides`]). A protected receive queue's thread
/// ([`NapiGate::protect`]) runs above the polling thread itself while
/// open, so that a protected frame reaches its socket, where the polling
/// thread looks between callbacks, without waiting for the thread to
/// drain the other queues' rings and sleep (0.7 ms behind a flood's full
/// ring); held ([`NapiGate::hold_protected`], the protected class's cap,
/// which the polling thread looks at after every callback), it runs only
/// when the CPU is otherwise idle.
pub struct NapiGate {
    ifaces: Vec<String>,
    tids: Vec<i32>,
    open: Sched,
    is_open: bool,
    protected: Vec<i32>,
    held: bool,
    /// The thread of each receive side, in the polling thread's order.
    sides: Vec<i32>,
    /// Threads yielding to the others now.
    yielded: Vec<i32>,
}

/// `s` moved `by` real-time priorities (a real-time class only, within 1–99).
fn nudge(s: Sched, by: i32) -> Sched {
    match s {
        Sched::Fifo(p) => Sched::Fifo((p + by).clamp(1, 99)),
        s => s,
    }
}

impl NapiGate {
    /// The gate over the NAPI threads of `ifaces` (in this namespace),
    /// opened at `open`.
    pub fn new(ifaces: &[String], open: Sched) -> SysResult<NapiGate> {
        let mut tids = Vec::new();
        for i in ifaces {
            tids.extend(thread_ids(i)?);
        }
        let mut g = NapiGate::of_threads(tids, open)?;
        g.ifaces = ifaces.to_vec();
        Ok(g)
    }

    /// The gate over the NAPI threads `tids`, opened at `open`.
    pub fn of_threads(tids: Vec<i32>, open: Sched) -> SysResult<NapiGate> {
        let g = NapiGate {
            ifaces: Vec::new(),
            tids,
            open,
            is_open: true,
            protected: Vec::new(),
            held: false,
            sides: Vec::new(),
            yielded: Vec::new(),
        };
        g.apply(g.all())?;
        Ok(g)
    }

    /// How thread `t` runs now. A protected queue's thread follows its
    /// hold alone: the polling thread holds it for every inhibit that
    /// holds the protected class, and not for the real-time budget's
    /// guard, which closes the gate on the others.
    fn sched_of(&self, t: i32) -> Sched {
        if self.protected.contains(&t) {
            match self.open {
                _ if self.held => Sched::Idle,
                Sched::Fifo(_) => Sched::Fifo(crate::backend::POLL_PRIO + 1),
                s => s,
            }
        } else if !self.is_open {
            Sched::Idle
        } else if self.yielded.contains(&t) {
            nudge(self.open, -1)
        } else {
            self.open
        }
    }

    fn apply<'a>(&self, tids: impl Iterator<Item = &'a i32>) -> SysResult<()> {
        tids.filter(|t| **t > 0)
            .try_for_each(|t| set_sched(*t, self.sched_of(*t)))
    }

    /// Tells the gate which thread serves each receive side of the polling
    /// thread: `(device, queue)` per side, the device an index into the
    /// gate's interfaces.
    pub fn sides(&mut self, sides: &[(usize, u32)]) -> SysResult<()> {
        let mut by_dev: Vec<Vec<i32>> = Vec::new();
        for i in &self.ifaces {
            by_dev.push(queue_threads(i)?);
        }
        self.sides = sides
            .iter()
            .map(|&(d, q)| {
                by_dev
                    .get(d)
                    .and_then(|t| t.get(q as usize))
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        Ok(())
    }

    /// The polling thread is about to sleep, having taken frames from the
    /// sides marked in `served` since it last slept: their threads yield
    /// to the others' until it takes from those (none yields when every
    /// side was served, or none).
    pub fn yield_served(&mut self, served: &[bool]) -> SysResult<()> {
        if self.sides.len() < 2 || !matches!(self.open, Sched::Fifo(_)) {
            return Ok(());
        }
        let want = yielding(&self.sides, &self.protected, served);
        if want == self.yielded {
            return Ok(());
        }
        let changed: Vec<i32> = want
            .iter()
            .chain(&self.yielded)
            .filter(|t| want.contains(t) != self.yielded.contains(t))
            .copied()
            .collect();
        self.yielded = want;
        // Raised threads go to the back of their new priority's queue,
        // behind the others there: lower first, then raise.
        let (down, up): (Vec<i32>, Vec<i32>) =
            changed.into_iter().partition(|t| self.yielded.contains(t));
        self.apply(down.iter())?;
        self.apply(up.iter())
    }

    /// Makes receive queue `queue` of every device of the gate a protected
    /// one: its thread runs ahead of the others'. Returns how many threads
    /// that is (0 where the gate knows no devices or none has the queue).
    pub fn protect(&mut self, queue: u32) -> SysResult<usize> {
        for i in &self.ifaces {
            let Some(&tid) = queue_threads(i)?.get(queue as usize) else {
                continue;
            };
            if tid > 0 && !self.protected.contains(&tid) {
                self.tids.retain(|t| *t != tid);
                self.protected.push(tid);
            }
        }
        self.apply(self.protected.iter())?;
        Ok(self.protected.len())
    }

    /// Holds the protected queues' threads back (`hold`), or lets them go
    /// first again.
    pub fn hold_protected(&mut self, hold: bool) -> SysResult<()> {
        if hold != self.held {
            self.held = hold;
            self.apply(self.protected.iter())?;
        }
        Ok(())
    }

    /// Opens or closes ordinary input (a protected queue's thread follows
    /// [`NapiGate::hold_protected`]).
    pub fn set(&mut self, open: bool) -> SysResult<()> {
        self.is_open = open;
        self.apply(self.tids.iter())
    }

    /// CPU time the threads have used, in ns.
    pub fn cpu_ns(&self) -> SysResult<u64> {
        self.all().map(|t| cpu_ns(*t)).sum()
    }

    /// How many times the threads have been put on a CPU.
    pub fn runs(&self) -> SysResult<u64> {
        self.all().map(|t| runs(*t)).sum()
    }

    fn all(&self) -> impl Iterator<Item = &i32> {
        self.tids.iter().chain(&self.protected)
    }
}

impl Drop for NapiGate {
    fn drop(&mut self) {
        // As the lab left them, with the kernel's default slice; a killed
        // router leaves them to `lab up`.
        for t in self.all() {
            let _ = crate::sys::slice::set_time_shared(*t, None);
        }
    }
}

/// The threads that yield, given the thread of each receive side, the
/// protected ones (never yielding: they have a priority of their own), and
/// the sides served since the polling thread last slept: the served
/// ordinary sides' threads, unless every ordinary side was served or none.
fn yielding(sides: &[i32], protected: &[i32], served: &[bool]) -> Vec<i32> {
    let ordinary: Vec<(i32, bool)> = sides
        .iter()
        .enumerate()
        .filter(|(_, t)| **t > 0 && !protected.contains(t))
        .map(|(i, t)| (*t, served.get(i).copied().unwrap_or(false)))
        .collect();
    let n = ordinary.iter().filter(|(_, s)| *s).count();
    if n == 0 || n == ordinary.len() {
        return Vec::new();
    }
    ordinary
        .into_iter()
        .filter(|(_, s)| *s)
        .map(|(t, _)| t)
        .collect()
}

impl crate::backend::Gate for NapiGate {
    fn set(&mut self, open: bool) -> SysResult<()> {
        NapiGate::set(self, open)
    }
    fn cpu_ns(&self) -> SysResult<u64> {
        NapiGate::cpu_ns(self)
    }
    fn protect(&mut self, queue: u32) -> SysResult<usize> {
        NapiGate::protect(self, queue)
    }
    fn hold_protected(&mut self, hold: bool) -> SysResult<()> {
        NapiGate::hold_protected(self, hold)
    }
    fn sides(&mut self, sides: &[(usize, u32)]) -> SysResult<()> {
        NapiGate::sides(self, sides)
    }
    fn yield_served(&mut self, served: &[bool]) -> SysResult<()> {
        NapiGate::yield_served(self, served)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time-shared gate gives its threads their slice when open, the
    /// idle class when closed, and the kernel's default slice when it is
    /// dropped (on a kernel that keeps per-thread slices).
    #[test]
    fn a_sliced_gate_opens_with_its_slice_and_leaves_the_default() {
        use crate::sys::slice::slice;
        if !crate::sys::is_root() {
            eprintln!("skipped: a thread leaves SCHED_IDLE only with CAP_SYS_NICE (run the tests as root)");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_nonzero().get())
                .unwrap();
            let _ = stopped.recv();
        });
        let tid = rx.recv().unwrap();
        let default = slice(tid).unwrap();
        // SAFETY: sched_getscheduler only reads.
        let policy = || unsafe { libc::sched_getscheduler(tid) };
        let mut g = NapiGate::of_threads(vec![tid], Sched::Sliced(150_000)).unwrap();
        let kept = slice(tid).unwrap();
        assert_eq!(policy(), libc::SCHED_OTHER);
        g.set(false).unwrap();
        assert_eq!(policy(), libc::SCHED_IDLE);
        g.set(true).unwrap();
        assert_eq!(policy(), libc::SCHED_OTHER);
        assert_eq!(slice(tid).unwrap(), kept, "the slice again on reopening");
        drop(g);
        assert_eq!(slice(tid).unwrap(), default, "the default slice after");
        stop.send(()).unwrap();
        h.join().unwrap();
        match kept {
            Some(ns) => assert_eq!(ns, 150_000),
            None => eprintln!(
                "skipped: this kernel keeps no per-thread slice (Linux 6.12 or later does)"
            ),
        }
    }

    /// The sides served yield to the others; the protected never yield; all
    /// or none served, nobody yields.
    #[test]
    fn the_served_sides_yield_to_the_others() {
        let sides = [11, 12, 21, 22];
        let served = |v: [bool; 4]| yielding(&sides, &[12, 22], &v);
        assert_eq!(served([true, false, false, false]), [11]);
        assert_eq!(served([true, true, false, false]), [11]);
        assert_eq!(served([false, false, true, false]), [21]);
        assert!(served([true, false, true, false]).is_empty());
        assert!(served([false, true, false, true]).is_empty());
        assert_eq!(yielding(&sides, &[], &[true, true, false, false]), [11, 12]);
        // A side with no thread, and fewer marks than sides.
        assert_eq!(yielding(&[0, 5, 6], &[], &[true, true]), [5]);
    }
}
