//! rxsched on real interfaces: AF_PACKET rings behind a small backend trait,
//! the lab of network namespaces, a traffic generator and sink, and a router
//! whose receive scheduling comes from `rxsched-core`.

pub mod backend;
pub mod lab;
pub mod router;
pub mod spin;
pub mod sys;
pub mod traffic;
pub mod wire;
