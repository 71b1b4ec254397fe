//! Packet I/O behind small traits, in the style of smoltcp's `phy`: the
//! router and the tools are written against [`RxBackend`] and
//! [`TxBackend`], and the same code runs on
//!
//! - [`xdp`]: AF_XDP sockets fed by an XDP program (copy mode);
//! - [`packet`]: AF_PACKET `TPACKET_V3` receive rings and `sendmmsg`;
//! - [`mem`]: in-memory rings and a clock the test moves, so that the
//!   router's loops are tested without root or a network;
//! - [`fault`]: a middleware wrapper that drops, corrupts, truncates,
//!   reorders or delays frames on their way in.
//!
//! How a thread waits for a receive "interrupt" is a backend matter too:
//! [`Wait`] is `epoll` on real sockets and a step of fake time in memory.
//!
//! So is who does a device's receive work and at what priority: a real
//! backend opens its devices for a command ([`Opened`]: the [`Port`]s, the
//! [`Gate`] on their receive work, the priority the thread that takes
//! their frames runs at) as the command's [`Servicing`] asks.

pub mod copy;
pub mod fault;
pub mod in_xdp;
pub mod mem;
pub mod packet;
pub mod xdp;

use crate::sys::SysResult;
use crate::wire::Mac;
use std::os::fd::RawFd;

/// Device priority: the interrupt mode's receive thread (M1's interrupt
/// handler; with XDP, the devices' NAPI threads) preempts everything else
/// on the CPU.
pub const DEVICE_PRIO: i32 = 50;
/// Kernel-thread priority for the polling thread on AF_PACKET: Mogul &
/// Ramakrishnan's polling thread was a kernel thread, above every user
/// process and below interrupts. The lowest real-time priority keeps that
/// order: a compute-bound process gets the CPU only when the thread is
/// idle, or when the M4 cycle limit makes it give the CPU up. (As a nice-0
/// thread its wake-ups waited out a compute process's time slice: p99
/// latency of 3-5 ms where the interrupt mode had under 1 ms.) The interrupt
/// mode's forwarding thread stays a normal-priority thread, as the M1
/// baseline is defined.
pub const KTHREAD_PRIO: i32 = 1;
/// With XDP the polling thread owns the devices' receive work: it runs at
/// [`POLL_PRIO`], and their NAPI threads just below it at [`NAPI_PRIO`], so
/// that they run only while the thread waits for input, and are held off
/// (frames die on the device's ring) while it works.
pub const POLL_PRIO: i32 = 50;
/// See [`POLL_PRIO`].
pub const NAPI_PRIO: i32 = 40;

/// How a polling thread opens and closes a device's input beyond its own rings:
/// with threaded NAPI, by the receive threads' priority
/// ([`crate::napi_threads::NapiGate`]). Also reports those threads' CPU time, which
/// M4 charges to the loop.
pub trait Gate {
    /// Input allowed (true) or inhibited.
    fn set(&mut self, open: bool) -> SysResult<()>;
    /// CPU time the receive work outside this thread has used, in ns.
    fn cpu_ns(&self) -> SysResult<u64>;
    /// How many times that receive work was woken, where no wake-up of
    /// the polling thread follows each (it forwards no frames itself): M4
    /// charges each as it charges the thread's own. 0 where the thread's
    /// wake-ups stand for them.
    fn wakeups(&self) -> SysResult<u64> {
        Ok(0)
    }
    /// Runs receive queue `queue` of every device ahead of the others' (a
    /// protected queue). Returns how many receive threads that moved: 0
    /// where the receive work is not in threads the gate schedules.
    fn protect(&mut self, _queue: u32) -> SysResult<usize> {
        Ok(0)
    }
    /// Holds the protected queues' receive work back while ordinary input
    /// waits (the protected class's cap), or lets it go first again.
    fn hold_protected(&mut self, _hold: bool) -> SysResult<()> {
        Ok(())
    }
    /// Which receive work serves each receive side of the polling thread,
    /// `(device, queue)` per side in its order.
    fn sides(&mut self, _sides: &[(usize, u32)]) -> SysResult<()> {
        Ok(())
    }
    /// The polling thread is about to sleep, having taken frames from the
    /// sides marked in `served` since it last slept: their receive work
    /// gives the others' a turn first, as the device round robin would.
    fn yield_served(&mut self, _served: &[bool]) -> SysResult<()> {
        Ok(())
    }
}

/// No gate: the rings are all there is (AF_PACKET, in-memory ports).
pub struct NoGate;

impl Gate for NoGate {
    fn set(&mut self, _open: bool) -> SysResult<()> {
        Ok(())
    }
    fn cpu_ns(&self) -> SysResult<u64> {
        Ok(0)
    }
}

