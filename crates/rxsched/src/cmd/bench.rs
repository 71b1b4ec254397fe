//! `rxsched bench real ...`: the real dataplane swept in the lab.

use super::{summary, verdict, write, write_index};
use indicatif::ProgressBar;
use rxsched::error::{Error, Result};
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

/// `bench real router`.
pub fn router(quick: bool, out: &Path) -> Result<ExitCode> {
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
    let results = rxsched::bench::router(&opts, &progress)?;
    bar.finish_and_clear();
    let mut ok = true;
    for r in &results {
        write(out, r)?;
        println!("{}", summary(r, 0.0, out));
        ok &= r.passed();
    }
    write_index(out)?;
    println!("report: {}", out.join("index.html").display());
    Ok(verdict(ok))
}
