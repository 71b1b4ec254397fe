//! `rxsched bench real screen`: forwarding through a user-level screening
//! stage (Mogul & Ramakrishnan 1996 §6.6.1's screend) on the DUT, with the
//! compute process beside it, swept over offered load: our router with the
//! screening process in interrupt mode, in polling mode without and with
//! queue-state feedback, and Linux's own forwarding with the same rules as
//! an nftables ruleset (`kernel-nftables`).

use super::trial::{self, BenchError, Forwarder};
use super::{bounded, labels, named, rates, result, steady};
use crate::checks::{Check, Rule};
use crate::result::{Axis, ResultFile, Series};
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

/// One series: its label, what forwards, and our router's extra flags.
struct Variant {
    label: &'static str,
    fwd: Forwarder,
    extra: Vec<String>,
}

fn variants(rules: &Path) -> Vec<Variant> {
    let screen = |more: &[&str]| {
        let mut v = vec!["--screen".to_string(), rules.display().to_string()];
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    vec![
        Variant {
            label: "interrupt-screend",
            fwd: Forwarder::Interrupt,
            extra: screen(&[]),
        },
        Variant {
            label: "polling-screend",
            fwd: Forwarder::Polling,
            extra: screen(&[]),
        },
        Variant {
            label: "polling-screend-feedback",
            fwd: Forwarder::Polling,
            extra: screen(&["--feedback", "0.75,0.25"]),
        },
        Variant {
            label: "kernel-nftables",
            fwd: Forwarder::Kernel,
            extra: Vec::new(),
        },
    ]
}

/// Runs `nft` in the DUT's namespace.
fn nft(lab: &Lab, args: &[&str]) -> Result<(), BenchError> {
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.ns(Role::Dut), "nft"])
        .args(args)
        .output()
        .map_err(|e| BenchError(format!("nft: {e} (install it: apt-get install nftables)")))?;
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
struct NftRules<'a>(&'a Lab);

impl<'a> NftRules<'a> {
    fn load(lab: &'a Lab, rules: &Rules, dir: &Path) -> Result<NftRules<'a>, BenchError> {
        let path = dir.join("screen.nft");
        std::fs::write(&path, rules.to_nft())
            .map_err(|e| BenchError(format!("{}: {e}", path.display())))?;
        // A table left by a killed run would hold the old rules.
        let _ = nft(lab, &["delete", "table", "ip", "rxsched"]);
        nft(lab, &["-f", &path.display().to_string()])?;
        Ok(NftRules(lab))
    }
}

impl Drop for NftRules<'_> {
    fn drop(&mut self) {
        let _ = nft(self.0, &["delete", "table", "ip", "rxsched"]);
    }
}

/// Runs the screening benchmark: `real-screen`.
pub fn screen(
    opts: &super::BenchOpts,
    progress: &dyn Fn(&str),
) -> Result<Vec<ResultFile>, BenchError> {
    let l = &opts.lab;
    let (rates, secs) = rates(opts.quick);
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| BenchError(format!("{}: {e}", opts.out.display())))?;
    let dir = opts
        .out
        .canonicalize()
        .map_err(|e| BenchError(e.to_string()))?;
    let path = dir.join("screen.rules");
    std::fs::write(&path, RULES).map_err(|e| BenchError(format!("{}: {e}", path.display())))?;
    let rules =
        Rules::parse(&path.display().to_string(), RULES).map_err(|e| BenchError(e.to_string()))?;
    progress("measuring the compute process alone");
    let dut = trial::measure_dut(l, 1.0)?;
    let all = variants(&path);
    let total = all.len() * rates.len();
    let mut series = Vec::new();
    for (i, v) in all.iter().enumerate() {
        let _nft = match v.fwd {
            Forwarder::Kernel => Some(NftRules::load(l, &rules, &dir)?),
            _ => None,
        };
        let mut s = Series::new(v.label);
        for (j, &r) in rates.iter().enumerate() {
            progress(&format!(
                "[{}/{total}] {} at {r:.0} pkts/s",
                i * rates.len() + j + 1,
                v.label
            ));
            let point = || trial::run_with(l, v.fwd, &v.extra, r, secs, &dut);
            s.points.push(steady(point, progress)?);
        }
        series.push(s);
    }
    l.set_kernel_forwarding(false)
        .map_err(|e| BenchError(e.to_string()))?;
    Ok(vec![screen_result(series)])
}

fn screen_result(series: Vec<Series>) -> ResultFile {
    let checks: Vec<Check> = vec![
        named(
            "with feedback, screened forwarding at the highest rate delivers at least 90% of its MLFRR",
            Rule::LastOverMlfrr(bounded("polling-screend-feedback", Some(0.9), None)),
        ),
        named(
            "interrupt-driven screened forwarding livelocks: at most 20% of its peak at the highest rate",
            Rule::Collapses {
                series: labels(&["interrupt-screend"]),
                max: 0.2,
            },
        ),
        named(
            "polling without feedback livelocks at the screening queue: at most 20% of its peak at the highest rate",
            Rule::Collapses {
                series: labels(&["polling-screend"]),
                max: 0.2,
            },
        ),
    ];
    result(
        "real-screen",
        "Forwarding through a screening process on the DUT: interrupt, polling, polling with feedback, and the kernel with nftables",
        Axis::new("delivered_pps", "Delivered rate (at the sink)", "pkts/s"),
        series,
        checks,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's rules accept the lab generator's frames, and only by the
    /// last rule (each frame is judged by all five).
    #[test]
    fn the_lab_flow_passes_the_last_rule() {
        use rxsched_linux::lab::{G0, S0};
        use rxsched_linux::rules::{Action, Decided, Flow};
        let rules = Rules::parse("screen.rules", RULES).unwrap();
        let cfg = rxsched_linux::traffic::GenConfig {
            iface: "g0".into(),
            src_mac: None,
            dst_mac: rxsched_linux::lab::ROUTER_MAC,
            src_ip: G0.ip,
            dst_ip: S0.ip,
            dst_port: 9001,
            rate_pps: 1.0,
            frame_bytes: 64,
            count: 1,
            duration_s: 1.0,
            cpu: None,
            engine: rxsched_linux::traffic::Engine::Packet,
        };
        let f = rxsched_linux::traffic::probe(&cfg, G0.mac, 1, 0).to_vec();
        let (action, by) = rules.verdict(&Flow::of_frame(&f));
        assert_eq!(action, Action::Accept);
        assert_eq!(by, Decided::Rule(4));
    }
}
