//! `rxsched bench real capture`: the monitor (`rxsched capture`, with and
//! without queue feedback) against `tcpdump -w` and `tshark -w` on the DUT,
//! each pinned to the DUT CPU beside the compute process, each writing to
//! /dev/null and to a file on disk, swept over offered load.
//!
//! The generator addresses the frames to a MAC that is not d0's, so the
//! DUT's kernel throws them away after its packet taps: what the capturers
//! see is all the work there is.

use super::trial::{self, f, finish, spawn, strings as s, BenchError, Dut};
use super::{judged, rates, steady};
use crate::experiments::BenchFile;
use crate::result::{Point, ResultFile, Series};
use rxsched_linux::lab::{self, Lab, Role, D0, DUT_CPU, GEN_CPU};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Who captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    /// `rxsched capture`; feedback on or off, optionally `--cycle-limit 50`.
    Ours { feedback: bool, limit: bool },
    /// `rxsched capture` in the paper's form: a 32-frame queue, inhibit
    /// when fewer than 8 are free, resume only by the 1 ms timeout.
    OursPaper,
    /// `tcpdump -w`.
    Tcpdump,
    /// `tshark -w`.
    Tshark,
}

/// One series: a tool and where it writes.
#[derive(Debug, Clone)]
struct Variant {
    label: String,
    tool: Tool,
    file: bool,
}

fn variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for file in [false, true] {
        let tail = if file { "-file" } else { "" };
        for (name, tool) in [
            (
                "rxsched-capture",
                Tool::Ours {
                    feedback: true,
                    limit: false,
                },
            ),
            (
                "rxsched-capture-nofeedback",
                Tool::Ours {
                    feedback: false,
                    limit: false,
                },
            ),
            ("tcpdump-w", Tool::Tcpdump),
            ("tshark-w", Tool::Tshark),
        ] {
            v.push(Variant {
                label: format!("{name}{tail}"),
                tool,
                file,
            });
        }
    }
    v.push(Variant {
        label: "rxsched-capture-paper".into(),
        tool: Tool::OursPaper,
        file: false,
    });
    v.push(Variant {
        label: "rxsched-capture-cycle-limit-50".into(),
        tool: Tool::Ours {
            feedback: true,
            limit: true,
        },
        file: false,
    });
    v
}

/// Starts a program (not ours) in a role's namespace, pinned to the DUT CPU.
fn spawn_tool(l: &Lab, role: Role, args: &[String]) -> Result<Child, BenchError> {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            &l.ns(role),
            "taskset",
            "-c",
            &DUT_CPU.to_string(),
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            BenchError(format!(
                "{}: {e} (install it: apt-get install tcpdump tshark)",
                args[0]
            ))
        })
}

/// "N packets captured" from tcpdump's or tshark's closing lines.
fn captured(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let l = l.trim();
        let n = l.strip_suffix("packets captured")?;
        n.trim().parse().ok()
    })
}

