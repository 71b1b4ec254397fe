//! The CPU ledger: every nanosecond of every CPU in the measured interval
//! charged to one bucket (idle, an interrupt level, a thread or process),
//! and the promise that each CPU's buckets cover the interval exactly.

use super::interval::Interval;
use rxsched_core::Nanos;
use std::collections::BTreeMap;

/// One CPU's books.
#[derive(Debug, Clone)]
struct Books {
    /// Time charged to each bucket inside the measured interval.
    busy: Vec<Nanos>,
    /// Up to when this CPU has been charged.
    since: Nanos,
}

/// The books of `n` CPUs over one set of buckets.
#[derive(Debug, Clone)]
pub struct Ledger {
    names: Vec<String>,
    cpus: Vec<Books>,
    w: Interval,
}

impl Ledger {
    /// Books for `cpus` CPUs with the buckets `names`, over interval `w`.
    pub fn new(names: Vec<String>, cpus: usize, w: Interval) -> Ledger {
        let books = Books {
            busy: vec![0; names.len()],
            since: 0,
        };
        Ledger {
            names,
            cpus: vec![books; cpus],
            w,
        }
    }

    /// Charges CPU `k`'s time since its last charge, up to `now`, to
    /// bucket `b` (the part inside the measured interval); returns that
    /// time, whole, for whoever keeps a context's own total.
    pub fn account(&mut self, k: usize, b: usize, now: Nanos) -> Nanos {
        let books = &mut self.cpus[k];
        debug_assert!(now >= books.since, "CPU {k} charged backwards in time");
        books.busy[b] += self.w.clip(books.since, now);
        let ran = now - books.since;
        books.since = now;
        ran
    }

    /// The buckets' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// CPU `k`'s time in each bucket, in the order of [`Ledger::names`].
    pub fn busy(&self, k: usize) -> &[Nanos] {
        &self.cpus[k].busy
    }

    /// Each bucket's share of the machine over the measured interval (of
    /// all `n` CPUs, so the shares sum to 1); fails unless every CPU's
    /// buckets cover the interval exactly. Call once every CPU has been
    /// charged up to the interval's end.
    pub fn shares(&self) -> Result<BTreeMap<String, f64>, String> {
        let window = self.w.len();
        for (k, books) in self.cpus.iter().enumerate() {
            let total: Nanos = books.busy.iter().sum();
            if total != window {
                return Err(format!(
                    "CPU {k}'s accounting covers {total} ns of a {window} ns interval"
                ));
            }
        }
        let n = self.cpus.len() as f64;
        let mut shares = BTreeMap::new();
        // CPU by CPU, bucket by bucket: the sums add in one order, so the
        // record is the same to the last bit.
        for books in &self.cpus {
            for (name, ns) in self.names.iter().zip(&books.busy) {
                *shares.entry(name.clone()).or_insert(0.0) += *ns as f64 / window as f64 / n;
            }
        }
        Ok(shares)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_clipped_to_the_interval_and_must_cover_it() {
        let w = Interval { w0: 10, end: 30 };
        let mut l = Ledger::new(vec!["idle".into(), "busy".into()], 2, w);
        assert_eq!(l.account(0, 1, 15), 15);
        assert_eq!(l.busy(0), &[0, 5]);
        l.account(0, 0, 40);
        assert!(l.shares().is_err(), "CPU 1 has charged nothing");
        l.account(1, 1, 30);
        let s = l.shares().unwrap();
        assert_eq!(s["idle"], 15.0 / 20.0 / 2.0);
        assert_eq!(s["busy"], 5.0 / 20.0 / 2.0 + 0.5);
    }
}
