//! The NT host's record: CPU shares of the whole machine and of each CPU,
//! the polling thread's share, the two-level switch's switches, the lock's
//! waiting, and where the reader last ran.

use super::thread::Role;
use super::Smp;
use crate::engine::record::{Outside, Record};
use crate::error::SimError;
use crate::metrics::{Metrics, Samples};
use rxsched_core::Nanos;
use std::collections::BTreeMap;

impl Smp {
    /// Closes the books at the end of the run and makes the record.
    pub(super) fn finish(mut self) -> Result<(Metrics, Samples), SimError> {
        self.account_all();
        for a in &mut self.adapters {
            if a.polling {
                a.polling_w += self.w.clip(a.polling_since, self.now);
            }
        }
        let cpu = self.ledger.shares().map_err(SimError::Invariant)?;
        let window = self.w.len();
        let n = self.cpus.len();
        let mut extra = self.per_cpu();
        let user: f64 = cpu
            .iter()
            .filter(|(k, _)| k.starts_with("user:"))
            .map(|(_, v)| v)
            .sum();
        // Shares of the whole machine's capacity, n CPUs.
        extra.insert("user_share".into(), user);
        extra.insert("cpus".into(), n as f64);
        extra.insert(
            "dpc_share_of_one_cpu".into(),
            cpu.get("dpc").copied().unwrap_or(0.0) * n as f64,
        );
        // Queue 0's (the only one in a host of one queue); the queues
        // of a host of several are alike.
        let a0 = &self.adapters[0];
        // The share of queue 0's interrupt CPU spent at neither ISR nor DPC
        // level: 0 when its interrupt routine runs continuously, leaving
        // no moment for that CPU's dispatcher.
        let at = |b: &str| {
            extra
                .get(&format!("cpu{}.{b}", a0.cpu))
                .copied()
                .unwrap_or(0.0)
        };
        let free = (1.0 - at("isr") - at("dpc")).max(0.0);
        extra.insert("interrupt_cpu_free_share".into(), free);
        extra.insert("polling_share".into(), a0.polling_w as f64 / window as f64);
        extra.insert("polling_now".into(), f64::from(u8::from(a0.polling)));
        let switches: u64 = self
            .adapters
            .iter()
            .filter_map(|a| a.two.as_ref())
            .map(|t| t.switches())
            .sum();
        if a0.two.is_some() {
            extra.insert("two_level_switches".into(), switches as f64);
        }
        if self.slo_switch {
            extra.insert("slo_switch_over".into(), self.cfg.threshold);
            let back = self.cfg.return_below.unwrap_or(0.0);
            extra.insert("slo_switch_return_below".into(), back);
            extra.insert("slo_switch_hold_ms".into(), self.cfg.hold_ms);
        }
        extra.insert("queues".into(), self.adapters.len() as f64);
        self.lock_numbers(&mut extra);
        for (i, th) in self.sched.threads.iter().enumerate() {
            if self.threads[i].role == Role::Reader {
                extra.insert("reader_cpu".into(), th.last as f64);
                break;
            }
        }
        let record = Record {
            in_flight: self.in_flight(),
            cpu,
            mode_switches: switches,
            inhibits: BTreeMap::new(),
            extra,
        };
        let outside = Outside {
            echo: self.echo.as_ref(),
            tcp: None,
        };
        record.close(self.meter, self.w, outside)
    }

    /// Each CPU's share of each bucket it used (and always of idle, the
    /// DPC and the ISR), as `cpu<k>.<bucket>`.
    fn per_cpu(&self) -> BTreeMap<String, f64> {
        let window = self.w.len();
        let mut extra = BTreeMap::new();
        for k in 0..self.cpus.len() {
            for (name, ns) in self.ledger.names().iter().zip(self.ledger.busy(k)) {
                if *ns > 0 || ["idle", "dpc", "isr"].contains(&name.as_str()) {
                    extra.insert(format!("cpu{k}.{name}"), *ns as f64 / window as f64);
                }
            }
        }
        extra
    }

    /// Datagrams still inside the host: on the ring, in the socket, in a
    /// job under way or preempted.
    fn in_flight(&self) -> u64 {
        let held = self
            .cpus
            .iter()
            .flat_map(|c| [c.isr, c.dpc_job])
            .chain(self.threads.iter().flat_map(|t| [t.job, t.resume]))
            .flatten()
            .filter_map(|j| j.work.packet())
            .count() as u64;
        let rings: usize = self.adapters.iter().map(|a| a.ring.len()).sum();
        rings as u64 + self.consumer.sock.len() as u64 + held
    }

    /// The lock's waiting, from its side and from the threads', and how
    /// often an acquisition had to wait.
    fn lock_numbers(&self, extra: &mut BTreeMap<String, f64>) {
        let lock = &self.consumer.lock;
        let lock_ns = lock.waited_ns + lock.waiting_ns(self.now);
        let blocked_ns = self.consumer.blocked_ns
            + self
                .threads
                .iter()
                .filter_map(|t| t.lock_since)
                .map(|s| self.now - s)
                .sum::<Nanos>();
        extra.insert("lock_wait_ns".into(), lock_ns as f64);
        extra.insert("lock_blocked_ns".into(), blocked_ns as f64);
        extra.insert(
            "lock_contention".into(),
            lock.contended as f64 / lock.acquired.max(1) as f64,
        );
    }
}
