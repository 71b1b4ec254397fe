//! The keys only one host has: the lab's DUT (`[lab]`) and the NT
//! multiprocessor (`[smp]`, its processes' CPUs and locks).

use super::{need, Bad};
use crate::scenario::{
    KernelKind, LabForwarder, LabScreen, ProcessCfg, ProcessKind, Scenario, Scheduler, SmpCfg,
    SmpDetector, TrafficKind,
};

impl Scenario {
    /// The `lab` host: one source on port 0, a compute process at most.
    pub(super) fn validate_lab(&self) -> Result<(), Bad> {
        let lab = self.kernel.kind == KernelKind::Lab;
        need(
            lab || self.lab.is_none(),
            "lab",
            "[lab] describes the XDP lab's DUT of kernel.kind = \"lab\"",
        )?;
        if !lab {
            return Ok(());
        }
        need(
            self.tcp.is_none() && self.echo.is_none(),
            "kernel.kind",
            "the lab host forwards the generator's UDP frames; it has no TCP or echo model",
        )?;
        for (i, p) in self.process.iter().enumerate() {
            need(
                p.kind == ProcessKind::Compute,
                &format!("process.{i}.kind"),
                "the lab host runs a compute process beside the forwarder, nothing else",
            )?;
        }
        for (i, t) in self.traffic.iter().enumerate() {
            need(
                t.port == 0 && t.kind == TrafficKind::Constant,
                &format!("traffic.{i}"),
                "the lab's generator sends constant-rate traffic into port 0",
            )?;
        }
        let cfg = self.lab.clone().unwrap_or_default();
        let fwd = cfg.forwarder;
        match cfg.screen {
            LabScreen::None => {}
            LabScreen::Process => {
                need(
                    fwd.to_socket(),
                    "lab.screen",
                    "a screening process sits behind rxsched's router on its socket \
                     (lab.forwarder = \"polling\" or \"interrupt\")",
                )?;
                need(
                    cfg.screen_queue > 0,
                    "lab.screen_queue",
                    "the screening queue holds at least one frame",
                )?;
            }
            LabScreen::Program => need(
                matches!(fwd, LabForwarder::Kernel | LabForwarder::PollingInXdp),
                "lab.screen",
                "rules in the receive work are nftables (lab.forwarder = \"kernel\") \
                 or route's XDP program (\"polling-in-xdp\")",
            )?,
        }
        need(
            cfg.screen == LabScreen::None || !fwd.captures(),
            "lab.screen",
            "the monitor has no screening stage (its filter is not modelled)",
        )?;
        need(
            cfg.filter_queue > 0,
            "lab.filter_queue",
            "the packet-filter queue holds at least one frame",
        )?;
        need(
            !self.kernel.feedback.enabled
                || fwd.captures()
                || (fwd == LabForwarder::Polling && cfg.screen == LabScreen::Process),
            "kernel.feedback.enabled",
            "on the lab host, M3 watches the screening queue behind the polling router \
             (lab.forwarder = \"polling\", lab.screen = \"process\") or the monitor's \
             packet-filter queue (\"capture-copy\", \"capture-take\")",
        )?;
        Ok(())
    }

    /// The `nt` host and its keys, which only it has.
    pub(super) fn validate_nt(&self) -> Result<(), Bad> {
        let nt = self.kernel.kind == KernelKind::Nt;
        need(
            nt || self.smp.is_none(),
            "smp",
            "[smp] describes the multiprocessor of kernel.kind = \"nt\"",
        )?;
        for (i, p) in self.process.iter().enumerate() {
            self.validate_nt_process(i, p, nt)?;
        }
        if !nt {
            return Ok(());
        }
        need(
            self.tcp.is_none(),
            "tcp",
            "the nt host has no TCP model; use UDP traffic or [echo]",
        )?;
        need(
            self.run.scheduler == Scheduler::Priority,
            "run.scheduler",
            "an nt host schedules threads by priority",
        )?;
        need(
            self.process
                .iter()
                .filter(|p| p.kind == ProcessKind::Reader)
                .count()
                <= 1,
            "process",
            "an nt host has at most one reader (with any number of threads)",
        )?;
        for (i, t) in self.traffic.iter().enumerate() {
            need(
                t.port == 0,
                &format!("traffic.{i}.port"),
                "an nt host has one adapter, port 0",
            )?;
        }
        self.smp.clone().unwrap_or_default().validate()
    }

