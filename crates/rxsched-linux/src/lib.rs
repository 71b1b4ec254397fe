//! rxsched on real interfaces: the same policies the simulator runs
//! (`rxsched-core`), driving real packets.
//!
//! - I/O: [`backend`] (AF_XDP, AF_PACKET, in-memory rings and a fault
//!   injector behind small traits), [`wire`] (frame views and builders),
//!   [`sys`] (checked system calls), [`bpf`] (rxsched's own XDP and tc
//!   programs), [`napi_threads`] (the kernel's threaded-NAPI receive threads),
//!   [`links`] (ports going down, coming back, disappearing).
//! - The runtime every command shares: [`runtime`] (configuration and
//!   launch, backend selection, priorities, the gate on receive work, and
//!   the polling thread generic over what takes each frame).
//! - The applications: [`router`] (`route`: M1, M2 with M3 and M4, M11),
//!   [`capture`] (the monitor), [`srp`] (SRP's early demultiplexing),
//!   [`guard`] (early discard for full UDP sockets, for unmodified
//!   applications), with the user-level stages behind them: [`stage`] (the shared-memory
//!   queue into a stage), [`screen`] (screend) and [`rules`] (its rule
//!   language), [`pcap_filter`] (tcpdump's filter language, for `capture`).
//! - The lab and its load: [`lab`] (namespaces, veth, pinned receive work),
//!   [`loadgen`] (the generator and sink), [`xdpfwd`] (the XDP forwarding
//!   peer), [`spin`] and [`udprecv`] (a compute process and the kernel's UDP
//!   receiver, for the benches), [`cgroup`] (CPU shares), [`wakecost`] (what
//!   a wake-up costs the task it interrupts).
//! - [`needs`]: what a test needs from the machine, and what it says when
//!   the machine lacks it.

pub mod backend;
pub mod bpf;
pub mod capture;
pub mod cgroup;
pub mod guard;
pub mod lab;
pub mod links;
pub mod loadgen;
pub mod metrics;
pub mod napi_threads;
pub mod needs;
pub mod pcap_filter;
pub mod router;
pub mod rules;
pub mod runtime;
pub mod screen;
pub mod spin;
pub mod srp;
pub mod stage;
pub mod sys;
pub mod udprecv;
pub mod wakecost;
pub mod wire;
pub mod xdpfwd;
