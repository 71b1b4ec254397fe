//! Scenario files: what to simulate, and how to build a figure from it.

use crate::error::{from_toml, line_of, InputError};
use rxsched_core::Quota;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Which receive architecture the kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum KernelKind {
    /// M1: the interrupt-driven 4.2BSD path with `ipintrq`.
    #[default]
    Bsd,
    /// The modified (polling) kernel configured to act as unmodified: the
    /// M1 path through the new driver structure.
    Emulated,
    /// M2: interrupt-initiated polling, with M3/M4 as options.
    Polling,
    /// Linux 2.6: hard interrupts, the NET_RX softirq, optional NAPI (M7)
    /// and transmit-reclaim modes (M8).
    Linux,
}

/// The six driver variants of Spanos et al. 2008, as presets of
/// `kernel.napi` and `kernel.tx_reclaim`.
pub const VARIANTS: &[(&str, bool, &str)] = &[
    ("ORIGINAL", false, "per-packet"),
    ("TX-128", false, "every-128"),
    ("TX-OFF", false, "before-send"),
    ("NAPI", true, "per-packet"),
    ("NAPI-TX-128", true, "every-128"),
    ("NAPI-TX-OFF", true, "before-send"),
];

/// Where IP input runs in the interrupt-driven kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IpLayer {
    /// A software interrupt, above every thread (4.2BSD).
    Softirq,
    /// A kernel thread, below interrupts (Digital UNIX).
    #[default]
    Thread,
}

/// M3 options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeedbackCfg {
    /// Whether queue-state feedback is on.
    pub enabled: bool,
    /// Inhibit input when the queue is this full (percent of its size).
    pub high_pct: f64,
    /// Resume input when it drains to this level (percent).
    pub low_pct: f64,
    /// Monitor form: inhibit when fewer than this many slots are free and
    /// resume only by timeout (0: use the watermarks).
    pub min_free: u32,
    /// Resume anyway after this long, in case the consumer hangs.
    pub timeout_us: f64,
}

impl Default for FeedbackCfg {
    fn default() -> Self {
        // Mogul & Ramakrishnan 1996 §6.6.1: 75% / 25% of a 32-entry queue, one tick.
        FeedbackCfg {
            enabled: false,
            high_pct: 75.0,
            low_pct: 25.0,
            min_free: 0,
            timeout_us: 1000.0,
        }
    }
}

/// M4 options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CycleLimitCfg {
    /// Whether the CPU-cycle limit is on.
    pub enabled: bool,
    /// Share of each period input handling may use, in percent.
    pub percent: f64,
    /// The period, in microseconds.
    pub period_us: f64,
}

impl Default for CycleLimitCfg {
    fn default() -> Self {
        // Mogul & Ramakrishnan 1996 §7: a 10 ms period.
        CycleLimitCfg {
            enabled: false,
            percent: 50.0,
            period_us: 10_000.0,
        }
    }
}

/// M5 options.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerCfg {
    /// Whether the circuit breaker is on.
    pub enabled: bool,
    /// Packets in one interrupt before it trips.
    pub batch: u32,
    /// How long interrupts stay off, in microseconds.
    pub off_us: f64,
}

impl Default for BreakerCfg {
    fn default() -> Self {
        // Mogul & Ramakrishnan 1996 §8: 250 packets, then 1 ms off.
        BreakerCfg {
            enabled: false,
            batch: 250,
            off_us: 1000.0,
        }
    }
}

