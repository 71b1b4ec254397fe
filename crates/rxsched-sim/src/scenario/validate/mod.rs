//! The ranges a scenario's values must lie in. A failure names the dotted
//! key and says what is wanted.

mod hosts;

use super::{
    KernelCfg, KernelKind, LabForwarder, ProcessCfg, ProcessKind, RunCfg, Scenario, Scheduler,
    TcpCfg, TcpReceiver, TrafficCfg, TrafficKind, VARIANTS,
};

/// A bad value: its dotted key and what is wrong.
pub type Bad = (String, String);

/// The longest time any setting may name, in µs: 1,000 s of virtual time.
const MAX_US: f64 = 1e9;

fn positive(v: f64) -> bool {
    v.is_finite() && v > 0.0 && v <= MAX_US
}

/// `Err` naming `key` unless `ok`.
fn need(ok: bool, key: &str, msg: &str) -> Result<(), Bad> {
    if ok {
        Ok(())
    } else {
        Err((key.to_string(), msg.to_string()))
    }
}

/// `Err` unless `v` is a positive time in µs of at most `MAX_US`.
fn time_us(v: f64, key: &str) -> Result<(), Bad> {
    need(
        positive(v),
        key,
        "must be a positive time of at most 1e9 µs",
    )
}

impl Scenario {
    /// Checks ranges; on failure returns the dotted key and the reason.
    pub fn validate(&self) -> Result<(), Bad> {
        self.kernel.validate()?;
        let reader = self
            .process
            .iter()
            .any(|p| matches!(p.kind, ProcessKind::Reader | ProcessKind::Tcpdump));
        self.validate_traffic(reader)?;
        self.validate_processes()?;
        if let Some(t) = &self.tcp {
            t.validate(reader)?;
        }
        self.validate_echo(reader)?;
        self.validate_kinds(reader)?;
        self.validate_nt()?;
        self.validate_lab()?;
        if let Some(l) = &self.link {
            need(
                l.bit_rate_bps.is_finite() && (1e3..=1e13).contains(&l.bit_rate_bps),
                "link.bit_rate_bps",
                "must be from 1e3 to 1e13 bits per second",
            )?;
        }
        self.run.validate()
    }

    /// The traffic sources; `reader`: the host receives (one port).
    fn validate_traffic(&self, reader: bool) -> Result<(), Bad> {
        need(
            self.traffic.len() <= 16,
            "traffic",
            "at most 16 traffic sources",
        )?;
        for (i, t) in self.traffic.iter().enumerate() {
            t.validate(&format!("traffic.{i}"), reader)?;
            need(
                t.flows == 0 || self.kernel.kind == KernelKind::Linux,
                &format!("traffic.{i}.flows"),
                "flows are told apart by the receive queues of kernel.kind = \"linux\" only",
            )?;
        }
        Ok(())
    }

    /// The processes: one consumer at most, each one's keys, their counts.
    fn validate_processes(&self) -> Result<(), Bad> {
        let consumers = self
            .process
            .iter()
            .filter(|p| {
                matches!(
                    p.kind,
                    ProcessKind::Screend | ProcessKind::Reader | ProcessKind::Tcpdump
                )
            })
            .count();
        need(
            consumers <= 1,
            "process",
            "at most one screend, reader or tcpdump process",
        )?;
        for (i, p) in self.process.iter().enumerate() {
            self.validate_process(i, p)?;
        }
        for (i, p) in self.process.iter().enumerate() {
            need(
                p.count.is_none_or(|n| n <= 64)
                    && (p.count.is_none()
                        || matches!(p.kind, ProcessKind::Compute | ProcessKind::Onoff)),
                &format!("process.{i}.count"),
                "only compute and onoff processes have a count, of at most 64",
            )?;
        }
        need(
            self.expanded().process.len() <= 64,
            "process",
            "at most 64 processes",
        )
    }

