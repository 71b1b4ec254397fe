//! The DUT CPU's scheduler as Linux runs the lab's threads on it: real-time
//! threads (`SCHED_FIFO`) by priority above every other, with real-time
//! throttling; the rest shared fairly by virtual runtime, weighted
//! (`SCHED_OTHER` at nice 0 weighs 1024, `SCHED_IDLE` 3), a thread that
//! wakes placed at most half a slice behind the others (so it preempts a
//! thread that has run all along), and a `SCHED_IDLE` thread never
//! preempting on waking. Short of a wake-up, a fair thread gives the CPU to
//! another only at a scheduler tick (`1 / CONFIG_HZ`) once it is a slice
//! ahead. Threads of one process session (an autogroup) share one
//! weight: each runnable one weighs the group's over their number (the
//! kernel's hierarchy of task groups, flattened).

use rxsched_core::Nanos;

/// A thread's scheduling class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `SCHED_FIFO` at this priority.
    Fifo(u8),
    /// The fair class with this weight.
    Fair(u32),
}

/// `SCHED_OTHER` at nice 0.
pub const NORMAL: Class = Class::Fair(1024);
/// `SCHED_IDLE`.
pub const IDLE: Class = Class::Fair(3);

/// The fair class's slice: EEVDF's base slice (0.75 ms) scaled for two
/// CPUs, as the kernel scales it (`1 + ilog2(CPUs)`).
pub const SLICE: Nanos = 1_500_000;
/// Real-time throttling: the real-time threads get this much of each
/// [`RT_PERIOD`] while a fair thread waits (`sched_rt_runtime_us`).
pub const RT_RUNTIME: Nanos = 950_000_000;
/// See [`RT_RUNTIME`].
pub const RT_PERIOD: Nanos = 1_000_000_000;

/// One thread's scheduling state.
#[derive(Debug, Clone)]
pub struct Thread {
    /// Its class.
    pub class: Class,
    /// Runnable (running or waiting for the CPU).
    pub runnable: bool,
    /// Virtual runtime, in weighted ns (fair class).
    vr: f64,
    /// CPU time used so far.
    pub cpu: Nanos,
    /// Times it was put on the CPU.
    pub runs: u64,
    /// Times it was woken.
    pub wakeups: u64,
    /// Its session's group (0: none, a kernel thread).
    group: u8,
}

impl Thread {
    fn new(class: Class) -> Thread {
        Thread {
            class,
            runnable: false,
            vr: 0.0,
            cpu: 0,
            runs: 0,
            wakeups: 0,
            group: 0,
        }
    }
}

/// The CPU's threads and which one runs.
#[derive(Debug, Clone)]
pub struct Sched {
    /// The threads, by index.
    pub t: Vec<Thread>,
    /// The thread on the CPU.
    pub running: Option<usize>,
    /// A thread that woke and should take the CPU from a fair thread.
    preempt: Option<usize>,
    /// The scheduler tick.
    tick: Nanos,
    rt_used: Nanos,
    period: Nanos,
}

impl Sched {
    /// A CPU with threads of these classes, none runnable, ticking every
    /// `tick` ns.
    pub fn new(classes: &[Class], tick: Nanos) -> Sched {
        Sched {
            t: classes.iter().map(|&c| Thread::new(c)).collect(),
            running: None,
            preempt: None,
            tick: tick.max(1),
            rt_used: 0,
            period: 0,
        }
    }

    /// Puts thread `i` in session group `g` (not 0).
    pub fn set_group(&mut self, i: usize, g: u8) {
        self.t[i].group = g;
    }

    fn weight(&self, i: usize) -> f64 {
        let g = self.t[i].group;
        let sharing = |t: &Thread| t.group == g && t.runnable && matches!(t.class, Class::Fair(_));
        let n = if g == 0 {
            1
        } else {
            self.t.iter().filter(|t| sharing(t)).count().max(1)
        };
        match self.t[i].class {
            Class::Fair(w) => f64::from(w) / n as f64,
            Class::Fifo(_) => 1024.0,
        }
    }