/// `[kernel]`: the mechanisms and their parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelCfg {
    /// The receive architecture.
    pub kind: KernelKind,
    /// Where IP input runs in the interrupt-driven kernels.
    pub ip_layer: IpLayer,
    /// Packets per polling callback.
    pub quota: Quota,
    /// `ipintrq` limit.
    pub ipintrq_limit: u32,
    /// Interface output queue limit.
    pub output_queue_limit: u32,
    /// screend's input queue size.
    pub screen_queue_limit: u32,
    /// Socket receive buffer, in packets.
    pub socket_packets: u32,
    /// Socket receive buffer, in bytes.
    pub socket_bytes: u32,
    /// M3.
    pub feedback: FeedbackCfg,
    /// M4.
    pub cycle_limit: CycleLimitCfg,
    /// M5.
    pub breaker: BreakerCfg,
    /// Linux: a driver variant preset (`ORIGINAL`, `TX-128`, `TX-OFF`,
    /// `NAPI`, `NAPI-TX-128`, `NAPI-TX-OFF`); sets `napi` and `tx_reclaim`.
    pub variant: Option<String>,
    /// Linux: receive through NAPI (M7).
    pub napi: Option<bool>,
    /// Linux: `per-packet`, `every-N` or `before-send` (M8).
    pub tx_reclaim: Option<String>,
    /// Linux NAPI: packets per device per poll turn.
    pub napi_weight: u32,
    /// Linux NAPI: packets per softirq run.
    pub napi_budget: u32,
    /// Linux NAPI: time per softirq run, in µs.
    pub napi_budget_us: f64,
    /// Linux without NAPI: the per-CPU backlog (`netdev_max_backlog`).
    pub backlog_limit: u32,
}

impl KernelCfg {
    /// The Linux receive and reclaim modes, from the preset or the explicit keys.
    pub fn linux_modes(&self) -> (bool, rxsched_core::TxReclaim) {
        let (mut napi, mut reclaim) = (false, "per-packet".to_string());
        if let Some(v) = &self.variant {
            if let Some((_, n, r)) = VARIANTS.iter().find(|(name, _, _)| name == v) {
                napi = *n;
                reclaim = r.to_string();
            }
        }
        if let Some(n) = self.napi {
            napi = n;
        }
        if let Some(r) = &self.tx_reclaim {
            reclaim = r.clone();
        }
        let reclaim =
            rxsched_core::TxReclaim::parse(&reclaim).unwrap_or(rxsched_core::TxReclaim::PerPacket);
        (napi, reclaim)
    }
}

impl Default for KernelCfg {
    fn default() -> Self {
        KernelCfg {
            kind: KernelKind::Bsd,
            ip_layer: IpLayer::Thread,
            quota: Quota::Limited(10),
            // 4.2BSD: IFQ_MAXLEN 50 for ipintrq and interface output queues.
            ipintrq_limit: 50,
            output_queue_limit: 50,
            screen_queue_limit: 32,
            // Mogul & Ramakrishnan 1996 §4.2: a delivery queue of 10 packets and 4 KB.
            socket_packets: 10,
            socket_bytes: 4096,
            feedback: FeedbackCfg::default(),
            cycle_limit: CycleLimitCfg::default(),
            breaker: BreakerCfg::default(),
            variant: None,
            napi: None,
            tx_reclaim: None,
            // Spanos et al. 2008: NAPI weight 32; Linux's budget of 300 packets or 2 ms.
            napi_weight: 32,
            napi_budget: 300,
            napi_budget_us: 2000.0,
            // Linux 2.6.9: netdev_max_backlog = 300.
            backlog_limit: 300,
        }
    }
}

/// The arrival process of a traffic source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TrafficKind {
    /// Evenly spaced packets.
    #[default]
    Constant,
    /// Exponential gaps.
    Poisson,
    /// Bursts of `burst` packets `spacing_us` apart, bursts `1/rate` apart.
    Burst,
}

/// `[[traffic]]`: a source of packets arriving on the input interface.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrafficCfg {
    /// The arrival process.
    pub kind: TrafficKind,
    /// Packets per second (bursts per second for `burst`); 0 sends nothing.
    pub rate_pps: f64,
    /// Frame size in bytes, Ethernet header and CRC included.
    pub frame_bytes: u32,
    /// Packets per burst.
    pub burst: u32,
    /// Gap between packets in a burst, in µs (0: back to back at line rate).
    pub spacing_us: f64,
    /// Stop after this many packets (0: no limit).
    pub count: u64,
    /// When the first packet starts, in µs.
    pub start_us: f64,
    /// The interface it arrives on (0 or 1); a router forwards to the other.
    pub port: u8,
}

