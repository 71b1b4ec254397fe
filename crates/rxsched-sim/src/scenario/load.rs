//! Reading a scenario file, and overriding its keys from the command line.
//! Every error names the file, line and key, or the `--set` key at fault.

use super::Scenario;
use crate::error::{from_path_error, from_toml, line_of, InputError};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// A scenario together with its source, so that later errors can name lines.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Where it came from.
    pub file: String,
    /// The directory relative paths resolve against.
    pub dir: Option<PathBuf>,
    /// The TOML text.
    pub src: String,
    /// The model part of the parsed tree, before overrides.
    pub tree: toml::Table,
    /// Top-level tables the caller set aside (a figure's construction).
    pub foreign: toml::Table,
    /// The parsed scenario, before overrides.
    pub scenario: Scenario,
}

impl Loaded {
    /// Parses scenario text that holds nothing but the model.
    pub fn parse(file: &str, src: String, dir: Option<PathBuf>) -> Result<Loaded, InputError> {
        Loaded::parse_with(file, src, dir, &[])
    }

    /// Parses scenario text, setting the top-level keys `foreign` aside for
    /// the caller (see [`Loaded::deserialize`]).
    pub fn parse_with(
        file: &str,
        src: String,
        dir: Option<PathBuf>,
        foreign: &[&str],
    ) -> Result<Loaded, InputError> {
        let mut tree: toml::Table = toml::from_str(&src).map_err(|e| from_toml(file, &src, &e))?;
        let mut aside = toml::Table::new();
        for k in foreign {
            if let Some(v) = tree.remove(*k) {
                aside.insert(k.to_string(), v);
            }
        }
        let scenario: Scenario = from_tree(file, &src, tree.clone())?;
        let l = Loaded {
            file: file.to_string(),
            dir,
            src,
            tree,
            foreign: aside,
            scenario,
        };
        l.scenario.validate().map_err(|(k, m)| l.error(&k, m))?;
        l.check_profile(&l.scenario)?;
        Ok(l)
    }

    /// Reads and parses a scenario file (see [`Loaded::parse_with`]).
    pub fn read_with(path: &Path, foreign: &[&str]) -> Result<Loaded, InputError> {
        let src = std::fs::read_to_string(path).map_err(|e| InputError {
            file: path.display().to_string(),
            line: None,
            key: None,
            msg: format!("cannot read scenario: {e}"),
        })?;
        Loaded::parse_with(
            &path.display().to_string(),
            src,
            path.parent().map(Path::to_path_buf),
            foreign,
        )
    }

    /// Reads and parses a scenario file that holds nothing but the model.
    pub fn read(path: &Path) -> Result<Loaded, InputError> {
        Loaded::read_with(path, &[])
    }

    /// Deserializes the tables set aside, with errors naming this file's lines.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, InputError> {
        from_tree(&self.file, &self.src, self.foreign.clone())
    }

    /// An error about `key`, with the line it is on if the file has it.
    pub fn error(&self, key: &str, msg: String) -> InputError {
        InputError {
            file: self.file.clone(),
            line: line_of(&self.src, key),
            key: Some(key.to_string()),
            msg,
        }
    }

    /// The scenario with overrides applied (in order) and validated. An
    /// error a `--set` caused names that `--set` key, not the file.
    pub fn with(&self, sets: &[(String, toml::Value)]) -> Result<Scenario, InputError> {
        if sets.is_empty() {
            return Ok(self.scenario.clone());
        }
        let mut tree = self.tree.clone();
        for (k, v) in sets {
            set_path(&mut tree, k, v.clone()).map_err(|msg| set_error(k, msg))?;
        }
        let blame = |e: InputError| {
            let key = e.key.clone().unwrap_or_default();
            match sets.iter().rev().find(|(sk, _)| overlaps(sk, &key)) {
                Some((sk, _)) => set_error(sk, e.msg),
                None => e,
            }
        };
        let s: Scenario = from_tree(&self.file, &self.src, tree).map_err(blame)?;
        s.validate()
            .map_err(|(k, msg)| blame(self.error(&k, msg)))?;
        self.check_profile(&s).map_err(blame)?;
        Ok(s)
    }

    /// Whether scenario `s` (this file's, overrides applied) can run on its
    /// profile ([`crate::profile_of`]); an error about the scenario names
    /// this file's line, one inside a profile file names that file's.
    fn check_profile(&self, s: &Scenario) -> Result<(), InputError> {
        match crate::profile_of(s, self.dir.as_deref()) {
            Ok(p) => match crate::host::slo_of(s, &p, 2) {
                Some(Err(e)) => Err(self.error("kernel.slo", e.0)),
                _ => match crate::host::feedback_of_slo(s, &p, 2) {
                    Some(Err(e)) => Err(self.error("kernel.feedback.from_slo", e.0)),
                    _ => match crate::smp::switch_of_slo(s, &p) {
                        Some(Err(e)) => Err(self.error("kernel.slo", e.0)),
                        _ => Ok(()),
                    },
                },
            },
            Err(e) if e.file == crate::IN_SCENARIO => {
                let key = e.key.clone().unwrap_or_else(|| "profile".into());
                Err(self.error(&key, e.msg))
            }
            Err(e) => Err(e),
        }
    }
}

