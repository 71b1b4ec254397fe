//! rxsched's XDP programs, compiled ahead of time from `bpf/*.bpf.c` (see
//! `bpf/build.sh`) and embedded in the binary, loaded with aya.
//!
//! Programs are attached through a bpf_link, which the kernel removes when
//! the process holding it exits, however it exits: a killed generator,
//! sink or router leaves no program behind.

use crate::rules::{Action, Rule, Rules};
use crate::sys::{SysError, SysResult};
use crate::wire::Mac;
use aya::maps::{MapData, PerCpuArray};
use aya::programs::{Program, ProgramError, SchedClassifier, Xdp, XdpMode};
use aya::Ebpf;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use strum::VariantArray;

mod test_run;
pub use test_run::{run_live, run_once};

/// The generator (`bpf/gen.bpf.c`).
pub static GEN: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/gen.o");
/// The sink (`bpf/sink.bpf.c`).
pub static SINK: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/sink.o");
/// Redirection into AF_XDP sockets (`bpf/xsk.bpf.c`).
pub static XSK: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/xsk.o");
/// Forwarding in XDP (`bpf/fwd.bpf.c`).
pub static FWD: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/fwd.o");
/// The router's receive path, in XDP or at tc ingress (`bpf/route.bpf.c`).
pub static ROUTE: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/route.o");
/// SRP's server's receive path, in XDP or at tc ingress (`bpf/serve.bpf.c`).
pub static SERVE: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/serve.o");
/// A monitor's receive path: passive copies, or taking (`bpf/monitor.bpf.c`).
pub static MONITOR: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/monitor.o");
/// Early discard for full UDP sockets (`bpf/guard.bpf.c`).
pub static GUARD: &[u8] = aya::include_bytes_aligned!("../../bpf/obj/guard.o");

/// What `bpf/monitor.bpf.c` did with a frame, in the order of its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray)]
pub enum CopyOutcome {
    /// Copied into the ring buffer, and passed on to the stack.
    Copied,
    /// Passed on uncopied: the ring buffer was full.
    RingFull,
    /// Taken at tc ingress (the packet backend's `--take`): the stack
    /// never sees it.
    Taken,
    /// Passed on uncopied: the capture filter refused it.
    Filtered,
}

/// What `bpf/route.bpf.c` did with a frame, in the order of its counters.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    strum::VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RouteOutcome {
    /// Taken by user space, its next hop set from the kernel's tables.
    Taken,
    /// To the stack: ARP.
    Arp,
    /// To the stack: IPv6 the router does not forward itself (link-local,
    /// with routes by hand, or on the packet backend).
    Ipv6,
    /// To the stack: neither IPv4, ARP nor IPv6.
    OtherProto,
    /// To the stack: link or IP multicast, or broadcast.
    Multicast,
    /// To the stack: IPv4 options, which the kernel processes.
    Options,
    /// To the stack: the TTL expires here (the kernel sends Time Exceeded).
    TtlExpired,
    /// To the stack: the kernel's routing would not forward it: for this
    /// host, or with no route at all (the kernel answers Destination
    /// Unreachable).
    NotForwarded,
    /// To the stack: the next hop is unresolved (the kernel resolves it
    /// and forwards the frame).
    NoNeigh,
    /// To the stack: over the egress MTU (the kernel fragments it or sends
    /// Fragmentation Needed).
    FragNeeded,
    /// To the stack: no route, or a blackhole or prohibited one (the kernel
    /// sends Destination Unreachable).
    Unreachable,
    /// To the stack: forwarding is off on the input port.
    ForwardingOff,
    /// To the stack: another reason the FIB lookup gave.
    Other,
    /// To the stack: merged by GRO before a tc program saw it (the kernel
    /// forwards it in segments; an XDP program sees frames before GRO).
    Gro,
    /// To the stack: it arrived on a receive queue no socket of ours is
    /// bound to (the kernel forwards it).
    NoSocket,
    /// Dropped: another host's unicast MAC.
    NotOurs,
    /// Dropped: shorter than its headers.
    Truncated,
    /// Dropped: an IHL below 5, or a total length outside the frame.
    BadIhl,
    /// Dropped: denied by a screening rule (forwarding in XDP, with
    /// `--screen`).
    Screened,
}

