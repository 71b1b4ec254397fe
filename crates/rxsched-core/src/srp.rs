//! M9: Signaled Receiver Processing (Brustoloni, Gabber, Silberschatz &
//! Singh, USENIX 2000), and M10, Lazy Receiver Processing as that paper
//! describes it, as one sans-I/O state machine.
//!
//! Only link-level receive runs at interrupt level. A multi-stage early
//! demultiplexer ([`Med`]) maps (stage, header) to the protocol control
//! block of the next stage; each block's socket has an *unprocessed input
//! queue* (UIQ) and a set of owner processes. [`Srp::submit`] is the
//! next-stage submit (NSS): the buffering check (packet + UIQ + socket
//! receive queue against the receive-buffer limit) before any protocol
//! work, the enqueue, and the notification: a process asleep on the UIQ is
//! woken, otherwise every owner is sent SIGUIQ. What SIGUIQ does depends on
//! each owner's [`Disposition`]; the protocol work always runs in, and is
//! charged to, a process that owns the socket.
//!
//! LRP differs in two places, both chosen per socket ([`Check`],
//! [`Notice`]): its per-socket channel is bounded by a packet count and a
//! full channel drops at the interface; and it never signals: a UDP
//! receiver processes its channel inside its receive call, a TCP socket's
//! packets wake the owning process's kernel thread.

use std::collections::{BTreeMap, VecDeque};

/// A process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(pub u32);

/// A protocol control block (a socket, or a gateway stage's input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pcb(pub u32);

/// A stage of protocol processing, as the demultiplexer names it (the
/// link layer, a firewall, IP forwarding, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stage(pub u32);

/// The multi-stage early demultiplexer: (current stage, header key) to the
/// next stage's control block. `K` is whatever of the header the stages
/// look at (protocol and port, say); a miss has no stage to go to.
#[derive(Debug, Clone)]
pub struct Med<K> {
    map: BTreeMap<(Stage, K), Pcb>,
}

impl<K: Ord> Default for Med<K> {
    fn default() -> Self {
        Med {
            map: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> Med<K> {
    /// Packets leaving `stage` whose header gives `key` go to `pcb`.
    pub fn bind(&mut self, stage: Stage, key: K, pcb: Pcb) {
        self.map.insert((stage, key), pcb);
    }

    /// The next stage's control block.
    pub fn lookup(&self, stage: Stage, key: &K) -> Option<Pcb> {
        self.map.get(&(stage, key.clone())).copied()
    }
}

/// What SIGUIQ does to a process (§5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Disposition {
    /// The default action: on its next run the process does the protocol
    /// work for every packet in the UIQs of all the sockets it owns.
    #[default]
    Default,
    /// A handler runs; it does the protocol work now, or only notes the
    /// event and leaves the work to the next receive call (`defer`).
    Catch {
        /// Leave the work to the next receive call.
        defer: bool,
    },
    /// The signal stays pending until the process unblocks it.
    Block,
    /// No signal: the protocol work happens only inside receive calls.
    Ignore,
}

/// How a socket bounds what waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// SRP: packet + UIQ + receive queue may not exceed this many bytes.
    Rcvbuf(u64),
    /// LRP: the channel holds at most this many packets.
    Channel(u32),
}

impl Check {
    /// The buffering check, before any protocol work: whether a packet of
    /// `bytes` may join a UIQ holding `uiq_pkts` packets of `uiq_bytes`,
    /// in front of a socket receive queue of `rcvq_bytes`.
    pub fn admits(self, bytes: u32, uiq_pkts: usize, uiq_bytes: u64, rcvq_bytes: u64) -> bool {
        match self {
            Check::Rcvbuf(limit) => bytes as u64 + uiq_bytes + rcvq_bytes <= limit,
            Check::Channel(n) => (uiq_pkts as u64) < n as u64,
        }
    }
}

/// How a socket tells its owners that packets wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// SRP: wake a process asleep on the UIQ, or else signal the owners.
    Signal,
    /// LRP's UDP: wake a receiver asleep on the channel; nothing else.
    Sync,
    /// LRP's TCP: wake the owner's protocol thread.
    Thread,
}

