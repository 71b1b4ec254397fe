//! `rxsched bench real ...`: the real dataplane swept in the lab.

use super::{summary, verdict, write, write_index};
use indicatif::ProgressBar;
use rxsched::error::{Error, Result};
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

/// `bench real ...`: checks that it can run (a soak's `minutes` too), then
/// runs `bench` with a progress line and writes its results.
pub fn real(
    quick: bool,
    minutes: Option<f64>,
    out: &Path,
    bench: rxsched::bench::Bench,
) -> Result<ExitCode> {
    if let Some(m) = minutes {
        if !(m.is_finite() && (0.05..=1440.0).contains(&m)) {
            return Err(Error::flag("minutes", "must be from 0.05 to 1440"));
        }
    }
    if !rxsched_linux::sys::is_root() {
        return Err(Error::Input(
            "bench real: needs root (CAP_NET_ADMIN and packet sockets): run it with sudo".into(),
        ));
    }
    let lab = rxsched_linux::lab::Lab::standard();
    if !lab.is_up() {
        return Err(Error::Input(
            "bench real: the lab is not up: run `rxsched lab up` first".into(),
        ));
    }
    let opts = rxsched::bench::BenchOpts {
        quick,
        out: out.to_path_buf(),
        lab,
        minutes,
    };
    let plain = !std::io::stderr().is_terminal();
    let bar = if plain {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new_spinner();
        b.enable_steady_tick(std::time::Duration::from_millis(200));
        b
    };
    let progress = |m: &str| {
        if plain {
            eprintln!("bench: {m}");
        } else {
            bar.set_message(m.to_string());
        }
    };
    let results = bench(&opts, &progress)?;
    bar.finish_and_clear();
    let mut ok = true;
    for r in &results {
        write(out, r)?;
        rxsched::out::line(&summary(r, 0.0, out))?;
        ok &= r.passed();
    }
    write_index(out)?;
    rxsched::out::line(&format!("report: {}", out.join("index.html").display()))?;
    Ok(verdict(ok))
}