/// An error of aya's as a [`SysError`] naming the object and the call,
/// with the OS error when there is one (so that callers can tell bad input
/// from a failure).
fn aya_err(what: &str, call: &'static str, e: impl std::error::Error + 'static) -> SysError {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    let mut code = None;
    while let Some(s) = src {
        if let Some(c) = s
            .downcast_ref::<io::Error>()
            .and_then(io::Error::raw_os_error)
        {
            code = Some(c);
            break;
        }
        src = s.source();
    }
    let msg = e.to_string();
    // A program the verifier refused: the end of its log says why.
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = src {
        if let Some(aya::programs::ProgramError::LoadError { verifier_log, .. }) =
            s.downcast_ref::<aya::programs::ProgramError>()
        {
            let log = verifier_log.to_string();
            let tail: Vec<&str> = log.lines().rev().take(6).collect();
            let os = io::Error::from_raw_os_error(code.unwrap_or(libc::EINVAL));
            let why = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
            return SysError {
                what: what.to_string(),
                syscall: call,
                source: io::Error::new(os.kind(), format!("{os}; verifier: {why}")),
            };
        }
        src = s.source();
    }
    let source = match code {
        Some(c) => io::Error::from_raw_os_error(c),
        None if msg.contains("unknown network interface") => {
            io::Error::from_raw_os_error(libc::ENODEV)
        }
        None => io::Error::other(msg),
    };
    SysError {
        what: what.to_string(),
        syscall: call,
        source,
    }
}

/// One loaded object, with its programs attached where asked.
pub struct Object {
    ebpf: Ebpf,
    what: String,
}

impl Object {
    /// Loads an embedded object; `what` names it in errors.
    pub fn load(bytes: &[u8], what: &str) -> SysResult<Object> {
        let ebpf = Ebpf::load(bytes).map_err(|e| aya_err(what, "bpf(BPF_PROG_LOAD)", e))?;
        Ok(Object {
            ebpf,
            what: what.to_string(),
        })
    }

    /// Loads an embedded object whose fields are relocated against `btf`
    /// (the running kernel's, which the caller has checked is there).
    pub fn load_with_btf(bytes: &[u8], what: &str, btf: &aya::Btf) -> SysResult<Object> {
        let ebpf = aya::EbpfLoader::new()
            .btf(Some(btf))
            .load(bytes)
            .map_err(|e| aya_err(what, "bpf(BPF_PROG_LOAD)", e))?;
        Ok(Object {
            ebpf,
            what: what.to_string(),
        })
    }

    /// Program `prog` of the object as its type `P` (not loaded yet, maybe).
    fn program<P>(&mut self, prog: &str) -> SysResult<&mut P>
    where
        for<'a> &'a mut P: TryFrom<&'a mut Program, Error = ProgramError>,
    {
        let what = &self.what;
        let p = self.ebpf.program_mut(prog).ok_or_else(|| SysError {
            what: what.clone(),
            syscall: "bpf(BPF_PROG_LOAD)",
            source: io::Error::new(io::ErrorKind::NotFound, format!("no program {prog}")),
        })?;
        p.try_into()
            .map_err(|e| aya_err(what, "bpf(BPF_PROG_LOAD)", e))
    }

    fn xdp(&mut self, prog: &str) -> SysResult<&mut Xdp> {
        let what = self.what.clone();
        let x: &mut Xdp = self.program(prog)?;
        if x.fd().is_err() {
            x.load()
                .map_err(|e| aya_err(&what, "bpf(BPF_PROG_LOAD)", e))?;
        }
        Ok(x)
    }

    /// Attaches program `prog` to `iface` in native (driver) mode, through a
    /// bpf_link that goes away with this process.
    pub fn attach(&mut self, prog: &str, iface: &str) -> SysResult<()> {
        let x = self.xdp(prog)?;
        x.attach(iface, XdpMode::Driver)
            .map(|_| ())
            .map_err(|e| aya_err(iface, "XDP attach (native, bpf_link_create)", e))
    }