/// Who does the devices' receive work, and at what priority against the
/// thread that takes its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Servicing {
    /// A polling thread owns the receive work (M2): the work runs while the
    /// thread waits, and is held off while it works.
    Polling,
    /// As [`Servicing::Polling`], but the thread and the receive work are
    /// time-shared like any process (SRP's gateway stage under a share),
    /// asking for a slice of `slice_ns` if given (the kernel's default
    /// otherwise): see [`crate::sys::slice`].
    TimeShared {
        /// The slice, in ns.
        slice_ns: Option<u64>,
    },
    /// The receive work runs at device priority, above a normal thread
    /// that drains what it fills (the M1 baseline).
    Interrupt,
}

/// One device: its name, its two sides, and its MAC.
pub struct Port<R, T> {
    /// Its name.
    pub name: String,
    /// The receive side.
    pub rx: R,
    /// The transmit side.
    pub tx: T,
    /// Its MAC, the source of what it sends.
    pub mac: Mac,
    /// Its MTU: the largest IP packet it sends.
    pub mtu: usize,
}

/// A receive side of whatever backend.
pub type AnyRx = Box<dyn RxBackend + Send>;
/// A transmit side of whatever backend.
pub type AnyTx = Box<dyn TxBackend + Send>;

/// Devices a backend opened for a command.
pub struct Opened {
    /// The devices, in the order asked for (their queue 0).
    pub ports: Vec<Port<AnyRx, AnyTx>>,
    /// The devices' other receive queues (AF_XDP on a multi-queue device:
    /// see [`xdp::open_all`]), each with the index of its port in `ports`;
    /// they transmit through their port's queue 0.
    pub more_rx: Vec<(usize, AnyRx)>,
    /// The queues' protected sockets (a [`Steer`] on AF_XDP), each with
    /// its port's index.
    pub steered_rx: Vec<(usize, AnyRx)>,
    /// The gate on their receive work.
    pub gate: Box<dyn Gate>,
    /// Whether their receive work runs in threads the gate schedules
    /// (threaded NAPI): then the M1 baseline's "interrupt handler" is that
    /// work itself, and the thread that takes frames drains the socket
    /// rings; otherwise a receive thread of the command's own stands in.
    pub threaded: bool,
    /// The real-time priority the thread that takes their frames must run
    /// at, if any (set it once every helper thread and process is started:
    /// they would inherit it).
    pub thread_prio: Option<i32>,
}

/// What a command's receive sockets take from each device, and what the
/// device's program leaves to the kernel's stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Feed {
    /// Every frame, taken: the kernel's stack does not see it (a
    /// dedicated monitor port: `capture --take`). On AF_PACKET, a tc
    /// program drops each frame once the socket has its copy.
    #[default]
    All,
    /// The frames a capture filter accepts, taken (`capture --take` with
    /// a filter, on AF_XDP); the others go on to the kernel's stack.
    Take {
        /// The filter (`bpf/monitor.bpf.c`'s `xdp_take`).
        filter: crate::pcap_filter::Program,
    },
    /// A copy of every frame, the kernel's stack keeping them all (a
    /// passive monitor, `capture`'s default: [`copy`] on XDP, a plain
    /// socket on AF_PACKET).
    Copy {
        /// On XDP: the capture filter the copying program applies (a
        /// frame it refuses is not copied).
        filter: Option<crate::pcap_filter::Program>,
    },
    /// A router's frames (`bpf/route.bpf.c`): those it forwards, their
    /// next hops from the kernel's tables (`kernel_hops`), or else routed
    /// by user space with the host's own addresses `local` to the stack;
    /// the host's traffic and what RFC 1812 asks of a router go to the
    /// stack.
    Route {
        /// Next hops from the kernel's FIB and neighbour table.
        kernel_hops: bool,
        /// With routes given by hand: the host's own IPv4 addresses.
        local: Vec<[u8; 4]>,
        /// The program forwards what the kernel's tables route itself
        /// (`bpf_redirect`) instead of handing it to a socket: the
        /// commands' threads keep only the policy ([`in_xdp`]).
        in_xdp: bool,
        /// With `in_xdp`: the screening rules the program applies to what
        /// it forwards.
        screen: Option<crate::rules::Rules>,
        /// Protected traffic on shared queues: what the program steers
        /// to each queue's protected socket.
        steer: Option<Steer>,
    },
    /// SRP's server's frames (`bpf/serve.bpf.c`): UDP datagrams to these
    /// ports; the rest go to the stack.
    Serve {
        /// The consumers' UDP ports.
        udp: Vec<u16>,
    },
}

