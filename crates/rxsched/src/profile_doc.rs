//! The profile format's reference, written from the types themselves (their
//! JSON Schema and its documentation): `rxsched profiles --schema`, kept in
//! `profiles/README.md`.

use serde_json::Value;

/// The reference as Markdown: the top-level keys, then each table's.
pub fn markdown() -> String {
    let schema = rxsched_sim::profile::schema();
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = String::from(
        "# Profile reference\n\n\
         A profile is one testbed's costs: a TOML file, built in (`profiles/*.toml`)\n\
         or named by path from a scenario's `profile` key. Every cost a scenario's\n\
         host reads must be given (0 for work the testbed does not do, with the\n\
         reason in a comment); one it lacks is an error naming the key. Costs are\n\
         nanoseconds unless the key says per byte. `rxsched profiles` shows each\n\
         built-in profile with the source of every value.\n\n\
         This file is written by `rxsched profiles --schema` from the types the\n\
         simulator reads; a test keeps the two the same.\n\n",
    );
    out += "## Top level\n\n";
    out += &table(&schema, &defs, false);
    let mut seen = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (key, prop) in props {
            if let Some(name) = def_name(prop) {
                section(&mut out, &format!("[{key}]"), &name, &defs, &mut seen);
            }
        }
    }
    out
}

/// A table's section, and those of the tables inside it.
fn section(out: &mut String, title: &str, name: &str, defs: &Value, seen: &mut Vec<String>) {
    if seen.iter().any(|s| s == name) {
        return;
    }
    seen.push(name.to_string());
    let Some(def) = defs.get(name) else { return };
    *out += &format!("\n## `{title}`\n\n");
    if let Some(d) = def.get("description").and_then(Value::as_str) {
        *out += &format!("{}\n\n", one_line(d));
    }
    let costs = ["Costs", "LinuxCosts", "NtCosts", "LabCosts"].contains(&name);
    *out += &table(def, defs, costs);
    if let Some(props) = def.get("properties").and_then(Value::as_object) {
        for (key, prop) in props {
            if let Some(inner) = def_name(prop) {
                let inner_title = if prop.get("type").and_then(Value::as_str) == Some("array")
                    || prop.get("items").is_some()
                {
                    format!(
                        "[{}.{key}]]",
                        title.trim_start_matches('[').trim_end_matches(']')
                    )
                    .replacen('[', "[[", 1)
                } else {
                    format!("{}.{key}]", title.trim_end_matches(']'))
                };
                section(out, &inner_title, &inner, defs, seen);
            }
        }
    }
}

/// The rows of one table: key, type, whether it must be given, meaning.
/// A cost (`costs`) must be given when the scenario's host reads it.
fn table(def: &Value, defs: &Value, costs: bool) -> String {
    let required: Vec<&str> = def
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut s = String::from("| key | type | given | meaning |\n|---|---|---|---|\n");
    if let Some(props) = def.get("properties").and_then(Value::as_object) {
        for (key, prop) in props {
            let doc = prop
                .get("description")
                .and_then(Value::as_str)
                .or_else(|| {
                    def_name(prop)
                        .and_then(|n| defs.get(n))
                        .and_then(|d| d.get("description"))
                        .and_then(Value::as_str)
                })
                .unwrap_or("");
            s += &format!(
                "| `{key}` | {} | {} | {} |\n",
                type_of(prop),
                if required.contains(&key.as_str()) {
                    "required"
                } else if costs {
                    "when read"
                } else {
                    "optional"
                },
                one_line(doc).replace('|', "\\|")
            );
        }
    }
    s
}

/// The `$defs` name a property refers to, directly, as an option, or as
/// an array's items.
fn def_name(prop: &Value) -> Option<String> {
    if let Some(r) = prop.get("$ref").and_then(Value::as_str) {
        return r.rsplit('/').next().map(str::to_string);
    }
    if let Some(any) = prop.get("anyOf").and_then(Value::as_array) {
        return any.iter().find_map(def_name);
    }
    prop.get("items").and_then(def_name)
}

/// A short name for a property's type.
fn type_of(prop: &Value) -> String {
    if let Some(n) = def_name(prop) {
        let array = prop.get("items").is_some();
        return if array {
            format!("array of tables ({n})")
        } else {
            "table".into()
        };
    }
    let t = match prop.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    };
    match (t.as_str(), prop.get("items").and_then(|i| i.get("type"))) {
        ("array", Some(Value::String(i))) => format!("array of {i}"),
        ("object", _) => "table".into(),
        _ => t,
    }
}

/// Documentation text on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
