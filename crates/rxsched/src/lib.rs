//! The pieces behind the `rxsched` command: the experiments it knows, how a
//! scenario becomes a figure (sweeps, distributions, bursts, RFC 2544
//! throughput searches), the checks computed from the points, and the
//! report (JSON, CSV, SVG, HTML).

pub mod bench;
pub mod checks;
pub mod experiments;
pub mod figure;
pub mod report;
