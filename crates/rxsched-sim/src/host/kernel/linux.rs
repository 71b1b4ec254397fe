//! The Linux 2.6 forwarding path (Spanos et al. 2008): one interrupt line
//! per port shared by receive and transmit events, the NET_RX softirq, the
//! per-CPU backlog without NAPI, NAPI polling with it (M7), and the three
//! ways of reclaiming transmitted buffers (M8). A port may have several
//! receive queues (`kernel.rx_queues`), each a vector of its own: vector
//! `q * ports + port`, queue 0's ring being the device's own `Nic::rx`.

use super::{Kernel, KernelReport};
use crate::engine::job::per_byte;
use crate::engine::packet::Packet;
use crate::host::cpu::{CtxId, SOFT};
use crate::host::event::{Ev, Timer};
use crate::host::machine::Machine;
use crate::host::step::linux::Step;
use crate::host::step::{self, IntrSrc};
use crate::profile::{LinuxCosts, Profile};
use crate::scenario::Scenario;
use rand::Rng;
use rxsched_core::{DeviceId, DropPoint, Nanos, Napi, NapiAction, NapiConfig, TxReclaim};
use std::collections::VecDeque;

/// A NAPI poll in progress.
#[derive(Debug, Clone, Copy)]
struct PollJob {
    /// The receive queue's vector.
    port: u8,
    dev: DeviceId,
    limit: u32,
    done: u32,
}

/// The Linux kernel's own state.
#[derive(Debug)]
pub struct Linux {
    c: LinuxCosts,
    napi: Option<Napi>,
    /// Per vector: its NAPI instance.
    devs: Vec<DeviceId>,
    ports: usize,
    queues: usize,
    /// The rings of the queues after each port's first, and their size.
    extra: Vec<VecDeque<Packet>>,
    ring_cap: usize,
    /// Per `[[traffic]]` source: its flows (0: many).
    flows: Vec<u32>,
    reclaim: TxReclaim,
    /// The per-CPU input queue that `netif_rx` feeds without NAPI.
    backlog: VecDeque<Packet>,
    backlog_cap: usize,
    /// `netif_rx`'s throttle (Linux 2.6.9), if the kernel has one: set
    /// when the backlog overflows, it drops every frame until the backlog
    /// has emptied; and how often it was set.
    has_throttle: bool,
    throttle: bool,
    throttled: u64,
    /// Frames dropped at the backlog while it had room (the throttle on).
    throttled_drops: u64,
    /// NET_RX/NET_TX raised and not yet run.
    soft_pending: bool,
    /// The softirq is running (it may be preempted by hard interrupts).
    soft_active: bool,
    job: Option<PollJob>,
    /// The ISR entry in progress handles receive events / transmit completions.
    isr_rx: bool,
    isr_tx: bool,
    /// Per port: the line is raised for transmit completions.
    tx_irq_pending: Vec<bool>,
    /// Per port: completions since the last transmit interrupt.
    since_irq: Vec<u32>,
    /// Frames handed to devices so far: a buffer's age at reclaim.
    xmit_seq: u64,
    cold_reclaims: u64,
    /// ISR entries for the ports, whatever each served; and those that
    /// served receive events, and transmit completions (one entry may
    /// serve both).
    isr_entries: u64,
    entries_rx: u64,
    entries_tx: u64,
    /// Frames taken off the receive rings, and buffers the ISR reclaimed.
    rx_taken: u64,
    isr_reclaims: u64,
    /// Receive interrupt coalescing: the delay and the frame count.
    rx_usecs: Nanos,
    rx_frames: u32,
    /// Per vector: frames arrived since its last receive interrupt, and
    /// whether its coalescing timer runs.
    held: Vec<u32>,
    timer_set: Vec<bool>,
}

