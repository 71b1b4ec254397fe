//! The Linux 2.6 forwarding path (Spanos et al. 2008): one interrupt line
//! per port shared by receive and transmit events, the NET_RX softirq, the
//! per-CPU backlog without NAPI, NAPI polling with it, and the three ways
//! of reclaiming transmitted buffers.

use super::{Host, IntrSrc, Packet, Step, SOFT};
use crate::profile::LinuxCosts;
use rxsched_core::{DeviceId, DropPoint, Nanos, Napi, NapiAction, NapiConfig, TxReclaim};
use std::collections::VecDeque;

/// A NAPI poll in progress.
#[derive(Debug, Clone, Copy)]
pub(super) struct PollJob {
    port: u8,
    dev: DeviceId,
    limit: u32,
    done: u32,
}

/// The Linux kernel's own state.
pub(super) struct LinuxState {
    pub(super) c: LinuxCosts,
    pub(super) napi: Option<Napi>,
    pub(super) reclaim: TxReclaim,
    /// The per-CPU input queue that `netif_rx` feeds without NAPI.
    pub(super) backlog: VecDeque<Packet>,
    pub(super) backlog_cap: usize,
    /// NET_RX/NET_TX raised and not yet run.
    pub(super) soft_pending: bool,
    /// The softirq is running (it may be preempted by hard interrupts).
    pub(super) soft_active: bool,
    pub(super) job: Option<PollJob>,
    /// The ISR's receive work in progress: whether this entry handles receive
    /// events, and whether it handles transmit completions.
    pub(super) isr_rx: bool,
    pub(super) isr_tx: bool,
    /// Frames handed to devices so far: a buffer's age at reclaim.
    pub(super) xmit_seq: u64,
    pub(super) cold_reclaims: u64,
}

impl LinuxState {
    pub(super) fn new(
        c: LinuxCosts,
        napi: bool,
        cfg: NapiConfig,
        reclaim: TxReclaim,
        backlog_cap: u32,
    ) -> Self {
        LinuxState {
            c,
            napi: napi.then(|| Napi::new(cfg)),
            reclaim,
            backlog: VecDeque::new(),
            backlog_cap: backlog_cap as usize,
            soft_pending: false,
            soft_active: false,
            job: None,
            isr_rx: false,
            isr_tx: false,
            xmit_seq: 0,
            cold_reclaims: 0,
        }
    }
}

impl Host {
    fn lx(&mut self) -> &mut LinuxState {
        self.linux.as_mut().expect("the Linux kernel is configured")
    }

    /// Whether port `n` would raise its interrupt for a receive event now.
    pub(super) fn linux_rx_irq_enabled(&self, n: usize) -> bool {
        let l = self.linux.as_ref().expect("the Linux kernel is configured");
        l.napi
            .as_ref()
            .is_none_or(|napi| !napi.masked(self.nics[n].dev))
    }

    /// A frame finished on port `n`'s wire: maybe a transmit interrupt.
    pub(super) fn linux_tx_done(&mut self, n: usize) {
        let reclaim = self.lx().reclaim;
        let nic = &mut self.nics[n];
        nic.since_irq += 1;
        if reclaim.interrupt_now(nic.since_irq) {
            nic.since_irq = 0;
            nic.tx_irq_pending = true;
            self.post(IntrSrc::Port(n as u8));
        }
    }

    /// The cost of a Linux step.
    pub(super) fn linux_cost(&self, step: Step) -> Nanos {
        let c = &self
            .linux
            .as_ref()
            .expect("the Linux kernel is configured")
            .c;
        match step {
            Step::IntrEnter(_) => c.t_cs_in + c.t_cs_out,
            Step::RxLinux(p) => c.t_rx + (p.bytes as f64 * c.t_copy_per_byte).round() as Nanos,
            Step::IpLinux(_) => c.t_ip,
            Step::Xmit(..) => c.t_tx,
            Step::TxReclaim(_, p) => {
                let age = self
                    .linux
                    .as_ref()
                    .map_or(0, |l| l.xmit_seq.saturating_sub(p.seq));
                c.t_skb
                    + if age > c.cache_buffers {
                        c.t_skb_cold
                    } else {
                        0
                    }
            }
            _ => 0,
        }
    }

    /// The interrupt service routine of port `n`, after entry: receive
    /// events (NAPI: mask and schedule; otherwise `netif_rx` every frame on
    /// the ring), then transmit completions if the line was raised for them.
    pub(super) fn next_isr_linux(&mut self, n: u8) -> Option<Step> {
        let ni = n as usize;
        if self.lx().isr_rx && !self.nics[ni].rx.is_empty() {
            if self.lx().napi.is_some() {
                let dev = self.nics[ni].dev;
                let l = self.lx();
                l.isr_rx = false;
                if l.napi.as_mut().is_some_and(|napi| napi.interrupt(dev)) {
                    l.soft_pending = true;
                }
            } else {
                let p = self.nics[ni].rx.pop_front().expect("ring has a frame");
                return Some(Step::RxLinux(p));
            }
        }
        if self.lx().isr_tx {
            if let Some(p) = self.nics[ni].done_q.pop_front() {
                return Some(Step::TxReclaim(n, p));
            }
        }
        None
    }

    /// Begins an ISR entry for port `n`: note which events it serves.
    pub(super) fn enter_isr_linux(&mut self, n: u8) {
        let ni = n as usize;
        let rx = !self.nics[ni].rx.is_empty() && self.linux_rx_irq_enabled(ni);
        let tx = std::mem::take(&mut self.nics[ni].tx_irq_pending);
        if rx {
            self.interrupts.rx += 1;
        }
        if tx {
            self.interrupts.tx += 1;
        }
        let l = self.lx();
        l.isr_rx = rx;
        l.isr_tx = tx;
    }

