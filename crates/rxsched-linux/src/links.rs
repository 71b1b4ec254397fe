//! Watching the ports' links while a dataplane runs: a port that goes down
//! is reported once and waited for (its input simply stops; frames routed
//! to it are dropped at `port_down`), and one that comes back is reported
//! too; a port that disappears (deleted, or its namespace torn down) ends
//! the run, which then exits with its report.

use crate::sys::{self, LinkState, SysResult};

/// How often the links are looked at while nothing else asks, in ns.
pub const CHECK_EVERY_NS: u64 = 200_000_000;

/// The ports' link states, as last seen.
pub struct LinkWatch {
    who: &'static str,
    names: Vec<String>,
    seen: Vec<LinkState>,
    next_ns: u64,
}

impl LinkWatch {
    /// Starts watching `names` (which must exist now); `who` names the
    /// program in its messages (`route`, `capture`).
    pub fn new(who: &'static str, names: &[String], now: u64) -> SysResult<LinkWatch> {
        let seen = names
            .iter()
            .map(|n| {
                sys::link_state(n)?.ok_or_else(|| sys::SysError {
                    what: n.clone(),
                    syscall: "if_nametoindex",
                    source: std::io::Error::from_raw_os_error(libc::ENODEV),
                })
            })
            .collect::<SysResult<Vec<_>>>()?;
        for (n, s) in names.iter().zip(&seen) {
            if !s.up {
                eprintln!("rxsched {who}: {n} is down; waiting for it to come up");
            }
        }
        Ok(LinkWatch {
            who,
            names: names.to_vec(),
            seen,
            next_ns: now + CHECK_EVERY_NS,
        })
    }

    /// When the next periodic look is due, in ns.
    pub fn next(&self) -> u64 {
        self.next_ns
    }

    /// Whether a periodic look is due.
    pub fn due(&self, now: u64) -> bool {
        now >= self.next_ns
    }

    /// Whether port `i` was up when last seen.
    pub fn up(&self, i: usize) -> bool {
        self.seen[i].up
    }

    /// Looks at every link now, reporting changes once each on stderr.
    /// Returns why the run must end if a port has disappeared.
    pub fn check(&mut self, now: u64) -> SysResult<Option<String>> {
        self.next_ns = now + CHECK_EVERY_NS;
        for (i, name) in self.names.iter().enumerate() {
            let was = self.seen[i];
            let Some(s) = sys::link_state(name)?.filter(|s| s.index == was.index) else {
                return Ok(Some(format!(
                    "{name} has disappeared (the device was deleted, or its network namespace torn down)"
                )));
            };
            match (was.up, s.up) {
                (true, false) => eprintln!(
                    "rxsched {}: {name} went down; waiting for it to come back (frames routed to it are dropped at port_down)",
                    self.who
                ),
                (false, true) => eprintln!("rxsched {}: {name} is up again", self.who),
                _ => {}
            }
            self.seen[i] = s;
        }
        Ok(None)
    }

    /// Reports errors the ports' descriptors gave (once per change of
    /// error), and looks at the links at once.
    pub fn errors(
        &mut self,
        errs: Vec<(usize, std::io::Error)>,
        now: u64,
    ) -> SysResult<Option<String>> {
        if errs.is_empty() {
            return Ok(None);
        }
        for (i, e) in &errs {
            if let Some(n) = self.names.get(*i) {
                if !sys::is_link_error(e) {
                    eprintln!("rxsched {}: {n}: {e}", self.who);
                }
            }
        }
        self.check(now)
    }
}