/// Protected traffic that arrives on a shared queue: a router's program
/// steers the frames for user space that `rules` accept (the first
/// matching rule deciding, none: not protected) into a protected socket
/// of their own on the queue, which the polling thread serves first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steer {
    /// The protection rules (the language of `--screen`).
    pub rules: crate::rules::Rules,
    /// A queue that is wholly protected and needs no protected socket.
    pub except: Option<u32>,
}

impl Steer {
    /// The default protection rules: ICMP, OSPF (IP protocol 89) and BGP
    /// (TCP port 179, either way). ARP, multicast and frames for the host
    /// itself already go to its stack in the receive work.
    pub fn default_rules() -> crate::rules::Rules {
        crate::rules::Rules::parse(
            "default protection rules",
            "accept proto icmp\naccept proto icmp6\naccept proto 89\naccept proto tcp dport 179\naccept proto tcp sport 179\n",
        )
        .expect("the default protection rules parse")
    }
}

impl Feed {
    /// The program that feeds the sockets, its entry in XDP and at tc
    /// ingress, set up for the device `ifindex` whose MAC is `mac`; `None`
    /// for every frame, which needs no program of its own.
    pub fn program(&self, ifindex: u32, mac: Mac, what: &str) -> SysResult<Option<Program>> {
        use crate::bpf::{Object, ROUTE, SERVE};
        Ok(match self {
            Feed::All | Feed::Copy { .. } => None,
            Feed::Take { filter } => {
                let mut o = Object::load(crate::bpf::MONITOR, what)?;
                o.setup_filter(filter)?;
                Some(Program {
                    object: o,
                    xdp: "xdp_take",
                    tc: "tc_take",
                    counts: Object::copy_counts,
                })
            }
            Feed::Route {
                kernel_hops,
                local,
                in_xdp,
                screen,
                steer,
            } => {
                let mut o = Object::load(ROUTE, what)?;
                o.setup_route(ifindex, mac, *kernel_hops, local)?;
                o.set("route_cfg", 1, u32::from(*in_xdp))?;
                if let Some(rules) = screen {
                    o.setup_screen(rules)?;
                }
                if let Some(s) = steer {
                    o.setup_protect(&s.rules)?;
                }
                Some(Program {
                    object: o,
                    xdp: "xdp_route",
                    tc: "tc_route",
                    counts: Object::route_counts,
                })
            }
            Feed::Serve { udp } => {
                let mut o = Object::load(SERVE, what)?;
                o.setup_serve(udp)?;
                Some(Program {
                    object: o,
                    xdp: "xdp_serve",
                    tc: "tc_serve",
                    counts: Object::serve_counts,
                })
            }
        })
    }
}

/// A feed's program, loaded: its object, its entry points, and how its
/// counters are read.
pub struct Program {
    /// The loaded object.
    pub object: crate::bpf::Object,
    /// Its XDP entry point.
    pub xdp: &'static str,
    /// Its tc entry point.
    pub tc: &'static str,
    counts: fn(&mut crate::bpf::Object) -> SysResult<Vec<u64>>,
}

impl Program {
    /// Its counters, summed over the CPUs.
    pub fn counts(&mut self) -> SysResult<Vec<u64>> {
        (self.counts)(&mut self.object)
    }
}

/// A device's `rx_dropped` since a command opened it: what its receive
/// ring could not take, before any receive work.
pub struct DeviceDrops {
    iface: String,
    /// When opened, and when last read.
    base: u64,
    last: u64,
}

impl DeviceDrops {
    /// Counting from now.
    pub fn open(iface: &str) -> SysResult<DeviceDrops> {
        let base = crate::sys::iface_counter(iface, "rx_dropped")?;
        Ok(DeviceDrops {
            iface: iface.to_string(),
            base,
            last: base,
        })
    }

    /// The drops since opening (the last reading, once the device is gone).
    pub fn read(&mut self) -> SysResult<u64> {
        match crate::sys::iface_counter(&self.iface, "rx_dropped") {
            Ok(n) => self.last = n,
            // A device that has disappeared took its counters along.
            Err(_) if crate::sys::link_state(&self.iface)?.is_none() => {}
            Err(e) => return Err(e),
        }
        Ok(self.last.saturating_sub(self.base))
    }
}

