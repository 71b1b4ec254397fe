//! The screening stage (Mogul & Ramakrishnan 1996 §6.6.1's `screend`): a
//! separate, normal-priority process that takes each routed frame from the
//! router's screening queue, applies an ordered accept/deny rule set, and
//! sends what it accepts on the output port the router chose. As with
//! screend, whose verdict went back to the kernel through a system call that
//! finished the forwarding, the output work is the screening process's own
//! and is charged to it.
//!
//! The router is the queue's producer ([`crate::stage::StageQueue`]); its
//! queue-state feedback (M3) watches the queue's length. Every frame the
//! router queued is accepted and sent, accepted and refused by a full
//! output device (`output_queue`), denied by a rule (counted per rule), or
//! still queued.

use crate::backend::TxBackend;
use crate::rules::{Action, Decided, Flow, Rules};
use crate::stage::{StageFds, StageProcess, StageQueue};
use crate::sys::{self, SysResult};
use std::collections::BTreeMap;
use std::time::Duration;

/// Counter: frames a rule accepted.
pub const ACCEPTED: usize = 0;
/// Counter: accepted frames the output device took.
pub const SENT: usize = 1;
/// Counter: accepted frames the output device refused, after retrying.
pub const TX_DROPPED: usize = 2;
/// Counter: the first of the per-rule denial counters (rule `i` at
/// `DENIED + i`, the default deny after the last rule).
pub const DENIED: usize = 3;

/// Frames screened and sent in one batch at most.
const BATCH: u32 = 256;
/// How often a full output device is retried before its frames are dropped.
const TX_RETRIES: usize = 4;

/// How many consumer counters a queue needs for `rules`.
pub fn counters_for(rules: &Rules) -> u32 {
    (DENIED + rules.rules.len() + 1) as u32
}

/// What the screening stage did, read from its queue's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScreenCounts {
    /// Frames a rule accepted.
    pub accepted: u64,
    /// Accepted frames sent.
    pub sent: u64,
    /// Accepted frames the output device refused.
    pub tx_dropped: u64,
    /// Frames denied, by the rule that denied them (`rule2_line5`, `default`).
    pub denied: BTreeMap<String, u64>,
}

impl ScreenCounts {
    /// Reads the counters of `q`, whose consumer screens with `rules`.
    pub fn read(q: &StageQueue, rules: &Rules) -> ScreenCounts {
        let mut denied = BTreeMap::new();
        for i in 0..=rules.rules.len() {
            let by = if i < rules.rules.len() {
                Decided::Rule(i)
            } else {
                Decided::Default
            };
            let n = q.counter(DENIED + i);
            if n > 0 {
                denied.insert(rules.label(by), n);
            }
        }
        ScreenCounts {
            accepted: q.counter(ACCEPTED),
            sent: q.counter(SENT),
            tx_dropped: q.counter(TX_DROPPED),
            denied,
        }
    }

    /// Frames denied by any rule.
    pub fn denied_total(&self) -> u64 {
        self.denied.values().sum()
    }
}

/// Screens `q` until the producer says stop (or `stop()` says so), then
/// finishes what is queued: each frame is judged by `rules` and, if
/// accepted, sent on `tx[port]`.
pub fn serve<T: TxBackend>(
    q: &StageQueue,
    rules: &Rules,
    tx: &mut [T],
    stop: &dyn Fn() -> bool,
) -> SysResult<()> {
    loop {
        if screen_batch(q, rules, tx)? == 0 {
            if q.stopping() || stop() {
                return Ok(());
            }
            q.wait_for_work(100)?;
        }
    }
}

/// Screens up to one batch of what `q` holds; returns how many frames.
pub fn screen_batch<T: TxBackend>(q: &StageQueue, rules: &Rules, tx: &mut [T]) -> SysResult<u32> {
    let n = q.len().min(BATCH);
    if n == 0 {
        return Ok(0);
    }
    let mut out: Vec<Vec<&[u8]>> = Vec::new();
    out.resize_with(tx.len(), Vec::new);
    for k in 0..n {
        let Some(s) = q.peek_at(k) else { break };
        let (action, by) = rules.verdict(&Flow::of_frame(s.data));
        match (action, out.get_mut(s.port as usize)) {
            (Action::Accept, Some(o)) => {
                q.count(ACCEPTED, 1);
                o.push(s.data);
            }
            (Action::Accept, None) => {
                // No such port: the router and the stage disagree on the
                // ports; counted as refused by the device.
                q.count(ACCEPTED, 1);
                q.count(TX_DROPPED, 1);
            }
            (Action::Deny, _) => {
                let i = match by {
                    Decided::Rule(i) => i,
                    Decided::Default => rules.rules.len(),
                };
                q.count(DENIED + i, 1);
            }
        }
    }
    for (port, frames) in out.iter().enumerate() {
        let sent = send_all(&mut tx[port], frames)?;
        q.count(SENT, sent as u64);
        q.count(TX_DROPPED, (frames.len() - sent) as u64);
    }
    q.pop(n);
    Ok(n)
}

