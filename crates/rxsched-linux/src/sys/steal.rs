//! What the hypervisor takes from a CPU: its steal time (`/proc/stat`),
//! and a watch that finds the stalls in it. On a shared host a virtual CPU
//! can stop for about 100 ms at a time (measured here under load: a
//! SCHED_FIFO 99 thread on the DUT's CPU woke 100 ms late six times a
//! minute, and the steal column rose by as much each time); whatever was
//! in flight through that CPU waits as long, whoever forwards it. A
//! latency measured across such a stall measures the host.

use super::{SysError, SysResult};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Time the hypervisor has taken from `cpu` (the `steal` column of
/// `/proc/stat`), in ns: while it is stolen nothing on that CPU runs, so a
/// measurement of what a process there achieved leaves it out.
pub fn cpu_steal_ns(cpu: usize) -> SysResult<u64> {
    let text = std::fs::read_to_string("/proc/stat").map_err(|e| SysError {
        what: format!("cpu{cpu}"),
        syscall: "read(/proc/stat)",
        source: e,
    })?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    steal_ticks(&text, cpu)
        .map(|t| t * 1_000_000_000 / hz)
        .ok_or_else(|| SysError {
            what: format!("cpu{cpu}"),
            syscall: "read(/proc/stat)",
            source: io::Error::new(
                io::ErrorKind::NotFound,
                "no such CPU line or no steal column",
            ),
        })
}

/// The steal column (the eighth after the name) of CPU `cpu`'s line of `/proc/stat`.
fn steal_ticks(text: &str, cpu: usize) -> Option<u64> {
    let name = format!("cpu{cpu}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// How often a [`StallWatch`] reads the steal column.
pub const STALL_SAMPLE: Duration = Duration::from_millis(20);
/// Steal of at least this much within one sample is a stall: the CPU
/// stopped for that long at once (steal is accounted when it runs again).
pub const STALL_NS: u64 = 20_000_000;

/// What a [`StallWatch`] saw: the stalls, the longest, and all steal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stalls {
    /// Samples with at least [`STALL_NS`] stolen.
    pub count: u32,
    /// The most stolen within one sample, in ns.
    pub longest_ns: u64,
    /// All the steal over the watch, in ns.
    pub stolen_ns: u64,
    /// How long it watched, in ns.
    pub wall_ns: u64,
}

impl Stalls {
    /// Counts one sample in which `stolen` ns were taken.
    pub fn add(&mut self, stolen: u64) {
        self.stolen_ns += stolen;
        self.longest_ns = self.longest_ns.max(stolen);
        if stolen >= STALL_NS {
            self.count += 1;
        }
    }

    /// The share of the watch the hypervisor took.
    pub fn share(&self) -> f64 {
        (self.stolen_ns as f64 / self.wall_ns.max(1) as f64).min(1.0)
    }
}

/// A thread that reads one CPU's steal every [`STALL_SAMPLE`] until
/// stopped, from another CPU (so that it is not stalled with it).
pub struct StallWatch {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<SysResult<Stalls>>,
}

impl StallWatch {
    /// Watches `cpu` from a thread pinned to `from`.
    pub fn start(cpu: usize, from: usize) -> SysResult<StallWatch> {
        let first = cpu_steal_ns(cpu)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name(format!("stalls-cpu{cpu}"))
            .spawn(move || {
                super::pin_to_cpu(from)?;
                let t0 = std::time::Instant::now();
                let (mut last, mut seen) = (first, Stalls::default());
                loop {
                    let done = flag.load(Ordering::Relaxed);
                    if !done {
                        std::thread::sleep(STALL_SAMPLE);
                    }
                    let now = cpu_steal_ns(cpu)?;
                    seen.add(now.saturating_sub(last));
                    last = now;
                    if done {
                        seen.wall_ns = t0.elapsed().as_nanos() as u64;
                        return Ok(seen);
                    }
                }
            })
            .map_err(|e| SysError {
                what: format!("a watch of cpu{cpu}'s steal"),
                syscall: "clone",
                source: e,
            })?;
        Ok(StallWatch { stop, handle })
    }

    /// Stops the watch and says what it saw.
    pub fn stop(self) -> SysResult<Stalls> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_else(|_| {
            Err(SysError {
                what: "the steal watch".into(),
                syscall: "join",
                source: io::Error::other("its thread panicked"),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_steal_column() {
        let t = "cpu  9 0 9 9 0 0 9 99 0 0\ncpu0 1 0 2 3 4 5 6 7 0 0\ncpu1 1 0 2 3 4 5 6 42 0 0\nintr 1\n";
        assert_eq!(steal_ticks(t, 1), Some(42));
        assert_eq!(steal_ticks(t, 0), Some(7));
        assert_eq!(steal_ticks(t, 2), None);
    }

    #[test]
    fn a_stall_is_one_sample_with_much_stolen() {
        let mut s = Stalls::default();
        for stolen in [0, 10_000_000, 100_000_000, 0, STALL_NS] {
            s.add(stolen);
        }
        s.wall_ns = 1_000_000_000;
        assert_eq!((s.count, s.longest_ns), (2, 100_000_000));
        assert!((s.share() - 0.13).abs() < 1e-9, "{}", s.share());
    }

    #[test]
    fn a_watch_of_this_machine_stops_when_told() {
        let w = StallWatch::start(0, 0).unwrap();
        std::thread::sleep(STALL_SAMPLE * 3);
        let s = w.stop().unwrap();
        assert!(s.wall_ns >= 3 * STALL_SAMPLE.as_nanos() as u64, "{s:?}");
        assert!(s.longest_ns <= s.stolen_ns, "{s:?}");
    }
}
