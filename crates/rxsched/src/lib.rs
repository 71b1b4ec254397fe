//! The pieces behind the `rxsched` command: the files under `experiments/`
//! (the simulated figures and the real benches' results, with their
//! checks), how a scenario becomes a figure (sweeps, distributions, bursts,
//! RFC 2544 throughput searches), how a real bench measures its points in
//! the lab, the checks computed from the points, the result format, and
//! the report (JSON, CSV, SVG, HTML).
//!
//! Dependencies inside the crate point one way: `result` is at the bottom;
//! `checks` reads results; `experiments` holds the files that describe
//! figures, real results and their checks; `figure` and `bench` build
//! results; `report` writes them.

pub mod bench;
pub mod checks;
pub mod error;
pub mod experiments;
pub mod figure;
pub mod flags;
pub mod out;
pub mod profile_doc;
pub mod report;
pub mod result;
pub mod search;
pub mod shard;
pub mod swarm;