    /// Process `i`'s keys of the `nt` host (`nt`: this is one).
    fn validate_nt_process(&self, i: usize, p: &ProcessCfg, nt: bool) -> Result<(), Bad> {
        let at = |k: &str| format!("process.{i}.{k}");
        for (k, set) in [
            ("threads", p.threads.is_some()),
            ("lock_us", p.lock_us.is_some()),
            ("work_us", p.work_us.is_some()),
            ("realtime", p.realtime.is_some()),
            ("cpu", p.cpu.is_some()),
            ("nt_priority", p.nt_priority.is_some()),
            ("affinity", p.affinity.is_some()),
        ] {
            need(
                !set || nt,
                &at(k),
                "only a process of kernel.kind = \"nt\" has this",
            )?;
        }
        if !nt {
            return Ok(());
        }
        need(
            matches!(
                p.kind,
                ProcessKind::Reader | ProcessKind::Compute | ProcessKind::Onoff
            ),
            &at("kind"),
            "an nt host runs reader, compute and onoff processes",
        )?;
        need(
            p.nt_priority.is_none_or(|v| (1..=31).contains(&v)),
            &at("nt_priority"),
            "NT priorities run from 1 to 31 (normal 8, real-time 24)",
        )?;
        need(
            p.priority.is_none(),
            &at("priority"),
            "an nt thread's priority is its class: say `realtime = true` or nothing",
        )?;
        need(
            p.threads.is_none_or(|n| (0..=64).contains(&n))
                && (p.threads.is_none() || p.kind == ProcessKind::Reader),
            &at("threads"),
            "a reader has 1 to 64 threads, or 0 for one per CPU",
        )?;
        for (k, v) in [("lock_us", p.lock_us), ("work_us", p.work_us)] {
            need(
                v.is_none_or(|v| v.is_finite() && (0.0..=1e6).contains(&v))
                    && (v.is_none() || p.kind == ProcessKind::Reader),
                &at(k),
                "a reader's time per datagram, from 0 to 1e6 µs",
            )?;
        }
        let cpus = self.smp.as_ref().map_or(2, |c| c.cpus);
        need(
            p.affinity
                .as_ref()
                .is_none_or(|a| !a.is_empty() && a.iter().all(|&c| c < cpus)),
            &at("affinity"),
            "a list of the host's CPUs (0 to smp.cpus - 1), at least one",
        )?;
        need(
            p.cpu.is_none_or(|c| c < cpus),
            &at("cpu"),
            "must be one of the host's CPUs (0 to smp.cpus - 1)",
        )
    }
}

impl SmpCfg {
    fn validate(&self) -> Result<(), Bad> {
        need(
            (1..=64).contains(&self.cpus),
            "smp.cpus",
            "must be from 1 to 64",
        )?;
        need(
            self.interrupt_cpu < self.cpus,
            "smp.interrupt_cpu",
            "must be one of the host's CPUs (0 to smp.cpus - 1)",
        )?;
        need(
            self.queues <= self.cpus,
            "smp.queues",
            "from 1 to smp.cpus (one interrupt and polling thread per CPU), or 0 for one per CPU",
        )?;
        let share = self.detector == SmpDetector::Cpu;
        need(
            self.threshold.is_finite()
                && self.threshold > 0.0
                && (!share || self.threshold <= 1.0)
                && self.threshold <= 1e9,
            "smp.threshold",
            "must be positive (a share of one CPU, at most 1, for detector = \"cpu\")",
        )?;
        need(
            self.hold_ms.is_finite() && (0.0..=1e6).contains(&self.hold_ms),
            "smp.hold_ms",
            "must be from 0 to 1e6 ms",
        )?;
        need(
            self.window_ms.is_finite() && self.window_ms >= 0.01 && self.window_ms <= 1e5,
            "smp.window_ms",
            "must be from 0.01 to 1e5 ms",
        )?;
        need(
            self.idle_grace_ms.is_finite() && (0.0..=1e6).contains(&self.idle_grace_ms),
            "smp.idle_grace_ms",
            "must be from 0 to 1e6 ms",
        )?;
        need(
            self.return_below
                .is_none_or(|f| f.is_finite() && f > 0.0 && f <= 1.0),
            "smp.return_below",
            "a share of one CPU, above 0 and at most 1",
        )?;
        need(
            (1..=1_000_000).contains(&self.poll_quota),
            "smp.poll_quota",
            "must be from 1 to 1000000 datagrams",
        )
    }
}