    /// Time passed up to `now` with no thread running (an interrupt).
    pub fn pass(&mut self, now: Nanos) {
        if now / RT_PERIOD != self.period {
            self.period = now / RT_PERIOD;
            self.rt_used = 0;
        }
    }

    /// The running thread ran `dt` more, up to `now`.
    pub fn advance(&mut self, now: Nanos, dt: Nanos) {
        self.pass(now);
        let Some(r) = self.running else { return };
        self.t[r].cpu += dt;
        match self.t[r].class {
            Class::Fifo(_) => self.rt_used += dt,
            Class::Fair(_) => self.t[r].vr += dt as f64 * 1024.0 / self.weight(r),
        }
    }

    /// The smallest virtual runtime of the runnable fair threads but `but`.
    fn min_vr(&self, but: usize) -> Option<f64> {
        self.t
            .iter()
            .enumerate()
            .filter(|(i, t)| *i != but && t.runnable && matches!(t.class, Class::Fair(_)))
            .map(|(_, t)| t.vr)
            .min_by(f64::total_cmp)
    }

    /// Thread `i` becomes runnable.
    pub fn wake(&mut self, i: usize) {
        if self.t[i].runnable {
            return;
        }
        self.t[i].runnable = true;
        self.t[i].wakeups += 1;
        if let Class::Fair(w) = self.t[i].class {
            if let Some(m) = self.min_vr(i) {
                self.t[i].vr = self.t[i].vr.max(m - SLICE as f64 / 2.0);
            }
            let beats_running = self.running.is_some_and(|r| {
                matches!(self.t[r].class, Class::Fair(_)) && self.t[i].vr < self.t[r].vr
            });
            if w > IDLE_WEIGHT && beats_running {
                self.preempt = Some(i);
            }
        }
    }

    /// Thread `i` sleeps (it gives the CPU up if it has it).
    pub fn sleep(&mut self, i: usize) {
        self.t[i].runnable = false;
        if self.running == Some(i) {
            self.running = None;
        }
    }

    /// Changes thread `i`'s class (a gate opening or closing).
    pub fn set_class(&mut self, i: usize, class: Class) {
        if self.t[i].class == class {
            return;
        }
        if let (Class::Fifo(_), Class::Fair(_)) = (self.t[i].class, class) {
            if let Some(m) = self.min_vr(i) {
                self.t[i].vr = self.t[i].vr.max(m);
            }
        }
        self.t[i].class = class;
    }

    fn throttled(&self) -> bool {
        self.rt_used >= RT_RUNTIME
            && self
                .t
                .iter()
                .any(|t| t.runnable && matches!(t.class, Class::Fair(_)))
    }

