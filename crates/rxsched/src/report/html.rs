//! `index.html`: the scoreboard per paper, then each result with its
//! figure, summary, values, claims and checks.

use crate::result::{Claim, ResultFile, SCHEMA};
use std::collections::BTreeSet;
use std::io;
use std::path::Path;

fn verdict(pass: bool) -> &'static str {
    if pass {
        "<span class=pass>pass</span>"
    } else {
        "<span class=fail>FAIL</span>"
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Rewrites `index.html` from every result file in `dir`.
pub fn write_index(dir: &Path) -> io::Result<()> {
    let mut results: Vec<ResultFile> = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().and_then(|s| s.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        if let Ok(r) = serde_json::from_str::<ResultFile>(&text) {
            if r.schema == SCHEMA {
                results.push(r);
            }
        }
    }
    // By paper, in the papers' order; within a paper, by id.
    results.sort_by(|a, b| (paper_rank(&a.id), &a.id).cmp(&(paper_rank(&b.id), &b.id)));
    let mut h = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>rxsched results</title>\n<style>\
         body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}\
         .pass{color:#1a7f37}.fail{color:#cf222e;font-weight:bold}\
         .wide{overflow-x:auto;max-width:100%}\
         table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:90%;text-align:left;vertical-align:top}\
         img{max-width:100%;height:auto;border:1px solid #eee}.views img{max-width:49%;vertical-align:top}\
         @media (max-width:700px){.views img{max-width:100%}}\
         code{overflow-wrap:anywhere}section{margin-bottom:3em}details{margin:.5em 0}</style></head><body>\n\
         <h1>rxsched: reproduced figures</h1>\n",
    );
    h += &scoreboard(&results);
    let checked = results.iter().filter(|r| !r.checks.is_empty()).count();
    let clean = results
        .iter()
        .filter(|r| !r.checks.is_empty() && r.checks.iter().all(|c| c.pass))
        .count();
    let missed = results.iter().filter(|r| !r.passed()).count();
    h += &format!(
        "<p>{} results: {clean} with every check passing, {} with known misses only, {missed} failing, \
         {} with no checks. Lines and dots are simulated; hollow squares are the published points. \
         Beside each figure, where its packets went (delivered; dropped before any work in blues, after work in reds) \
         and where its CPU went.</p>\n",
        results.len(),
        checked - clean - missed,
        results.len() - checked,
    );
    let mut group = "";
    for r in &results {
        if paper(&r.id) != group {
            if !group.is_empty() {
                h += "</ul>\n";
            }
            group = paper(&r.id);
            h += &format!("<h3>{}</h3>\n<ul>\n", esc(group));
        }
        let known = r
            .checks
            .iter()
            .filter(|c| !c.pass && c.known_miss.is_some())
            .count();
        let mark = if r.checks.is_empty() {
            "<span>no checks</span>".to_string()
        } else if r.passed() && known > 0 {
            format!(
                "<span class=fail>{known} known miss{}</span>",
                if known == 1 { "" } else { "es" }
            )
        } else {
            verdict(r.passed()).to_string()
        };
        h += &format!(
            "<li><a href=\"#{0}\">{0}</a>: {1} ({mark}){2}</li>\n",
            esc(&r.id),
            esc(&r.title),
            view_links(dir, &r.id)
        );
    }
    if !group.is_empty() {
        h += "</ul>\n";
    }
    let mut group = "";
    for r in &results {
        if paper(&r.id) != group {
            group = paper(&r.id);
            h += &format!("<h2 class=paper>{}</h2>\n", esc(group));
        }
        h += &format!(
            "<section id=\"{id}\"><h2>{id}: {title}</h2>\n<p>{source}. Profile <code>{profile}</code>, seed {seed}{quick}. \
             Data: <a href=\"{id}.json\">JSON</a>, <a href=\"{id}.csv\">CSV</a>.</p>\n<img src=\"{id}.svg\" alt=\"{id}\">\n",
            id = esc(&r.id),
            title = esc(&r.title),
            source = esc(&r.source),
            profile = esc(&r.profile),
            seed = r.seed,
            quick = if r.quick { ", quick form" } else { "" }
        );
        if !r.overrides.is_empty() {
            h += &format!(
                "<p>Run with overrides: <code>{}</code>.</p>\n",
                esc(&r.overrides.join(" "))
            );
        }
        h += &views(dir, &r.id);
        h += &wide(summary_table(r));
        h += &wide(prediction_table(r));
        h += &wide(claims_table(r));
        h += &wide(checks_table(r));
        let values = values_table(r);
        if !values.is_empty() {
            h += &format!(
                "<details><summary>The values (also in <a href=\"{id}.csv\">the CSV</a>)</summary>\n<div class=wide>{values}</div></details>\n",
                id = esc(&r.id)
            );
        }
        h += "</section>\n";
    }
    h += "</body></html>\n";
    std::fs::write(dir.join("index.html"), h)
}