    /// Attaches tc program `prog` at `iface`'s ingress through a TCX link
    /// (kernel 6.6 and later) that goes away with this process.
    pub fn attach_tc(&mut self, prog: &str, iface: &str) -> SysResult<()> {
        let what = self.what.clone();
        let tc: &mut SchedClassifier = self.program(prog)?;
        tc.load()
            .map_err(|e| aya_err(&what, "bpf(BPF_PROG_LOAD)", e))?;
        tc.attach(iface, aya::programs::TcAttachType::Ingress)
            .map(|_| ())
            .map_err(|e| aya_err(iface, "tc attach (ingress, TCX link)", e))
    }

    /// Program `prog`'s descriptor (loading it if need be), for test runs.
    pub fn prog_fd(&mut self, prog: &str) -> SysResult<RawFd> {
        let what = self.what.clone();
        let x = self.xdp(prog)?;
        let fd = x
            .fd()
            .map_err(|e| aya_err(&what, "bpf(BPF_PROG_GET_FD)", e))?;
        Ok(fd.as_fd().as_raw_fd())
    }

    /// The map `name`, for typed access.
    pub fn map(&mut self, name: &str) -> SysResult<&mut aya::maps::Map> {
        let what = self.what.clone();
        self.ebpf.map_mut(name).ok_or_else(|| SysError {
            what,
            syscall: "bpf(BPF_MAP_CREATE)",
            source: io::Error::new(io::ErrorKind::NotFound, format!("no map {name}")),
        })
    }

    /// Sets entry 0 of array map `name` to the bytes of `value`.
    pub fn set<V: aya::Pod>(&mut self, name: &str, index: u32, value: V) -> SysResult<()> {
        let what = self.what.clone();
        let mut a: aya::maps::Array<&mut MapData, V> = self
            .map(name)?
            .try_into()
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_UPDATE_ELEM)", e))?;
        a.set(index, value, 0)
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_UPDATE_ELEM)", e))
    }

    /// Entry `index` of array map `name`.
    pub fn get<V: aya::Pod>(&mut self, name: &str, index: u32) -> SysResult<V> {
        let what = self.what.clone();
        let a: aya::maps::Array<&mut MapData, V> = self
            .map(name)?
            .try_into()
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_LOOKUP_ELEM)", e))?;
        a.get(&index, 0)
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_LOOKUP_ELEM)", e))
    }

    /// Every CPU's value of entry `index` of per-CPU array map `name`.
    pub fn per_cpu<T: aya::Pod>(&mut self, name: &str, index: u32) -> SysResult<Vec<T>> {
        let what = self.what.clone();
        let a: PerCpuArray<&mut MapData, T> = self
            .map(name)?
            .try_into()
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_LOOKUP_ELEM)", e))?;
        let v = a
            .get(&index, 0)
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_LOOKUP_ELEM)", e))?;
        Ok(v.iter().copied().collect())
    }

    /// Binds AF_XDP socket `fd` to slot `index` of XSKMAP `name`.
    pub fn set_xsk(&mut self, name: &str, index: u32, fd: RawFd) -> SysResult<()> {
        let what = self.what.clone();
        let mut m: aya::maps::XskMap<&mut MapData> = self
            .map(name)?
            .try_into()
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_UPDATE_ELEM)", e))?;
        m.set(index, fd, 0)
            .map_err(|e| aya_err(&what, "bpf(BPF_MAP_UPDATE_ELEM)", e))
    }
}

impl RouteOutcome {
    /// Where a frame with this outcome went: `None` to user space,
    /// `Some(None)` to the kernel's stack, `Some(Some(point))` dropped.
    pub fn fate(self) -> Option<Option<rxsched_core::DropPoint>> {
        use rxsched_core::DropPoint;
        match self {
            RouteOutcome::Taken => None,
            RouteOutcome::NotOurs => Some(Some(DropPoint::OtherHost)),
            RouteOutcome::Truncated => Some(Some(DropPoint::Truncated)),
            RouteOutcome::BadIhl => Some(Some(DropPoint::BadIhl)),
            RouteOutcome::Screened => Some(Some(DropPoint::ScreenDenied)),
            _ => Some(None),
        }
    }
}

/// Screening rules `bpf/route.bpf.c` holds.
pub const SCREEN_RULES: usize = 64;

