//! `--metrics ADDR`: the counters of a running command in Prometheus'
//! exposition format (OpenMetrics text, as `prometheus-client` writes it),
//! served over HTTP at `http://ADDR/metrics` by a thread of its own.
//!
//! The thread that owns the counters publishes a rendered page now and then
//! ([`Publisher::publish`]); a scrape reads the latest page and never
//! touches the forwarding path, so it costs forwarding nothing but the
//! renderer's turn (see the README for what a scrape costs, measured).
//! What each command's page holds is in [`pages`].

use crate::sys::{SysError, SysResult};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// OpenMetrics' content type.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Where a command puts its latest page.
#[derive(Clone, Default)]
pub struct Publisher(Arc<Mutex<String>>);

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Publisher")
    }
}

impl Publisher {
    /// Replaces the page scrapes read.
    pub fn publish(&self, page: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = page;
    }

    fn page(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The HTTP side: serves the publisher's page until dropped.
pub struct Exporter {
    publisher: Publisher,
    stop: Arc<AtomicBool>,
    scrapes: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
    addr: SocketAddr,
}

impl Exporter {
    /// Listens on `addr` (port 0: any free port; [`Exporter::addr`] says
    /// which) and serves `GET /metrics`.
    pub fn start(addr: SocketAddr) -> SysResult<Exporter> {
        let server = tiny_http::Server::http(addr).map_err(|e| SysError {
            what: format!("--metrics {addr}"),
            syscall: "bind",
            source: std::io::Error::other(e.to_string()),
        })?;
        let addr = server
            .server_addr()
            .to_ip()
            .expect("an IP listener has an IP address");
        let publisher = Publisher::default();
        let stop = Arc::new(AtomicBool::new(false));
        let scrapes = Arc::new(AtomicU64::new(0));
        let (p, s, n) = (publisher.clone(), stop.clone(), scrapes.clone());
        let thread = std::thread::Builder::new()
            .name("rxsched-metrics".into())
            .spawn(move || serve(&server, &p, &s, &n))
            .map_err(|e| SysError {
                what: "metrics server".into(),
                syscall: "clone",
                source: e,
            })?;
        Ok(Exporter {
            publisher,
            stop,
            scrapes,
            thread: Some(thread),
            addr,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where to publish pages.
    pub fn publisher(&self) -> Publisher {
        self.publisher.clone()
    }

    /// Pages served so far.
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Relaxed)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, page: &Publisher, stop: &AtomicBool, n: &AtomicU64) {
    let header =
        tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE).expect("a valid header");
    while !stop.load(Relaxed) {
        let Ok(Some(req)) = server.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let path = req.url().split('?').next().unwrap_or("");
        let resp = if *req.method() != tiny_http::Method::Get {
            tiny_http::Response::from_string("GET /metrics\n").with_status_code(405)
        } else if path == "/metrics" {
            n.fetch_add(1, Relaxed);
            tiny_http::Response::from_string(page.page()).with_header(header.clone())
        } else {
            tiny_http::Response::from_string("rxsched: the metrics are at /metrics\n")
                .with_status_code(404)
        };
        let _ = req.respond(resp);
    }
}

/// How often a command with `--metrics` publishes a page, in s.
const PAGE_EVERY_S: f64 = 0.25;

/// When a polling thread publishes its page and prints its live line:
/// with a publisher, the thread is called back every [`PAGE_EVERY_S`] (or
/// at the line's interval, if shorter) and prints the line only when it is
/// due; without one, at the line's interval, and prints every time.
pub struct Cadence {
    publishing: bool,
    line_every: u64,
    next_line: u64,
    every_s: f64,
}

impl Cadence {
    /// Starting at `t0`, a live line every `stats_every_s` (0: none).
    pub fn new(stats_every_s: f64, publishing: bool, t0: u64) -> Cadence {
        let line_every = (stats_every_s * 1e9) as u64;
        let every_s = match (publishing, line_every) {
            (false, _) => stats_every_s,
            (true, 0) => PAGE_EVERY_S,
            (true, _) => stats_every_s.min(PAGE_EVERY_S),
        };
        Cadence {
            publishing,
            line_every,
            next_line: if line_every > 0 {
                t0 + line_every
            } else {
                u64::MAX
            },
            every_s,
        }
    }

    /// How often the thread is to be called back, in s.
    pub fn every_s(&self) -> f64 {
        self.every_s
    }

    /// Whether the live line is due at `now`.
    pub fn line_due(&mut self, now: u64) -> bool {
        if !self.publishing {
            return true;
        }
        if now < self.next_line {
            return false;
        }
        self.next_line = self.next_line.saturating_add(self.line_every).max(now);
        true
    }
}

mod pages;

pub use pages::{capture_page, router_page, serve_page, PortCounts, RouterExtras};

#[cfg(test)]
mod tests {
    use super::Cadence;

    #[test]
    fn a_page_four_times_a_second_and_the_line_at_its_own_interval() {
        let mut plain = Cadence::new(1.0, false, 0);
        assert_eq!(plain.every_s(), 1.0);
        assert!(plain.line_due(5));
        let mut c = Cadence::new(1.0, true, 0);
        assert_eq!(c.every_s(), 0.25);
        let due: Vec<u64> = (1..=8u64)
            .map(|i| i * 250_000_000)
            .filter(|&t| c.line_due(t))
            .collect();
        assert_eq!(due, [1_000_000_000, 2_000_000_000]);
        assert_eq!(Cadence::new(0.0, true, 0).every_s(), 0.25);
        assert!(!Cadence::new(0.0, true, 0).line_due(u64::MAX - 1));
    }
}
