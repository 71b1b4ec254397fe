//! rxsched on real interfaces: packet backends (AF_XDP, AF_PACKET, and
//! in-memory ones for tests) behind small traits, rxsched's own XDP
//! programs, threaded-NAPI control, the lab of network namespaces, a
//! traffic generator and sink, and a router whose receive scheduling comes
//! from `rxsched-core`.

pub mod backend;
pub mod bpf;
pub mod capture;
pub mod cgroup;
pub mod lab;
pub mod links;
pub mod napi;
pub mod needs;
pub mod router;
pub mod rules;
pub mod runtime;
pub mod screen;
pub mod serve;
pub mod spin;
pub mod stage;
pub mod sys;
pub mod traffic;
pub mod udprecv;
pub mod wakecost;
pub mod wire;
pub mod xdpfwd;
