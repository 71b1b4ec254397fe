//! `guard`: early discard for full UDP sockets, the applications unchanged.

use super::*;
use rxsched_linux::guard::{GuardOutcome, GuardReport};
use rxsched_linux::udprecv::UdpRecvReport;
use std::net::UdpSocket;

/// The DUT's address on the generator's side, and d0's MAC.
const DUT_IP: &str = "198.18.0.2";

/// A socket on the DUT that nobody reads, with a small receive buffer: it
/// is full after a few datagrams. Closed when dropped.
fn full_socket(l: &Lab, port: u16) -> UdpSocket {
    l.in_netns(Role::Dut, || {
        let s = UdpSocket::bind(("0.0.0.0", port)).map_err(|e| rxsched_linux::sys::SysError {
            what: format!("udp port {port}"),
            syscall: "bind",
            source: e,
        })?;
        let v: libc::c_int = 4096;
        rxsched_linux::sys::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &v,
            "the full socket",
            "setsockopt(SO_RCVBUF)",
        )?;
        Ok(s)
    })
    .expect("a socket in the DUT's namespace")
}

/// `guard` on d0 for up to 20 s, no live line.
fn start_guard(l: &Lab) -> Child {
    start(
        l,
        Role::Dut,
        &["guard", "-i", "d0", "--duration", "20", "--interval", "0"],
    )
}

/// The generator's flood to UDP port 7001 of the DUT's own address, from
/// CPU 0, at `rate` for `secs`, with `extra` flags.
fn flood_7001(l: &Lab, rate: &str, secs: &str, extra: &[&str]) -> Child {
    let mac = D0.mac.to_string();
    let mut args = vec![
        "gen",
        "--dst-mac",
        &mac,
        "--dst-ip",
        DUT_IP,
        "--dport",
        "7001",
        "--rate",
        rate,
        "--duration",
        secs,
        "--cpu",
        "0",
    ];
    args.extend_from_slice(extra);
    spawn(l, Role::Gen, &args)
}

