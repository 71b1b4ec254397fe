//! `route --metrics` and `capture --metrics`: the Prometheus page, as
//! Prometheus' own Python client library parses it, holds the command's
//! counters, frame for frame what its JSON report says at the end.

use super::*;

/// Scrapes `http://127.0.0.1:PORT/metrics` from the DUT's namespace with
/// `prometheus_client`'s OpenMetrics parser: every sample as
/// `name -> [(labels, value)]`.
fn scrape(l: &Lab, py: &str, port: u16) -> Result<serde_json::Value, String> {
    let script = format!(
        "import json, urllib.request\n\
         from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
         page = urllib.request.urlopen('http://127.0.0.1:{port}/metrics', timeout=5).read().decode()\n\
         out = {{}}\n\
         for fam in text_string_to_metric_families(page):\n\
         \x20   for s in fam.samples:\n\
         \x20       out.setdefault(s.name, []).append([s.labels, s.value])\n\
         print(json.dumps(out))\n"
    );
    let o = Command::new("ip")
        .args(["netns", "exec", &l.ns(Role::Dut), py, "-c", &script])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "the scrape failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    serde_json::from_slice(&o.stdout).map_err(|e| format!("the parser's output: {e}"))
}

/// A sample's value: `name` with `labels` (all of them), if there is one.
fn sample(page: &serde_json::Value, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
    page.get(name)?.as_array()?.iter().find_map(|s| {
        let have = s.get(0)?.as_object()?;
        let all = have.len() == labels.len()
            && labels
                .iter()
                .all(|(k, v)| have.get(*k).and_then(|x| x.as_str()) == Some(*v));
        all.then(|| s.get(1)?.as_f64().map(|v| v as u64))?
    })
}

/// The sum of `name`'s samples with the label `(key, value)`, whatever
/// their other labels; `None` if there is none.
fn sum_over(page: &serde_json::Value, name: &str, (key, value): (&str, &str)) -> Option<u64> {
    let mine: Vec<u64> = page
        .get(name)?
        .as_array()?
        .iter()
        .filter(|s| s.get(0).and_then(|l| l.get(key)).and_then(|v| v.as_str()) == Some(value))
        .filter_map(|s| s.get(1)?.as_f64().map(|v| v as u64))
        .collect();
    (!mine.is_empty()).then(|| mine.iter().sum())
}

/// A Python that has `prometheus_client` (Debian's package goes to the
/// system's Python, which another on the PATH may hide).
fn python() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import prometheus_client.openmetrics.parser"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// The Python with the client, or `None` (having said what the test
/// skipped, or failing under `RXSCHED_REQUIRE_TOOLS=1`).
fn client() -> Option<&'static str> {
    let py = python();
    let here = rxsched_linux::needs::check(
        py.is_some(),
        "Python's prometheus_client",
        "python3-prometheus-client",
    );
    py.filter(|_| here)
}

/// Samples of a page checked against a report's counts.
struct Against<'a> {
    page: &'a serde_json::Value,
    wrong: Vec<String>,
}

impl Against<'_> {
    /// `name` with `labels` should be `v`.
    fn want(&mut self, name: &str, labels: &[(&str, &str)], v: u64) {
        let got = sample(self.page, name, labels);
        if got != Some(v) {
            self.wrong
                .push(format!("{name}{labels:?}: page {got:?}, report {v}"));
        }
    }
}

