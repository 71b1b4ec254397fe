//! The kernels: each owns its queues and costs, and drives the
//! `rxsched-core` policies on the [`Machine`] it is handed; its steps are
//! in `crate::host::step`, and the host builds it (`crate::host::Host`).
//!
//! - [`bsd`]: the 4.2BSD interrupt-driven path (M1, with the M5 circuit
//!   breaker), and the BSD network stack the polling kernel shares;
//! - [`polling`]: interrupt-initiated polling (M2, with M3 and M4);
//! - [`linux`]: Linux 2.6's forwarding path with NAPI and the transmit
//!   reclaim variants (M7, M8);
//! - [`srp`]: a receiving host under Signaled Receiver Processing (M9) or
//!   Lazy Receiver Processing (M10).

pub mod bsd;
pub mod linux;
pub mod polling;
pub mod server;
pub mod srp;

use super::cpu::CtxId;
use super::event::Timer;
use super::machine::Machine;
use super::step::{IntrSrc, Step};
use crate::engine::packet::Packet;
use rxsched_core::Nanos;
use std::collections::BTreeMap;

/// What a kernel adds to the metrics record.
#[derive(Debug, Default)]
pub struct KernelReport {
    /// Input-inhibit episodes by cause.
    pub inhibits: BTreeMap<String, u64>,
    /// Interrupt/poll mode switches.
    pub mode_switches: u64,
    /// Kernel-specific numbers.
    pub extra: BTreeMap<String, f64>,
}

/// A kernel's receive architecture, as the host's event loop drives it.
pub trait Kernel: std::fmt::Debug {
    /// The name of the kernel thread's CPU-accounting bucket.
    fn kthread_bucket(&self) -> &'static str {
        "kernel_thread"
    }

    /// A frame was put on port `n`'s receive ring.
    fn rx_arrived(&mut self, m: &mut Machine, n: u8);

    /// A frame's last bit reached its port: the kernel may take it onto a
    /// receive ring of its own (another receive queue of the port), or
    /// drop it there if that ring is full, and say so; otherwise it goes
    /// onto the port's ring and [`Kernel::rx_arrived`] follows.
    fn take_arrival(&mut self, _m: &mut Machine, _p: Packet) -> bool {
        false
    }

    /// A frame was put on port `n`'s protected ring (`kernel.protect`). A
    /// kernel that does not serve that ring apart takes it as the port's.
    fn rx_arrived_protected(&mut self, m: &mut Machine, n: u8) {
        self.rx_arrived(m, n);
    }

    /// A frame left port `n`'s wire; its buffer waits in `done_q`.
    fn tx_done(&mut self, m: &mut Machine, n: u8);

    /// An interrupt handler is about to be entered.
    fn isr_enter(&mut self, _m: &mut Machine, _src: IntrSrc) {}

    /// The handler's next step after its entry; `None` when it is done.
    fn isr_step(&mut self, m: &mut Machine, src: IntrSrc) -> Option<Step>;

    /// The handler returned.
    fn isr_exit(&mut self, _m: &mut Machine, _src: IntrSrc) {}

    /// Work that context `c` must finish before anything else (a driver
    /// loading its transmit ring from that context).
    fn driver_step(&mut self, _m: &mut Machine, _c: CtxId) -> Option<Step> {
        None
    }

    /// The next step of the software interrupt or the kernel thread.
    fn next_step(&mut self, m: &mut Machine, c: CtxId) -> Option<Step>;

    /// A step of this kernel's (or an interrupt entry) finished in context `c`.
    fn complete(&mut self, m: &mut Machine, c: CtxId, step: Step);

    /// The CPU cost of a step of this kernel's, or of an interrupt entry.
    fn cost(&self, m: &Machine, step: Step) -> Nanos;

    /// One of this kernel's timers fired.
    fn timer(&mut self, _m: &mut Machine, _t: Timer) {}

    /// The CPU is about to idle; returns true if that made work runnable.
    fn idle(&mut self, _m: &mut Machine) -> bool {
        false
    }

    /// Whether this kernel decides what user process `u` does (a receiver
    /// whose protocol work the kernel hands it).
    fn owns_user(&self, _u: usize) -> bool {
        false
    }

    /// The next step of a user process the kernel owns; `None` when it
    /// sleeps.
    fn user_step(&mut self, _m: &mut Machine, _u: usize) -> Option<Step> {
        None
    }

    /// The watched queue (screend's or the packet filter's) changed length (M3 watches it).
    fn queue_level(&mut self, _m: &mut Machine) {}

    /// screend accepted `p`: what its context does next (`ip_output`).
    fn screened(&mut self, p: Packet) -> Option<Step>;

    /// Packets in the kernel's own queues.
    fn in_flight(&self) -> u64;

    /// Counters for the metrics record.
    fn report(&self) -> KernelReport;
}
