//! The router's live line: its counters' rates since the last line, every
//! few seconds (`--stats-every`) and on SIGUSR1, on standard error.

use super::report::{Counters, Devices, RouterReport};
use super::{Mode, ScreenEnd};
use crate::sys;
use std::sync::atomic::Ordering::Relaxed;

/// One line of live counters.
pub fn live_line(
    mode: Mode,
    c: &Counters,
    screen: Option<&ScreenEnd>,
    program: &[u64],
    extra: &str,
    prev: &mut (u64, u64, u64),
    now: u64,
) -> String {
    let sent = screen.map_or(0, |s| s.queue.counter(crate::screen::SENT));
    // Forwarding in XDP (`program`, the devices' counts): what the program
    // took or dropped is the router's input, what it took is forwarded.
    let mut from_program = RouterReport::new(mode, &Counters::default(), 0, 0);
    from_program.add_program(program, true);
    let rx = c.rx.load(Relaxed) + from_program.rx;
    let fw = c.forwarded.load(Relaxed) + sent + from_program.forwarded;
    let dt = (now.saturating_sub(prev.2)).max(1) as f64 / 1e9;
    let by_device = c.devices.get().map_or(0, |base| {
        Devices::read(&base.ports())
            .map(|now| now.since(base).values().map(|r| r.total()).sum())
            .unwrap_or(0)
    });
    let line = format!(
        "route {}: rx {:.0}/s forwarded {:.0}/s; drops ipintrq {} output_queue {} screen_queue {}; refused {} (by the devices {by_device}){extra}",
        mode.name(),
        (rx - prev.0) as f64 / dt,
        (fw - prev.1) as f64 / dt,
        c.ipintrq.load(Relaxed),
        c.output_queue.load(Relaxed),
        c.screen_queue.load(Relaxed),
        c.refused_total(),
    );
    *prev = (rx, fw, now);
    line
}

/// Live counters every `every_ns` (if not 0) and on SIGUSR1.
pub struct Stats {
    every: u64,
    next: u64,
    prev: (u64, u64, u64),
}

impl Stats {
    /// Starting at `t0`.
    pub fn new(every_s: f64, t0: u64) -> Stats {
        let every = (every_s * 1e9) as u64;
        Stats {
            every,
            next: if every > 0 { t0 + every } else { u64::MAX },
            prev: (0, 0, t0),
        }
    }

    /// The next time a line is due.
    pub fn due(&self) -> u64 {
        self.next
    }

    /// Prints a line to stderr if one is due at `now`.
    pub fn tick(
        &mut self,
        mode: Mode,
        c: &Counters,
        screen: Option<&ScreenEnd>,
        extra: &str,
        now: u64,
    ) {
        if now >= self.next || sys::signals::take_usr1() {
            eprintln!(
                "{}",
                live_line(mode, c, screen, &[], extra, &mut self.prev, now)
            );
            if now >= self.next {
                self.next += self.every;
            }
        }
    }
}
