//! The pages: each command's counters as metrics families (see the
//! README's list), from its report and what the report does not hold.

use crate::router::RouterReport;
use crate::sys::SysResult;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
/// Labels as name-value pairs.
type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A family of counters, set to the given values.
fn counters(r: &mut Registry, name: &str, help: &str, values: &[(Labels, u64)]) {
    let f = Family::<Labels, Counter>::default();
    for (l, v) in values {
        f.get_or_create(l).inc_by(*v);
    }
    r.register(name, help, f);
}

fn counter(r: &mut Registry, name: &str, help: &str, v: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(v);
    r.register(name, help, c);
}

fn gauge(r: &mut Registry, name: &str, help: &str, v: f64) {
    let g = Gauge::<f64, AtomicU64>::default();
    g.set(v);
    r.register(name, help, g);
}

/// What a router's page holds beyond its report: its ports' device
/// counters and its threads' CPU time.
#[derive(Debug, Clone, Default)]
pub struct RouterExtras {
    /// Per port: frames and bytes received and sent, as the device counts
    /// them (`/proc/net/dev`).
    pub ports: Vec<(String, PortCounts)>,
    /// CPU seconds of the polling thread and of the receive threads.
    pub cpu_s: Vec<(&'static str, f64)>,
    /// Per receive side: its port, its queue (or `protected`), and the
    /// frames its NIC ring (`nic_rx_ring`) and its socket's ring
    /// (`xsk_rx_ring`) dropped.
    pub rings: Vec<(String, String, u64, u64)>,
    /// Frames and bytes taken off each receive side.
    pub queues: Vec<crate::router::QueueTaken>,
    /// The quota given (frames per callback), if limited.
    pub quota: Option<u32>,
    /// M4's share given, if on.
    pub cycle_limit: Option<f64>,
    /// Input control now: held off, and by what (M3's queue feedback,
    /// M4's cycle limit, ...), or `None` while input runs.
    pub inhibited: Option<rxsched_core::InhibitCause>,
    /// With M4: what is left of this period's share, in ns.
    pub cycle_headroom_ns: Option<u64>,
}

/// One device's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

impl RouterExtras {
    /// The device counters of `ports` now.
    pub fn read_ports(ports: &[String]) -> SysResult<Vec<(String, PortCounts)>> {
        let text = crate::sys::net_dev("metrics")?;
        let get = |p: &str, c: &str| crate::sys::dev_counter(&text, p, c).unwrap_or(0);
        Ok(ports
            .iter()
            .map(|p| {
                let c = PortCounts {
                    rx_frames: get(p, "rx_packets"),
                    rx_bytes: get(p, "rx_bytes"),
                    tx_frames: get(p, "tx_packets"),
                    tx_bytes: get(p, "tx_bytes"),
                };
                (p.clone(), c)
            })
            .collect())
    }
}

/// A router's page: its report's counters as metrics (see the README's
/// list), and `extra`.
pub fn router_page(r: &RouterReport, extra: &RouterExtras) -> String {
    let mut reg = Registry::default();
    let g = &mut reg;
    counter(
        g,
        "rxsched_frames_received",
        "Frames the router took off its receive rings",
        r.rx,
    );
    counter(
        g,
        "rxsched_frames_forwarded",
        "Frames the router's output devices took",
        r.forwarded,
    );
    dropped_by_side(g, &r.drops, &extra.rings);
    let side = |q: &crate::router::QueueTaken| labels(&[("port", &q.port), ("queue", &q.queue)]);
    let frames: Vec<_> = extra.queues.iter().map(|q| (side(q), q.frames)).collect();
    let bytes: Vec<_> = extra.queues.iter().map(|q| (side(q), q.bytes)).collect();
    counters(
        g,
        "rxsched_queue_frames_received",
        "Frames the router took off each receive queue",
        &frames,
    );
    counters(
        g,
        "rxsched_queue_bytes_received",
        "Bytes of the frames the router took off each receive queue",
        &bytes,
    );
    let refused: Vec<_> = crate::router::REASONS
        .iter()
        .map(|p| {
            (
                labels(&[("reason", p.name())]),
                r.drops.get(p).copied().unwrap_or(0),
            )
        })
        .collect();
    counters(
        g,
        "rxsched_frames_refused",
        "Frames refused as malformed or unroutable, by reason",
        &refused,
    );
    let stack: Vec<_> = r
        .to_stack
        .iter()
        .map(|(o, n)| {
            let name = serde_json::to_value(o).ok();
            let name = name.as_ref().and_then(|v| v.as_str()).unwrap_or("other");
            (labels(&[("reason", name)]), *n)
        })
        .collect();
    counters(
        g,
        "rxsched_frames_to_stack",
        "Frames the devices' program handed to the host's stack, by reason",
        &stack,
    );
    policy(g, &r.inhibits, r.mode_switches);
    gauge(
        g,
        "rxsched_frames_in_flight",
        "Frames inside the router now",
        r.in_flight as f64,
    );
    port_counters(g, &extra.ports);
    let cpu = Family::<Labels, Counter<f64, AtomicU64>>::default();
    for (thread, s) in &extra.cpu_s {
        cpu.get_or_create(&labels(&[("thread", thread)])).inc_by(*s);
    }
    g.register(
        "rxsched_cpu_seconds",
        "CPU time of the router's threads (rate() gives the CPU share)",
        cpu,
    );
    let quota = r.slo.as_ref().map(|s| s.quota).or(extra.quota);
    if let Some(q) = quota {
        gauge(
            g,
            "rxsched_quota",
            "Frames per callback (as an objective set it, if one did)",
            f64::from(q),
        );
    }
    let limit = r.slo.as_ref().map(|s| s.cycle_limit).or(extra.cycle_limit);
    if let Some(l) = limit {
        gauge(
            g,
            "rxsched_cycle_limit_share",
            "M4's share of each period (as an objective set it, if one did)",
            l,
        );
    }
    let cause = extra.inhibited.map_or("none".to_string(), |c| {
        serde_json::to_value(c)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "other".into())
    });
    let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    f.get_or_create(&labels(&[("cause", &cause)]))
        .set(f64::from(u8::from(extra.inhibited.is_some())));
    g.register(
        "rxsched_input_inhibited",
        "1 while input is held off (M3, M4), with the cause; 0 with cause none",
        f,
    );
    if let Some(h) = extra.cycle_headroom_ns {
        gauge(
            g,
            "rxsched_cycle_limit_headroom_seconds",
            "M4: what is left of this period's share of the CPU",
            h as f64 / 1e9,
        );
    }
    if let Some(t) = &r.two_level {
        let polling = t.service == rxsched_core::Service::Polling;
        gauge(
            g,
            "rxsched_polling",
            "1 while a polling thread services the devices (two-level)",
            f64::from(u8::from(polling)),
        );
    }
    if let Some(p) = &r.protected {
        counter(
            g,
            "rxsched_protected_frames",
            "Protected frames taken off the protected queues and sockets",
            p.taken,
        );
    }
    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}

