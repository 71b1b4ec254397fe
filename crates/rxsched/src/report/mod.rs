//! Writing results: JSON, CSV, an SVG plot per figure ([`plot`]), and
//! `index.html` ([`html`]).

pub(crate) mod html;
mod plot;
mod views;

use crate::result::ResultFile;
pub use html::write_index;
pub use plot::plot;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io;
use std::path::Path;

/// Writes `<id>.json`, `<id>.csv` and `<id>.svg` into `dir`, and the
/// companion views `<id>-drops.svg` and `<id>-cpu.svg` where the points
/// have drops and CPU shares.
pub fn write_all(dir: &Path, r: &ResultFile) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(r).map_err(io::Error::other)?;
    std::fs::write(dir.join(format!("{}.json", r.id)), json + "\n")?;
    write_csv(&dir.join(format!("{}.csv", r.id)), r)?;
    let svg = plot(r).map_err(|e| io::Error::other(e.to_string()))?;
    std::fs::write(dir.join(format!("{}.svg", r.id)), svg)?;
    // The companion views, where the points say.
    for (view, svg) in [("drops", views::drops_svg(r)), ("cpu", views::cpu_svg(r))] {
        let path = dir.join(format!("{}-{view}.svg", r.id));
        match svg {
            Some(svg) => std::fs::write(path, svg)?,
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }
    Ok(())
}

/// Flattens a point into `name → number` pairs (`drops.ipintrq`, `cpu.idle`).
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Number(n) => out.push((prefix.to_string(), n.to_string())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        Value::Bool(b) => out.push((prefix.to_string(), b.to_string())),
        _ => {}
    }
}

fn write_csv(path: &Path, r: &ResultFile) -> io::Result<()> {
    let mut rows: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut cols = BTreeSet::new();
    for s in &r.series {
        for p in &s.points {
            let mut kv = Vec::new();
            flatten("", &Value::Object(p.0.clone()), &mut kv);
            for (k, _) in &kv {
                cols.insert(k.clone());
            }
            rows.push((s.label.clone(), kv));
        }
    }
    // x and y first, then everything else in name order.
    let mut header = vec!["series".to_string(), r.x.metric.clone(), r.y.metric.clone()];
    header.extend(
        cols.into_iter()
            .filter(|c| *c != r.x.metric && *c != r.y.metric),
    );
    let mut w = csv::Writer::from_path(path).map_err(io::Error::other)?;
    w.write_record(&header).map_err(io::Error::other)?;
    for (label, kv) in rows {
        let rec: Vec<String> = header
            .iter()
            .enumerate()
            .map(|(i, h)| {
                if i == 0 {
                    label.clone()
                } else {
                    kv.iter()
                        .find(|(k, _)| k == h)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                }
            })
            .collect();
        w.write_record(&rec).map_err(io::Error::other)?;
    }
    w.flush()
}