/// One point: `v` capturing while the generator offers `rate` for `secs`.
fn run(
    l: &Lab,
    v: &Variant,
    rate: f64,
    secs: f64,
    dut: &Dut,
    dir: &Path,
) -> Result<Point, BenchError> {
    let io = |e: lab::LabError| BenchError(e.to_string());
    l.reset_dut_receive().map_err(io)?;
    l.set_kernel_forwarding(false).map_err(io)?;
    let out: PathBuf = if v.file {
        dir.join(format!("{}.pcap", v.label))
    } else {
        PathBuf::from("/dev/null")
    };
    let out_s = out.display().to_string();
    let (child, settle) = match v.tool {
        Tool::Ours { .. } | Tool::OursPaper => {
            let mut a = s(&[
                "capture",
                "-i",
                D0.iface,
                "-w",
                &out_s,
                "--cpu",
                &DUT_CPU.to_string(),
            ]);
            a.extend(s(&["--duration", &(secs + 8.0).to_string()]));
            match v.tool {
                Tool::Ours {
                    feedback: false, ..
                } => a.push("--no-feedback".into()),
                Tool::OursPaper => a.extend(s(&[
                    "--queue",
                    "32",
                    "--min-free",
                    "8",
                    "--resume-at",
                    "timeout",
                ])),
                _ => {}
            }
            if v.tool
                == (Tool::Ours {
                    feedback: true,
                    limit: true,
                })
            {
                a.extend(s(&[
                    "--cycle-limit",
                    "50",
                    "--wake-cost-ns",
                    &dut.wake_cost_ns.to_string(),
                ]));
            }
            (spawn(l, Role::Dut, &a)?, 500)
        }
        Tool::Tcpdump => (
            spawn_tool(
                l,
                Role::Dut,
                &s(&["tcpdump", "-i", D0.iface, "-n", "-w", &out_s]),
            )?,
            1000,
        ),
        Tool::Tshark => (
            spawn_tool(
                l,
                Role::Dut,
                &s(&["tshark", "-i", D0.iface, "-n", "-q", "-w", &out_s]),
            )?,
            3000,
        ),
    };
    std::thread::sleep(Duration::from_millis(settle));
    let spin = spawn(
        l,
        Role::Dut,
        &s(&[
            "spin",
            "--cpu",
            &DUT_CPU.to_string(),
            "--duration",
            &secs.to_string(),
        ]),
    )?;
    let gen = s(&[
        "gen",
        "--cpu",
        &GEN_CPU.to_string(),
        "--rate",
        &rate.to_string(),
        "--duration",
        &secs.to_string(),
        "--dst-mac",
        &lab::ROUTER_MAC.to_string(),
    ]);
    let g = finish(spawn(l, Role::Gen, &gen)?, "gen")?;
    let sp = finish(spin, "spin")?;
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling a process this benchmark started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let (written, mut drops) = match v.tool {
        Tool::Ours { .. } | Tool::OursPaper => {
            let r = finish(child, &v.label)?;
            let mut drops = serde_json::Map::new();
            if let Some(o) = r["drops"].as_object() {
                for (k, n) in o {
                    if n.as_f64().unwrap_or(0.0) > 0.0 {
                        drops.insert(k.clone(), n.clone());
                    }
                }
            }
            let inhibits = r["inhibits"]
                .as_object()
                .map_or(0.0, |o| o.values().filter_map(|x| x.as_f64()).sum());
            drops.insert("inhibits".into(), inhibits.into());
            (f(&r, "written"), drops)
        }
        Tool::Tcpdump | Tool::Tshark => {
            let o = child
                .wait_with_output()
                .map_err(|e| BenchError(format!("{}: {e}", v.label)))?;
            let err = String::from_utf8_lossy(&o.stderr);
            let n = captured(&err).ok_or_else(|| {
                BenchError(format!(
                    "{} printed no capture count: {}",
                    v.label,
                    err.trim()
                ))
            })?;
            (n as f64, serde_json::Map::new())
        }
    };
    let dur = f(&g, "duration_s").max(1e-9);
    let mut p = Point::xy(
        "offered_pps",
        f(&g, "achieved_pps"),
        "delivered_pps",
        written / dur,
    );
    // What the loss-free rate (MLFRR) is computed from: every frame sent
    // and not written counts as lost, at the drop point our monitor names,
    // and the rest (a peer's losses, frames lost before the monitor saw
    // them) as `not_written`.
    let sent = f(&g, "sent");
    p.set("arrived", sent);
    let inhibits = drops.remove("inhibits").and_then(|x| x.as_f64());
    let named: f64 = drops.values().filter_map(|x| x.as_f64()).sum();
    let rest = (sent - written - named).max(0.0);
    if rest > 0.0 {
        drops.insert("not_written".into(), rest.into());
    }
    p.0.insert("drops".into(), serde_json::Value::Object(drops));
    p.set("written", written);
    if let Some(n) = inhibits {
        p.set("inhibits", n);
    }
    p.set(
        "compute_progress",
        (f(&sp, "progress_rate") / dut.idle).clamp(0.0, 1.0),
    );
    p.set(
        "dut_steal_share",
        f(&sp, "steal_s") / f(&sp, "duration_s").max(1e-9),
    );
    if v.file {
        std::fs::remove_file(&out).ok();
    }
    Ok(p)
}

/// Runs the capture benchmark: `real-capture`.
pub fn capture(
    opts: &super::BenchOpts,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-capture")?;
    let l = &opts.lab;
    let (rates, secs) = rates(opts.quick);
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| BenchError(format!("{}: {e}", opts.out.display())))?;
    let dir = opts
        .out
        .canonicalize()
        .map_err(|e| BenchError(e.to_string()))?;
    progress("measuring the compute process alone");
    let dut = trial::measure_dut(l, 1.0)?;
    let all = variants();
    let total = all.len() * rates.len();
    let mut series = Vec::new();
    for (i, v) in all.iter().enumerate() {
        let mut s = Series::new(&v.label);
        for (j, &r) in rates.iter().enumerate() {
            progress(&format!(
                "[{}/{total}] {} at {r:.0} pkts/s",
                i * rates.len() + j + 1,
                v.label
            ));
            s.points
                .push(steady(|| run(l, v, r, secs, &dut, &dir), progress)?);
        }
        series.push(s);
    }
    Ok(vec![judged(&file, series)])
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_capture_count() {
        let e = "tcpdump: listening on d0\n1234 packets captured\n1300 packets received by filter\n66 packets dropped by kernel\n";
        assert_eq!(super::captured(e), Some(1234));
        assert_eq!(
            super::captured("Capturing on 'd0'\n 17 packets captured\n"),
            Some(17)
        );
        assert_eq!(super::captured("nothing"), None);
    }
}
