//! `rxsched bench real ...`: the real dataplane in the XDP lab, swept over
//! offered load and written in the same result format as the simulator's
//! figures (profile `linux-veth`).
//!
//! A bench reads as data. What a result is and what its points must show
//! live in its check file, `experiments/<id>.toml` ([`BenchFile`], judged
//! by [`result`] with the same checks the simulator's figures use). The
//! processes of a trial are described in [`proc`] and rendered there, once,
//! and their reports read back as the structs the commands print them
//! from; variants × rates, with the retry of a point the hypervisor
//! disturbed, are [`sweep`]'s. What is left in each bench is which variants, which
//! trial, and which point a trial makes.

pub mod calibrate;
pub mod capture;
mod counters;
pub mod error;
mod excess;
#[cfg(test)]
mod fixed_points;
pub mod forward;
mod keepalive;
pub mod lab;
pub mod predict;
pub mod proc;
pub mod protect;
mod reservation;
pub mod router;
pub mod screen;
pub mod soak;
pub mod srp;
pub mod sweep;
pub mod two_level;

use crate::experiments::BenchFile;
use crate::result::{Meta, ResultFile, Series};
pub use capture::capture;
pub use error::BenchError;
pub use lab::lab;
pub use protect::protect;
pub use router::router;
pub use screen::screen;
pub use soak::soak;
pub use srp::srp;
use std::path::PathBuf;
pub use two_level::two_level;

/// How to run the benchmark.
#[derive(Debug, Clone)]
pub struct BenchOpts {
    /// Fewer points and shorter trials.
    pub quick: bool,
    /// Where results go.
    pub out: PathBuf,
    /// The lab to use.
    pub lab: rxsched_linux::lab::Lab,
    /// How long a soak runs, in minutes (default: 10, or 0.5 with `quick`).
    pub minutes: Option<f64>,
}

/// A benchmark of the real dataplane: its results, each judged.
pub type Bench = fn(&BenchOpts, &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError>;

/// The programs beside this one that a bench starts, each with the Debian
/// package it comes in. They run through `ip netns exec`, so a missing one
/// would show only when its trial starts: [`missing_tools`] looks first.
pub type Tools = &'static [(&'static str, &'static str)];

/// A bench as `rxsched bench real NAME` runs it: what it runs, and the
/// programs it starts beside ours.
#[derive(Debug, Clone, Copy)]
pub struct Real {
    /// Its name on the command line.
    pub name: &'static str,
    /// The bench.
    pub run: Bench,
    /// What it starts beside ours, looked for first.
    pub tools: Tools,
}

/// What starts every peer of ours pinned to its CPU.
const TASKSET: (&str, &str) = ("taskset", "util-linux");

/// Why `what` (a command, for the message) cannot run here: the programs
/// of `tools` this machine lacks, each named with its package, before
/// anything is measured; `None` when all are here.
pub fn missing_tools(what: &str, tools: Tools) -> Option<String> {
    let gone: Vec<_> = tools
        .iter()
        .filter(|(cmd, _)| !rxsched_linux::needs::has(cmd))
        .collect();
    if gone.is_empty() {
        return None;
    }
    let names: Vec<String> = gone.iter().map(|(c, p)| format!("{c} ({p})")).collect();
    let mut packages: Vec<&str> = gone.iter().map(|(_, p)| *p).collect();
    packages.sort_unstable();
    packages.dedup();
    Some(format!(
        "{what}: needs {}, not on this machine: apt-get install {}; nothing was measured",
        names.join(", "),
        packages.join(" ")
    ))
}

/// A point may lose this share of what arrived and still count as
/// loss-free: this VM's virtual CPUs are descheduled by the host for
/// milliseconds at a time (steal 3–8% here), and veth's fixed 256-frame
/// ring overflows during such a stall whatever forwards (the kernel lost 2%
/// at a tenth of its capacity, polling 5% at a quarter, in one quick run).
const LOSS_TOLERANCE: f64 = 0.05;

/// Where every real result comes from.
const SOURCE: &str = "rxsched real dataplane in the XDP lab (REAL.md)";

/// A result as its check file describes it, with the series measured and
/// the file's checks evaluated on them.
pub fn result(file: &BenchFile, series: Vec<Series>) -> ResultFile {
    let b = &file.bench;
    let meta = Meta {
        id: b.id.clone(),
        title: b.title.clone(),
        source: SOURCE.into(),
        profile: "linux-veth".into(),
        seed: 0,
        quick: false,
    };
    let mut r = ResultFile::new(meta, b.x.clone(), b.y.clone(), series, Vec::new());
    r.mlfrr_loss = LOSS_TOLERANCE;
    r.table = b.table.clone();
    r.checks = crate::checks::evaluate_all(&file.check, &r);
    r
}

/// The results directory, made and named absolutely: the benches that
/// write files there hand its paths to processes in other namespaces.
fn out_dir(opts: &BenchOpts) -> Result<PathBuf, BenchError> {
    use error::Context;
    std::fs::create_dir_all(&opts.out).context(opts.out.display())?;
    opts.out.canonicalize().context(opts.out.display())
}

#[cfg(test)]
mod tools_tests {
    use super::{missing_tools, Tools};

    #[test]
    fn a_missing_program_is_named_with_its_package_before_anything_runs() {
        const T: Tools = &[
            ("sh", "dash"),
            ("rxsched-no-such-tool", "no-such-package"),
            ("rxsched-no-such-tool-2", "no-such-package"),
        ];
        let why = missing_tools("bench real x", T).expect("two are missing");
        assert!(
            why.starts_with("bench real x: needs rxsched-no-such-tool (no-such-package), rxsched-no-such-tool-2 (no-such-package),"),
            "{why}"
        );
        // One package named once, and nothing said of what is here.
        assert!(why.contains("apt-get install no-such-package;"), "{why}");
        assert!(!why.contains("dash"), "{why}");
        assert_eq!(missing_tools("bench real x", &[("sh", "dash")]), None);
    }
}