    /// Chooses the thread to run now, and puts it on the CPU.
    pub fn pick(&mut self) -> Option<usize> {
        let rt = (!self.throttled())
            .then(|| {
                self.t
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| match t.class {
                        Class::Fifo(p) if t.runnable => Some((p, i)),
                        _ => None,
                    })
                    // The highest priority; the first of equals.
                    .max_by_key(|&(p, i)| (p, std::cmp::Reverse(i)))
                    .map(|(_, i)| i)
            })
            .flatten();
        let next = rt.or_else(|| {
            let current = self
                .running
                .filter(|&r| self.t[r].runnable && matches!(self.t[r].class, Class::Fair(_)));
            match (self.preempt.take(), current) {
                (Some(w), _) if self.t[w].runnable && matches!(self.t[w].class, Class::Fair(_)) => {
                    Some(w)
                }
                (_, Some(c))
                    if self
                        .min_vr(c)
                        .is_none_or(|m| self.t[c].vr < m + SLICE as f64) =>
                {
                    Some(c)
                }
                _ => self
                    .t
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.runnable && matches!(t.class, Class::Fair(_)))
                    .min_by(|a, b| a.1.vr.total_cmp(&b.1.vr))
                    .map(|(i, _)| i),
            }
        });
        if next != self.running {
            if let Some(n) = next {
                self.t[n].runs += 1;
            }
        }
        self.running = next;
        next
    }

    /// When the scheduler must look again though nothing else happens: at
    /// the first tick after the running fair thread is a slice ahead of
    /// another, or when the real-time threads' runtime runs out, or when the
    /// throttled period ends.
    pub fn next_look(&self, now: Nanos) -> Option<Nanos> {
        let period_end = (now / RT_PERIOD + 1) * RT_PERIOD;
        if self.throttled() {
            return Some(period_end);
        }
        let r = self.running?;
        match self.t[r].class {
            Class::Fifo(_) => {
                let waiting = self
                    .t
                    .iter()
                    .any(|t| t.runnable && matches!(t.class, Class::Fair(_)));
                waiting.then(|| (now + (RT_RUNTIME - self.rt_used)).min(period_end))
            }
            Class::Fair(_) => {
                let m = self.min_vr(r)?;
                let ahead = m + SLICE as f64 - self.t[r].vr;
                let at = now + (ahead.max(0.0) * self.weight(r) / 1024.0).ceil() as Nanos;
                Some((at / self.tick + 1) * self.tick)
            }
        }
    }
}

const IDLE_WEIGHT: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the CPU for `ns` with every thread always runnable; returns
    /// each thread's CPU time.
    fn share(classes: &[Class], ns: Nanos) -> Vec<Nanos> {
        share_grouped(classes, &[], ns)
    }

    /// [`share`] with thread `i` in session group `groups[i]`.
    fn share_grouped(classes: &[Class], groups: &[u8], ns: Nanos) -> Vec<Nanos> {
        let mut s = Sched::new(classes, 4_000_000);
        for (i, &g) in groups.iter().enumerate() {
            s.set_group(i, g);
        }
        for i in 0..classes.len() {
            s.wake(i);
        }
        let mut now = 0;
        s.pick();
        while now < ns {
            let next = s.next_look(now).unwrap_or(ns).min(ns);
            s.advance(next, next - now);
            now = next;
            s.pick();
        }
        s.t.iter().map(|t| t.cpu).collect()
    }

    #[test]
    fn two_normal_threads_share_evenly() {
        let c = share(&[NORMAL, NORMAL], 1_000_000_000);
        let d = c[0].abs_diff(c[1]);
        assert!(d <= 2 * 4_000_000, "{c:?}");
    }

    /// Two threads of one session beside one of another session and a
    /// kernel thread: the session shares one weight, so each of its two
    /// gets half of what the others get (1/6 against 1/3 each).
    #[test]
    fn a_sessions_threads_share_its_weight() {
        let ns = 3_000_000_000;
        let c = share_grouped(&[NORMAL; 4], &[1, 1, 2, 0], ns);
        let f: Vec<f64> = c.iter().map(|&t| t as f64 / ns as f64).collect();
        for (i, want) in [
            (0, 1.0 / 6.0),
            (1, 1.0 / 6.0),
            (2, 1.0 / 3.0),
            (3, 1.0 / 3.0),
        ] {
            assert!((f[i] - want).abs() < 0.02, "shares {f:?}");
        }
    }

    #[test]
    fn an_idle_class_thread_gets_its_weight() {
        let c = share(&[NORMAL, IDLE], 1_000_000_000);
        let f = c[1] as f64 / 1e9;
        assert!((0.001..0.01).contains(&f), "SCHED_IDLE share {f}");
    }

    #[test]
    fn a_fifo_thread_is_throttled_to_its_runtime() {
        let c = share(&[Class::Fifo(50), NORMAL], 2_000_000_000);
        assert_eq!(c[0], 2 * RT_RUNTIME, "{c:?}");
        assert_eq!(c[1], 2 * (RT_PERIOD - RT_RUNTIME));
    }
}