fn set_error(key: &str, msg: String) -> InputError {
    InputError {
        file: "--set".into(),
        line: None,
        key: Some(key.to_string()),
        msg,
    }
}

/// Deserializes a TOML tree, naming the file line and dotted key of an error.
fn from_tree<T: DeserializeOwned>(
    file: &str,
    src: &str,
    tree: toml::Table,
) -> Result<T, InputError> {
    serde_path_to_error::deserialize(toml::Value::Table(tree))
        .map_err(|e| from_path_error(file, src, &e))
}

/// Whether an override of `set` can have caused an error at `key`: one
/// names a part of the other, array indices aside (`traffic.rate_pps` sets
/// `traffic.0.rate_pps`).
pub fn overlaps(set: &str, key: &str) -> bool {
    let parts = |k: &str| -> Vec<String> {
        k.split('.')
            .filter(|p| p.parse::<usize>().is_err())
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (parts(set), parts(key));
    let n = a.len().min(b.len());
    !key.is_empty() && a[..n] == b[..n]
}

/// Parses `key=value` as given to `--set`. The value is TOML (`5`, `"bsd"`,
/// `true`, `[1, 2]`), or a bare word taken as a string.
pub fn parse_set(s: &str) -> Result<(String, toml::Value), InputError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| set_error(s, "expected key=value".into()))?;
    let v = v.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()));
    Ok((k.trim().to_string(), value))
}

/// Sets a dotted key in a TOML tree. A numeric part indexes an array; a key
/// under an array of tables without an index applies to every element.
pub fn set_path(tree: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err("empty part in key".into());
    }
    set_in(tree, &parts, value)
}