/// `struct screen_rule` of `bpf/route.bpf.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct ScreenRule {
    src: u32,
    src_mask: u32,
    dst: u32,
    dst_mask: u32,
    sport_lo: u16,
    sport_hi: u16,
    dport_lo: u16,
    dport_hi: u16,
    proto: u8,
    has: u8,
    accept: u8,
    pad: u8,
}

// SAFETY: plain integers, no padding (28 bytes, as the C struct).
unsafe impl aya::Pod for ScreenRule {}

impl ScreenRule {
    /// The program's form of `r`.
    fn of(r: &Rule) -> ScreenRule {
        // Addresses as the frame holds them (network order, read as a
        // native integer), as the program compares them.
        let net = |n: Option<ipnet::Ipv4Net>| {
            n.map_or((0, 0), |n| {
                (
                    u32::from_ne_bytes(n.network().octets()),
                    u32::from_ne_bytes(n.netmask().octets()),
                )
            })
        };
        let ports = |p: Option<crate::rules::Ports>| p.map_or((0, 0), |p| (p.lo, p.hi));
        let ((src, src_mask), (dst, dst_mask)) = (net(r.from), net(r.to));
        let ((sport_lo, sport_hi), (dport_lo, dport_hi)) = (ports(r.sport), ports(r.dport));
        let has = [
            r.proto.is_some(),
            r.from.is_some(),
            r.to.is_some(),
            r.sport.is_some(),
            r.dport.is_some(),
        ]
        .iter()
        .enumerate()
        .fold(0u8, |a, (i, b)| a | (u8::from(*b) << i));
        ScreenRule {
            src,
            src_mask,
            dst,
            dst_mask,
            sport_lo,
            sport_hi,
            dport_lo,
            dport_hi,
            proto: r.proto.unwrap_or(0),
            has,
            accept: u8::from(r.action == Action::Accept),
            pad: 0,
        }
    }
}

/// Receive queues and consumers the socket map has room for (`bpf/xsks.h`).
pub const XSKS_QUEUES: u32 = 64;
/// See [`XSKS_QUEUES`].
pub const XSKS_CONSUMERS: usize = 16;

impl Object {
    /// Sets up `bpf/route.bpf.c` for the port `ifindex` whose MAC is
    /// `mac`: next hops from the kernel's tables, or (`feed`'s
    /// `kernel_hops` false) from user space's, with the host's own
    /// addresses `local` going to the stack.
    pub fn setup_route(
        &mut self,
        ifindex: u32,
        mac: Mac,
        kernel_hops: bool,
        local: &[[u8; 4]],
    ) -> SysResult<()> {
        let what = self.what.clone();
        let err = |e| aya_err(&what, "bpf(BPF_MAP_UPDATE_ELEM)", e);
        let m = mac.0;
        let mac48 = (0..6).fold(0u64, |a, i| a | (m[i] as u64) << (8 * i));
        {
            let mut ports: aya::maps::HashMap<&mut MapData, u32, u64> =
                self.map("port_macs")?.try_into().map_err(err)?;
            ports.insert(ifindex, mac48, 0).map_err(err)?;
        }
        {
            let mut l: aya::maps::HashMap<&mut MapData, u32, u8> =
                self.map("local_v4")?.try_into().map_err(err)?;
            for a in local {
                l.insert(u32::from_ne_bytes(*a), 1, 0).map_err(err)?;
            }
        }
        self.set("route_cfg", 0, u32::from(kernel_hops))
    }

    /// `bpf/route.bpf.c`'s counters, summed over the CPUs: its outcomes in
    /// [`RouteOutcome`]'s order, then what each screening rule decided
    /// ([`SCREEN_RULES`] entries, then the default's), then the protected
    /// frames steered to a protected socket and those on a queue without
    /// one.
    pub fn route_counts(&mut self) -> SysResult<Vec<u64>> {
        let mut c = self.counts("route_stats", RouteOutcome::VARIANTS.len())?;
        c.extend(self.counts("screen_stats", SCREEN_RULES + 1)?);
        c.extend(self.counts("protect_stats", 2)?);
        Ok(c)
    }