    /// Process `i`'s keys that only some kinds, kernels or schedulers have.
    fn validate_process(&self, i: usize, p: &ProcessCfg) -> Result<(), Bad> {
        let at = |k: &str| format!("process.{i}.{k}");
        need(
            p.output.is_none() || p.kind == ProcessKind::Tcpdump,
            &at("output"),
            "only a tcpdump process has an output",
        )?;
        need(
            p.reservation.is_none()
                || (p.reservation.is_some_and(|r| r > 0.0 && r < 1.0)
                    && self.run.scheduler == Scheduler::Proportional),
            &at("reservation"),
            "a reservation is a share in (0, 1), under run.scheduler = \"proportional\"",
        )?;
        for (k, v) in [("on_ms", p.on_ms), ("off_ms", p.off_ms)] {
            need(
                v.is_none()
                    || (p.kind == ProcessKind::Onoff && v.is_some_and(|v| positive(v * 1e3))),
                &at(k),
                "an onoff process's positive time of at most 1e6 ms",
            )?;
        }
        need(
            p.disposition.is_none()
                || (p.kind == ProcessKind::Reader && self.kernel.kind == KernelKind::Srp),
            &at("disposition"),
            "only a reader under kernel.kind = \"srp\" has a SIGUIQ disposition",
        )?;
        self.validate_server(i, p)
    }

    /// A reader that serves requests over the host's TCP connection.
    fn validate_server(&self, i: usize, p: &ProcessCfg) -> Result<(), Bad> {
        let at = |k: &str| format!("process.{i}.{k}");
        let given = [
            p.request_kb.is_some(),
            p.compute.is_some(),
            p.compute_ns_per_byte.is_some(),
        ];
        if given.iter().all(|g| !g) {
            return Ok(());
        }
        need(
            given.iter().all(|g| *g),
            &at("request_kb"),
            "a server needs request_kb, compute and compute_ns_per_byte together",
        )?;
        let host_tcp = self
            .tcp
            .as_ref()
            .is_some_and(|t| t.receiver == TcpReceiver::Host);
        need(
            p.kind == ProcessKind::Reader && self.kernel.kind == KernelKind::Srp && host_tcp,
            &at("request_kb"),
            "a server is a reader of the host's TCP connection (tcp.receiver = \"host\") under kernel.kind = \"srp\"",
        )?;
        need(
            p.request_kb
                .is_some_and(|k| k.is_finite() && k > 0.0 && k <= 1e6),
            &at("request_kb"),
            "must be more than 0 and at most 1,000,000 KB",
        )?;
        need(
            p.compute_ns_per_byte
                .is_some_and(|v| v.is_finite() && (0.0..=1e6).contains(&v)),
            &at("compute_ns_per_byte"),
            "must be from 0 to 1,000,000 ns",
        )
    }

    /// The ping-pong client; `reader`: the host has a reader to answer it.
    fn validate_echo(&self, reader: bool) -> Result<(), Bad> {
        let Some(e) = &self.echo else {
            return Ok(());
        };
        // An Ethernet frame, or under nt a Classical IP datagram over
        // ATM (RFC 1626's 9,180-byte MTU plus LLC/SNAP).
        let (lo, hi, what) = if self.kernel.kind == KernelKind::Nt {
            (
                36,
                9188,
                "must be 36 to 9188 bytes (a Classical IP datagram with LLC/SNAP, no IP fragments)",
            )
        } else {
            (60, 1518, "must be 60 to 1518 bytes (no IP fragments)")
        };
        need((lo..=hi).contains(&e.frame_bytes), "echo.frame_bytes", what)?;
        need(
            e.client_us.is_finite() && (0.0..=MAX_US).contains(&e.client_us),
            "echo.client_us",
            "must be a time from 0 to 1e9 µs",
        )?;
        need(
            reader,
            "echo",
            "the host's reader answers the client: add one",
        )
    }