/// `guard` on d0 drops, in XDP, what arrives for a socket whose buffer is
/// full, and nothing for a socket with room: a flood of 100,000 pkts/s to
/// a socket nobody reads, with 5,000 pkts/s to `udp-recv` mixed in
/// between its frames. Every trial: the guard dropped nothing of the read
/// socket's, and every datagram that met a socket is counted against one.
/// A trial passes when the read socket got every datagram the guard passed
/// it (frame for frame), at least 90% of those the generator sent it
/// (some die on the veth's ring, before any program, more when the
/// machine is busy), the kernel dropped
/// none of them, and the guard dropped at least 90% of the flood.
#[test]
fn guard_drops_only_what_a_full_socket_would_drop() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new("g") else { return };
    let l = &t.0;
    let _full = full_socket(l, 7001);
    trials(3, "guard beside a full socket", || {
        let recv = start(
            l,
            Role::Dut,
            &[
                "udp-recv",
                "--port",
                "7002",
                "--rcvbuf",
                "4194304",
                "--duration",
                "5",
            ],
        );
        let guard = start_guard(l);
        let flood: GenReport = report(flood_7001(l, "100000", "2", &["--mix", "7002:5000"]));
        let r: UdpRecvReport = report(recv);
        stop(&guard);
        let g: GuardReport = report(guard);
        let sock = |port: &str| {
            g.sockets
                .iter()
                .find(|s| s.socket == format!("0.0.0.0:{port}"))
                .cloned()
                .unwrap_or_else(|| panic!("no count for port {port}: {g:?}"))
        };
        let (full, read) = (sock("7001"), sock("7002"));
        assert_eq!(
            read.dropped, 0,
            "the guard dropped datagrams of a socket with room: {g:?}"
        );
        // Every datagram that met a socket is counted against one.
        let met = g.outcomes[&GuardOutcome::Room] + g.outcomes[&GuardOutcome::Full];
        let per_socket: u64 = g.sockets.iter().map(|s| s.passed + s.dropped).sum();
        assert_eq!(met, per_socket, "{g:?}");
        let modest = flood.mix_sent.unwrap_or(0);
        let saw = format!(
            "the read socket got {} of the {modest} datagrams sent to it (the kernel dropped {}, the guard passed {}); the guard dropped {} of the {} flood datagrams for the full socket and passed {} (drop rule {:?})",
            r.received, r.socket_drops, read.passed, full.dropped, flood.sent, full.passed, g.drop_rule
        );
        let ok = r.received == read.passed
            && r.received as f64 >= 0.9 * modest as f64
            && r.socket_drops == 0
            && full.dropped as f64 >= 0.9 * flood.sent as f64;
        if ok {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}

/// A minimal BTF file: one type, `int`, and no `struct sock`.
fn btf_without_sock(path: &std::path::Path) {
    let strings = b"\0int\0";
    let mut types = Vec::new();
    for w in [1u32, 1 << 24, 4, 32] {
        types.extend_from_slice(&w.to_le_bytes());
    }
    let mut b = Vec::new();
    b.extend_from_slice(&0xEB9Fu16.to_le_bytes());
    b.extend_from_slice(&[1, 0]);
    for w in [
        24u32,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.extend_from_slice(&types);
    b.extend_from_slice(strings);
    std::fs::write(path, b).expect("write the BTF file");
}

/// Whether `iface` in `role`'s namespace has an XDP program attached.
fn has_xdp(l: &Lab, role: Role, iface: &str) -> bool {
    let o = Command::new("ip")
        .args(["netns", "exec", &l.ns(role), "ip", "link", "show", iface])
        .output()
        .expect("ip link show");
    String::from_utf8_lossy(&o.stdout).contains("xdp")
}

/// `guard` fails safe: when the kernel's BTF cannot give it the socket
/// fields it reads (here a BTF file without `struct sock`, or none at
/// all), it says so, exits with an error, and leaves the interface
/// without a program.
#[test]
fn guard_fails_safe_without_the_kernels_socket_fields() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new("h") else { return };
    let l = &t.0;
    let dir = std::env::temp_dir().join(format!("rxsched-guard-btf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let btf = dir.join("no-sock.btf");
    btf_without_sock(&btf);
    let missing = dir.join("missing.btf");
    for (file, says) in [
        (&btf, "no struct sock with sk_rcvbuf"),
        (&missing, "no kernel BTF here"),
    ] {
        let o = Command::new("ip")
            .args(["netns", "exec", &l.ns(Role::Dut), exe()])
            .args(["guard", "-i", "d0", "--duration", "2", "--btf"])
            .arg(file)
            .output()
            .expect("guard");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "guard ran with {file:?}: {err}");
        assert!(
            err.contains(says) && err.contains("attached nothing"),
            "guard with {file:?} said: {err}"
        );
        assert!(!has_xdp(l, Role::Dut, "d0"), "a program was left on d0");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dig`'s answers from `dnsmasq` in the DUT, `count` queries in one batch
/// from CPU 1 of the generator's namespace while the generator floods the
/// full socket from CPU 0; with `guard` on d0 or without it.
fn dns_under_flood(l: &Lab, count: usize, guarded: bool) -> (usize, Option<GuardReport>) {
    let guard = guarded.then(|| start_guard(l));
    let flood = flood_7001(l, "1e9", "3", &[]);
    std::thread::sleep(Duration::from_millis(500));
    let batch: String = (0..count).map(|i| format!("q{i}.lab.test A\n")).collect();
    let file = std::env::temp_dir().join(format!("rxsched-dig-{}", std::process::id()));
    std::fs::write(&file, batch).expect("write dig's batch");
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &l.ns(Role::Gen),
            "taskset",
            "-c",
            "1",
            "dig",
        ])
        .args([&format!("@{DUT_IP}"), "+tries=1", "+time=1", "+short", "-f"])
        .arg(&file)
        .output()
        .expect("dig");
    let _ = std::fs::remove_file(&file);
    let _: GenReport = report(flood);
    let answered = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.trim() == "198.18.0.99")
        .count();
    let g = guard.map(|g| {
        stop(&g);
        report::<GuardReport>(g)
    });
    (answered, g)
}

/// A real server nobody here wrote, unchanged: `dnsmasq` on the DUT
/// answers `dig` from the generator's namespace while a flood at the
/// generator's top rate fills another socket on the same host. With
/// `guard`: every query the guard passed is answered, at least 95% of 200
/// are, the guard drops none of the DNS server's datagrams and drops the
/// flood's. (A few queries die on the device's shared ring before any
/// program, guarded or not; the same run without the guard is shown
/// beside it.)
#[test]
fn a_dns_server_answers_beside_a_flood_with_guard() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !rxsched_linux::needs::tool("dnsmasq", "dnsmasq-base")
        || !rxsched_linux::needs::tool("dig", "bind9-dnsutils")
    {
        return;
    }
    let Some(t) = TestLab::new("n") else { return };
    let l = &t.0;
    let _full = full_socket(l, 7001);
    let log = std::env::temp_dir().join(format!("rxsched-dnsmasq-{}", std::process::id()));
    let mut dns = Command::new("ip")
        .args([
            "netns",
            "exec",
            &l.ns(Role::Dut),
            "taskset",
            "-c",
            "1",
            "dnsmasq",
        ])
        .args([
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--no-resolv",
            "--no-hosts",
            "--user=root",
            "--pid-file",
            "--bind-interfaces",
            "--listen-address",
            DUT_IP,
            "--address=/lab.test/198.18.0.99",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("dnsmasq's log"))
        .spawn()
        .expect("dnsmasq");
    std::thread::sleep(Duration::from_millis(500));
    if let Ok(Some(status)) = dns.try_wait() {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        panic!("dnsmasq exited ({status}): {said}");
    }
    let n = 200;
    trials(3, "dnsmasq beside a flood, with guard", || {
        let (plain, _) = dns_under_flood(l, n, false);
        let (answered, g) = dns_under_flood(l, n, true);
        let g = g.expect("guard's report");
        let dns_sock = g
            .sockets
            .iter()
            .find(|s| s.socket.ends_with(":53"))
            .cloned();
        let flood = g.sockets.iter().find(|s| s.socket.ends_with(":7001"));
        if let Some(d) = &dns_sock {
            assert_eq!(d.dropped, 0, "the guard dropped DNS queries: {g:?}");
        }
        let passed = dns_sock.map_or(0, |d| d.passed);
        let saw = format!(
            "dig got {answered} of {n} answers with guard ({plain} without); the guard passed {passed} queries to the DNS server and dropped {} datagrams of the flood",
            flood.map_or(0, |f| f.dropped)
        );
        if answered as u64 == passed
            && answered * 100 >= n * 95
            && flood.is_some_and(|f| f.dropped > 0)
        {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
    // SAFETY: signalling the process this test started, by its pid.
    unsafe { libc::kill(dns.id() as i32, libc::SIGTERM) };
    let _ = dns.wait();
    let _ = std::fs::remove_file(&log);
}