    /// After the ISR: the line is raised again if events came meanwhile.
    pub(super) fn exit_isr_linux(&mut self, n: u8) {
        let ni = n as usize;
        let l = self.lx();
        let reclaimed = std::mem::take(&mut l.isr_tx);
        l.isr_rx = false;
        if reclaimed && !self.nics[ni].out_q.is_empty() {
            // Freed descriptors wake the queue: NET_TX sends what waits.
            self.lx().soft_pending = true;
        }
        let rx_waiting = !self.nics[ni].rx.is_empty() && self.linux_rx_irq_enabled(ni);
        if rx_waiting || self.nics[ni].tx_irq_pending {
            self.post(IntrSrc::Port(n));
        }
    }

    /// Whether port `n` can take a frame now: something waits in its queue
    /// and a descriptor is free (reclaiming first, in before-send mode).
    fn can_xmit(&self, n: usize) -> bool {
        let nic = &self.nics[n];
        let used = nic.tx_ring.len() + nic.wire.is_some() as usize + nic.done_q.len();
        !nic.out_q.is_empty() && used < nic.tx_cap
    }

    /// The NET_RX (and NET_TX) softirq.
    pub(super) fn next_softirq_linux(&mut self) -> Option<Step> {
        let now = self.now;
        if !self.lx().soft_active {
            let l = self.lx();
            if !l.soft_pending {
                return None;
            }
            l.soft_pending = false;
            l.soft_active = true;
            if let Some(napi) = l.napi.as_mut() {
                napi.begin_run(now);
            }
        }
        loop {
            // Transmit first: what the forwarding path queued goes out.
            let reclaim = self.lx().reclaim;
            for n in 0..self.nics.len() {
                if reclaim.before_send() && !self.nics[n].out_q.is_empty() {
                    if let Some(p) = self.nics[n].done_q.pop_front() {
                        return Some(Step::TxReclaim(n as u8, p));
                    }
                }
                if self.can_xmit(n) {
                    let p = self.nics[n].out_q.pop_front().expect("queue has a frame");
                    return Some(Step::Xmit(n as u8, p));
                }
            }
            if self.lx().napi.is_none() {
                let l = self.lx();
                if let Some(p) = l.backlog.pop_front() {
                    return Some(self.begin(Step::IpLinux(p)));
                }
                l.soft_active = false;
                return None;
            }
            match self.lx().job {
                Some(mut job) => {
                    let ni = job.port as usize;
                    if job.done < job.limit && !self.nics[ni].rx.is_empty() {
                        job.done += 1;
                        self.lx().job = Some(job);
                        let p = self.nics[ni].rx.pop_front().expect("ring has a frame");
                        return Some(Step::RxLinux(p));
                    }
                    let drained = self.nics[ni].rx.is_empty();
                    let l = self.lx();
                    l.job = None;
                    let unmask = l
                        .napi
                        .as_mut()
                        .is_some_and(|napi| napi.poll_done(job.dev, job.done, drained));
                    if unmask && !self.nics[ni].rx.is_empty() {
                        self.post(IntrSrc::Port(job.port));
                    }
                }
                None => {
                    let l = self.lx();
                    match l.napi.as_mut().map(|napi| napi.next(now)) {
                        Some(NapiAction::Poll { dev, limit }) => {
                            let port = self
                                .nics
                                .iter()
                                .position(|x| x.dev == dev)
                                .expect("a registered device")
                                as u8;
                            self.lx().job = Some(PollJob {
                                port,
                                dev,
                                limit,
                                done: 0,
                            });
                        }
                        Some(NapiAction::Yield) => {
                            // Budget spent: end this run, and raise the softirq again.
                            l.soft_active = false;
                            l.soft_pending = true;
                            return None;
                        }
                        _ => {
                            l.soft_active = false;
                            return None;
                        }
                    }
                }
            }
        }
    }

    /// Applies a completed Linux step.
    pub(super) fn complete_linux(&mut self, c: usize, step: Step) {
        match step {
            Step::RxLinux(p) => {
                if self.lx().napi.is_some() {
                    // NAPI: straight on to IP in the poll (netif_receive_skb).
                    self.ctx[c].carry = Some(Step::IpLinux(p));
                } else {
                    let l = self.lx();
                    if l.backlog.len() >= l.backlog_cap {
                        self.drops.add(DropPoint::Backlog);
                    } else {
                        l.backlog.push_back(p);
                        l.soft_pending = true;
                    }
                }
            }
            Step::IpLinux(p) => {
                let out = 1 - p.port as usize;
                let nic = &mut self.nics[out];
                if nic.out_q.len() >= nic.out_cap {
                    self.drops.add(DropPoint::OutputQueue);
                } else {
                    nic.out_q.push_back(p);
                    if c != SOFT {
                        self.lx().soft_pending = true;
                    }
                }
            }
            Step::Xmit(n, mut p) => {
                let l = self.lx();
                l.xmit_seq += 1;
                p.seq = l.xmit_seq;
                self.nics[n as usize].tx_ring.push_back(p);
                self.kick(n as usize);
            }
            Step::TxReclaim(_, p) => {
                let l = self.lx();
                if l.xmit_seq.saturating_sub(p.seq) > l.c.cache_buffers {
                    l.cold_reclaims += 1;
                }
            }
            _ => {}
        }
    }
}