/// Who must be told of a queued packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notify {
    /// These processes were asleep on the UIQ: make them runnable.
    Woke(Vec<Pid>),
    /// SIGUIQ is now pending for these owners (it was not already).
    Signalled(Vec<Pid>),
    /// Wake this owner's protocol thread (LRP's TCP).
    Thread(Pid),
    /// Nobody: they ignore or block the signal, or it was already pending.
    Nobody,
}

/// What NSS did with a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted<P> {
    /// No stage takes it (drop point `no_pcb`).
    NoPcb(P),
    /// The buffering check refused it before any protocol work (drop
    /// point `uiq`; LRP's full channel, at the interface).
    Dropped(Pcb, P),
    /// Queued on `pcb`'s UIQ.
    Queued(Pcb, Notify),
}

/// What a process does now about a pending SIGUIQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery<P> {
    /// Protocol work for these packets, in this process, charged to it;
    /// `handler` if a caught signal's handler does it (it pays the
    /// handler's entry and return).
    Process {
        /// The packets, with the socket each is for.
        packets: Vec<(Pcb, P)>,
        /// Whether a user handler does the work.
        handler: bool,
    },
    /// A handler ran and left the work to the next receive call.
    Deferred,
    /// Nothing now (no signal pending, or it is blocked).
    Nothing,
}

#[derive(Debug, Clone)]
struct Socket<P> {
    owners: Vec<Pid>,
    uiq: VecDeque<(P, u32)>,
    uiq_bytes: u64,
    rcvq_bytes: u64,
    check: Check,
    notice: Notice,
    sleepers: Vec<Pid>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Proc {
    disposition: Disposition,
    pending: bool,
}

/// Counters of the notification path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SrpCounts {
    /// Packets queued on UIQs.
    pub queued: u64,
    /// Packets the buffering check dropped.
    pub dropped: u64,
    /// Packets no stage took.
    pub no_pcb: u64,
    /// Wake-ups of processes asleep on a UIQ.
    pub wakeups: u64,
    /// SIGUIQ posted (a pending signal is not posted again).
    pub signals: u64,
    /// Deliveries that did protocol work.
    pub deliveries: u64,
}

/// The SRP (or LRP) state of one host: sockets and their UIQs, and each
/// process's disposition and pending signal.
#[derive(Debug, Clone)]
pub struct Srp<P> {
    sockets: Vec<Socket<P>>,
    procs: BTreeMap<Pid, Proc>,
    counts: SrpCounts,
}

impl<P> Default for Srp<P> {
    fn default() -> Self {
        Srp {
            sockets: Vec::new(),
            procs: BTreeMap::new(),
            counts: SrpCounts::default(),
        }
    }
}

impl<P> Srp<P> {
    /// A process with its SIGUIQ disposition.
    pub fn process(&mut self, pid: Pid, disposition: Disposition) {
        self.procs.entry(pid).or_default().disposition = disposition;
    }

    /// A socket owned by `owners`, bounded and notified as given.
    pub fn socket(&mut self, owners: &[Pid], check: Check, notice: Notice) -> Pcb {
        for o in owners {
            self.procs.entry(*o).or_default();
        }
        self.sockets.push(Socket {
            owners: owners.to_vec(),
            uiq: VecDeque::new(),
            uiq_bytes: 0,
            rcvq_bytes: 0,
            check,
            notice,
            sleepers: Vec::new(),
        });
        Pcb(self.sockets.len() as u32 - 1)
    }

    /// Changes a process's disposition (unblocking leaves a pending signal
    /// pending: it is delivered the next time the process runs).
    pub fn set_disposition(&mut self, pid: Pid, d: Disposition) {
        let p = self.procs.entry(pid).or_default();
        p.disposition = d;
        if d == Disposition::Ignore {
            p.pending = false;
        }
    }

