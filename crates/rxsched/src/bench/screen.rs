//! `rxsched bench real screen`: forwarding through a user-level screening
//! stage (Mogul & Ramakrishnan 1996 §6.6.1's screend) on the DUT, with the
//! compute process beside it, swept over offered load: our router with the
//! screening process in interrupt mode, in polling mode without and with
//! queue-state feedback, our router forwarding in XDP with the rules in its
//! program (`polling-in-xdp-screened`), and Linux's own forwarding with the
//! same rules as an nftables ruleset (`kernel-nftables`).

use super::error::Context;
use super::forward::{run_trial, Dut, Forwarder, Screen};
use super::sweep::{rates, Sweep};
use super::{out_dir, result, BenchError, BenchOpts};
use crate::experiments::BenchFile;
use crate::result::ResultFile;
use rxsched_linux::lab::{Lab, Role};
use rxsched_linux::rules::Rules;
use std::path::Path;
use std::process::Command;

/// The rule set every series applies: the lab's flow (UDP 9000 → 9001 from
/// the generator's network to the sink's) is accepted by the last rule,
/// after four that each look at it and do not match.
pub const RULES: &str = "\
# rxsched bench real screen: the lab's flow passes the fifth rule
deny proto tcp
deny proto udp dport 0-1023
deny proto icmp
deny from 198.18.1.0/24
accept proto udp from 198.18.0.0/24 to 198.19.0.0/24 sport 9000 dport 9001
";

/// One series: its label, what forwards, and the screening behind our router.
struct Variant {
    label: &'static str,
    fwd: Forwarder,
    screen: Option<Screen>,
}

/// The paper's screening queue (Mogul & Ramakrishnan 1996 §6.6.1).
const PAPER_QUEUE: u32 = 32;

fn variants(rules: &Path) -> Vec<Variant> {
    // The paper's three forms on its 32-packet queue, and ours: the stage
    // on the default queue, and the rules in the devices' program.
    let screen = |feedback, queue| {
        Some(Screen {
            rules: rules.display().to_string(),
            feedback,
            queue,
        })
    };
    vec![
        Variant {
            label: "interrupt-screend",
            fwd: Forwarder::Interrupt,
            screen: screen(None, Some(PAPER_QUEUE)),
        },
        Variant {
            label: "polling-screend",
            fwd: Forwarder::Polling,
            screen: screen(None, Some(PAPER_QUEUE)),
        },
        Variant {
            label: "polling-screend-feedback",
            fwd: Forwarder::Polling,
            screen: screen(Some("0.75,0.25"), Some(PAPER_QUEUE)),
        },
        Variant {
            label: "polling-screend-feedback-q1024",
            fwd: Forwarder::Polling,
            screen: screen(Some("0.75,0.25"), None),
        },
        Variant {
            label: "polling-in-xdp-screened",
            fwd: Forwarder::PollingInXdp,
            screen: screen(None, None),
        },
        Variant {
            label: "kernel-nftables",
            fwd: Forwarder::Kernel,
            screen: None,
        },
    ]
}

/// The kernel's screening is an nftables ruleset (`calibrate --real`
/// measures it too).
pub const TOOLS: super::Tools = &[("nft", "nftables")];

/// Runs `nft` in the DUT's namespace.
fn nft(lab: &Lab, args: &[&str]) -> Result<(), BenchError> {
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.ns(Role::Dut), "nft"])
        .args(args)
        .output()
        .context("nft (install it: apt-get install nftables)")?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BenchError(format!(
            "nft {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The rules as an nftables ruleset on the DUT while it lives.
pub(super) struct NftRules<'a>(&'a Lab);

impl<'a> NftRules<'a> {
    pub(super) fn load(
        lab: &'a Lab,
        rules: &Rules,
        dir: &Path,
    ) -> Result<NftRules<'a>, BenchError> {
        let path = dir.join("screen.nft");
        std::fs::write(&path, rules.to_nft()).context(path.display())?;
        // A table left by a killed run would hold the old rules.
        let _ = nft(lab, &["delete", "table", "inet", "rxsched"]);
        nft(lab, &["-f", &path.display().to_string()])?;
        Ok(NftRules(lab))
    }
}

impl Drop for NftRules<'_> {
    fn drop(&mut self) {
        let _ = nft(self.0, &["delete", "table", "inet", "rxsched"]);
    }
}

/// Runs the screening benchmark: `real-screen`.
pub fn screen(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<Vec<ResultFile>, BenchError> {
    super::calibrate::with_pace(opts, progress, |dut| screen_at(opts, dut, progress))
}

/// [`screen`] with the compute process measured alone.
fn screen_at(
    opts: &BenchOpts,
    dut: &Dut,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let file = BenchFile::load("real-screen")?;
    let l = &opts.lab;
    let (rates, secs) = rates(opts.quick);
    let dir = out_dir(opts)?;
    let path = dir.join("screen.rules");
    std::fs::write(&path, RULES).context(path.display())?;
    let rules = Rules::parse(&path.display().to_string(), RULES)?;
    let all = variants(&path);
    let mut sweep = Sweep::over_rates(all.len(), &rates, progress);
    let mut series = Vec::new();
    for v in &all {
        // The kernel applies the same rules while it forwards.
        let _nft = match v.fwd {
            Forwarder::Kernel => Some(NftRules::load(l, &rules, &dir)?),
            _ => None,
        };
        let trial = |r| run_trial(l, v.fwd, v.screen.as_ref(), r, secs, dut);
        series.push(sweep.series(v.label, trial)?);
    }
    Ok(vec![result(&file, series)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check file names the series this bench measures, in its order.
    #[test]
    fn the_check_file_names_the_series_measured() {
        let file = BenchFile::load("real-screen").unwrap();
        let labels: Vec<&str> = variants(Path::new("r")).iter().map(|v| v.label).collect();
        assert_eq!(file.bench.series, labels);
    }

    /// The bench's rules accept the lab generator's frames, and only by the
    /// last rule (each frame is judged by all five).
    #[test]
    fn the_lab_flow_passes_the_last_rule() {
        use rxsched_linux::lab::{G0, S0};
        use rxsched_linux::rules::{Action, Decided, Flow};
        let rules = Rules::parse("screen.rules", RULES).unwrap();
        let cfg = rxsched_linux::loadgen::GenConfig {
            iface: "g0".into(),
            src_mac: None,
            dst_mac: rxsched_linux::lab::D0.mac,
            src_ip: G0.ip,
            dst_ip: S0.ip,
            dst_port: 9001,
            rate_pps: 1.0,
            frame_bytes: 64,
            count: 1,
            duration_s: 1.0,
            cpu: None,
            engine: rxsched_linux::loadgen::Engine::Packet,
            mix: None,
        };
        let f = rxsched_linux::loadgen::probe(&cfg, G0.mac, 1, 0).to_vec();
        let (action, by) = rules.verdict(&Flow::of_frame(&f));
        assert_eq!(action, Action::Accept);
        assert_eq!(by, Decided::Rule(4));
    }
}