#[test]
fn route_serves_its_counters_to_a_prometheus_client() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(py) = client() else { return };
    let Some(t) = TestLab::new("m") else { return };
    let l = &t.0;
    trials(3, "metrics frame for frame", || {
        let port = 9464;
        let addr = format!("127.0.0.1:{port}");
        let route = start(
            l,
            Role::Dut,
            &[
                "route",
                "--mode",
                "polling",
                "--metrics",
                &addr,
                "--duration",
                "6",
            ],
        );
        // During traffic the page moves; once it has stopped (and the
        // page has been refreshed) it holds what the report will say.
        let during = scrape(l, py, port);
        send(l, 20_000, &[]);
        std::thread::sleep(Duration::from_millis(800));
        let page = scrape(l, py, port);
        stop(&route);
        let r: RouterReport = report(route);
        let (during, page) = (during?, page?);
        let got = |name: &str, labels: &[(&str, &str)]| sample(&page, name, labels);
        let mut a = Against {
            page: &page,
            wrong: Vec::new(),
        };
        a.want("rxsched_frames_received_total", &[], r.rx);
        a.want("rxsched_frames_forwarded_total", &[], r.forwarded);
        // Frames and bytes by port and queue: each as the report has it,
        // and together every frame received.
        for q in &r.received_by_queue {
            let side = [("port", q.port.as_str()), ("queue", q.queue.as_str())];
            a.want("rxsched_queue_frames_received_total", &side, q.frames);
            a.want("rxsched_queue_bytes_received_total", &side, q.bytes);
        }
        let by_queue: u64 = r.received_by_queue.iter().map(|q| q.frames).sum();
        if by_queue != r.rx || r.received_by_queue.is_empty() {
            a.wrong.push(format!(
                "by queue {:?} add up to {by_queue}, not the {} received",
                r.received_by_queue, r.rx
            ));
        }
        // Each point's samples (the rings' one per port and queue) add up
        // to the report's count, and the rings' name d0's queue 0.
        for (p, n) in &r.drops {
            let sum = sum_over(&page, "rxsched_frames_dropped_total", ("point", p.name()));
            if sum != Some(*n) {
                a.wrong
                    .push(format!("dropped at {p}: page {sum:?}, report {n}"));
            }
        }
        let d0 = [("point", "nic_rx_ring"), ("port", "d0"), ("queue", "0")];
        if sample(&page, "rxsched_frames_dropped_total", &d0).is_none() {
            a.wrong
                .push("no nic_rx_ring sample for d0's queue 0".into());
        }
        for (c, n) in &r.inhibits {
            a.want("rxsched_input_inhibits_total", &[("cause", c.name())], *n);
        }
        a.want("rxsched_mode_switches_total", &[], r.mode_switches);
        // The devices' own counters (kept since the device was made) rose
        // with the traffic: d0 received about what the router took, d1
        // sent about what it forwarded (veth's count of the frames its XDP
        // program redirected need not be the router's to the frame).
        let rose = |port: &str, dir: &str| {
            let l = [("port", port), ("direction", dir)];
            let before = sample(&during, "rxsched_port_frames_total", &l).unwrap_or(0);
            got("rxsched_port_frames_total", &l).map(|v| v.saturating_sub(before))
        };
        let (d0, d1) = (rose("d0", "rx"), rose("d1", "tx"));
        let near = |v: Option<u64>, n: u64| v.is_some_and(|v| v as f64 >= 0.99 * n as f64);
        let devices_ok = near(d0, r.rx) && near(d1, r.forwarded);
        let cpu = page
            .get("rxsched_cpu_seconds_total")
            .and_then(|v| v.as_array())
            .map_or(0, |a| a.len());
        let saw = format!(
            "received {} forwarded {} (report), page before the traffic had {} families, after {}; devices during the run: d0 rx {d0:?}, d1 tx {d1:?}; {cpu} CPU samples; mismatches: {:?}",
            r.rx,
            r.forwarded,
            during.as_object().map_or(0, |o| o.len()),
            page.as_object().map_or(0, |o| o.len()),
            a.wrong,
        );
        // Every frame sent reached the router (a trial where some did not,
        // e.g. the virtual CPU stalled while they were sent, is tried again).
        if r.rx >= 20_000 && a.wrong.is_empty() && devices_ok && cpu == 2 {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}

/// `route --cpus 1,1 --metrics`: two polling threads, one page, the
/// whole router's: every frame received, forwarded, dropped and taken by
/// queue, as the report says at the end.
#[test]
fn a_router_of_two_threads_serves_one_page() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(py) = client() else { return };
    let Some(t) = TestLab::with_queues("k", 2) else {
        return;
    };
    let l = &t.0;
    trials(3, "two threads' metrics frame for frame", || {
        let port = 9466;
        let addr = format!("127.0.0.1:{port}");
        let route = start(
            l,
            Role::Dut,
            &[
                "route",
                "--cpus",
                "1,1",
                "--metrics",
                &addr,
                "--duration",
                "8",
            ],
        );
        // The generator on CPU 0 fills queue 0, on CPU 1 queue 1.
        send(l, 10_000, &["--cpu", "0"]);
        send(l, 10_000, &["--cpu", "1"]);
        std::thread::sleep(Duration::from_millis(800));
        let page = scrape(l, py, port);
        stop(&route);
        let r: RouterReport = report(route);
        let page = page?;
        let mut a = Against {
            page: &page,
            wrong: Vec::new(),
        };
        a.want("rxsched_frames_received_total", &[], r.rx);
        a.want("rxsched_frames_forwarded_total", &[], r.forwarded);
        for q in &r.received_by_queue {
            let side = [("port", q.port.as_str()), ("queue", q.queue.as_str())];
            a.want("rxsched_queue_frames_received_total", &side, q.frames);
        }
        let by_queue: u64 = r.received_by_queue.iter().map(|q| q.frames).sum();
        if by_queue != r.rx {
            a.wrong
                .push(format!("by queue {by_queue}, received {}", r.rx));
        }
        for (p, n) in &r.drops {
            let sum = sum_over(&page, "rxsched_frames_dropped_total", ("point", p.name()));
            if sum != Some(*n) {
                a.wrong
                    .push(format!("dropped at {p}: page {sum:?}, report {n}"));
            }
        }
        let taken: Vec<u64> = r.threads.iter().map(|t| t.taken).collect();
        let saw = format!(
            "received {} forwarded {}; threads took {taken:?}; by queue {:?}; mismatches {:?}",
            r.rx, r.forwarded, r.received_by_queue, a.wrong
        );
        assert_eq!(r.threads.len(), 2, "{saw}");
        if a.wrong.is_empty() && r.rx >= 19_000 && taken.iter().all(|&t| t > 0) {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}

#[test]
fn capture_serves_its_counters_to_a_prometheus_client() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(py) = client() else { return };
    let Some(t) = TestLab::new("n") else { return };
    let l = &t.0;
    let dir = std::env::temp_dir().join(format!("rxsched-capmetrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("f.rules");
    // The probes to port 9002 refused by the filter's first rule.
    std::fs::write(&rules, "deny proto udp dport 9002\naccept\n").unwrap();
    let file = dir.join("d0.pcap");
    trials(3, "capture metrics frame for frame", || {
        let port = 9465;
        let addr = format!("127.0.0.1:{port}");
        let cap = start(
            l,
            Role::Dut,
            &[
                "capture",
                "-i",
                "d0",
                "-w",
                file.to_str().unwrap(),
                "--filter",
                rules.to_str().unwrap(),
                "--metrics",
                &addr,
                "--duration",
                "5",
            ],
        );
        send(l, 1000, &[]);
        send(l, 1000, &["--dport", "9002"]);
        std::thread::sleep(Duration::from_millis(800));
        let page = scrape(l, py, port);
        // Stopped at once: a frame of the lab's own (an ARP request) that
        // comes after the scrape would be in the report and not the page.
        stop(&cap);
        let r: rxsched_linux::capture::CaptureReport = report(cap);
        let page = page?;
        let mut a = Against {
            page: &page,
            wrong: Vec::new(),
        };
        a.want("rxsched_frames_received_total", &[], r.rx);
        a.want("rxsched_frames_written_total", &[], r.written);
        a.want("rxsched_bytes_written_total", &[], r.bytes_written);
        for (p, n) in &r.drops {
            a.want("rxsched_frames_dropped_total", &[("point", p.name())], *n);
        }
        for (rule, n) in &r.filtered {
            a.want("rxsched_frames_filtered_total", &[("rule", rule)], *n);
        }
        let saw = format!(
            "read {} written {} filtered {:?} (report); mismatches: {:?}",
            r.rx, r.written, r.filtered, a.wrong
        );
        assert!(r.rx >= 2000, "{saw}");
        let refused: u64 = r.filtered.values().sum();
        if a.wrong.is_empty() && refused >= 990 {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_serves_its_counters_to_a_prometheus_client() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(py) = client() else { return };
    let Some(t) = TestLab::new("o") else { return };
    let l = &t.0;
    trials(3, "serve metrics frame for frame", || {
        let port = 9466;
        let addr = format!("127.0.0.1:{port}");
        let srv = start(
            l,
            Role::Dut,
            &[
                "serve",
                "-i",
                "d0",
                "--consumer",
                "7001:flooded",
                "--consumer",
                "7002:modest",
                "--metrics",
                &addr,
                "--duration",
                "20",
            ],
        );
        send(l, 1000, &["--dport", "7001"]);
        send(l, 500, &["--dport", "7002"]);
        std::thread::sleep(Duration::from_millis(800));
        let page = scrape(l, py, port);
        stop(&srv);
        let r: ServeReport = report(srv);
        let page = page?;
        let mut a = Against {
            page: &page,
            wrong: Vec::new(),
        };
        a.want("rxsched_frames_received_total", &[], r.rx);
        for c in &r.consumers {
            let who = [("consumer", c.name.as_str())];
            a.want("rxsched_consumer_datagrams_total", &who, c.received);
            a.want("rxsched_consumer_dropped_total", &who, c.uiq_drops);
        }
        let got: Vec<u64> = r.consumers.iter().map(|c| c.received).collect();
        let saw = format!(
            "rx {} consumers {got:?} (report); mismatches: {:?}",
            r.rx, a.wrong
        );
        if a.wrong.is_empty() && got == [1000, 500] {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}
