//! The experiments `reproduce` knows, compiled in from `experiments/`.

/// Pairs each id with its scenario file's text, compiled in.
macro_rules! experiments {
    ($($id:literal),* $(,)?) => {
        &[$(($id, include_str!(concat!("../../../experiments/", $id, ".toml")))),*]
    };
}

/// Every experiment: its id and scenario text, in `reproduce all` order.
pub const ALL: &[(&str, &str)] = experiments![
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
    "spanos-table1",
    "spanos-fig5-64",
    "spanos-fig5-256",
    "spanos-table3",
    "spanos-model",
    "srp-fig4",
    "srp-fig5",
    "srp-modes",
    "srp-fig6",
    "srp-table1",
    "hansen-cpu",
    "hansen-pinning",
    "hansen-latency",
    "hansen-locking",
    "hansen-switch",
];

/// The scenario text of experiment `id`.
pub fn get(id: &str) -> Option<&'static str> {
    ALL.iter().find(|(i, _)| *i == id).map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut ids: Vec<String> = ALL.iter().map(|(i, _)| i.to_string()).collect();
        ids.sort();
        assert_eq!(files, ids);
        for (id, src) in ALL {
            let f = crate::experiment::ExperimentFile::parse(id, src.to_string(), None).unwrap();
            assert_eq!(f.exp.id.as_deref(), Some(*id));
        }
    }
}