/// Receiving frames.
pub trait RxBackend {
    /// The descriptor that becomes readable when frames wait (the
    /// "interrupt"), if the backend has one.
    fn fd(&self) -> Option<RawFd>;
    /// Hands at most `max` waiting frames to `f`, one ring operation for
    /// the batch, stopping early once `f` returns false (the frame it was
    /// given is taken); returns how many it handed over.
    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize;
    /// [`RxBackend::recv_while`], with the receive queue each frame came
    /// in on where one ring holds several queues' frames (`None`: the
    /// port's own queue).
    fn recv_tagged(&mut self, max: usize, f: &mut dyn FnMut(&[u8], Option<u32>) -> bool) -> usize {
        self.recv_while(max, &mut |frame| f(frame, None))
    }
    /// Hands at most `max` waiting frames to `f`; returns how many.
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        self.recv_while(max, &mut |frame| {
            f(frame);
            true
        })
    }
    /// Whether a frame waits now.
    fn pending(&self) -> bool;
    /// Frames dropped because the ring was full, since opening.
    fn ring_drops(&mut self) -> SysResult<u64>;
    /// Frames dropped after the kernel's receive work because a socket's
    /// ring was full (AF_XDP's `xsk_rx_ring`), since opening.
    fn socket_drops(&mut self) -> SysResult<u64> {
        Ok(0)
    }
    /// Frames waiting on the ring now, if the backend can tell.
    fn queued(&self) -> u64 {
        0
    }
    /// What the device's program did with the frames that arrived (see
    /// [`crate::bpf::RouteOutcome`]), since opening; empty if it has none.
    fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        Ok(Vec::new())
    }
    /// The longest a thread waiting on [`RxBackend::fd`] may sleep before
    /// looking again, for a backend whose descriptor may stay quiet while
    /// frames wait (its wake-ups batched), or whose receive work M4 must
    /// look at while it charges it (`charging`); `None`: no limit.
    fn max_sleep_ns(&self, _charging: bool) -> Option<u64> {
        None
    }
}

/// Transmitting frames.
pub trait TxBackend {
    /// Sends the frames; returns how many the device took. A full device
    /// queue is not an error: the frames not taken are for the caller to
    /// keep or drop.
    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize>;
    /// The descriptor to wait on for room (POLLOUT), if the backend has one.
    fn fd(&self) -> Option<RawFd>;
    /// Another handle on the same device queue, for another thread to send
    /// through (the two take turns), if the backend can share it.
    fn share(&self) -> Option<AnyTx> {
        None
    }
}

/// Blocking until a receive "interrupt": one of the armed ports has input.
pub trait Wait {
    /// Registers port `i`'s receive descriptor (in port order, once each).
    fn add(&mut self, port: usize, fd: Option<RawFd>) -> SysResult<()>;
    /// Blocks until an armed port may have input, or for `timeout_ns`.
    /// `ready` tells whether a port has input now (backends without a
    /// descriptor are asked this way). Returns the ports to look at.
    fn wait(
        &mut self,
        armed: &[bool],
        ready: &dyn Fn(usize) -> bool,
        timeout_ns: u64,
    ) -> SysResult<Vec<usize>>;
    /// Errors the ports' descriptors reported while waiting, by port,
    /// since the last call (a device that went down, a socket hung up).
    fn take_errors(&mut self) -> Vec<(usize, std::io::Error)> {
        Vec::new()
    }
}

/// The devices' programs' counters ([`RxBackend::program_counts`]),
/// summed over `rx`.
pub fn program_counts<R: RxBackend>(rx: &mut [R]) -> SysResult<Vec<u64>> {
    let mut sum: Vec<u64> = Vec::new();
    for r in rx {
        let c = r.program_counts()?;
        if sum.len() < c.len() {
            sum.resize(c.len(), 0);
        }
        for (s, n) in sum.iter_mut().zip(c) {
            *s += n;
        }
    }
    Ok(sum)
}

impl<B: RxBackend + ?Sized> RxBackend for Box<B> {
    fn fd(&self) -> Option<RawFd> {
        (**self).fd()
    }
    fn recv_while(&mut self, max: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> usize {
        (**self).recv_while(max, f)
    }
    fn recv_tagged(&mut self, max: usize, f: &mut dyn FnMut(&[u8], Option<u32>) -> bool) -> usize {
        (**self).recv_tagged(max, f)
    }
    fn pending(&self) -> bool {
        (**self).pending()
    }
    fn ring_drops(&mut self) -> SysResult<u64> {
        (**self).ring_drops()
    }
    fn socket_drops(&mut self) -> SysResult<u64> {
        (**self).socket_drops()
    }
    fn queued(&self) -> u64 {
        (**self).queued()
    }
    fn program_counts(&mut self) -> SysResult<Vec<u64>> {
        (**self).program_counts()
    }
    fn max_sleep_ns(&self, charging: bool) -> Option<u64> {
        (**self).max_sleep_ns(charging)
    }
}

impl<B: TxBackend + ?Sized> TxBackend for Box<B> {
    fn send(&mut self, frames: &[&[u8]]) -> SysResult<usize> {
        (**self).send(frames)
    }
    fn fd(&self) -> Option<RawFd> {
        (**self).fd()
    }
}
