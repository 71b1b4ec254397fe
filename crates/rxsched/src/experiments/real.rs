//! A real bench's check file (`experiments/real-*.toml`): what one result of
//! `rxsched bench real ...` is (its id, title, axes and series) under a
//! top-level `[bench]`, and the `[[check]]`s that judge its points, in the
//! format of the simulator's scenario files and validated by the same
//! [`crate::checks::validate`]. The bench measures the points; this file
//! says what they must show.

use super::simulated::BENCH_TABLE;
use crate::checks::Check;
use crate::result::Axis;
use rxsched_sim::error::{from_path_error, from_toml, line_of};
use rxsched_sim::InputError;
use serde::Deserialize;

/// `[bench]`: what the result is.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchCfg {
    /// The result id, which is also the file's name (`real-router`).
    pub id: String,
    /// Title.
    pub title: String,
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The series the bench measures, by the labels the checks use.
    pub series: Vec<String>,
    /// Metrics the report shows as a table, one row per point.
    #[serde(default)]
    pub table: Vec<String>,
    /// The simulator's experiment of the lab host that predicts this
    /// bench (`--predict`): each measured series by its series of the
    /// same label.
    #[serde(default)]
    pub predicted_by: Option<String>,
}

/// A whole check file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchFile {
    /// What the result is.
    pub bench: BenchCfg,
    /// Verdicts.
    #[serde(default)]
    pub check: Vec<Check>,
    /// Verdicts on the simulator's prediction of the measured series
    /// (`<label>-predicted`, from `bench real ... --predict PROFILE`),
    /// applied only when the bench predicted.
    #[serde(default)]
    pub prediction: Vec<Check>,
}

impl BenchFile {
    /// Parses a check file's text; an error names the file, line and key.
    pub fn parse(file: &str, src: &str) -> Result<BenchFile, InputError> {
        let tree: toml::Table = toml::from_str(src).map_err(|e| from_toml(file, src, &e))?;
        if !tree.contains_key(BENCH_TABLE) {
            return Err(InputError {
                file: file.to_string(),
                line: None,
                key: Some(BENCH_TABLE.to_string()),
                msg: "a real bench's check file starts with a [bench] table (id, title, x, y, series)".into(),
            });
        }
        let f: BenchFile = serde_path_to_error::deserialize(toml::Value::Table(tree))
            .map_err(|e| from_path_error(file, src, &e))?;
        let labels: Vec<&str> = f.bench.series.iter().map(String::as_str).collect();
        // A real bench's points carry whatever it measured: no metric list
        // to hold a check's `metric` against.
        let at = |(key, msg): (String, String)| InputError {
            file: file.to_string(),
            line: line_of(src, &key),
            key: Some(key),
            msg,
        };
        crate::checks::validate(&f.check, &labels, |_| Ok(())).map_err(at)?;
        let predicted: Vec<String> = labels
            .iter()
            .map(|l| format!("{l}{}", crate::bench::predict::SUFFIX))
            .collect();
        let mut both = labels.clone();
        both.extend(predicted.iter().map(String::as_str));
        crate::checks::validate(&f.prediction, &both, |_| Ok(()))
            .map_err(|(key, msg)| at((key.replacen("check", "prediction", 1), msg)))?;
        Ok(f)
    }

    /// The compiled-in check file of result `id` (`experiments/<id>.toml`).
    pub fn load(id: &str) -> Result<BenchFile, InputError> {
        let file = format!("experiments/{id}.toml");
        let src = super::bench(id).ok_or_else(|| InputError {
            file: file.clone(),
            line: None,
            key: None,
            msg: "no such real bench result: its check file is not compiled in".into(),
        })?;
        let f = BenchFile::parse(&file, src)?;
        if f.bench.id != id {
            return Err(InputError {
                file,
                line: line_of(src, "bench.id"),
                key: Some("bench.id".into()),
                msg: format!("the file of {id} says it is {:?}", f.bench.id),
            });
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "[bench]\nid = \"real-t\"\ntitle = \"t\"\nx = { metric = \"offered_pps\", label = \"in\" }\ny = { metric = \"delivered_pps\", label = \"out\" }\nseries = [\"a\", \"b\"]\n";

    fn error(tail: &str) -> InputError {
        BenchFile::parse("real-t.toml", &format!("{HEAD}{tail}")).unwrap_err()
    }

    #[test]
    fn a_malformed_check_file_names_file_line_and_key() {
        let e = error("[[check]]\nname = \"c\"\nkind = \"flat\"\nseries = [\"a\"]\nmin = 0.9\ntolerance = 3\n");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(12), Some("check.0.tolerance")),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("real-t.toml:12: key `check.0.tolerance`"),
            "{e}"
        );
        let e = error("[[check]]\nname = \"c\"\nkind = \"flat\"\nseries = [\"c\"]\nmin = 0.9\n");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(10), Some("check.0.series")),
            "{e}"
        );
        let e = error(
            "[[check]]\nname = \"c\"\nkind = \"last_ratio\"\nseries = [\"a\"]\nother = [\"b\"]\n",
        );
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(9), Some("check.0.kind")),
            "{e}"
        );
        // A value of the wrong type inside a check is blamed on the check,
        // as in a scenario file.
        let e = error("[[check]]\nname = \"c\"\nkind = \"flat\"\nseries = \"a\"\nmin = 0.9\n");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(7), Some("check.0")),
            "{e}"
        );
        let e = BenchFile::parse("real-t.toml", &HEAD.replace("title", "titel")).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("bench.titel")),
            "{e}"
        );
        let e = BenchFile::parse("real-t.toml", "[bench\n").unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn a_scenario_is_not_a_check_file_and_a_check_file_not_a_scenario() {
        let e = BenchFile::parse("s.toml", "profile = \"dec3000-300\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("bench"), "{e}");
        let e =
            super::super::ExperimentFile::parse("real-t.toml", HEAD.to_string(), None).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(1), Some("bench")), "{e}");
        assert!(e.msg.contains("bench real"), "{e}");
    }
}
