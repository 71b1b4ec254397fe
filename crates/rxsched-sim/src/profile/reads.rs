//! Which costs a scenario's host reads. A profile that lacks one is
//! refused, naming the key, rather than run on a silent zero: a testbed
//! without such work says so with an explicit 0 and its reason.

use super::Profile;
use crate::scenario::{CaptureOutput, KernelKind, ProcessKind, Scenario, SmpService};
use crate::InputError;
use std::collections::BTreeSet;

/// The dotted cost keys the host of `s` reads.
pub fn reads(s: &Scenario) -> Vec<&'static str> {
    let k = s.kernel.kind;
    let has = |kind: ProcessKind| s.process.iter().any(|p| p.kind == kind);
    let mut keys: Vec<&'static str> = Vec::new();
    match k {
        KernelKind::Linux => {
            return vec![
                "linux.t_cs_in",
                "linux.t_cs_out",
                "linux.t_rx",
                "linux.t_copy_per_byte",
                "linux.t_ip",
                "linux.t_tx",
                "linux.t_skb",
                "linux.t_skb_cold",
                "linux.cache_buffers",
            ]
        }
        KernelKind::Nt => {
            keys.extend([
                "nt.isr",
                "nt.dpc_entry",
                "nt.dpc_packet",
                "nt.dpc_per_byte",
                "nt.wake",
                "nt.context_switch",
                "nt.recv",
                "nt.recv_per_byte",
            ]);
            let smp = s.smp.clone().unwrap_or_default();
            if smp.service != SmpService::Interrupt {
                keys.push("nt.monitor");
            }
            if s.echo.is_some() {
                keys.extend(["nt.send", "nt.send_per_byte"]);
            }
            if s.process.iter().any(|p| p.lock_us.is_some_and(|l| l > 0.0)) {
                keys.push("nt.lock");
            }
            return keys;
        }
        KernelKind::Lab => {
            use crate::scenario::LabForwarder as F;
            use crate::scenario::LabScreen;
            let cfg = s.lab.clone().unwrap_or_default();
            let fwd = cfg.forwarder;
            keys.extend([
                "lab.gen_batches_per_s",
                "lab.veth_ring",
                "lab.tick_hz",
                "lab.wake",
            ]);
            keys.extend(match fwd {
                F::Kernel => ["lab.napi_kernel_forward", "lab.napi_kernel_run"],
                F::XdpFwd => ["lab.napi_xdp_forward", "lab.napi_xdp_run"],
                F::PollingInXdp => ["lab.napi_xdp_route", "lab.napi_route_run"],
                F::Interrupt => ["lab.napi_xsk_interrupt", "lab.napi_xsk_run"],
                F::Polling | F::CaptureTake => ["lab.napi_xsk_redirect", "lab.napi_xsk_run"],
                F::CaptureCopy => ["lab.napi_copy", "lab.napi_copy_run"],
            });
            if fwd.to_socket() {
                keys.push("lab.napi_xsk_full");
            }
            match fwd {
                F::Interrupt => keys.extend([
                    "lab.napi_xsk_wake",
                    "lab.router_interrupt",
                    "lab.router_interrupt_run",
                    "lab.xsk_rx_ring",
                ]),
                F::Polling => keys.extend([
                    "lab.router_polling",
                    "lab.router_polling_run",
                    "lab.xsk_rx_ring",
                ]),
                F::PollingInXdp => keys.push("lab.router_polling_run"),
                F::CaptureCopy => keys.extend([
                    "lab.napi_copy_full",
                    "lab.capture_copy",
                    "lab.capture_run",
                    "lab.copy_ring",
                    "lab.copy_wake",
                ]),
                F::CaptureTake => keys.extend([
                    "lab.capture_take",
                    "lab.capture_take_run",
                    "lab.xsk_rx_ring",
                ]),
                F::Kernel | F::XdpFwd => {}
            }
            if fwd.captures() {
                keys.extend(["lab.writer_frame", "lab.writer_run"]);
            }
            match (cfg.screen, fwd) {
                (LabScreen::None, _) => {}
                (LabScreen::Process, F::Interrupt) => keys.extend([
                    "lab.router_interrupt_screen",
                    "lab.router_interrupt_screen_run",
                    "lab.screen_frame",
                    "lab.screen_run",
                ]),
                (LabScreen::Process, _) => keys.extend([
                    "lab.router_screen",
                    "lab.router_screen_run",
                    "lab.screen_frame",
                    "lab.screen_run",
                ]),
                (LabScreen::Program, F::Kernel) => keys.push("lab.napi_nft_forward"),
                (LabScreen::Program, _) => keys.push("lab.napi_xdp_screen"),
            }
            let charged = s.kernel.cycle_limit.enabled || s.kernel.slo.is_some();
            if charged && matches!(fwd, F::Polling | F::PollingInXdp) {
                keys.push("lab.router_charge");
            }
            return keys;
        }
        _ => {}
    }
    keys.extend([
        "cost.intr_dispatch",
        "cost.rx_copy",
        "cost.rx_copy_per_byte",
        "cost.rx_link",
        "cost.clock_hz",
    ]);
    match k {
        KernelKind::Bsd | KernelKind::Emulated => keys.extend(["cost.ipintrq", "cost.ip_switch"]),
        KernelKind::Polling => keys.extend([
            "cost.poll_intr",
            "cost.poll_switch",
            "cost.poll_callback",
            "cost.intr_enable",
        ]),
        KernelKind::Srp | KernelKind::Lrp => keys.extend([
            "cost.srp_demux",
            "cost.srp_signal",
            "cost.srp_deliver",
            "cost.srp_handler",
        ]),
        _ => {}
    }
    let reader = has(ProcessKind::Reader);
    let tcpdump = s.process.iter().find(|p| p.kind == ProcessKind::Tcpdump);
    if reader {
        keys.extend([
            "cost.ip_input",
            "cost.udp_input",
            "cost.app_read",
            "cost.app_read_per_byte",
        ]);
    } else if tcpdump.is_none() {
        keys.extend([
            "cost.ip_input",
            "cost.ip_output",
            "cost.driver_tx",
            "cost.output_done",
            "cost.tx_reclaim",
        ]);
    }
    if let Some(t) = tcpdump {
        keys.extend(["cost.pf_filter", "cost.capture_read"]);
        if t.output == Some(CaptureOutput::File) {
            keys.push("cost.capture_file");
        }
    }
    if has(ProcessKind::Screend) {
        keys.push("cost.screend");
    }
    if s.process.iter().any(|p| p.kind != ProcessKind::Reader) || s.process.len() > 1 {
        keys.push("cost.context_switch");
    }
    if s.tcp.is_some() {
        keys.extend([
            "cost.tcp_input",
            "cost.tcp_input_per_byte",
            "cost.tcp_ack",
            "cost.tcp_read",
        ]);
    }
    if s.process.iter().any(|p| p.request_kb.is_some()) {
        keys.extend(["cost.cache_bytes", "cost.cache_miss_per_byte"]);
    }
    keys
}

/// The dotted keys of every cost a profile's text gives.
pub fn given(src: &str) -> BTreeSet<String> {
    let Ok(tree) = src.parse::<toml::Table>() else {
        return BTreeSet::new();
    };
    let mut keys = BTreeSet::new();
    for table in ["cost", "linux", "nt", "lab"] {
        if let Some(t) = tree.get(table).and_then(|t| t.as_table()) {
            keys.extend(t.keys().map(|k| format!("{table}.{k}")));
        }
    }
    keys
}

impl Profile {
    /// Refuses scenario `s` if its host reads a cost this profile does
    /// not give. The error is about the scenario's `profile` key.
    pub fn check_costs(&self, s: &Scenario) -> Result<(), InputError> {
        let missing: Vec<&str> = reads(s)
            .into_iter()
            .filter(|k| !self.given.contains(*k))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(InputError {
            file: crate::IN_SCENARIO.into(),
            line: None,
            key: Some("profile".into()),
            msg: format!(
                "profile {:?} does not give {}, which this scenario's host reads; \
                 give each in the profile (0 if the testbed has no such work, with the reason)",
                self.name,
                missing.join(", ")
            ),
        })
    }
}