    /// What the kernel kinds and the processes ask of each other, and the
    /// reservations' sum; `reader`: a reader or tcpdump is there.
    fn validate_kinds(&self, reader: bool) -> Result<(), Bad> {
        let reserved: f64 = self.process.iter().filter_map(|p| p.reservation).sum();
        need(
            reserved < 1.0,
            "process",
            "the reservations must add up to less than 1",
        )?;
        let receiving_host = matches!(self.kernel.kind, KernelKind::Srp | KernelKind::Lrp);
        let has = |k: ProcessKind| self.process.iter().filter(|p| p.kind == k).count();
        need(
            !receiving_host
                || (has(ProcessKind::Reader) + has(ProcessKind::Forwarder) == 1
                    && has(ProcessKind::Screend) + has(ProcessKind::Tcpdump) == 0
                    && (has(ProcessKind::Forwarder) == 0 || self.kernel.kind == KernelKind::Srp)),
            "kernel.kind",
            "srp and lrp model a receiving host (one reader) and srp a gateway (one forwarder), with no screend or tcpdump",
        )?;
        need(
            has(ProcessKind::Forwarder) == 0 || self.kernel.kind == KernelKind::Srp,
            "process",
            "a forwarder process runs SRP's forwarding stage: it needs kernel.kind = \"srp\"",
        )?;
        need(
            !(reader && self.kernel.kind == KernelKind::Linux),
            "kernel.kind",
            "the linux kernel forwards; a reader or tcpdump needs bsd, emulated or polling",
        )?;
        need(
            self.kernel.kind == KernelKind::Linux
                || (self.kernel.rx_usecs == 0.0 && self.kernel.rx_frames <= 1),
            "kernel.rx_usecs",
            "interrupt coalescing is modelled for kernel.kind = \"linux\" only",
        )?;
        need(
            self.kernel.kind == KernelKind::Linux || self.kernel.rx_queues == 1,
            "kernel.rx_queues",
            "several receive queues per port are modelled for kernel.kind = \"linux\" only",
        )?;
        need(
            self.kernel.intr_return_probe_ns == 0
                || matches!(self.kernel.kind, KernelKind::Bsd | KernelKind::Emulated),
            "kernel.intr_return_probe_ns",
            "instruments the device interrupt's return of kernel.kind = \"bsd\" and \"emulated\" only",
        )?;
        let bsd_family = matches!(
            self.kernel.kind,
            KernelKind::Bsd | KernelKind::Emulated | KernelKind::Polling
        );
        if let Some(i) = self.traffic.iter().position(|t| t.protected) {
            need(
                bsd_family,
                &format!("traffic.{i}.protected"),
                "protected traffic is modelled for kernel.kind = \"bsd\", \"emulated\" and \"polling\" (the router of Mogul & Ramakrishnan)",
            )?;
        }
        if let Some(slo) = &self.kernel.slo {
            let lab_polling = self.kernel.kind == KernelKind::Lab
                && self
                    .lab
                    .as_ref()
                    .is_some_and(|l| l.forwarder == LabForwarder::Polling);
            let two_level = self.kernel.kind == KernelKind::Nt
                && self
                    .smp
                    .as_ref()
                    .is_some_and(|c| c.service == crate::scenario::SmpService::TwoLevel);
            need(
                self.kernel.kind == KernelKind::Polling || lab_polling || two_level,
                "kernel.slo",
                "an objective sets the polling facility's quota and cycle limit, or the two-level switch: it needs kernel.kind = \"polling\", \"lab\" with lab.forwarder = \"polling\", or \"nt\" with smp.service = \"two-level\"",
            )?;
            need(
                !self.kernel.cycle_limit.enabled,
                "kernel.slo",
                "an objective sets the cycle limit itself: leave kernel.cycle_limit off",
            )?;
            rxsched_core::Slo::parse(slo)
                .map_err(|e| ("kernel.slo".to_string(), format!("{slo:?}: {e}")))?;
        }
        let q = self.kernel.gp_quantum_us;
        need(
            q == 0.0 || positive(q),
            "kernel.gp_quantum_us",
            "must be 0 (off) or a positive time of at most 1e9 µs",
        )?;
        need(
            q == 0.0 || self.kernel.kind == KernelKind::Polling,
            "kernel.gp_quantum_us",
            "the processes' turns between rounds of polling need kernel.kind = \"polling\"",
        )?;
        let f = &self.kernel.feedback;
        need(
            !f.from_slo || (self.kernel.slo.is_some() && self.kernel.kind == KernelKind::Polling),
            "kernel.feedback.from_slo",
            "the watermarks come from an objective: it needs kernel.slo, on kernel.kind = \"polling\"",
        )?;
        need(
            !f.from_slo || f.min_free == 0,
            "kernel.feedback.from_slo",
            "an objective sets watermarks, not the monitor's min_free: leave min_free at 0",
        )?;
        let p = &self.kernel.protect;
        need(
            !p.enabled || bsd_family,
            "kernel.protect.enabled",
            "a protected receive ring is modelled for kernel.kind = \"bsd\", \"emulated\" and \"polling\"",
        )?;
        need(
            (1..=65_536).contains(&p.ring),
            "kernel.protect.ring",
            "must be 1 to 65536 descriptors",
        )?;
        need(
            !p.enabled || self.traffic.iter().any(|t| t.protected),
            "kernel.protect.enabled",
            "no [[traffic]] source is protected: mark one with protected = true",
        )
    }
}