impl Default for TrafficCfg {
    fn default() -> Self {
        TrafficCfg {
            kind: TrafficKind::Constant,
            rate_pps: 1000.0,
            frame_bytes: 64,
            burst: 1,
            spacing_us: 0.0,
            count: 0,
            start_us: 0.0,
            port: 0,
        }
    }
}

/// What a user process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessKind {
    /// A user-level filter every forwarded packet passes through.
    Screend,
    /// An application reading every packet from a UDP socket.
    Reader,
    /// A compute-bound process whose progress is measured.
    Compute,
}

impl ProcessKind {
    /// The name used for the process when it has none of its own.
    pub fn name(self) -> &'static str {
        match self {
            ProcessKind::Screend => "screend",
            ProcessKind::Reader => "reader",
            ProcessKind::Compute => "compute",
        }
    }
}

/// `[[process]]`: a user process.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessCfg {
    /// What it does.
    pub kind: ProcessKind,
    /// Its name in `cpu.user:<name>` (default: the kind).
    #[serde(default)]
    pub name: Option<String>,
    /// Scheduling priority: lower runs first (screend and readers 0, compute 1).
    #[serde(default)]
    pub priority: Option<u32>,
}

/// `[run]`: how long, and which seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunCfg {
    /// Measured interval, in ms.
    pub duration_ms: f64,
    /// Warm-up before measuring, in ms.
    pub warmup_ms: f64,
    /// The seed of the run's one RNG.
    pub seed: u64,
    /// User scheduling quantum, in ms.
    pub quantum_ms: f64,
}

impl Default for RunCfg {
    fn default() -> Self {
        RunCfg {
            duration_ms: 1000.0,
            warmup_ms: 100.0,
            seed: 1,
            quantum_ms: 10.0,
        }
    }
}

/// An axis of a figure: a metric and how to label it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// A field of the metrics record (dotted for nested ones, e.g. `cpu.user:compute`).
    pub metric: String,
    /// Axis label.
    pub label: String,
    /// Unit.
    #[serde(default)]
    pub unit: String,
}

/// How a figure's points are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FigureKind {
    /// One run per value of `vary`; a point is that run's metrics record.
    #[default]
    Sweep,
    /// One run per series; the points are the cumulative distribution of a sample.
    Cdf,
    /// One run per series; one point per packet of a burst.
    Burst,
    /// One RFC 2544 throughput search per value of `vary`: the highest
    /// per-source rate at which a trial loses nothing.
    Throughput,
}

/// An RFC 2544 throughput search: binary search on `traffic.rate_pps` (of
/// every source) between 0 and the line rate, with trials of fixed length.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchCfg {
    /// Stop when the bracket is narrower than this fraction of the line rate.
    pub resolution: f64,
    /// The length of one trial, in ms (after `run.warmup_ms`).
    pub trial_ms: f64,
}

impl Default for SearchCfg {
    fn default() -> Self {
        SearchCfg {
            resolution: 0.002,
            trial_ms: 100.0,
        }
    }
}

/// `[figure]`: how `reproduce` and `sweep` turn runs into a figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureCfg {
    /// How points are made.
    #[serde(default)]
    pub kind: FigureKind,
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The key a sweep varies (a `--set` key).
    #[serde(default)]
    pub vary: Option<String>,
    /// The values it takes.
    #[serde(default)]
    pub values: Vec<f64>,
    /// The values in `--quick` form (default: every other value).
    #[serde(default)]
    pub quick_values: Vec<f64>,
    /// Overrides applied in `--quick` form.
    #[serde(default)]
    pub quick_set: BTreeMap<String, toml::Value>,
    /// For `cdf`: which sample (`ipin_latency`, `latency`).
    #[serde(default)]
    pub sample: Option<String>,
    /// For `throughput`: the search.
    #[serde(default)]
    pub search: SearchCfg,
    /// Metrics to show as a table in the report, one row per point.
    #[serde(default)]
    pub table: Vec<String>,
    /// Where the plot's legend goes: `upper-right` (default), `upper-left`,
    /// `lower-right` or `lower-left`.
    #[serde(default)]
    pub legend: Option<String>,
}