/// A monitor's page (`capture --metrics`): what it read, wrote and
/// dropped, by point and by filter rule, and its device's counters.
pub fn capture_page(r: &crate::capture::CaptureReport, iface: &str) -> String {
    let mut reg = Registry::default();
    let g = &mut reg;
    counter(
        g,
        "rxsched_frames_received",
        "Frames (or copies) the monitor read off its ring",
        r.rx,
    );
    counter(
        g,
        "rxsched_frames_written",
        "Frames written to the capture file",
        r.written,
    );
    counter(
        g,
        "rxsched_bytes_written",
        "Bytes of frame data written (after the snap length)",
        r.bytes_written,
    );
    dropped(g, &r.drops);
    let filtered: Vec<_> = r
        .filtered
        .iter()
        .map(|(rule, n)| (labels(&[("rule", rule)]), *n))
        .collect();
    counters(
        g,
        "rxsched_frames_filtered",
        "Frames the filter refused, by the rule that refused them",
        &filtered,
    );
    policy(g, &r.inhibits, r.mode_switches);
    gauge(
        g,
        "rxsched_frames_in_flight",
        "Frames read and not yet written",
        r.in_flight as f64,
    );
    cpu_seconds(g, &[("polling".to_string(), r.cpu_s)]);
    finish(reg, iface)
}

/// A router's drops by point, the rings' by port and queue too
/// (`{point="nic_rx_ring",port="d0",queue="0"}`): each drop is in one
/// sample, so a sum over the family is every drop.
fn dropped_by_side(
    g: &mut Registry,
    drops: &std::collections::BTreeMap<rxsched_core::DropPoint, u64>,
    rings: &[(String, String, u64, u64)],
) {
    use rxsched_core::DropPoint::{NicRxRing, XskRxRing};
    let mut samples = Vec::new();
    for (p, n) in drops {
        if rings.is_empty() || !matches!(p, NicRxRing | XskRxRing) {
            samples.push((labels(&[("point", p.name())]), *n));
        }
    }
    for (port, queue, ring, sock) in rings {
        for (p, n) in [(NicRxRing, *ring), (XskRxRing, *sock)] {
            if n > 0 || drops.contains_key(&p) {
                let l = [("point", p.name()), ("port", port), ("queue", queue)];
                samples.push((labels(&l), n));
            }
        }
    }
    counters(
        g,
        "rxsched_frames_dropped",
        "Frames dropped, by drop point (the rings' by port and queue; refusals among them)",
        &samples,
    );
}

/// Frames dropped, by drop point (refusals among them, for a router).
fn dropped(g: &mut Registry, drops: &std::collections::BTreeMap<rxsched_core::DropPoint, u64>) {
    let drops: Vec<_> = drops
        .iter()
        .map(|(p, n)| (labels(&[("point", p.name())]), *n))
        .collect();
    counters(
        g,
        "rxsched_frames_dropped",
        "Frames dropped, by drop point",
        &drops,
    );
}