impl TcpCfg {
    /// `reader`: the host has a reader (it receives the connection).
    fn validate(&self, reader: bool) -> Result<(), Bad> {
        need(
            (1..=9000).contains(&self.mss),
            "tcp.mss",
            "must be 1 to 9000 bytes",
        )?;
        need(
            self.window_bytes >= self.mss && self.window_bytes <= 1 << 30,
            "tcp.window_bytes",
            "must hold at least one segment, and at most 1 GiB",
        )?;
        for (k, v) in [
            ("tcp.sender_segment_us", self.sender_segment_us),
            ("tcp.sender_ack_us", self.sender_ack_us),
            ("tcp.ack_contention_us", self.ack_contention_us),
            ("tcp.receiver_segment_us", self.receiver_segment_us),
        ] {
            need(
                v.is_finite() && (0.0..=MAX_US).contains(&v),
                k,
                "must be a time from 0 to 1e9 µs",
            )?;
        }
        time_us(self.rto_min_ms * 1e3, "tcp.rto_min_ms")?;
        let host = self.receiver == TcpReceiver::Host;
        need(
            reader == host,
            "tcp.receiver",
            "\"host\" needs a reader (the host receives); \"endpoint\" needs none (the host forwards)",
        )?;
        need(
            !self.flow_control || host,
            "tcp.flow_control",
            "the host's window is modelled when it receives (tcp.receiver = \"host\")",
        )
    }
}

impl KernelCfg {
    fn validate(&self) -> Result<(), Bad> {
        for (key, v) in [
            ("kernel.ipintrq_limit", self.ipintrq_limit),
            ("kernel.output_queue_limit", self.output_queue_limit),
            ("kernel.screen_queue_limit", self.screen_queue_limit),
            ("kernel.filter_queue_limit", self.filter_queue_limit),
            ("kernel.socket_packets", self.socket_packets),
            ("kernel.socket_bytes", self.socket_bytes),
            ("kernel.backlog_limit", self.backlog_limit),
        ] {
            need(v > 0, key, "a queue must hold at least one packet")?;
        }
        let f = &self.feedback;
        for (key, v) in [
            ("kernel.feedback.high_pct", f.high_pct),
            ("kernel.feedback.low_pct", f.low_pct),
        ] {
            need(
                (0.0..=100.0).contains(&v),
                key,
                "a watermark is a percentage from 0 to 100",
            )?;
        }
        need(
            f.low_pct < f.high_pct,
            "kernel.feedback.low_pct",
            "the low watermark must be below the high one",
        )?;
        need(
            f.min_free == 0 || f.min_free < self.screen_queue_limit.min(self.filter_queue_limit),
            "kernel.feedback.min_free",
            "must be smaller than the queue",
        )?;
        time_us(f.timeout_us, "kernel.feedback.timeout_us")?;
        let c = &self.cycle_limit;
        need(
            c.percent > 0.0 && c.percent <= 100.0,
            "kernel.cycle_limit.percent",
            "must be in (0, 100]",
        )?;
        time_us(c.period_us, "kernel.cycle_limit.period_us")?;
        need(
            self.breaker.batch > 0,
            "kernel.breaker.batch",
            "must be at least 1",
        )?;
        time_us(self.breaker.off_us, "kernel.breaker.off_us")?;
        self.validate_linux()
    }