/// A table that may be wider than the page, scrolling on its own.
fn wide(table: String) -> String {
    if table.is_empty() {
        table
    } else {
        format!("<div class=wide>{table}</div>\n")
    }
}

/// The companion views a figure has, as (file, what it shows).
fn view_files(dir: &Path, id: &str) -> Vec<(String, &'static str)> {
    [
        ("drops", "where the packets went"),
        ("cpu", "where the CPU went"),
    ]
    .into_iter()
    .map(|(view, what)| (format!("{id}-{view}.svg"), what))
    .filter(|(file, _)| dir.join(file).exists())
    .collect()
}

/// Links from the list of results to a figure's companion views.
fn view_links(dir: &Path, id: &str) -> String {
    let links: Vec<String> = view_files(dir, id)
        .iter()
        .map(|(file, what)| format!("<a href=\"{}\">{what}</a>", esc(file)))
        .collect();
    if links.is_empty() {
        String::new()
    } else {
        format!(": {}", links.join(", "))
    }
}

/// The companion views of a figure that has them (`report::views`).
fn views(dir: &Path, id: &str) -> String {
    let mut h = String::new();
    for (file, what) in view_files(dir, id) {
        h += &format!(
            "<a href=\"{0}\"><img src=\"{0}\" alt=\"{1}: {what}\"></a>",
            esc(&file),
            esc(id)
        );
    }
    if h.is_empty() {
        h
    } else {
        format!("<p class=views>{h}</p>\n")
    }
}

/// Where a paper comes in the report: the papers in the order the
/// project takes them, then the lab, then the rest.
fn paper_rank(id: &str) -> usize {
    match id.split('-').next().unwrap_or(id) {
        "mogul" => 0,
        "spanos" => 1,
        "srp" => 2,
        "hansen" => 3,
        "lab" | "real" => 4,
        "slo" | "protect" => 5,
        _ => 6,
    }
}

/// What a paper's results score, claim by claim.
#[derive(Default)]
struct Score {
    reproduced: usize,
    calibrated: usize,
    construction: usize,
    missed: Vec<(String, String, String)>,
    unchecked: usize,
}

/// The paper a result belongs to, by its id's first word.
fn paper(id: &str) -> &str {
    match id.split('-').next().unwrap_or(id) {
        "mogul" => "Mogul & Ramakrishnan 1996",
        "spanos" => "Spanos et al. 2008",
        "srp" => "Brustoloni et al. 2000 (SRP)",
        "hansen" => "Hansen & Jul 1997",
        "real" => "the real dataplane (this machine)",
        "lab" => "the lab host (this machine's profile)",
        "slo" | "protect" => "past the papers",
        _ => "other",
    }
}