impl Linux {
    /// The kernel a scenario configures.
    pub fn new(s: &Scenario, p: &Profile, ports: usize) -> Linux {
        let k = &s.kernel;
        let (napi, reclaim) = k.linux_modes();
        let cfg = NapiConfig {
            weight: k.napi_weight,
            budget_packets: k.napi_budget,
            budget_ns: (k.napi_budget_us * 1e3) as Nanos,
        };
        let mut napi = napi.then(|| Napi::new(cfg));
        let queues = k.rx_queues.max(1) as usize;
        let vectors = ports * queues;
        let devs = (0..vectors)
            .map(|i| napi.as_mut().map_or(DeviceId(i), |n| n.register()))
            .collect();
        Linux {
            c: p.linux.clone().unwrap_or_default(),
            napi,
            devs,
            ports,
            queues,
            extra: vec![VecDeque::new(); vectors - ports],
            ring_cap: p.nic.rx_ring as usize,
            flows: s.traffic.iter().map(|t| t.flows).collect(),
            reclaim,
            backlog: VecDeque::new(),
            backlog_cap: k.backlog_limit as usize,
            has_throttle: k.backlog_throttle,
            throttle: false,
            throttled: 0,
            throttled_drops: 0,
            soft_pending: false,
            soft_active: false,
            job: None,
            isr_rx: false,
            isr_tx: false,
            tx_irq_pending: vec![false; ports],
            since_irq: vec![0; ports],
            xmit_seq: 0,
            cold_reclaims: 0,
            isr_entries: 0,
            entries_rx: 0,
            entries_tx: 0,
            rx_taken: 0,
            isr_reclaims: 0,
            rx_usecs: (k.rx_usecs * 1e3).round() as Nanos,
            rx_frames: k.rx_frames,
            held: vec![0; vectors],
            timer_set: vec![false; vectors],
        }
    }

    /// Vector `v`'s receive ring.
    fn ring<'a>(&'a mut self, m: &'a mut Machine, v: usize) -> &'a mut VecDeque<Packet> {
        if v < self.ports {
            &mut m.nics[v].rx
        } else {
            &mut self.extra[v - self.ports]
        }
    }

    /// Whether vector `v`'s ring holds a frame.
    fn has_rx(&self, m: &Machine, v: usize) -> bool {
        if v < self.ports {
            !m.nics[v].rx.is_empty()
        } else {
            !self.extra[v - self.ports].is_empty()
        }
    }

    /// A frame is on vector `v`'s ring: raise its interrupt now, or when
    /// coalescing lets it.
    fn rx_event(&mut self, m: &mut Machine, v: usize) {
        if !self.rx_irq_enabled(v) {
            return;
        }
        if !self.coalescing() {
            m.raise(IntrSrc::Port(v as u8));
            return;
        }
        // Coalescing: the interrupt waits for `rx_frames` frames, or
        // `rx_usecs` after the first frame it waits for.
        self.held[v] += 1;
        if self.rx_frames > 1 && self.held[v] >= self.rx_frames {
            self.held[v] = 0;
            m.raise(IntrSrc::Port(v as u8));
        } else if !self.timer_set[v] {
            self.timer_set[v] = true;
            m.push(m.now + self.rx_usecs, Ev::Timer(Timer::Coalesce(v as u8)));
        }
    }

    /// Whether the device coalesces receive interrupts.
    fn coalescing(&self) -> bool {
        self.rx_usecs > 0 || self.rx_frames > 1
    }

    /// Whether vector `n` would raise its interrupt for a receive event now.
    fn rx_irq_enabled(&self, n: usize) -> bool {
        self.napi
            .as_ref()
            .is_none_or(|napi| !napi.masked(self.devs[n]))
    }

    /// Whether port `n` can take a frame now: something waits in its queue
    /// and a descriptor is free.
    fn can_xmit(m: &Machine, n: usize) -> bool {
        let nic = &m.nics[n];
        let used = nic.tx_ring.len() + nic.wire.is_some() as usize + nic.done_q.len();
        !nic.out_q.is_empty() && used < nic.tx_cap
    }

    /// What the softirq transmits first: what the forwarding path queued.
    fn next_transmit(&mut self, m: &mut Machine) -> Option<step::Step> {
        for n in 0..m.nics.len() {
            if self.reclaim.before_send() && !m.nics[n].out_q.is_empty() {
                if let Some(p) = m.nics[n].done_q.pop_front() {
                    return Some(step::Step::Linux(Step::TxReclaim(n as u8, p)));
                }
            }
            if Self::can_xmit(m, n) {
                let p = m.nics[n].out_q.pop_front().expect("queue has a frame");
                return Some(step::Step::Linux(Step::Xmit(n as u8, p)));
            }
        }
        None
    }

