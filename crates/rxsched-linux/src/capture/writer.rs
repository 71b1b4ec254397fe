//! The monitor's writer: a thread that drains the packet-filter queue into
//! the capture files.

use super::save::{Savers, Stats};
use super::{BYTES, WRITTEN};
use crate::stage::StageQueue;
use crate::sys::{self, SysError, SysResult};
use std::sync::{Arc, Mutex};

/// Frames the writer takes off the queue at a time.
const WRITE_BATCH: u32 = 64;

/// What the writer shares with the polling thread.
#[derive(Default)]
pub(super) struct Shared {
    /// The latest counts for a statistics block (pcapng), set by the
    /// polling thread; the writer writes one at most every second.
    pub stats: Mutex<Option<Stats>>,
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The writer thread: every queued frame into its queue's saver, until
/// the polling thread says stop (it then writes what is queued), `count`
/// frames are written (`-c`), or the rotation has made its last file. It
/// returns the savers, for the last statistics blocks.
pub(super) fn spawn_writer(
    queue: Arc<StageQueue>,
    mut saver: Savers,
    shared: Arc<Shared>,
    count: Option<u64>,
    cpu: Option<usize>,
) -> SysResult<std::thread::JoinHandle<std::io::Result<Savers>>> {
    std::thread::Builder::new()
        .name("rxsched-pcap".into())
        .spawn(move || {
            if let Some(c) = cpu {
                sys::pin_to_cpu(c).map_err(|e| e.source)?;
            }
            let mut last_stats = now_s();
            let mut stats: Option<Stats> = None;
            let mut written = 0u64;
            loop {
                let room = count.map_or(u64::MAX, |c| c.saturating_sub(written));
                let n = (queue.len() as u64).min(WRITE_BATCH as u64).min(room) as u32;
                if room == 0 {
                    break;
                }
                // Once a second: the polling thread's latest counts, into
                // a statistics block, and kept for the blocks that close
                // rotated files.
                let now = now_s();
                if now > last_stats {
                    let s = shared
                        .stats
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                    if let Some(s) = &s {
                        saver.stats(s)?;
                        last_stats = now;
                    }
                    stats = s;
                }
                if n == 0 {
                    if queue.stopping() {
                        break;
                    }
                    queue.wait_for_work(100).map_err(|e| e.source)?;
                    continue;
                }
                let mut done = 0;
                let mut more = true;
                for k in 0..n {
                    let Some(f) = queue.peek_at(k) else { break };
                    let s = saver.get(f.port, now)?;
                    if !s.write(f.ts_ns, f.orig_len, f.data, now, stats.as_ref())? {
                        more = false;
                        break;
                    }
                    queue.count(WRITTEN, 1);
                    queue.count(BYTES, f.data.len() as u64);
                    done += 1;
                }
                queue.pop(done);
                written += done as u64;
                if !more {
                    break;
                }
            }
            Ok(saver)
        })
        .map_err(|e| SysError {
            what: "pcap writer".into(),
            syscall: "clone",
            source: e,
        })
}