fn set_in(t: &mut toml::Table, parts: &[&str], value: toml::Value) -> Result<(), String> {
    let (head, rest) = (parts[0], &parts[1..]);
    if rest.is_empty() {
        t.insert(head.to_string(), value);
        return Ok(());
    }
    let entry = t
        .entry(head.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    match entry {
        toml::Value::Table(sub) => set_in(sub, rest, value),
        toml::Value::Array(arr) => set_in_array(head, arr, rest, value),
        _ => Err(format!("`{head}` is a value, not a table")),
    }
}

fn set_in_array(
    head: &str,
    arr: &mut Vec<toml::Value>,
    rest: &[&str],
    value: toml::Value,
) -> Result<(), String> {
    if let Ok(i) = rest[0].parse::<usize>() {
        let el = arr
            .get_mut(i)
            .ok_or_else(|| format!("`{head}` has no element {i}"))?;
        return match (el, rest.len()) {
            (el, 1) => {
                *el = value;
                Ok(())
            }
            (toml::Value::Table(sub), _) => set_in(sub, &rest[1..], value),
            _ => Err(format!("`{head}.{i}` is not a table")),
        };
    }
    if arr.is_empty() {
        arr.push(toml::Value::Table(toml::Table::new()));
    }
    for el in arr.iter_mut() {
        match el {
            toml::Value::Table(sub) => set_in(sub, rest, value.clone())?,
            _ => return Err(format!("`{head}` is not an array of tables")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rxsched_core::Quota;

    fn load(src: &str) -> Result<Loaded, InputError> {
        Loaded::parse("t.toml", src.to_string(), None)
    }

    #[test]
    fn unknown_key_is_an_error_with_line() {
        let e = load("profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\nquotta = 5\n")
            .unwrap_err();
        assert_eq!(e.line, Some(4));
        assert_eq!(e.key.as_deref(), Some("kernel.quotta"));
        assert!(
            e.to_string().starts_with("t.toml:4: key `kernel.quotta`"),
            "{e}"
        );
    }

    #[test]
    fn type_errors_name_line_and_key() {
        let e = load("profile = \"dec3000-300\"\n[run]\nseed = \"one\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("run.seed")));
        let e = load("profile = \"dec3000-300\"\n[kernel]\nquota = 0\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("kernel.quota")));
    }

    #[test]
    fn out_of_range_values_name_line_and_key() {
        let e = load("profile = \"dec3000-300\"\n[[traffic]]\nrate_pps = -5\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("traffic.0.rate_pps"))
        );
        let e = load("profile = \"dec3000-300\"\n[kernel]\nipintrq_limit = 0\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("kernel.ipintrq_limit"))
        );
        let e = load("profile = \"dec3000-300\"\n[kernel.feedback]\nhigh_pct = 120\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("kernel.feedback.high_pct"))
        );
    }

    #[test]
    fn malformed_toml_names_line() {
        let e = load("profile = \"dec3000-300\"\n[kernel\nkind = 1\n").unwrap_err();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn foreign_tables_are_set_aside() {
        let l = Loaded::parse_with(
            "t.toml",
            "profile = \"dec3000-300\"\n[figure]\nanything = 1\n".into(),
            None,
            &["figure"],
        )
        .unwrap();
        assert!(l.foreign.contains_key("figure"));
        assert!(load("profile = \"dec3000-300\"\n[figure]\nanything = 1\n").is_err());
    }

    #[test]
    fn overrides_apply_and_blame_the_set_key() {
        let l = load("profile = \"dec3000-300\"\n[[traffic]]\nrate_pps = 5\n").unwrap();
        let s = l
            .with(&[parse_set("traffic.rate_pps=700").unwrap()])
            .unwrap();
        assert_eq!(s.traffic[0].rate_pps, 700.0);
        let s = l
            .with(&[parse_set("kernel.quota=unlimited").unwrap()])
            .unwrap();
        assert_eq!(s.kernel.quota, Quota::Unlimited);
        let e = l.with(&[parse_set("kernel.quota=0").unwrap()]).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.key.as_deref()),
            ("--set", Some("kernel.quota"))
        );
        // Set without an index, the error is still the override's.
        let e = l
            .with(&[parse_set("traffic.rate_pps=-1").unwrap()])
            .unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.key.as_deref()),
            ("--set", Some("traffic.rate_pps"))
        );
        let e = l
            .with(&[parse_set("run.duration_ms=1e300").unwrap()])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("run.duration_ms"));
        let e = l
            .with(&[parse_set("kernel.breaker.off_us=nan").unwrap()])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("kernel.breaker.off_us"));
        let e = l
            .with(&[parse_set("process=[{ kind = \"compute\", output = \"file\" }]").unwrap()])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("process"), "{e}");
        assert!(e.to_string().contains("only a tcpdump process"), "{e}");
        let e = l
            .with(&[
                parse_set("process=[{ kind = \"tcpdump\" }]").unwrap(),
                parse_set("kernel.kind=linux").unwrap(),
            ])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("kernel.kind"));
        let e = l.with(&[parse_set("kernel.nope=1").unwrap()]).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.key.as_deref()),
            ("--set", Some("kernel.nope"))
        );
    }

    #[test]
    fn overlap_ignores_indices() {
        assert!(overlaps("traffic.rate_pps", "traffic.0.rate_pps"));
        assert!(overlaps("process", "process.1.kind"));
        assert!(!overlaps("kernel.quota", "kernel.feedback.high_pct"));
        assert!(!overlaps("kernel.quota", ""));
    }
}