    /// NSS: the buffering check, then the enqueue and the notification.
    /// `pcb` is what the demultiplexer found, if anything.
    pub fn submit(&mut self, pcb: Option<Pcb>, pkt: P, bytes: u32) -> Submitted<P> {
        let Some(pcb) = pcb.filter(|p| (p.0 as usize) < self.sockets.len()) else {
            self.counts.no_pcb += 1;
            return Submitted::NoPcb(pkt);
        };
        let s = &mut self.sockets[pcb.0 as usize];
        if !s
            .check
            .admits(bytes, s.uiq.len(), s.uiq_bytes, s.rcvq_bytes)
        {
            self.counts.dropped += 1;
            return Submitted::Dropped(pcb, pkt);
        }
        s.uiq.push_back((pkt, bytes));
        s.uiq_bytes += bytes as u64;
        self.counts.queued += 1;
        let notify = if !s.sleepers.is_empty() {
            let woke = std::mem::take(&mut s.sleepers);
            self.counts.wakeups += woke.len() as u64;
            Notify::Woke(woke)
        } else {
            match s.notice {
                Notice::Sync => Notify::Nobody,
                Notice::Thread => Notify::Thread(s.owners[0]),
                Notice::Signal => {
                    let mut posted = Vec::new();
                    for o in &s.owners {
                        let p = self.procs.entry(*o).or_default();
                        if p.disposition != Disposition::Ignore && !p.pending {
                            p.pending = true;
                            posted.push(*o);
                        }
                    }
                    self.counts.signals += posted.len() as u64;
                    if posted.is_empty() {
                        Notify::Nobody
                    } else {
                        Notify::Signalled(posted)
                    }
                }
            }
        };
        Submitted::Queued(pcb, notify)
    }

    /// Whether SIGUIQ is pending for `pid` and would act now (not blocked).
    pub fn deliverable(&self, pid: Pid) -> bool {
        self.procs
            .get(&pid)
            .is_some_and(|p| p.pending && p.disposition != Disposition::Block)
    }

    /// `pid` runs with SIGUIQ pending: what its disposition makes it do.
    pub fn deliver(&mut self, pid: Pid) -> Delivery<P> {
        let Some(p) = self.procs.get_mut(&pid) else {
            return Delivery::Nothing;
        };
        if !p.pending || p.disposition == Disposition::Block {
            return Delivery::Nothing;
        }
        p.pending = false;
        let handler = match p.disposition {
            Disposition::Catch { defer: true } => return Delivery::Deferred,
            Disposition::Catch { defer: false } => true,
            _ => false,
        };
        let mut packets = Vec::new();
        for (i, s) in self.sockets.iter_mut().enumerate() {
            if s.owners.contains(&pid) {
                for (pkt, _) in s.uiq.drain(..) {
                    packets.push((Pcb(i as u32), pkt));
                }
                // Bytes leave the UIQ as the work on them finishes
                // (`processed`), so the check still counts them meanwhile.
            }
        }
        if packets.is_empty() {
            return Delivery::Nothing;
        }
        self.counts.deliveries += 1;
        Delivery::Process { packets, handler }
    }

    /// A receive call (or LRP's protocol thread) takes what `pcb`'s UIQ
    /// holds, to do its protocol work.
    pub fn take(&mut self, pcb: Pcb) -> Vec<P> {
        let s = &mut self.sockets[pcb.0 as usize];
        s.uiq.drain(..).map(|(p, _)| p).collect()
    }

    /// Takes the oldest packet on `pcb`'s UIQ (LRP's lazy receive call).
    pub fn take_one(&mut self, pcb: Pcb) -> Option<P> {
        self.sockets[pcb.0 as usize].uiq.pop_front().map(|(p, _)| p)
    }

    /// The protocol work on a packet of `bytes` from `pcb`'s UIQ is done:
    /// `delivered` bytes of it are now on the socket's receive queue (0 if
    /// the work discarded it, or for a gateway stage that passed it on).
    pub fn processed(&mut self, pcb: Pcb, bytes: u32, delivered: u32) {
        let s = &mut self.sockets[pcb.0 as usize];
        s.uiq_bytes = s.uiq_bytes.saturating_sub(bytes as u64);
        s.rcvq_bytes += delivered as u64;
    }

    /// The application copied `bytes` out of `pcb`'s receive queue.
    pub fn consumed(&mut self, pcb: Pcb, bytes: u32) {
        let s = &mut self.sockets[pcb.0 as usize];
        s.rcvq_bytes = s.rcvq_bytes.saturating_sub(bytes as u64);
    }

