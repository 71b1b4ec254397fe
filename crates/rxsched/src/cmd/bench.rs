//! `rxsched bench real ...`: the real dataplane swept in the lab.

use super::{dir_of, summary, verdict, write, write_index};
use indicatif::ProgressBar;
use rxsched::error::{Error, Result};
use rxsched::result::ResultFile;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `bench real ...`: checks that it can run (a soak's `minutes` too, and
/// the programs it starts beside ours), then runs `bench` with a progress
/// line and writes its results.
pub fn real(
    quick: bool,
    minutes: Option<f64>,
    out: &Path,
    predict: Option<&str>,
    bench: rxsched::bench::Real,
) -> Result<ExitCode> {
    if let Some(m) = minutes {
        if !(m.is_finite() && (0.05..=1440.0).contains(&m)) {
            return Err(Error::flag("minutes", "must be from 0.05 to 1440"));
        }
    }
    let what = format!("bench real {}", bench.name);
    if let Some(profile) = predict {
        rxsched::bench::predict::check_profile(profile)
            .map_err(|e| Error::Input(format!("{what} --predict {e}; nothing was measured")))?;
    }
    let opts = lab_opts(&what, quick, out, minutes, bench.tools)?;
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
    let mut results = (bench.run)(&opts, &progress)?;
    // A prediction that fails leaves the measurement written.
    let mut predicted = Ok(());
    if let Some(profile) = predict {
        predicted = results
            .iter_mut()
            .try_for_each(|r| predict_one(r, profile, &progress));
    }
    bar.finish_and_clear();
    let mut ok = true;
    for r in &results {
        write(out, r)?;
        rxsched::out::line(&summary(r, 0.0, out))?;
        ok &= r.passed();
    }
    write_index(out)?;
    rxsched::out::line(&format!("report: {}", out.join("index.html").display()))?;
    predicted.map_err(|e| {
        Error::Input(format!(
            "{e} (the measured results are written in {}; predict them with rxsched \
             bench predict)",
            out.display()
        ))
    })?;
    Ok(verdict(ok))
}

/// Adds the lab host's prediction on `profile` to result `r`, or says on
/// one line that it has none for this result.
fn predict_one(r: &mut ResultFile, profile: &str, progress: &dyn Fn(&str)) -> Result<()> {
    use rxsched::bench::predict;
    if !predict::predicts(&r.id) {
        return rxsched::out::line(&format!(
            "{}: the simulator's lab host does not predict this result yet",
            r.id
        ));
    }
    predict::add(r, profile, progress).map_err(|e| Error::Input(e.to_string()))?;
    if let Some(pace) = &r.pace {
        let words = rxsched::bench::calibrate::verdict(pace);
        rxsched::out::line(&format!("{}: {words}", r.id))?;
    }
    Ok(())
}

/// `rxsched bench predict FILE... --profile P`: predicts results measured
/// earlier and writes each back where it was, with the report beside it.
pub fn predict(files: &[PathBuf], profile: &str) -> Result<ExitCode> {
    let mut ok = true;
    for f in files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| Error::Input(format!("{}: cannot read: {e}", f.display())))?;
        let mut r: ResultFile = serde_json::from_str(&text)
            .map_err(|e| Error::Input(format!("{}: not a result file: {e}", f.display())))?;
        predict_one(&mut r, profile, &|m| eprintln!("predict: {m}"))?;
        let dir = dir_of(f);
        write(dir, &r)?;
        rxsched::out::line(&summary(&r, 0.0, dir))?;
        ok &= r.passed();
    }
    write_index(dir_of(&files[0]))?;
    Ok(verdict(ok))
}

/// The lab to run in, refused with what to do when this is not root, the
/// lab is not up or a program of `tools` is missing; `what` names the
/// command in the message.
fn lab_opts(
    what: &str,
    quick: bool,
    out: &Path,
    minutes: Option<f64>,
    tools: rxsched::bench::Tools,
) -> Result<rxsched::bench::BenchOpts> {
    if !rxsched_linux::sys::is_root() {
        return Err(Error::Input(format!(
            "{what}: needs root (CAP_NET_ADMIN and packet sockets): run it with sudo"
        )));
    }
    let lab = rxsched_linux::lab::Lab::standard();
    if !lab.is_up() {
        return Err(Error::Input(format!(
            "{what}: the lab is not up: run `rxsched lab up` first"
        )));
    }
    if let Some(why) = rxsched::bench::missing_tools(what, tools) {
        return Err(Error::Input(why));
    }
    Ok(rxsched::bench::BenchOpts {
        quick,
        out: out.to_path_buf(),
        lab,
        minutes,
    })
}

/// `calibrate --real`: measures the lab's per-frame costs and writes them
/// as the profile `out`.
pub fn calibrate(out: &Path, repeats: usize, quick: bool) -> Result<ExitCode> {
    let opts = lab_opts(
        "calibrate --real",
        quick,
        out,
        None,
        rxsched::bench::screen::TOOLS,
    )?;
    let secs = if quick { 1.0 } else { 3.0 };
    let t0 = std::time::Instant::now();
    let hz = rxsched::bench::calibrate::kernel_hz().map_err(|e| Error::Run(e.0))?;
    let progress = |m: &str| eprintln!("calibrate: {m}");
    let (costs, pace) = rxsched::bench::calibrate::measure(&opts, repeats, secs, &progress)
        .map_err(|e| Error::Run(e.0))?;
    let name = out.file_stem().map_or("linux-veth-lab".into(), |s| {
        s.to_string_lossy().into_owned()
    });
    let host = format!(
        "{}, {} CPUs",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "Linux".into(), |r| format!("Linux {}", r.trim())),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let text = rxsched::bench::calibrate::profile(&name, &costs, &pace, repeats, &host, hz);
    std::fs::write(out, &text)
        .map_err(|e| Error::Input(format!("{}: cannot write the profile: {e}", out.display())))?;
    for c in &costs {
        let unit = if c.key.ends_with("_per_s") {
            "/s"
        } else {
            "ns"
        };
        rxsched::out::line(&format!(
            "{:<20} {:>8.0} {unit}  spread {:>4.0}%  ({})",
            c.key,
            c.median(),
            100.0 * c.spread(),
            c.how
        ))?;
    }
    let moved = rxsched::bench::calibrate::pace_moved(&pace);
    let paces: Vec<String> = pace.iter().map(|p| format!("{p:.0}")).collect();
    rxsched::out::line(&format!(
        "pace                 {} ns a frame at the start and after each repeat (moved {:.0}%)",
        paces.join(", "),
        100.0 * moved
    ))?;
    if moved > rxsched::bench::calibrate::PACE_MOVED {
        eprintln!(
            "calibrate --real: the machine's pace moved {:.0}% during the calibration \
             ({} ns a frame): its costs mix the states it passed through, and a bench \
             predicted from it misses by about as much; calibrate again when the pace holds",
            100.0 * moved,
            paces.join(", ")
        );
    }
    rxsched::out::line(&format!(
        "wrote {} in {:.0} s",
        out.display(),
        t0.elapsed().as_secs_f64()
    ))?;
    Ok(ExitCode::SUCCESS)
}