    /// Sets `bpf/route.bpf.c`'s screening rules (forwarding in XDP): the
    /// first rule a frame matches decides, none denies it.
    pub fn setup_screen(&mut self, rules: &Rules) -> SysResult<()> {
        self.set_rules("screen_rules", rules)?;
        self.set("route_cfg", 2, rules.rules.len() as u32)
    }

    /// Sets `bpf/route.bpf.c`'s protection rules: a frame for user space
    /// whose first matching rule accepts it goes to its queue's protected
    /// socket, where there is one.
    pub fn setup_protect(&mut self, rules: &Rules) -> SysResult<()> {
        self.set_rules("protect_rules", rules)?;
        self.set("route_cfg", 3, rules.rules.len() as u32)
    }

    /// Writes `rules` into the rule map `map` of `bpf/route.bpf.c`.
    fn set_rules(&mut self, map: &str, rules: &Rules) -> SysResult<()> {
        if rules.rules.len() > SCREEN_RULES {
            return Err(SysError {
                what: self.what.clone(),
                syscall: "configure",
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the XDP program holds {SCREEN_RULES} rules in {map}, not {}",
                        rules.rules.len()
                    ),
                ),
            });
        }
        for (i, r) in rules.rules.iter().enumerate() {
            self.set(map, i as u32, ScreenRule::of(r))?;
        }
        Ok(())
    }

    /// Sets up `bpf/serve.bpf.c` to take the UDP datagrams to `ports`,
    /// each port's for the consumer of its index (whose sockets sit at
    /// [`Object::consumer_slot`] of the socket map).
    pub fn setup_serve(&mut self, ports: &[u16]) -> SysResult<()> {
        let what = self.what.clone();
        let err = |e| aya_err(&what, "bpf(BPF_MAP_UPDATE_ELEM)", e);
        let mut m: aya::maps::HashMap<&mut MapData, u16, u8> =
            self.map("udp_ports")?.try_into().map_err(err)?;
        for (i, p) in ports.iter().enumerate() {
            m.insert(*p, i as u8, 0).map_err(err)?;
        }
        Ok(())
    }

    /// Where consumer `c`'s socket on `queue` sits in the socket map
    /// (`bpf/xsks.h`); `None` past the map's queues or consumers.
    pub fn consumer_slot(c: usize, queue: u32) -> Option<u32> {
        (c < XSKS_CONSUMERS && queue < XSKS_QUEUES).then(|| c as u32 * XSKS_QUEUES + queue)
    }

    /// `bpf/serve.bpf.c`'s counters, summed over the CPUs: datagrams taken,
    /// and frames left to the stack.
    pub fn serve_counts(&mut self) -> SysResult<Vec<u64>> {
        self.counts("serve_stats", 2)
    }

    /// `bpf/monitor.bpf.c`'s counters, summed over the CPUs, in
    /// [`CopyOutcome`]'s order.
    pub fn copy_counts(&mut self) -> SysResult<Vec<u64>> {
        self.counts("copy_stats", CopyOutcome::VARIANTS.len())
    }

    /// Sets `bpf/filter.h`'s capture filter (in `bpf/monitor.bpf.c`).
    pub fn setup_filter(&mut self, p: &crate::pcap_filter::Program) -> SysResult<()> {
        for (i, op) in p.ops().iter().enumerate() {
            self.set("filter_ops", i as u32, *op)?;
        }
        self.set("filter_len", 0, p.ops().len() as u32)
    }

    /// Takes ring-buffer map `name` out of the object, for its reader.
    pub fn take_ring(&mut self, name: &str) -> SysResult<aya::maps::RingBuf<MapData>> {
        let what = self.what.clone();
        let m = self.ebpf.take_map(name).ok_or_else(|| SysError {
            what: what.clone(),
            syscall: "bpf(BPF_MAP_CREATE)",
            source: io::Error::new(io::ErrorKind::NotFound, format!("no map {name}")),
        })?;
        aya::maps::RingBuf::try_from(m).map_err(|e| aya_err(&what, "mmap(ringbuf)", e))
    }

    fn counts(&mut self, map: &str, n: usize) -> SysResult<Vec<u64>> {
        (0..n as u32)
            .map(|i| Ok(self.per_cpu::<u64>(map, i)?.iter().sum()))
            .collect()
    }
}