/// `[[series]]`: one curve, as overrides of the base scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesCfg {
    /// The label, as result files and checks name it.
    pub label: String,
    /// Overrides of the base scenario.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
}

/// `[[reference]]`: published points drawn beside ours.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceCfg {
    /// The series they belong to.
    pub series: String,
    /// `[x, y]` pairs.
    pub points: Vec<[f64; 2]>,
    /// Where they come from.
    #[serde(default)]
    pub note: String,
    /// Multiply the published y values by this before drawing or comparing
    /// (e.g. to remove tracing overhead); the note must say why.
    #[serde(default)]
    pub scale: Option<f64>,
}

/// `[[check]]`: a verdict computed from the points.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckCfg {
    /// What it checks, in words.
    pub name: String,
    /// The rule (see the check module).
    pub kind: String,
    /// The series it looks at.
    #[serde(default)]
    pub series: Vec<String>,
    /// A second group of series, for comparisons.
    #[serde(default)]
    pub other: Vec<String>,
    /// The rule's threshold.
    #[serde(default)]
    pub min: Option<f64>,
    /// The rule's upper threshold.
    #[serde(default)]
    pub max: Option<f64>,
    /// Relative tolerance, for reference comparisons.
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// A point to look at (x value), or the lowest x a rule looks at.
    #[serde(default)]
    pub at: Option<f64>,
    /// The highest x a rule looks at.
    #[serde(default)]
    pub until: Option<f64>,
    /// Look at this metric instead of the figure's y.
    #[serde(default)]
    pub metric: Option<String>,
    /// A drop point, for rules about where packets were dropped.
    #[serde(default)]
    pub point: Option<String>,
}

/// A whole scenario file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Experiment id (for `reproduce`).
    #[serde(default)]
    pub id: Option<String>,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// The publication reproduced.
    #[serde(default)]
    pub source: Option<String>,
    /// The machine profile: a built-in name or a path.
    pub profile: String,
    /// Mechanisms.
    #[serde(default)]
    pub kernel: KernelCfg,
    /// Traffic sources.
    #[serde(default)]
    pub traffic: Vec<TrafficCfg>,
    /// User processes.
    #[serde(default)]
    pub process: Vec<ProcessCfg>,
    /// Run length and seed.
    #[serde(default)]
    pub run: RunCfg,
    /// Figure construction.
    #[serde(default)]
    pub figure: Option<FigureCfg>,
    /// Curves.
    #[serde(default)]
    pub series: Vec<SeriesCfg>,
    /// Published points.
    #[serde(default)]
    pub reference: Vec<ReferenceCfg>,
    /// Verdicts.
    #[serde(default)]
    pub check: Vec<CheckCfg>,
}

/// A scenario together with its source, so that later errors can name lines.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Where it came from.
    pub file: String,
    /// The directory relative paths resolve against.
    pub dir: Option<PathBuf>,
    /// The TOML text.
    pub src: String,
    /// The parsed tree, before overrides.
    pub tree: toml::Table,
    /// The parsed scenario, before overrides.
    pub scenario: Scenario,
}

impl Loaded {
    /// Parses scenario text.
    pub fn parse(file: &str, src: String, dir: Option<PathBuf>) -> Result<Loaded, InputError> {
        let tree: toml::Table = toml::from_str(&src).map_err(|e| from_toml(file, &src, &e))?;
        let scenario: Scenario = toml::from_str(&src).map_err(|e| from_toml(file, &src, &e))?;
        let l = Loaded {
            file: file.to_string(),
            dir,
            src,
            tree,
            scenario,
        };
        l.scenario.validate().map_err(|(k, m)| l.error(&k, m))?;
        Ok(l)
    }

    /// Reads and parses a scenario file.
    pub fn read(path: &Path) -> Result<Loaded, InputError> {
        let src = std::fs::read_to_string(path).map_err(|e| InputError {
            file: path.display().to_string(),
            line: None,
            key: None,
            msg: format!("cannot read scenario: {e}"),
        })?;
        Loaded::parse(
            &path.display().to_string(),
            src,
            path.parent().map(Path::to_path_buf),
        )
    }

