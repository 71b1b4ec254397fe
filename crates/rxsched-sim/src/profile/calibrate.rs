//! A profile's free parameters (`[calibrate]`): what `rxsched calibrate`
//! fits, to which claims, what the last fit gave, and a profile with its
//! parameters set to other values for one scenario (`[profile_param]`).

use super::Profile;
use crate::error::InputError;
use serde::{Deserialize, Serialize};

/// `[calibrate]`: what `rxsched calibrate` fits and to what.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Calibrate {
    /// The free parameters.
    pub param: Vec<FreeParam>,
    /// The calibration claims that fix them: checks of experiments on this
    /// profile. There are at least as many as parameters.
    pub claims: Vec<ClaimRef>,
    /// What the last fit gave, claim by claim (written by `calibrate --write`).
    #[serde(default)]
    pub fitted: Vec<Fitted>,
}

/// One free parameter: it sets costs, each its base value times the
/// parameter (`scales`), or to the parameter itself (`sets`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FreeParam {
    /// Its name.
    pub name: String,
    /// What it is, in words.
    pub why: String,
    /// Dotted cost keys (`cost.ip_input`) and the base each is scaled from.
    #[serde(default)]
    pub scales: std::collections::BTreeMap<String, f64>,
    /// Dotted cost keys set to the parameter's value.
    #[serde(default)]
    pub sets: Vec<String>,
    /// The range it is searched in.
    pub range: [f64; 2],
    /// Its value in the profile (the costs it sets hold the same); the
    /// search starts here.
    pub value: f64,
}

/// A calibration claim: a check of an experiment.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRef {
    /// The experiment id.
    pub experiment: String,
    /// The check's name, as in the experiment file.
    pub check: String,
}

/// One claim's residual at the last fit.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fitted {
    /// The experiment id.
    pub experiment: String,
    /// The check's name.
    pub check: String,
    /// The relative residuals of its points (ours less published, over
    /// published), rounded to 1e-4.
    pub residuals: Vec<f64>,
}

impl FreeParam {
    /// The costs this parameter gives at `v`: each dotted key and its value.
    pub fn costs(&self, v: f64) -> Vec<(String, f64)> {
        self.scales
            .iter()
            .map(|(k, base)| (k.clone(), base * v))
            .chain(self.sets.iter().map(|k| (k.clone(), v)))
            .collect()
    }
}

impl Profile {
    /// The profile with free parameters (of its `[calibrate]` section) at
    /// the values `params` gives them: each cost they govern is set, an
    /// integer cost rounded. Its `[calibrate]` section still records the
    /// fitted values.
    pub fn with_params(
        &self,
        params: &std::collections::BTreeMap<String, f64>,
    ) -> Result<Profile, InputError> {
        let err = |key: String, msg: String| InputError {
            file: crate::IN_SCENARIO.into(),
            line: None,
            key: Some(key),
            msg,
        };
        let mut tree = toml::Table::try_from(self)
            .map_err(|e| err("profile".into(), format!("profile {}: {e}", self.name)))?;
        let free = self.calibrate.as_ref().map_or(&[][..], |c| &c.param[..]);
        let mut given = self.given.clone();
        for (name, v) in params {
            let key = format!("profile_param.{name}");
            let Some(p) = free.iter().find(|p| &p.name == name) else {
                let names: Vec<&str> = free.iter().map(|p| p.name.as_str()).collect();
                return Err(err(
                    key,
                    format!(
                        "profile {} has no free parameter {name:?} (it has: {})",
                        self.name,
                        if names.is_empty() {
                            "none".into()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            };
            // A value outside the fit's range is allowed (a traced kernel
            // runs at trace scale 1): the costs it gives are checked with
            // the rest of the profile below.
            for (cost, x) in p.costs(*v) {
                given.insert(if cost.contains('.') {
                    cost.clone()
                } else {
                    format!("cost.{cost}")
                });
                let (table, k) = cost.split_once('.').unwrap_or(("cost", cost.as_str()));
                let t = tree
                    .entry(table)
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                let Some(t) = t.as_table_mut() else {
                    return Err(err(key, format!("{cost}: not a table's key")));
                };
                let value = match t.get(k) {
                    Some(toml::Value::Float(_)) => toml::Value::Float(x),
                    _ => toml::Value::Integer(x.round() as i64),
                };
                t.insert(k.to_string(), value);
            }
        }
        let mut p: Profile = tree
            .try_into()
            .map_err(|e| err("profile_param".into(), format!("{e}")))?;
        p.given = given;
        p.check().map_err(|(k, msg)| err(k.into(), msg.into()))?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::BUILTIN;
    use super::*;

    /// A profile's costs are what its free parameters give at their
    /// values: the profile and its `[calibrate]` section agree.
    #[test]
    fn calibrated_costs_follow_their_parameters() {
        for (name, src) in BUILTIN {
            let p = Profile::parse(name, src).unwrap();
            let Some(cal) = &p.calibrate else { continue };
            assert!(cal.param.len() <= cal.claims.len(), "{name}");
            let tree = toml::Value::try_from(&p).unwrap();
            for fp in &cal.param {
                for (key, want) in fp.costs(fp.value) {
                    let (t, k) = key.split_once('.').unwrap();
                    let have = tree[t][k]
                        .as_integer()
                        .map(|i| i as f64)
                        .or_else(|| tree[t][k].as_float())
                        .unwrap_or_else(|| panic!("{name}: no {key}"));
                    assert!(
                        (have - want.round()).abs() <= 0.5,
                        "{name}: {key} is {have}, {} at {} = {} gives {want}",
                        fp.name,
                        fp.name,
                        fp.value
                    );
                }
            }
        }
    }

    /// A scenario's `[profile_param]` sets the costs a free parameter
    /// governs (integers rounded), leaves the rest, and names an unknown
    /// parameter with the ones there are.
    #[test]
    fn a_free_parameter_can_be_set_for_one_scenario() {
        let p = Profile::load("dec3000-300", None).unwrap();
        let one = std::collections::BTreeMap::from([("trace_scale".to_string(), 1.0)]);
        let traced = p.with_params(&one).unwrap();
        let scale = &p.calibrate.as_ref().unwrap().param[0];
        assert_eq!(scale.name, "trace_scale");
        let base = |k: &str| scale.scales[k].round() as u64;
        assert_eq!(traced.cost.intr_dispatch, base("cost.intr_dispatch"));
        assert_eq!(traced.cost.ip_input, base("cost.ip_input"));
        assert_eq!(
            traced.cost.screend, p.cost.screend,
            "not governed by the scale"
        );
        assert_eq!(traced.wire.bit_rate_bps, p.wire.bit_rate_bps);
        let bad = std::collections::BTreeMap::from([("nope".to_string(), 1.0)]);
        let e = p.with_params(&bad).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("profile_param.nope"));
        assert!(e.msg.contains("trace_scale"), "{}", e.msg);
        let none = Profile::load("linux-veth-lab", None).unwrap();
        assert!(none.with_params(&one).unwrap_err().msg.contains("none"));
    }
}