    /// One turn of NAPI polling: a frame of the poll in progress, or the
    /// next poll; `Err(())` when the softirq run ends.
    fn next_napi(&mut self, m: &mut Machine) -> Result<Option<step::Step>, ()> {
        let now = m.now;
        match self.job {
            Some(mut job) => {
                let ni = job.port as usize;
                if job.done < job.limit && self.has_rx(m, ni) {
                    job.done += 1;
                    self.job = Some(job);
                    let p = self.ring(m, ni).pop_front().expect("ring has a frame");
                    return Ok(Some(step::Step::Linux(Step::Rx(p))));
                }
                let drained = !self.has_rx(m, ni);
                self.job = None;
                let unmask = self
                    .napi
                    .as_mut()
                    .is_some_and(|napi| napi.poll_done(job.dev, job.done, drained));
                if unmask && self.has_rx(m, ni) {
                    m.raise(IntrSrc::Port(job.port));
                }
                Ok(None)
            }
            None => match self.napi.as_mut().map(|napi| napi.next(now)) {
                Some(NapiAction::Poll { dev, limit }) => {
                    let port = self
                        .devs
                        .iter()
                        .position(|x| *x == dev)
                        .expect("a registered device") as u8;
                    self.job = Some(PollJob {
                        port,
                        dev,
                        limit,
                        done: 0,
                    });
                    Ok(None)
                }
                Some(NapiAction::Yield) => {
                    // Budget spent: end this run, and raise the softirq again.
                    self.soft_active = false;
                    self.soft_pending = true;
                    Err(())
                }
                _ => {
                    self.soft_active = false;
                    Err(())
                }
            },
        }
    }

    /// The NET_RX (and NET_TX) softirq.
    fn next_softirq(&mut self, m: &mut Machine) -> Option<step::Step> {
        if !self.soft_active {
            if !self.soft_pending {
                return None;
            }
            self.soft_pending = false;
            self.soft_active = true;
            if let Some(napi) = self.napi.as_mut() {
                napi.begin_run(m.now);
            }
        }
        loop {
            if let Some(s) = self.next_transmit(m) {
                return Some(s);
            }
            if self.napi.is_none() {
                if let Some(p) = self.backlog.pop_front() {
                    return Some(step::Step::Linux(Step::Ip(p)));
                }
                // process_backlog emptied the queue: the throttle lifts.
                self.throttle = false;
                self.soft_active = false;
                return None;
            }
            match self.next_napi(m) {
                Ok(Some(s)) => return Some(s),
                Ok(None) => {}
                Err(()) => return None,
            }
        }
    }
}

impl Kernel for Linux {
    fn rx_arrived(&mut self, m: &mut Machine, n: u8) {
        self.rx_event(m, n as usize);
    }

    /// With several receive queues, a frame of a source of many flows goes
    /// to one at random (the device's hash spreads them); a frame of a
    /// source of N flows belongs to one of them at random, and a flow keeps
    /// to one queue (the hash of the source and the flow), as the TCP
    /// connection's frames all go to the last; the first queue's ring is
    /// the device's own, the others' the kernel's.
    fn take_arrival(&mut self, m: &mut Machine, p: Packet) -> bool {
        if self.queues == 1 {
            return false;
        }
        let flows = self.flows.get(p.source as usize).copied().unwrap_or(0);
        let q = if p.tcp.is_some() {
            self.queues - 1
        } else if flows > 0 {
            let f = m.rng.gen_range(0..flows);
            flow_queue(p.source, f, self.queues)
        } else {
            m.rng.gen_range(0..self.queues)
        };
        if q == 0 {
            return false;
        }
        let v = q * self.ports + p.port as usize;
        if self.extra[v - self.ports].len() >= self.ring_cap {
            m.meter.ring_drop(p, m.now);
            return true;
        }
        self.extra[v - self.ports].push_back(p);
        self.rx_event(m, v);
        true
    }