/// The scoreboard that opens the report: per paper, the claims reproduced
/// (predictions and shapes whose checks pass), the calibrations met, the
/// checks that hold by construction (not counted as reproduced), the
/// misses (known or not) and the claims no check stands for; then every
/// miss, linked to its figure.
fn scoreboard(results: &[ResultFile]) -> String {
    use crate::result::ClaimKind;
    let mut papers: Vec<(&str, Score)> = Vec::new();
    for r in results {
        let name = paper(&r.id);
        let i = match papers.iter().position(|(p, _)| *p == name) {
            Some(i) => i,
            None => {
                papers.push((name, Score::default()));
                papers.len() - 1
            }
        };
        let sc = &mut papers[i].1;
        sc.unchecked += r.claims.len();
        for c in &r.checks {
            let kind = c.claim.as_ref().map(|cl| cl.kind);
            match (kind, c.pass) {
                (Some(ClaimKind::Construction), _) => sc.construction += 1,
                (_, false) => sc.missed.push((
                    r.id.clone(),
                    c.name.clone(),
                    c.known_miss.clone().unwrap_or_default(),
                )),
                (Some(ClaimKind::Calibration), true) => sc.calibrated += 1,
                (_, true) => sc.reproduced += 1,
            }
        }
    }
    let mut h = String::from(
        "<h2>Scoreboard</h2>
<div class=wide><table><tr><th>paper</th><th>reproduced</th><th>calibrations met</th>         <th>by construction (not counted)</th><th>missed</th><th>claims not checked</th></tr>
",
    );
    for (p, sc) in &papers {
        h += &format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>\n",
            esc(p),
            sc.reproduced,
            sc.calibrated,
            sc.construction,
            if sc.missed.is_empty() { "pass" } else { "fail" },
            sc.missed.len(),
            sc.unchecked
        );
    }
    h += "</table></div>\n";
    let misses: Vec<_> = papers.iter().flat_map(|(_, sc)| &sc.missed).collect();
    if !misses.is_empty() {
        h += "<h3>Misses</h3>\n<ul>\n";
        for (id, name, why) in misses {
            let why = if why.is_empty() {
                String::new()
            } else {
                format!(" <i>Known: {}</i>", esc(why))
            };
            h += &format!(
                "<li><a href=\"#{0}\">{0}</a>: {1}.{why}</li>\n",
                esc(id),
                esc(name)
            );
        }
        h += "</ul>\n";
    }
    h
}

/// The claims of the text about this figure: each with its section, how it
/// is used, our value (the check's computed numbers) and the verdict; then
/// the claims no check stands for, with the reason.
fn claims_table(r: &ResultFile) -> String {
    let checked = r
        .checks
        .iter()
        .filter_map(|c| c.claim.as_ref().map(|cl| (cl, c)));
    if r.claims.is_empty() && checked.clone().next().is_none() {
        return String::new();
    }
    let mut h = String::from(
        "<h3>Claims of the text</h3>\n<table><tr><th>claim</th><th>where</th><th>kind</th><th>ours</th><th>verdict</th></tr>\n",
    );
    let row = |cl: &Claim, ours: &str, v: &str| {
        format!(
            "<tr><td>\u{201c}{}\u{201d}</td><td>{}</td><td>{}</td><td>{}</td><td>{v}</td></tr>\n",
            esc(&cl.quote),
            esc(&cl.section),
            cl.kind.word(),
            esc(ours)
        )
    };
    for (cl, c) in checked {
        let v = match (&c.known_miss, c.pass) {
            (Some(why), false) => format!("<span class=fail>missed</span> (known: {})", esc(why)),
            _ => verdict(c.pass).to_string(),
        };
        h += &row(cl, &c.detail, &v);
    }
    for cl in &r.claims {
        let why = cl.unchecked.as_deref().unwrap_or("");
        h += &row(cl, why, "<span>not checked</span>");
    }
    h + "</table>\n"
}

/// The checks no claim of the text stands for (consistency, conservation,
/// the design's own expectations), or every check for a real result.
fn checks_table(r: &ResultFile) -> String {
    let rest: Vec<_> = r.checks.iter().filter(|c| c.claim.is_none()).collect();
    if rest.is_empty() {
        return String::new();
    }
    let mut h = String::new();
    if rest.len() < r.checks.len() {
        h += "<h3>Other checks</h3>\n";
    }
    h += "<table><tr><th>check</th><th>verdict</th><th>computed</th></tr>\n";
    for c in rest {
        h += &format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&c.name),
            verdict(c.pass),
            esc(&c.detail)
        );
    }
    h + "</table>\n"
}

/// A small table per series: peak, MLFRR and the value at the highest x,
/// with the published points beside them.
fn summary_table(r: &ResultFile) -> String {
    let mut h = format!(
        "<table><tr><th>series</th><th>peak {y}</th><th>MLFRR</th><th>{y} at highest {x}</th><th>published points [x, y]</th></tr>\n",
        y = esc(&r.y.metric),
        x = esc(&r.x.metric)
    );
    for s in &r.series {
        let c = r.curve(&s.label);
        let peak = c.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        let last = c.last().map_or(0.0, |p| p.1);
        let m = r.mlfrr(&s.label);
        let refs: Vec<String> = r
            .reference
            .iter()
            .filter(|rf| rf.series == s.label)
            .flat_map(|rf| rf.points.iter().map(|p| format!("[{}, {}]", p[0], p[1])))
            .collect();
        h += &format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&s.label),
            fmt_num(peak),
            if r.x.metric == "offered_pps" {
                fmt_num(m)
            } else {
                "–".into()
            },
            fmt_num(last),
            refs.join(" ")
        );
    }
    h + "</table>\n"
}