    /// `pid` sleeps in a receive call until `pcb`'s UIQ has a packet.
    pub fn sleep(&mut self, pid: Pid, pcb: Pcb) {
        let s = &mut self.sockets[pcb.0 as usize];
        if !s.sleepers.contains(&pid) {
            s.sleepers.push(pid);
        }
    }

    /// Packets on `pcb`'s UIQ.
    pub fn uiq_len(&self, pcb: Pcb) -> usize {
        self.sockets[pcb.0 as usize].uiq.len()
    }

    /// Bytes counted against `pcb`'s limit: UIQ (and in work) plus receive queue.
    pub fn buffered(&self, pcb: Pcb) -> u64 {
        let s = &self.sockets[pcb.0 as usize];
        s.uiq_bytes + s.rcvq_bytes
    }

    /// Bytes on `pcb`'s receive queue.
    pub fn rcvq_bytes(&self, pcb: Pcb) -> u64 {
        self.sockets[pcb.0 as usize].rcvq_bytes
    }

    /// Packets on every UIQ.
    pub fn queued(&self) -> u64 {
        self.sockets.iter().map(|s| s.uiq.len() as u64).sum()
    }

    /// The notification path's counters.
    pub fn counts(&self) -> SrpCounts {
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: Pid = Pid(1);
    const B: Pid = Pid(2);

    fn host(d: Disposition, limit: u64) -> (Srp<u32>, Pcb) {
        let mut s = Srp::default();
        s.process(A, d);
        let pcb = s.socket(&[A], Check::Rcvbuf(limit), Notice::Signal);
        (s, pcb)
    }

    #[test]
    fn demultiplexer_maps_stage_and_header_to_the_next_block() {
        let mut m: Med<(u8, u16)> = Med::default();
        m.bind(Stage(0), (17, 9000), Pcb(3));
        m.bind(Stage(1), (17, 9000), Pcb(4));
        assert_eq!(m.lookup(Stage(0), &(17, 9000)), Some(Pcb(3)));
        assert_eq!(m.lookup(Stage(1), &(17, 9000)), Some(Pcb(4)));
        assert_eq!(m.lookup(Stage(0), &(6, 9000)), None);
    }

    #[test]
    fn a_sleeper_is_woken_and_otherwise_owners_are_signalled_once() {
        let (mut s, pcb) = host(Disposition::Default, 10_000);
        s.sleep(A, pcb);
        assert_eq!(
            s.submit(Some(pcb), 1, 100),
            Submitted::Queued(pcb, Notify::Woke(vec![A]))
        );
        assert_eq!(
            s.submit(Some(pcb), 2, 100),
            Submitted::Queued(pcb, Notify::Signalled(vec![A]))
        );
        // Already pending: not posted again.
        assert_eq!(
            s.submit(Some(pcb), 3, 100),
            Submitted::Queued(pcb, Notify::Nobody)
        );
        assert_eq!(s.counts().signals, 1);
        assert_eq!(s.submit(None, 4, 100), Submitted::NoPcb(4));
    }

    #[test]
    fn each_disposition_does_its_own_thing() {
        // Default: the owner processes every queued packet of all its sockets.
        let (mut s, pcb) = host(Disposition::Default, 10_000);
        let other = s.socket(&[A], Check::Rcvbuf(10_000), Notice::Signal);
        s.submit(Some(pcb), 1, 10);
        s.submit(Some(other), 2, 10);
        assert!(s.deliverable(A));
        assert_eq!(
            s.deliver(A),
            Delivery::Process {
                packets: vec![(pcb, 1), (other, 2)],
                handler: false
            }
        );
        assert_eq!(s.deliver(A), Delivery::Nothing);
        // Catch, now: the handler does the work.
        let (mut s, pcb) = host(Disposition::Catch { defer: false }, 10_000);
        s.submit(Some(pcb), 1, 10);
        assert!(matches!(
            s.deliver(A),
            Delivery::Process { handler: true, .. }
        ));
        // Catch, deferred: the packets stay for the receive call.
        let (mut s, pcb) = host(Disposition::Catch { defer: true }, 10_000);
        s.submit(Some(pcb), 1, 10);
        assert_eq!(s.deliver(A), Delivery::Deferred);
        assert_eq!(s.take(pcb), vec![1]);
        // Block: pending until unblocked, then delivered.
        let (mut s, pcb) = host(Disposition::Block, 10_000);
        s.submit(Some(pcb), 1, 10);
        assert!(!s.deliverable(A));
        assert_eq!(s.deliver(A), Delivery::Nothing);
        s.set_disposition(A, Disposition::Default);
        assert!(s.deliverable(A));
        assert!(matches!(s.deliver(A), Delivery::Process { .. }));
        // Ignore: never signalled; the receive call does the work.
        let (mut s, pcb) = host(Disposition::Ignore, 10_000);
        assert_eq!(
            s.submit(Some(pcb), 1, 10),
            Submitted::Queued(pcb, Notify::Nobody)
        );
        assert!(!s.deliverable(A));
        assert_eq!(s.take(pcb), vec![1]);
    }

    #[test]
    fn every_owner_is_signalled_and_lrp_notices_differ() {
        let mut s: Srp<u32> = Srp::default();
        s.process(A, Disposition::Default);
        s.process(B, Disposition::Ignore);
        let shared = s.socket(&[A, B], Check::Rcvbuf(1_000), Notice::Signal);
        assert_eq!(
            s.submit(Some(shared), 1, 10),
            Submitted::Queued(shared, Notify::Signalled(vec![A]))
        );
        let udp = s.socket(&[B], Check::Channel(2), Notice::Sync);
        let tcp = s.socket(&[B], Check::Channel(2), Notice::Thread);
        assert_eq!(
            s.submit(Some(udp), 1, 10),
            Submitted::Queued(udp, Notify::Nobody)
        );
        assert_eq!(
            s.submit(Some(tcp), 1, 10),
            Submitted::Queued(tcp, Notify::Thread(B))
        );
        s.submit(Some(udp), 2, 10);
        assert_eq!(s.submit(Some(udp), 3, 10), Submitted::Dropped(udp, 3));
    }

    proptest! {
        /// Whatever arrives, is processed and is read, the buffering check
        /// never lets more than the limit wait for a socket, and it drops a
        /// packet before any work on it: a dropped packet is never handed
        /// to a process.
        #[test]
        fn buffering_check_bounds_what_waits_and_drops_before_work(
            limit in 1u64..20_000,
            ops in prop::collection::vec((0u8..4, 1u32..3_000), 1..300),
        ) {
            let (mut s, pcb) = host(Disposition::Default, limit);
            let mut next = 0u32;
            let mut dropped = Vec::new();
            let mut in_work: Vec<(u32, u32)> = Vec::new();
            let mut sizes = BTreeMap::new();
            let mut rcvq: VecDeque<u32> = VecDeque::new();
            for (op, bytes) in ops {
                match op {
                    0 | 1 => {
                        next += 1;
                        sizes.insert(next, bytes);
                        match s.submit(Some(pcb), next, bytes) {
                            Submitted::Dropped(_, p) => dropped.push(p),
                            Submitted::Queued(..) => {}
                            Submitted::NoPcb(_) => prop_assert!(false),
                        }
                    }
                    2 => {
                        if let Delivery::Process { packets, .. } = s.deliver(A) {
                            in_work.extend(packets.into_iter().map(|(_, p)| (p, sizes[&p])));
                        }
                        for (p, b) in in_work.drain(..) {
                            prop_assert!(!dropped.contains(&p));
                            s.processed(pcb, b, b);
                            rcvq.push_back(b);
                        }
                    }
                    _ => {
                        if let Some(b) = rcvq.pop_front() {
                            s.consumed(pcb, b);
                        }
                    }
                }
                prop_assert!(s.buffered(pcb) <= limit, "{} > {limit}", s.buffered(pcb));
            }
            let c = s.counts();
            prop_assert_eq!(c.queued + c.dropped, next as u64);
            prop_assert_eq!(c.dropped, dropped.len() as u64);
        }
    }
}