    fn timer(&mut self, m: &mut Machine, t: Timer) {
        let Timer::Coalesce(n) = t else { return };
        let ni = n as usize;
        self.timer_set[ni] = false;
        if self.held[ni] > 0 && self.has_rx(m, ni) && self.rx_irq_enabled(ni) {
            self.held[ni] = 0;
            m.raise(IntrSrc::Port(n));
        }
    }

    fn tx_done(&mut self, m: &mut Machine, n: u8) {
        let ni = n as usize;
        self.since_irq[ni] += 1;
        if self.reclaim.interrupt_now(self.since_irq[ni]) {
            self.since_irq[ni] = 0;
            self.tx_irq_pending[ni] = true;
            m.raise(IntrSrc::Port(n));
        }
    }

    /// Begins an ISR entry for a vector: note which events it serves
    /// (transmit completions are queue 0's).
    fn isr_enter(&mut self, m: &mut Machine, src: IntrSrc) {
        let IntrSrc::Port(n) = src else { return };
        let ni = n as usize;
        let rx = self.has_rx(m, ni) && self.rx_irq_enabled(ni);
        let tx = ni < self.ports && std::mem::take(&mut self.tx_irq_pending[ni]);
        if rx {
            m.meter.interrupts.rx += 1;
            self.entries_rx += 1;
            self.held[ni] = 0;
        }
        if tx {
            m.meter.interrupts.tx += 1;
            self.entries_tx += 1;
        }
        self.isr_entries += 1;
        self.isr_rx = rx;
        self.isr_tx = tx;
    }

    /// The ISR after entry: receive events (NAPI: mask and schedule;
    /// otherwise `netif_rx` every frame on the ring), then transmit
    /// completions if the line was raised for them.
    fn isr_step(&mut self, m: &mut Machine, src: IntrSrc) -> Option<step::Step> {
        let IntrSrc::Port(n) = src else { return None };
        let ni = n as usize;
        if self.isr_rx && self.has_rx(m, ni) {
            if let Some(napi) = self.napi.as_mut() {
                self.isr_rx = false;
                if napi.interrupt(self.devs[ni]) {
                    self.soft_pending = true;
                }
            } else {
                let p = self.ring(m, ni).pop_front().expect("ring has a frame");
                return Some(step::Step::Linux(Step::Rx(p)));
            }
        }
        if self.isr_tx {
            if let Some(p) = m.nics[ni].done_q.pop_front() {
                return Some(step::Step::Linux(Step::TxReclaim(n, p)));
            }
        }
        None
    }

    /// After the ISR: the line is raised again if events came meanwhile.
    fn isr_exit(&mut self, m: &mut Machine, src: IntrSrc) {
        let IntrSrc::Port(n) = src else { return };
        let ni = n as usize;
        let reclaimed = std::mem::take(&mut self.isr_tx);
        self.isr_rx = false;
        if reclaimed && !m.nics[ni].out_q.is_empty() {
            // Freed descriptors wake the queue: NET_TX sends what waits.
            self.soft_pending = true;
        }
        let rx_waiting = self.has_rx(m, ni) && self.rx_irq_enabled(ni);
        if rx_waiting || (ni < self.ports && self.tx_irq_pending[ni]) {
            m.raise(IntrSrc::Port(n));
        }
    }

    fn next_step(&mut self, m: &mut Machine, c: CtxId) -> Option<step::Step> {
        if c == SOFT {
            self.next_softirq(m)
        } else {
            None
        }
    }