/// The policy's own counters: input inhibits by cause, mode switches.
fn policy(
    g: &mut Registry,
    inhibits: &std::collections::BTreeMap<rxsched_core::InhibitCause, u64>,
    mode_switches: u64,
) {
    let inhibits: Vec<_> = inhibits
        .iter()
        .map(|(c, n)| (labels(&[("cause", c.name())]), *n))
        .collect();
    counters(
        g,
        "rxsched_input_inhibits",
        "Input-inhibit episodes, by cause",
        &inhibits,
    );
    counter(
        g,
        "rxsched_mode_switches",
        "Switches between interrupt and polling service",
        mode_switches,
    );
}

/// Per port: the device's frames and bytes each way.
fn port_counters(g: &mut Registry, ports: &[(String, PortCounts)]) {
    let mut frames = Vec::new();
    let mut bytes = Vec::new();
    for (p, c) in ports {
        for (dir, f, b) in [
            ("rx", c.rx_frames, c.rx_bytes),
            ("tx", c.tx_frames, c.tx_bytes),
        ] {
            frames.push((labels(&[("port", p), ("direction", dir)]), f));
            bytes.push((labels(&[("port", p), ("direction", dir)]), b));
        }
    }
    counters(
        g,
        "rxsched_port_frames",
        "Frames the port's device received and sent (its own counters)",
        &frames,
    );
    counters(
        g,
        "rxsched_port_bytes",
        "Bytes the port's device received and sent (its own counters)",
        &bytes,
    );
}

/// A server's page (`serve --metrics`): what arrived and where it went,
/// and each consumer's share, by consumer name.
pub fn serve_page(r: &crate::srp::ServeReport, iface: &str) -> String {
    let mut reg = Registry::default();
    let g = &mut reg;
    counter(
        g,
        "rxsched_frames_received",
        "Frames the demultiplexer took",
        r.rx,
    );
    counter(
        g,
        "rxsched_frames_to_stack",
        "Frames left to the host's stack (no consumer owns them)",
        r.to_stack,
    );
    dropped(g, &r.drops);
    let per = |f: &dyn Fn(&crate::srp::ConsumerReport) -> u64| -> Vec<(Labels, u64)> {
        r.consumers
            .iter()
            .map(|c| (labels(&[("consumer", &c.name)]), f(c)))
            .collect()
    };
    counters(
        g,
        "rxsched_consumer_datagrams",
        "Datagrams each consumer received",
        &per(&|c| c.received),
    );
    counters(
        g,
        "rxsched_consumer_bytes",
        "Payload bytes each consumer received",
        &per(&|c| c.bytes),
    );
    counters(
        g,
        "rxsched_consumer_dropped",
        "Datagrams dropped at each consumer's queue (its channel or UIQ)",
        &per(&|c| c.uiq_drops),
    );
    counters(
        g,
        "rxsched_consumer_bad_checksum",
        "Datagrams each consumer found corrupt",
        &per(&|c| c.bad_checksum),
    );
    let mut threads = vec![("polling".to_string(), r.cpu_s)];
    threads.extend(
        r.consumers
            .iter()
            .map(|c| (format!("consumer:{}", c.name), c.cpu_s)),
    );
    cpu_seconds(g, &threads);
    finish(reg, iface)
}

/// CPU seconds by thread.
fn cpu_seconds(g: &mut Registry, threads: &[(String, f64)]) {
    let cpu = Family::<Labels, Counter<f64, AtomicU64>>::default();
    for (t, s) in threads {
        cpu.get_or_create(&labels(&[("thread", t)])).inc_by(*s);
    }
    g.register(
        "rxsched_cpu_seconds",
        "CPU time of the command's threads (rate() gives the CPU share)",
        cpu,
    );
}

/// `iface`'s device counters added, the page written out.
fn finish(mut reg: Registry, iface: &str) -> String {
    if let Ok(ports) = RouterExtras::read_ports(&[iface.to_string()]) {
        port_counters(&mut reg, &ports);
    }
    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::{router_page, RouterExtras};
    /// The page says where input control stands and what each queue took,
    /// in Prometheus' text format.
    #[test]
    fn the_router_page_shows_input_control_and_queues() {
        use crate::router::{Counters, Mode, QueueTaken, RouterReport};
        let r = RouterReport::new(Mode::Polling, &Counters::default(), 0, 0);
        let extra = RouterExtras {
            queues: vec![QueueTaken {
                port: "d0".into(),
                queue: "1".into(),
                frames: 7,
                bytes: 448,
            }],
            cycle_limit: Some(0.5),
            inhibited: Some(rxsched_core::InhibitCause::CycleLimit),
            cycle_headroom_ns: Some(0),
            ..RouterExtras::default()
        };
        let page = router_page(&r, &extra);
        for line in [
            "rxsched_input_inhibited{cause=\"cycle_limit\"} 1",
            "rxsched_cycle_limit_headroom_seconds 0",
            "rxsched_queue_frames_received_total{port=\"d0\",queue=\"1\"} 7",
            "rxsched_queue_bytes_received_total{port=\"d0\",queue=\"1\"} 448",
        ] {
            assert!(
                page.lines().any(|l| l.starts_with(line)),
                "no {line} in\n{page}"
            );
        }
        let running = router_page(&r, &RouterExtras::default());
        assert!(
            running.contains("rxsched_input_inhibited{cause=\"none\"} 0"),
            "{running}"
        );
    }
}
