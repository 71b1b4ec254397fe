//! Errors for users: they name the file, the line and the key.

use std::fmt;

/// Bad input: a scenario, profile or override the user must fix (exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file, or `--set` for a command-line override.
    pub file: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// The dotted key, when known.
    pub key: Option<String>,
    /// What is wrong and what to do.
    pub msg: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(k) = &self.key {
            write!(f, ": key `{k}`")?;
        }
        write!(f, ": {}", self.msg)
    }
}

impl std::error::Error for InputError {}

/// Everything a simulation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The user's input is wrong (exit 2).
    #[error("{0}")]
    Input(#[from] InputError),
    /// The model broke an invariant, such as conservation (exit 1).
    #[error("simulation failed: {0}")]
    Invariant(String),
}

/// Converts a `toml` deserialisation error into an [`InputError`] with line and key.
pub fn from_toml(file: &str, src: &str, e: &toml::de::Error) -> InputError {
    let line = e
        .span()
        .map(|s| src[..s.start.min(src.len())].matches('\n').count() + 1);
    let msg = e.message().trim().to_string();
    let key = msg
        .split('`')
        .nth(1)
        .filter(|_| msg.starts_with("unknown field"))
        .map(str::to_string)
        .or_else(|| line.and_then(|l| key_at(src, l)));
    InputError {
        file: file.to_string(),
        line,
        key,
        msg,
    }
}

/// Converts an error met while deserializing a TOML tree into an
/// [`InputError`] naming the dotted key (`traffic.0.rate_pps`) and its line.
pub fn from_path_error(
    file: &str,
    src: &str,
    e: &serde_path_to_error::Error<toml::de::Error>,
) -> InputError {
    use serde_path_to_error::Segment;
    let mut parts: Vec<String> = e
        .path()
        .iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.clone()),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect();
    let msg = e.inner().message().trim().to_string();
    // An unknown key is reported at its table; name the key itself.
    if let Some(k) = msg
        .strip_prefix("unknown field `")
        .and_then(|m| m.split('`').next())
    {
        if parts.last().map(String::as_str) != Some(k) {
            parts.push(k.to_string());
        }
    }
    let key = parts.join(".");
    let line = (0..=parts.len())
        .rev()
        .find_map(|n| line_of(src, &parts[..n].join(".")).filter(|_| n > 0));
    InputError {
        file: file.to_string(),
        line,
        key: (!key.is_empty()).then_some(key),
        msg,
    }
}

/// The dotted key written on a 1-based line (`traffic.1.rate_pps` for
/// `rate_pps = ...` under the second `[[traffic]]`), or the table a header
/// line opens: what a syntax error on that line is about.
pub fn key_at(src: &str, line: usize) -> Option<String> {
    let mut table = String::new();
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    for (i, text) in src.lines().enumerate() {
        let t = text.trim();
        let header = if let Some(h) = t.strip_prefix("[[") {
            h.split("]]").next().map(|n| {
                let n = n.trim().to_string();
                let c = counts.entry(n.clone()).or_default();
                *c += 1;
                format!("{n}.{}", *c - 1)
            })
        } else if let Some(h) = t.strip_prefix('[') {
            h.split(']').next().map(|n| n.trim().to_string())
        } else {
            None
        };
        if let Some(h) = header {
            table = h;
            if i + 1 == line {
                return (!table.is_empty()).then(|| table.clone());
            }
            continue;
        }
        if i + 1 == line {
            let k = t.split('=').next()?.trim();
            let ok = !k.is_empty()
                && t.contains('=')
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            return ok.then(|| {
                if table.is_empty() {
                    k.to_string()
                } else {
                    format!("{table}.{k}")
                }
            });
        }
    }
    None
}

/// Finds the line on which a dotted key (`kernel.feedback.high_pct`,
/// `traffic.0.rate_pps`) is written in a TOML source, if it is.
pub fn line_of(src: &str, key: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(src).ok()?;
    let mut cur = doc.as_item().clone();
    let mut span = None;
    for part in key.split('.') {
        cur = if let Ok(i) = part.parse::<usize>() {
            match cur {
                toml_edit::Item::ArrayOfTables(a) => toml_edit::Item::Table(a.get(i)?.clone()),
                toml_edit::Item::Value(toml_edit::Value::Array(a)) => {
                    toml_edit::Item::Value(a.get(i)?.clone())
                }
                _ => return None,
            }
        } else {
            let (k, v) = cur.as_table_like()?.get_key_value(part)?;
            span = k.span().or_else(|| v.span()).or(span);
            v.clone()
        };
    }
    span.map(|s| src[..s.start.min(src.len())].matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_lines_of_keys() {
        let src = "profile = \"x\"\n[kernel]\nquota = 5\n[kernel.feedback]\nhigh_pct = 75\n[[traffic]]\nrate_pps = 1\n[[traffic]]\nrate_pps = 2\n";
        assert_eq!(line_of(src, "profile"), Some(1));
        assert_eq!(line_of(src, "kernel.quota"), Some(3));
        assert_eq!(line_of(src, "kernel.feedback.high_pct"), Some(5));
        assert_eq!(line_of(src, "traffic.1.rate_pps"), Some(9));
        assert_eq!(line_of(src, "kernel.nothing"), None);
    }

    #[test]
    fn names_the_key_on_a_line() {
        let src = "profile = \"x\"\n[kernel]\nquota = = 5\n[[traffic]]\n[[traffic]]\nrate_pps = x\n# note\n";
        assert_eq!(key_at(src, 1).as_deref(), Some("profile"));
        assert_eq!(key_at(src, 2).as_deref(), Some("kernel"));
        assert_eq!(key_at(src, 3).as_deref(), Some("kernel.quota"));
        assert_eq!(key_at(src, 6).as_deref(), Some("traffic.1.rate_pps"));
        assert_eq!(key_at(src, 7), None);
        assert_eq!(key_at(src, 99), None);
    }
}