    /// An error about `key`, with the line it is on if the file has it.
    pub fn error(&self, key: &str, msg: String) -> InputError {
        InputError {
            file: self.file.clone(),
            line: line_of(&self.src, key),
            key: Some(key.to_string()),
            msg,
        }
    }

    /// The scenario with overrides applied (in order) and validated.
    pub fn with(&self, sets: &[(String, toml::Value)]) -> Result<Scenario, InputError> {
        if sets.is_empty() {
            return Ok(self.scenario.clone());
        }
        let mut tree = self.tree.clone();
        for (k, v) in sets {
            set_path(&mut tree, k, v.clone()).map_err(|msg| InputError {
                file: "--set".into(),
                line: None,
                key: Some(k.clone()),
                msg,
            })?;
        }
        let keys: Vec<_> = sets.iter().map(|(k, _)| k.as_str()).collect();
        let s: Scenario =
            Scenario::deserialize(toml::Value::Table(tree)).map_err(|e| InputError {
                file: format!("{} with --set {}", self.file, keys.join(", ")),
                line: None,
                key: None,
                msg: e.message().trim().to_string(),
            })?;
        s.validate().map_err(|(k, msg)| {
            if let Some((sk, _)) = sets
                .iter()
                .rev()
                .find(|(sk, _)| k.starts_with(sk.as_str()) || sk.starts_with(&k))
            {
                InputError {
                    file: "--set".into(),
                    line: None,
                    key: Some(sk.clone()),
                    msg,
                }
            } else {
                self.error(&k, msg)
            }
        })?;
        Ok(s)
    }
}

/// Parses `key=value` as given to `--set`. The value is TOML (`5`, `"bsd"`,
/// `true`, `[1, 2]`), or a bare word taken as a string.
pub fn parse_set(s: &str) -> Result<(String, toml::Value), InputError> {
    let (k, v) = s.split_once('=').ok_or_else(|| InputError {
        file: "--set".into(),
        line: None,
        key: Some(s.to_string()),
        msg: "expected key=value".into(),
    })?;
    let v = v.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()));
    Ok((k.trim().to_string(), value))
}

/// Sets a dotted key in a TOML tree. A numeric part indexes an array; a key
/// under an array of tables without an index applies to every element.
pub fn set_path(tree: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err("empty part in key".into());
    }
    set_in(tree, &parts, value)
}

