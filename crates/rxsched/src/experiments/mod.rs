//! The files under `experiments/`, compiled in, and the two kinds of file
//! there. A simulated experiment ([`ExperimentFile`]: a scenario with its
//! `[figure]`, `[[series]]` and `[[check]]`s) is a figure `reproduce`
//! runs. A real bench's check file (`real-*.toml`, [`BenchFile`]: a
//! `[bench]` table and its `[[check]]`s) says what one result of
//! `bench real` is and what its points must show. Both hold their verdicts
//! in the one format of [`crate::checks`].

mod real;
mod simulated;

pub use real::{BenchCfg, BenchFile};
pub use simulated::{
    Experiment, ExperimentFile, FigureCfg, FigureKind, Milestone, ReferenceCfg, SearchCfg,
    SeriesCfg, BENCH_TABLE, KEYS, THROUGHPUT_METRICS,
};

/// Pairs each id with its file's text, compiled in.
macro_rules! files {
    ($($id:literal),* $(,)?) => {
        &[$(($id, include_str!(concat!("../../../../experiments/", $id, ".toml")))),*]
    };
}

/// Every simulated experiment: its id and scenario text, in `reproduce all` order.
pub const ALL: &[(&str, &str)] = files![
    "mogul-fig4-1",
    "mogul-fig4-2",
    "mogul-fig6-1",
    "mogul-fig6-3",
    "mogul-fig6-4",
    "mogul-fig6-5",
    "mogul-fig6-6",
    "mogul-fig7-1",
    "mogul-fig7-4",
    "mogul-fig7-6",
    "mogul-fig7-7",
    "mogul-fig7-8",
    "mogul-fig8-1",
    "mogul-fig8-2",
    "mogul-fig8-3",
    "mogul-fig8-4",
    "mogul-fig8-5",
    "mogul-calaveras",
    "protect-mogul",
    "slo-mogul",
    "slo-screend",
    "spanos-table1",
    "spanos-fig5-64",
    "spanos-fig5-256",
    "spanos-table3",
    "spanos-model",
    "spanos-table5",
    "srp-fig4",
    "srp-fig5",
    "srp-modes",
    "srp-fig6",
    "srp-table1",
    "srp-table2",
    "hansen-cpu",
    "hansen-pinning",
    "hansen-latency",
    "hansen-locking",
    "hansen-switch",
    "slo-two-level",
    "hansen-scaling",
    "lab-router",
    "lab-cpu-limit",
    "slo-lab",
    "lab-screen",
    "lab-capture",
];

/// The prefix of a real bench's check file: `experiments/real-<name>.toml`.
pub const REAL_PREFIX: &str = "real-";

/// Every real bench result's check file: its id and text.
pub const BENCHES: &[(&str, &str)] = files![
    "real-router",
    "real-cpu-limit",
    "real-latency",
    "real-lab",
    "real-capture",
    "real-screen",
    "real-srp",
    "real-srp-reservation",
    "real-srp-excess",
    "real-srp-tcp",
    "real-soak",
    "real-two-level",
    "real-protect",
];

/// The scenario text of simulated experiment `id`.
pub fn get(id: &str) -> Option<&'static str> {
    ALL.iter().find(|(i, _)| *i == id).map(|(_, s)| *s)
}

/// The check file text of real bench result `id`.
pub fn bench(id: &str) -> Option<&'static str> {
    BENCHES.iter().find(|(i, _)| *i == id).map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each file under `experiments/` is compiled in under its own id, as a
    /// check file if its name says `real-`, else as a simulated experiment;
    /// and each parses as what it is.
    #[test]
    fn every_file_is_registered_under_its_own_id() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .map(|n| n.trim_end_matches(".toml").to_string())
            .collect();
        files.sort();
        let (real, simulated): (Vec<String>, Vec<String>) =
            files.into_iter().partition(|f| f.starts_with(REAL_PREFIX));
        let ids = |list: &[(&str, &str)]| {
            let mut v: Vec<String> = list.iter().map(|(i, _)| i.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(simulated, ids(ALL));
        assert_eq!(real, ids(BENCHES));
        for (id, src) in ALL {
            let f = ExperimentFile::parse(id, src.to_string(), None).unwrap();
            assert_eq!(f.exp.id.as_deref(), Some(*id));
        }
        for (id, _) in BENCHES {
            BenchFile::load(id).unwrap();
        }
    }
}
