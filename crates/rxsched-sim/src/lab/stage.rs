//! The stage behind the router on the lab host: the screening process
//! (`route --screen`, the paper's screend) or the monitor's writer thread
//! (`rxsched capture`). A normal thread behind the router's queue, woken
//! by the router's kick when it sleeps, handling up to a batch of frames
//! at a time; the frames stay on its queue until the batch is done, and
//! when M3 asked for it, it kicks the router once the queue has drained to
//! the level M3 resumes at. Also the copying monitor's ring buffer, and
//! the program's wake-ups of the monitor.

use super::{Item, Lab, LabForwarder, COPY_LOOK_NS, ROUTER, STAGE};
use rxsched_core::{DropPoint, Nanos, Wake};

/// The most frames the screening process screens and sends in one batch
/// (`screen.rs`'s `BATCH`).
const SCREEN_BATCH: usize = 256;
/// The most frames the writer writes in one batch (`WRITE_BATCH`).
const WRITE_BATCH: usize = 64;

impl Lab {
    /// The stage's costs: (a run, a frame) and its batch.
    pub(super) fn stage_costs(&self) -> (Nanos, Nanos, usize) {
        let c = &self.c;
        if self.fwd.captures() {
            (c.writer_run, c.writer_frame, WRITE_BATCH)
        } else {
            (c.screen_run, c.screen_frame, SCREEN_BATCH)
        }
    }

    /// The router hands `frames` to the stage's queue: those it has no
    /// room for are dropped there; the stage is kicked if it sleeps.
    pub(super) fn hand_to_stage(&mut self, frames: Vec<Nanos>) {
        let room = self.sq_cap.saturating_sub(self.sq.len());
        let kept = frames.len().min(room);
        self.sq.extend(&frames[..kept]);
        let at = if self.fwd.captures() {
            DropPoint::FilterQueue
        } else {
            DropPoint::ScreenQueue
        };
        self.drop(at, (frames.len() - kept) as u64);
        if kept > 0 && !self.cpu.t[STAGE].runnable {
            // Its run's cost comes as it is switched in.
            self.item[STAGE] = Some((Item::StageRun, 0));
            self.cpu.wake(STAGE);
        }
    }

    /// The router queued its `n`th frame of a batch: M3 hears the queue's
    /// length; an inhibit that begins asks the stage for a kick at the
    /// level input resumes at.
    pub(super) fn stage_level(&mut self, n: usize) {
        let len = (self.sq.len() + n).min(self.sq_cap) as u32;
        let now = self.now;
        let Some(lp) = self.lp.as_mut() else { return };
        if let Wake::At(_) = lp.queue_level(len, now) {
            let low = lp.facility().feedback().and_then(|f| f.resume_at());
            self.kick_at = low.map(|l| l as usize);
        }
    }

    /// The stage's next batch, or its sleep.
    pub(super) fn stage_next(&mut self) {
        let (_, per_frame, batch) = self.stage_costs();
        let n = self.sq.len().min(batch);
        if n == 0 {
            self.item[STAGE] = None;
            self.cpu.sleep(STAGE);
            return;
        }
        self.item[STAGE] = Some((Item::StageBatch(n), per_frame * n as u64));
    }

    /// A batch was sent or written (the lab's frames all pass the rules):
    /// off the queue, delivered; the router kicked if it asked.
    pub(super) fn staged_out(&mut self, n: usize) {
        let frames: Vec<Nanos> = self.sq.drain(..n).collect();
        self.deliver(&frames);
        if self.kick_at.is_some_and(|l| self.sq.len() <= l) {
            self.kick_at = None;
            let (now, len) = (self.now, self.sq.len() as u32);
            let lp = self
                .lp
                .as_mut()
                .expect("only a polling router asks for a kick");
            if lp.queue_level(len, now) == Wake::Now && !self.cpu.t[ROUTER].runnable {
                // The kick ends the router's wait, and the timeout it waited with.
                self.timer = None;
                self.router_wake();
            }
        }
        self.stage_next();
    }

    /// The copying program's NAPI poll: copies of the frames the ring
    /// buffer has room for (the rest go uncopied, `copy_ring`); the host's
    /// stack takes the frames themselves. The program wakes the monitor
    /// when the unread copies cross `copy_wake`, or when it last did so a
    /// millisecond ago or more.
    pub(super) fn copied(&mut self, frames: Vec<Nanos>) {
        debug_assert_eq!(self.fwd, LabForwarder::CaptureCopy);
        let before = self.xsk.len();
        let kept = frames.len().min(self.xsk_room());
        self.xsk.extend(&frames[..kept]);
        self.drop(DropPoint::CopyRing, (frames.len() - kept) as u64);
        if kept == 0 {
            return;
        }
        let at = self.c.copy_wake as usize;
        let crossed = before < at && self.xsk.len() >= at;
        let due = self.copy_woke.is_none_or(|t| self.now >= t + COPY_LOOK_NS);
        if crossed || due {
            self.copy_woke = Some(self.now);
            self.socket_ready();
        }
    }
}