    fn complete(&mut self, m: &mut Machine, c: CtxId, step: step::Step) {
        let step::Step::Linux(step) = step else {
            return;
        };
        match step {
            Step::Rx(p) => {
                self.rx_taken += 1;
                if self.napi.is_some() {
                    // NAPI: straight on to IP in the poll (netif_receive_skb).
                    m.carry(c, step::Step::Linux(Step::Ip(p)));
                } else if self.backlog.len() > self.backlog_cap {
                    // netif_rx takes a frame while the queue holds at most
                    // netdev_max_backlog: one more than the limit fits.
                    if self.has_throttle && !self.throttle {
                        self.throttle = true;
                        self.throttled += 1;
                    }
                    m.drop(DropPoint::Backlog);
                } else if self.throttle && !self.backlog.is_empty() {
                    // Throttled: dropped although there is room.
                    self.throttled_drops += 1;
                    m.drop(DropPoint::Backlog);
                } else {
                    // A frame that finds the backlog empty lifts it.
                    self.throttle = false;
                    self.backlog.push_back(p);
                    self.soft_pending = true;
                }
            }
            Step::Ip(p) => {
                let out = 1 - p.port as usize;
                let nic = &mut m.nics[out];
                if nic.out_q.len() >= nic.out_cap {
                    m.drop(DropPoint::OutputQueue);
                } else {
                    nic.out_q.push_back(p);
                    if c != SOFT {
                        self.soft_pending = true;
                    }
                }
            }
            Step::Xmit(n, mut p) => {
                self.xmit_seq += 1;
                p.seq = self.xmit_seq;
                m.nics[n as usize].tx_ring.push_back(p);
                m.kick(n as usize);
            }
            Step::TxReclaim(_, p) => {
                if c != SOFT {
                    self.isr_reclaims += 1;
                }
                if self.xmit_seq.saturating_sub(p.seq) > self.c.cache_buffers {
                    self.cold_reclaims += 1;
                }
            }
        }
    }

    fn cost(&self, _m: &Machine, step: step::Step) -> Nanos {
        let c = &self.c;
        match step {
            step::Step::IntrEnter(_) => c.t_cs_in + c.t_cs_out,
            step::Step::Linux(Step::Rx(p)) => c.t_rx + per_byte(p.bytes, c.t_copy_per_byte),
            step::Step::Linux(Step::Ip(_)) => c.t_ip,
            step::Step::Linux(Step::Xmit(..)) => c.t_tx,
            step::Step::Linux(Step::TxReclaim(_, p)) => {
                let age = self.xmit_seq.saturating_sub(p.seq);
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

    fn screened(&mut self, _p: Packet) -> Option<step::Step> {
        None
    }

    fn in_flight(&self) -> u64 {
        (self.backlog.len() + self.extra.iter().map(VecDeque::len).sum::<usize>()) as u64
    }

    fn report(&self) -> KernelReport {
        let mut r = KernelReport::default();
        // Buffers freed after their lines were evicted (TX-128's cost).
        r.extra
            .insert("cold_reclaims".to_string(), self.cold_reclaims as f64);
        // Spanos et al.'s table 5 counts the ISR's entry and exit per
        // forwarded frame (2 for ORIGINAL: a receive and a transmit
        // interrupt; 1 for TX-OFF and NAPI; ...); table 3 counts receive and
        // transmit interrupts apart. Per frame taken in, over the whole run.
        let frames = self.rx_taken.max(1) as f64;
        for (k, v) in [
            ("isr_entries", self.isr_entries as f64),
            ("isr_entries_per_frame", self.isr_entries as f64 / frames),
            ("rx_interrupts_per_frame", self.entries_rx as f64 / frames),
            ("tx_interrupts_per_frame", self.entries_tx as f64 / frames),
            (
                "frames_per_tx_interrupt",
                self.isr_reclaims as f64 / self.entries_tx.max(1) as f64,
            ),
            // netif_rx's throttle: how often the backlog's overflow set
            // it, and the frames it dropped while the backlog had room
            // (counted in drops.backlog with the overflow's).
            ("backlog_throttles", self.throttled as f64),
            ("backlog_throttled_drops", self.throttled_drops as f64),
        ] {
            r.extra.insert(k.to_string(), v);
        }
        r
    }
}

/// The receive queue a device's hash sends flow `f` of source `s` to
/// (SplitMix64's finaliser over the two, as a 5-tuple's hash would spread
/// them).
fn flow_queue(s: u8, f: u32, queues: usize) -> usize {
    let mut x = (u64::from(s) << 32 | u64::from(f)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % queues as u64) as usize
}