fn set_in(t: &mut toml::Table, parts: &[&str], value: toml::Value) -> Result<(), String> {
    let (head, rest) = (parts[0], &parts[1..]);
    if rest.is_empty() {
        t.insert(head.to_string(), value);
        return Ok(());
    }
    let entry = t
        .entry(head.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    match entry {
        toml::Value::Table(sub) => set_in(sub, rest, value),
        toml::Value::Array(arr) => {
            if let Ok(i) = rest[0].parse::<usize>() {
                let el = arr
                    .get_mut(i)
                    .ok_or_else(|| format!("`{head}` has no element {i}"))?;
                match (el, rest.len()) {
                    (el, 1) => {
                        *el = value;
                        Ok(())
                    }
                    (toml::Value::Table(sub), _) => set_in(sub, &rest[1..], value),
                    _ => Err(format!("`{head}.{i}` is not a table")),
                }
            } else {
                if arr.is_empty() {
                    arr.push(toml::Value::Table(toml::Table::new()));
                }
                for el in arr.iter_mut() {
                    match el {
                        toml::Value::Table(sub) => set_in(sub, rest, value.clone())?,
                        _ => return Err(format!("`{head}` is not an array of tables")),
                    }
                }
                Ok(())
            }
        }
        _ => Err(format!("`{head}` is a value, not a table")),
    }
}

/// The longest time any setting may name, in µs: 1,000 s of virtual time.
const MAX_US: f64 = 1e9;

fn positive(v: f64) -> bool {
    v.is_finite() && v > 0.0 && v <= MAX_US
}

impl Scenario {
    /// Checks ranges; on failure returns the dotted key and the reason.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        let k = &self.kernel;
        for (key, v) in [
            ("kernel.ipintrq_limit", k.ipintrq_limit),
            ("kernel.output_queue_limit", k.output_queue_limit),
            ("kernel.screen_queue_limit", k.screen_queue_limit),
            ("kernel.socket_packets", k.socket_packets),
            ("kernel.socket_bytes", k.socket_bytes),
        ] {
            if v == 0 {
                return err(key, "a queue must hold at least one packet");
            }
        }
        let f = &k.feedback;
        for (key, v) in [
            ("kernel.feedback.high_pct", f.high_pct),
            ("kernel.feedback.low_pct", f.low_pct),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return err(key, "a watermark is a percentage from 0 to 100");
            }
        }
        if f.low_pct >= f.high_pct {
            return err(
                "kernel.feedback.low_pct",
                "the low watermark must be below the high one",
            );
        }
        if f.min_free >= k.screen_queue_limit && f.min_free > 0 {
            return err("kernel.feedback.min_free", "must be smaller than the queue");
        }
        if !positive(f.timeout_us) {
            return err(
                "kernel.feedback.timeout_us",
                "must be a positive time of at most 1e9 µs",
            );
        }
        let c = &k.cycle_limit;
        if !(c.percent > 0.0 && c.percent <= 100.0) {
            return err("kernel.cycle_limit.percent", "must be in (0, 100]");
        }
        if !positive(c.period_us) {
            return err(
                "kernel.cycle_limit.period_us",
                "must be a positive time of at most 1e9 µs",
            );
        }
        if let Some(v) = &k.variant {
            if !VARIANTS.iter().any(|(n, _, _)| n == v) {
                let names: Vec<_> = VARIANTS.iter().map(|(n, _, _)| *n).collect();
                return err(
                    "kernel.variant",
                    &format!("unknown variant {v:?}; known: {}", names.join(", ")),
                );
            }
        }
        if let Some(r) = &k.tx_reclaim {
            if rxsched_core::TxReclaim::parse(r).is_none() {
                return err(
                    "kernel.tx_reclaim",
                    "must be per-packet, every-N (N >= 1) or before-send",
                );
            }
        }
        if k.napi_weight == 0 || k.napi_budget == 0 {
            return err(
                "kernel.napi_weight",
                "NAPI weight and budget must be at least 1",
            );
        }
        if !positive(k.napi_budget_us) {
            return err(
                "kernel.napi_budget_us",
                "must be a positive time of at most 1e9 µs",
            );
        }
        if k.backlog_limit == 0 {
            return err(
                "kernel.backlog_limit",
                "a queue must hold at least one packet",
            );
        }
        if let Some(f) = &self.figure {
            if let Some(l) = &f.legend {
                if !["upper-right", "upper-left", "lower-right", "lower-left"].contains(&l.as_str())
                {
                    return err(
                        "figure.legend",
                        "must be upper-right, upper-left, lower-right or lower-left",
                    );
                }
            }
            let r = f.search.resolution;
            if !(r > 0.0 && r < 1.0) {
                return err(
                    "figure.search.resolution",
                    "must be a fraction of the line rate in (0, 1)",
                );
            }
            if !positive(f.search.trial_ms * 1e3) {
                return err(
                    "figure.search.trial_ms",
                    "must be a positive time of at most 1e6 ms",
                );
            }
        }
        if k.breaker.batch == 0 {
            return err("kernel.breaker.batch", "must be at least 1");
        }
        if !positive(k.breaker.off_us) {
            return err(
                "kernel.breaker.off_us",
                "must be a positive time of at most 1e9 µs",
            );
        }
        if self.traffic.len() > 16 {
            return err("traffic", "at most 16 traffic sources");
        }
        for (i, t) in self.traffic.iter().enumerate() {
            if !(t.rate_pps.is_finite() && t.rate_pps >= 0.0) {
                return err(
                    &format!("traffic.{i}.rate_pps"),
                    "must not be negative (0: no traffic)",
                );
            }
            if t.frame_bytes < 14 || t.frame_bytes > 65_535 {
                return err(
                    &format!("traffic.{i}.frame_bytes"),
                    "must be between 14 and 65535",
                );
            }
            if t.burst == 0 {
                return err(&format!("traffic.{i}.burst"), "must be at least 1");
            }
            if !(t.spacing_us >= 0.0 && t.spacing_us <= MAX_US) {
                return err(
                    &format!("traffic.{i}.spacing_us"),
                    "must be from 0 to 1e9 µs",
                );
            }
            if !(t.start_us >= 0.0 && t.start_us <= MAX_US) {
                return err(&format!("traffic.{i}.start_us"), "must be from 0 to 1e9 µs");
            }
            if t.port > 1 {
                return err(&format!("traffic.{i}.port"), "a host has ports 0 and 1");
            }
            if t.port == 1 && self.process.iter().any(|p| p.kind == ProcessKind::Reader) {
                return err(
                    &format!("traffic.{i}.port"),
                    "a receiving host (with a reader) has only port 0",
                );
            }
        }
        let consumers = self
            .process
            .iter()
            .filter(|p| matches!(p.kind, ProcessKind::Screend | ProcessKind::Reader))
            .count();
        if consumers > 1 {
            return err("process", "at most one screend or reader process");
        }
        let r = &self.run;
        if !positive(r.duration_ms * 1e3) {
            return err(
                "run.duration_ms",
                "must be a positive time of at most 1e6 ms",
            );
        }
        if !(r.warmup_ms >= 0.0 && r.warmup_ms * 1e3 <= MAX_US) {
            return err("run.warmup_ms", "must be from 0 to 1e6 ms");
        }
        if !positive(r.quantum_ms * 1e3) {
            return err(
                "run.quantum_ms",
                "must be a positive time of at most 1e6 ms",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(src: &str) -> Result<Loaded, InputError> {
        Loaded::parse("t.toml", src.to_string(), None)
    }

    #[test]
    fn unknown_key_is_an_error_with_line() {
        let e = load("profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\nquotta = 5\n")
            .unwrap_err();
        assert_eq!(e.line, Some(4));
        assert_eq!(e.key.as_deref(), Some("quotta"));
        assert!(e.to_string().starts_with("t.toml:4: key `quotta`"), "{e}");
    }

    #[test]
    fn out_of_range_values_name_line_and_key() {
        let e = load("profile = \"x\"\n[[traffic]]\nrate_pps = -5\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("traffic.0.rate_pps"))
        );
        let e = load("profile = \"x\"\n[kernel]\nipintrq_limit = 0\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("kernel.ipintrq_limit"))
        );
        let e = load("profile = \"x\"\n[kernel.feedback]\nhigh_pct = 120\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("kernel.feedback.high_pct"))
        );
    }

    #[test]
    fn malformed_toml_names_line() {
        let e = load("profile = \"x\"\n[kernel\nkind = 1\n").unwrap_err();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn overrides_apply_and_validate() {
        let l = load("profile = \"x\"\n[[traffic]]\nrate_pps = 5\n").unwrap();
        let s = l
            .with(&[parse_set("traffic.rate_pps=700").unwrap()])
            .unwrap();
        assert_eq!(s.traffic[0].rate_pps, 700.0);
        let s = l
            .with(&[parse_set("kernel.quota=unlimited").unwrap()])
            .unwrap();
        assert_eq!(s.kernel.quota, Quota::Unlimited);
        let e = l.with(&[parse_set("kernel.quota=0").unwrap()]).unwrap_err();
        assert!(e.msg.contains("quota"), "{e}");
        let e = l
            .with(&[parse_set("traffic.0.rate_pps=-1").unwrap()])
            .unwrap_err();
        assert_eq!(e.file, "--set");
        let e = l
            .with(&[parse_set("run.duration_ms=1e300").unwrap()])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("run.duration_ms"));
        let e = l
            .with(&[parse_set("kernel.breaker.off_us=nan").unwrap()])
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("kernel.breaker.off_us"));
        let e = l.with(&[parse_set("kernel.nope=1").unwrap()]).unwrap_err();
        assert!(e.msg.contains("nope"), "{e}");
    }
}
