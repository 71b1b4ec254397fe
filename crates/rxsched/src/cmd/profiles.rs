//! `rxsched profiles`: every machine profile, every section of it, and
//! where each cost came from (the comment beside it in the profile file).

use rxsched::error::{Error, Result};
use std::process::ExitCode;

/// Prints every built-in profile.
pub fn run() -> Result<ExitCode> {
    for (name, src) in rxsched_sim::profile::BUILTIN {
        let p = rxsched_sim::Profile::parse(name, src)?;
        let doc: toml_edit::DocumentMut = src
            .parse()
            .map_err(|e: toml_edit::TomlError| Error::Run(e.to_string()))?;
        let mut text = describe(name, &p.testbed, &p.calibrated_from, &doc);
        if let Some(c) = &p.calibrate {
            text.insert_str(text.len() - 1, &fitted(c));
        }
        rxsched::out::print(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the profile format's reference.
pub fn schema() -> Result<ExitCode> {
    rxsched::out::print(&rxsched::profile_doc::markdown())?;
    Ok(ExitCode::SUCCESS)
}

/// One profile: its testbed, its calibration sources, then each section's
/// values with their comments.
fn describe(name: &str, testbed: &str, from: &[String], doc: &toml_edit::DocumentMut) -> String {
    let mut s = format!("{name}: {testbed}\n  calibrated from:\n");
    for c in from {
        s += &format!("    - {c}\n");
    }
    s += "  costs:\n";
    for (section, item) in doc.iter() {
        let Some(t) = item.as_table() else { continue };
        // `[calibrate]` is shown apart, by `fitted`.
        if section == "calibrate" {
            continue;
        }
        let mut rows: Vec<(String, &toml_edit::Value)> = Vec::new();
        for (k, v) in t.iter() {
            match (v.as_value(), v.as_table()) {
                (Some(v), _) => rows.push((k.to_string(), v)),
                // A table inside (`[lab.spread]`): its values, one a row.
                (None, Some(inner)) => rows.extend(
                    inner
                        .iter()
                        .filter_map(|(kk, vv)| Some((format!("{k}.{kk}"), vv.as_value()?))),
                ),
                _ => {}
            }
        }
        for (k, v) in rows {
            let comment = v
                .decor()
                .suffix()
                .and_then(|s| s.as_str())
                .map(|s| s.trim().trim_start_matches('#').trim().to_string())
                .unwrap_or_default();
            let val = v.clone().decorated("", "").to_string();
            s += &format!(
                "    {:<26} {val:>12}   {comment}\n",
                format!("{section}.{k}")
            );
        }
    }
    s + "\n"
}

/// A profile's free parameters and the claims that fix them
/// (`rxsched calibrate`).
fn fitted(c: &rxsched_sim::profile::Calibrate) -> String {
    let mut s = String::from("  free parameters (rxsched calibrate):\n");
    for p in &c.param {
        let keys: Vec<&str> = p
            .scales
            .keys()
            .map(String::as_str)
            .chain(p.sets.iter().map(String::as_str))
            .collect();
        s += &format!(
            "    {:<14} {:>12} in [{}, {}]   {}; sets {}\n",
            p.name,
            p.value,
            p.range[0],
            p.range[1],
            p.why,
            keys.join(", ")
        );
    }
    s += "  fitted to:\n";
    for cl in &c.claims {
        s += &format!("    - {}: {}\n", cl.experiment, cl.check);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_of_every_profile_is_shown() {
        for (name, src) in rxsched_sim::profile::BUILTIN {
            let p = rxsched_sim::Profile::parse(name, src).unwrap();
            let doc: toml_edit::DocumentMut = src.parse().unwrap();
            let mut text = describe(name, &p.testbed, &p.calibrated_from, &doc);
            if let Some(c) = &p.calibrate {
                text += &fitted(c);
                for fp in &c.param {
                    assert!(text.contains(&fp.name), "{name}: {} missing", fp.name);
                }
            }
            for (section, item) in doc.iter() {
                if section == "calibrate" {
                    continue;
                }
                if let Some(t) = item.as_table() {
                    for (k, _) in t.iter() {
                        assert!(
                            text.contains(&format!("{section}.{k} "))
                                || text.contains(&format!("{section}.{k}.")),
                            "{name}: {section}.{k} missing"
                        );
                    }
                }
            }
        }
        let src = rxsched_sim::profile::BUILTIN
            .iter()
            .find(|(n, _)| *n == "mpc8250-linux")
            .unwrap()
            .1;
        let doc: toml_edit::DocumentMut = src.parse().unwrap();
        assert!(describe("m", "t", &[], &doc).contains("linux.t_cs_in"));
    }
}