/// Sends `frames`, waiting for room (up to [`TX_RETRIES`] times 1 ms) when
/// the device takes fewer; returns how many it took.
fn send_all<T: TxBackend>(tx: &mut T, frames: &[&[u8]]) -> SysResult<usize> {
    let mut sent = 0;
    let mut tries = 0;
    while sent < frames.len() {
        let k = match tx.send(&frames[sent..]) {
            Ok(k) => k,
            // The output port is down or gone: the rest are dropped.
            Err(e) if sys::is_link_error(&e.source) => break,
            Err(e) => return Err(e),
        };
        sent += k;
        if k == 0 {
            tries += 1;
            if tries > TX_RETRIES {
                break;
            }
            match tx.fd() {
                Some(fd) => {
                    sys::poll_fds(&[fd], libc::POLLOUT, 1)?;
                }
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }
    Ok(sent)
}

/// How the router starts its screening process.
#[derive(Debug, Clone)]
pub struct ScreenConfig {
    /// The rule file (the process reads it again; the router has checked it).
    pub rules_path: String,
    /// The rules, as the router read them (for the report's labels).
    pub rules: Rules,
    /// The screening queue's length, in frames (Mogul & Ramakrishnan 1996
    /// §6.6.1: 32).
    pub queue: u32,
    /// The program to run as the screening process (`rxsched`, whose
    /// hidden `screend` command calls [`process_main`]).
    pub exe: std::path::PathBuf,
}

/// The screening process, started by the router.
pub struct Screend(StageProcess);

impl Screend {
    /// Starts `cfg.exe screend` on queue `q`, sending on `ports`, pinned
    /// to `cpu`.
    pub fn spawn(
        cfg: &ScreenConfig,
        q: &StageQueue,
        ports: &[String],
        cpu: Option<usize>,
    ) -> SysResult<Screend> {
        let mut args = vec![
            "screend".to_string(),
            "--rules".into(),
            cfg.rules_path.clone(),
            "--ports".into(),
            ports.join(","),
        ];
        if let Some(c) = cpu {
            args.extend(["--cpu".to_string(), c.to_string()]);
        }
        Ok(Screend(StageProcess::spawn(&cfg.exe, &args, q)?))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.0.pid()
    }

    /// Tells the process to finish what is queued and waits for it (up to
    /// `grace`, then kills it). Returns its exit status if it exited by itself.
    pub fn stop(self, q: &StageQueue, grace: Duration) -> SysResult<Option<i32>> {
        Ok(self.0.stop(q, grace))
    }
}

/// The screening process: attaches to the queue by the inherited
/// descriptors `fds`, reads `rules_path`, opens a transmit socket on each
/// of `ports`, and screens until the router says stop.
pub fn process_main(
    fds: StageFds,
    rules_path: &str,
    ports: &[String],
    cpu: Option<usize>,
) -> Result<(), String> {
    // SAFETY: the descriptors were inherited from the router for this.
    let q = unsafe { StageQueue::attach(fds) }.map_err(|e| e.to_string())?;
    let rules = Rules::load(rules_path).map_err(|e| e.to_string())?;
    if counters_for(&rules) > q.counters() {
        return Err(format!(
            "{rules_path}: the rule file changed since the router read it"
        ));
    }
    sys::signals::install();
    if let Some(c) = cpu {
        sys::pin_to_cpu(c).map_err(|e| e.to_string())?;
    }
    sys::set_normal().map_err(|e| e.to_string())?;
    let mut tx = ports
        .iter()
        .map(|p| crate::backend::packet::PacketTx::open(p))
        .collect::<SysResult<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    serve(&q, &rules, &mut tx, &sys::signals::stopping).map_err(|e| e.to_string())
}