/// How far each prediction (`<label>-predicted`, from `--predict`) was
/// from its measured series, over the points in x order: the median and
/// the worst relative error of the y metric, with where the worst was.
pub(crate) fn prediction_table(r: &ResultFile) -> String {
    let suffix = crate::bench::predict::SUFFIX;
    let mut rows = String::new();
    for s in &r.series {
        let Some(measured) = s.label.strip_suffix(suffix) else {
            continue;
        };
        let (p, m) = (r.curve(&s.label), r.curve(measured));
        let mut errs: Vec<(f64, f64)> = p
            .iter()
            .zip(&m)
            .filter(|(_, b)| b.1.abs() > 0.0)
            .map(|(a, b)| ((a.1 - b.1) / b.1.abs(), b.0))
            .collect();
        if errs.is_empty() {
            continue;
        }
        let worst = errs
            .iter()
            .copied()
            .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))
            .expect("errors");
        errs.sort_by(|a, b| a.0.abs().total_cmp(&b.0.abs()));
        let median = errs[errs.len() / 2].0.abs();
        rows += &format!(
            "<tr><td>{}</td><td>{:.0}%</td><td>{:+.0}% at {}</td></tr>\n",
            esc(measured),
            100.0 * median,
            100.0 * worst.0,
            fmt_num(worst.1)
        );
    }
    if rows.is_empty() {
        return rows;
    }
    let pace = r.pace.as_ref().map_or(String::new(), |p| {
        format!(
            "<p>The machine's pace: {}.</p>\n",
            esc(&crate::bench::calibrate::verdict(p))
        )
    });
    format!(
        "<p>The simulator's prediction of each measured series (<code>--predict</code>), {y} against the measurement at the same offered rate:</p>\n\
         <table><tr><th>series</th><th>median error</th><th>worst error (at {x})</th></tr>\n{rows}</table>\n{pace}",
        y = esc(&r.y.metric),
        x = esc(&r.x.metric)
    )
}

/// Small results as tables: the chosen metrics per point, or, where the
/// published values sit at the same x, ours beside theirs.
fn values_table(r: &ResultFile) -> String {
    if !r.table.is_empty() {
        let mut h = String::from("<table><tr><th>series</th>");
        for m in &r.table {
            h += &format!("<th>{}</th>", esc(m));
        }
        h += "</tr>\n";
        for s in &r.series {
            for p in &s.points {
                h += &format!("<tr><td>{}</td>", esc(&s.label));
                for m in &r.table {
                    h += &format!("<td>{}</td>", p.get(m).map_or("–".into(), fmt_num));
                }
                h += "</tr>\n";
            }
        }
        return h + "</table>\n";
    }
    let xs: BTreeSet<u64> = r
        .reference
        .iter()
        .flat_map(|rf| rf.points.iter().map(|p| p[0].to_bits()))
        .collect();
    let many = r.series.iter().any(|s| s.points.len() > 16);
    if xs.len() < 2 || many {
        return String::new();
    }
    let mut h = format!("<table><tr><th>{}</th>", esc(&r.x.metric));
    for s in &r.series {
        h += &format!("<th>{} ours / published</th>", esc(&s.label));
    }
    h += "</tr>\n";
    let mut xs: Vec<f64> = xs.into_iter().map(f64::from_bits).collect();
    xs.sort_by(f64::total_cmp);
    for x in xs {
        h += &format!("<tr><td>{}</td>", fmt_num(x));
        for s in &r.series {
            let ours = r.curve(&s.label).iter().find(|p| p.0 == x).map(|p| p.1);
            let theirs = r
                .reference
                .iter()
                .filter(|rf| rf.series == s.label)
                .flat_map(|rf| rf.points.iter())
                .find(|p| p[0] == x)
                .map(|p| p[1]);
            let cell = |v: Option<f64>| v.map_or("–".to_string(), fmt_num);
            h += &format!("<td>{} / {}</td>", cell(ours), cell(theirs));
        }
        h += "</tr>\n";
    }
    h + "</table>\n"
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