    fn validate_linux(&self) -> Result<(), Bad> {
        if let Some(v) = &self.variant {
            let names: Vec<_> = VARIANTS.iter().map(|(n, _, _)| *n).collect();
            need(
                names.contains(&v.as_str()),
                "kernel.variant",
                &format!("unknown variant {v:?}; known: {}", names.join(", ")),
            )?;
        }
        if let Some(r) = &self.tx_reclaim {
            need(
                rxsched_core::TxReclaim::parse(r).is_some(),
                "kernel.tx_reclaim",
                "must be per-packet, every-N (N >= 1) or before-send",
            )?;
        }
        need(
            self.napi_weight > 0 && self.napi_budget > 0,
            "kernel.napi_weight",
            "NAPI weight and budget must be at least 1",
        )?;
        // Under a microsecond, a softirq run would end before its first packet.
        need(
            self.napi_budget_us.is_finite() && (1.0..=MAX_US).contains(&self.napi_budget_us),
            "kernel.napi_budget_us",
            "must be from 1 to 1e9 µs",
        )?;
        need(
            (1..=64).contains(&self.rx_queues),
            "kernel.rx_queues",
            "must be from 1 to 64",
        )?;
        need(
            self.rx_usecs.is_finite() && (0.0..=100_000.0).contains(&self.rx_usecs),
            "kernel.rx_usecs",
            "must be from 0 to 100,000 µs",
        )?;
        need(
            self.intr_return_probe_ns <= 1_000_000,
            "kernel.intr_return_probe_ns",
            "must be at most 1,000,000 ns",
        )?;
        need(
            self.rx_frames <= 65_536,
            "kernel.rx_frames",
            "must be at most 65,536",
        )?;
        // A frame count alone would hold the last frames of a burst forever.
        need(
            self.rx_frames <= 1 || self.rx_usecs > 0.0,
            "kernel.rx_frames",
            "needs kernel.rx_usecs too: a device holds frames only for so long",
        )
    }
}

impl TrafficCfg {
    fn validate(&self, at: &str, reader: bool) -> Result<(), Bad> {
        let key = |k: &str| format!("{at}.{k}");
        // A rate under one packet per 1,000 s sends nothing in the longest
        // run, and its period would not fit virtual time.
        need(
            self.rate_pps == 0.0 || (1e-3..=1e9).contains(&self.rate_pps),
            &key("rate_pps"),
            "must be 0 (no traffic) or from 0.001 to 1e9 packets per second",
        )?;
        need(
            (14..=65_535).contains(&self.frame_bytes),
            &key("frame_bytes"),
            "must be between 14 and 65535",
        )?;
        need(self.burst > 0, &key("burst"), "must be at least 1")?;
        need(
            (0.0..=1.0).contains(&self.jitter)
                && (self.jitter == 0.0 || self.kind == TrafficKind::Jittered),
            &key("jitter"),
            "must be from 0 to 1, and only on a `jittered` source",
        )?;
        for (k, v) in [("spacing_us", self.spacing_us), ("start_us", self.start_us)] {
            need(
                (0.0..=MAX_US).contains(&v),
                &key(k),
                "must be from 0 to 1e9 µs",
            )?;
        }
        need(self.port <= 1, &key("port"), "a host has ports 0 and 1")?;
        need(
            self.flows <= 1_000_000,
            &key("flows"),
            "must be at most 1,000,000 (0: many)",
        )?;
        need(
            self.port == 0 || !reader,
            &key("port"),
            "a receiving host (with a reader) has only port 0",
        )
    }
}

impl RunCfg {
    fn validate(&self) -> Result<(), Bad> {
        need(
            positive(self.duration_ms * 1e3),
            "run.duration_ms",
            "must be a positive time of at most 1e6 ms",
        )?;
        need(
            self.warmup_ms >= 0.0 && self.warmup_ms * 1e3 <= MAX_US,
            "run.warmup_ms",
            "must be from 0 to 1e6 ms",
        )?;
        need(
            positive(self.quantum_ms * 1e3),
            "run.quantum_ms",
            "must be a positive time of at most 1e6 ms",
        )
    }
}
