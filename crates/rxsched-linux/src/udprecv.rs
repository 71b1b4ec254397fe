//! `rxsched udp-recv`: an ordinary UDP socket receiver, the kernel peer of
//! `serve`: Linux does the protocol work in its receive path (the DUT's
//! NAPI thread) for every datagram of every socket, and a full socket
//! buffer drops after that work.

use crate::sys::{self, SysError, SysResult};
use serde::{Deserialize, Serialize};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// What one receiver got.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UdpRecvReport {
    /// The port.
    pub port: u16,
    /// Datagrams read.
    pub received: u64,
    /// Payload bytes read.
    pub bytes: u64,
    /// Datagrams the kernel dropped on the full socket buffer.
    pub socket_drops: u64,
    /// Seconds it ran.
    pub duration_s: f64,
    /// Its CPU time, in seconds (the kernel's work on its datagrams runs
    /// elsewhere: in the receive thread).
    pub cpu_s: f64,
}

fn err(what: String, syscall: &'static str, e: std::io::Error) -> SysError {
    SysError {
        what,
        syscall,
        source: e,
    }
}

/// Reads datagrams on `port` for `duration_s` (or until a stop signal),
/// with a receive buffer of `rcvbuf` bytes, pinned to `cpu`.
pub fn run(
    port: u16,
    rcvbuf: u32,
    cpu: Option<usize>,
    duration_s: f64,
) -> SysResult<UdpRecvReport> {
    sys::signals::install();
    if let Some(c) = cpu {
        sys::pin_to_cpu(c)?;
    }
    let what = format!("udp port {port}");
    let sock = UdpSocket::bind(("0.0.0.0", port)).map_err(|e| err(what.clone(), "bind", e))?;
    let v = rcvbuf as libc::c_int;
    sys::setsockopt(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUF,
        &v,
        &what,
        "setsockopt(SO_RCVBUF)",
    )?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| err(what.clone(), "setsockopt(SO_RCVTIMEO)", e))?;
    let how = format!("UDP, receive buffer {rcvbuf} bytes asked");
    crate::runtime::listening("udp-recv", &[format!("0.0.0.0:{port}")], &how);
    let t0 = Instant::now();
    let cpu0 = sys::thread_cpu_ns();
    let mut buf = vec![0u8; 65536];
    let (mut received, mut bytes) = (0u64, 0u64);
    while t0.elapsed().as_secs_f64() < duration_s && !sys::signals::stopping() {
        match sock.recv(&mut buf) {
            Ok(n) => {
                received += 1;
                bytes += n as u64;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(err(what, "recv", e)),
        }
    }
    Ok(UdpRecvReport {
        port,
        received,
        bytes,
        socket_drops: socket_drops(port).unwrap_or(0),
        duration_s: t0.elapsed().as_secs_f64(),
        cpu_s: (sys::thread_cpu_ns() - cpu0) as f64 / 1e9,
    })
}

/// The `drops` column of `/proc/net/udp` for the socket bound to `port`.
fn socket_drops(port: u16) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/udp").ok()?;
    let want = format!(":{port:04X}");
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1)?.ends_with(&want)).then(|| f.last()?.parse().ok())?
    })
}
