//! Real clients that nobody here wrote (ping, tracepath, iperf3) between
//! the lab's end hosts, ordinary hosts with neighbours learnt by ARP:
//! through the DUT kernel's own forwarding as the reference, then through
//! `route` in every mode on both backends. Every check that passes
//! through the kernel must pass through rxsched.

use super::*;

/// One client run: the command line, whether it did what a user expects,
/// and what it printed.
struct Seen {
    what: String,
    ok: bool,
    out: String,
}

/// Runs `args` in `role`'s namespace for at most `secs`; returns its exit
/// status's success and its output (stdout and stderr).
fn client(l: &Lab, role: Role, secs: u32, args: &[&str]) -> (bool, String) {
    let o = Command::new("timeout")
        .args([&secs.to_string(), "ip", "netns", "exec", &l.ns(role)])
        .args(args)
        .output()
        .expect("timeout(1)");
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), out)
}

/// Runs `args` and judges its output by `ok`.
fn check(
    l: &Lab,
    what: &str,
    role: Role,
    secs: u32,
    args: &[&str],
    ok: impl Fn(bool, &str) -> bool,
) -> Seen {
    let (status, out) = client(l, role, secs, args);
    Seen {
        what: what.to_string(),
        ok: ok(status, &out),
        out,
    }
}

/// Sets the MTU of the sink's link (both ends).
fn sink_link_mtu(l: &Lab, mtu: u32) {
    let m = mtu.to_string();
    l.exec(Role::Dut, "ip", &["link", "set", "d1", "mtu", &m])
        .unwrap();
    l.exec(Role::Sink, "ip", &["link", "set", "s0", "mtu", &m])
        .unwrap();
    // Forget the path MTUs learnt (each run must learn them again).
    let _ = l.exec(Role::Gen, "ip", &["route", "flush", "cache"]);
    let _ = l.exec(Role::Gen, "ip", &["-6", "route", "flush", "cache"]);
}

/// Every client, in order, against whatever forwards on the DUT now.
fn run_clients(l: &Lab) -> Vec<Seen> {
    let received = |all: bool| {
        move |_: bool, out: &str| {
            let want = if all { " 0% packet loss" } else { " received," };
            out.contains(want) && !out.contains(" 0 received")
        }
    };
    let mut v = vec![
        check(
            l,
            "ping through the router",
            Role::Gen,
            5,
            &["ping", "-c", "3", "-i", "0.2", "-W", "1", "198.19.0.1"],
            received(true),
        ),
        check(
            l,
            "ping the router's near address",
            Role::Gen,
            5,
            &["ping", "-c", "2", "-i", "0.2", "-W", "1", "198.18.0.2"],
            received(true),
        ),
        check(
            l,
            "ping the router's far address",
            Role::Gen,
            5,
            &["ping", "-c", "2", "-i", "0.2", "-W", "1", "198.19.0.2"],
            received(true),
        ),
        check(
            l,
            "ping -t 1: Time Exceeded",
            Role::Gen,
            5,
            &["ping", "-c", "1", "-t", "1", "-W", "1", "198.19.0.1"],
            |_, o| o.contains("From 198.18.0.2") && o.contains("Time to live exceeded"),
        ),
        check(
            l,
            "tracepath: every hop",
            Role::Gen,
            15,
            &["tracepath", "-n", "-m", "4", "198.19.0.1"],
            |_, o| {
                o.contains(" 1:  198.18.0.2") && o.contains("198.19.0.1") && o.contains("reached")
            },
        ),
        check(
            l,
            "ping -6 through the router",
            Role::Gen,
            5,
            &["ping", "-6", "-c", "3", "-i", "0.2", "-W", "1", S0.ip6],
            received(true),
        ),
        check(
            l,
            "ping -6 the router's near address",
            Role::Gen,
            5,
            &["ping", "-6", "-c", "2", "-i", "0.2", "-W", "1", D0.ip6],
            received(true),
        ),
        check(
            l,
            "ping -6 -t 1: Time Exceeded",
            Role::Gen,
            5,
            &["ping", "-6", "-c", "1", "-t", "1", "-W", "1", S0.ip6],
            |_, o| o.contains(&format!("From {}", D0.ip6)) && o.contains("Time exceeded"),
        ),
        check(
            l,
            "tracepath -6: every hop",
            Role::Gen,
            15,
            &["tracepath", "-6", "-n", "-m", "4", S0.ip6],
            |_, o| {
                o.contains(&format!(" 1:  {}", D0.ip6))
                    && o.contains(S0.ip6)
                    && o.contains("reached")
            },
        ),
    ];
    // The kernel sends ICMP errors to a host at about one a second (with a
    // burst of six): let the errors tracepath drew age out, and ask twice.
    std::thread::sleep(Duration::from_millis(1500));
    // A destination the router has no route for.
    l.exec(
        Role::Gen,
        "ip",
        &[
            "route",
            "replace",
            "198.20.0.0/24",
            "via",
            "198.18.0.2",
            "dev",
            "g0",
        ],
    )
    .unwrap();
    v.push(check(
        l,
        "no route: Destination Unreachable",
        Role::Gen,
        5,
        &["ping", "-c", "2", "-i", "1", "-W", "1", "198.20.0.1"],
        |_, o| o.contains("From 198.18.0.2") && o.contains("Unreachable"),
    ));
    // A narrower egress link: path MTU discovery, and fragments.
    sink_link_mtu(l, 1400);
    v.push(check(
        l,
        "ping -M do -s 1450: Fragmentation Needed",
        Role::Gen,
        5,
        &[
            "ping",
            "-c",
            "1",
            "-M",
            "do",
            "-s",
            "1450",
            "-W",
            "1",
            "198.19.0.1",
        ],
        |_, o| o.contains("Frag needed") && o.contains("mtu = 1400"),
    ));
    v.push(check(
        l,
        "tracepath learns the path MTU",
        Role::Gen,
        15,
        &["tracepath", "-n", "-m", "4", "198.19.0.1"],
        |_, o| o.contains("pmtu 1400"),
    ));
    v.push(check(
        l,
        "ping -6 -M do -s 1450: Packet Too Big",
        Role::Gen,
        5,
        &[
            "ping", "-6", "-c", "1", "-M", "do", "-s", "1450", "-W", "1", S0.ip6,
        ],
        |_, o| o.contains("Packet too big") && o.contains("mtu=1400"),
    ));
    v.push(check(
        l,
        "ping -M dont -s 3000: fragmented on the way",
        Role::Gen,
        5,
        &[
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-M",
            "dont",
            "-s",
            "3000",
            "-W",
            "1",
            "198.19.0.1",
        ],
        received(true),
    ));
    sink_link_mtu(l, 1500);
    // TCP across the router.
    let (ok, out) = client(
        l,
        Role::Sink,
        5,
        &["iperf3", "-s", "-1", "-D", "-B", "198.19.0.1"],
    );
    assert!(ok, "iperf3 server: {out}");
    std::thread::sleep(Duration::from_millis(300));
    v.push(check(
        l,
        "iperf3 TCP for 2 s",
        Role::Gen,
        20,
        &["iperf3", "-c", "198.19.0.1", "-t", "2", "-f", "m"],
        |s, o| s && o.contains("receiver"),
    ));
    // The neighbours forgotten in the middle of a run.
    let _ = l.exec(Role::Dut, "ip", &["neigh", "flush", "all"]);
    v.push(check(
        l,
        "ping after the DUT's neighbours are flushed",
        Role::Gen,
        5,
        &["ping", "-c", "3", "-i", "0.2", "-W", "1", "198.19.0.1"],
        received(false),
    ));
    v
}

/// The clients through the kernel, then through each router; a check the
/// kernel passes that a router fails is reported with what the client
/// printed, each router's report alongside.
#[test]
fn real_clients_work_through_route_as_through_the_kernel() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for tool in [
        ("ping", "iputils-ping"),
        ("tracepath", "iputils-tracepath"),
        ("iperf3", "iperf3"),
    ] {
        if !rxsched_linux::needs::tool(tool.0, tool.1) {
            return;
        }
    }
    let Some(t) = TestLab::new("r") else { return };
    let l = &t.0;
    l.ipv6_on().expect("IPv6 on the lab's links");
    let reference = run_clients(l);
    let failed: Vec<&Seen> = reference.iter().filter(|s| !s.ok).collect();
    assert!(
        failed.is_empty(),
        "the lab itself: kernel forwarding fails {}",
        failed
            .iter()
            .map(|s| format!("{}:\n{}", s.what, s.out))
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "kernel forwarding: {} checks passed ({})",
        reference.len(),
        reference
            .iter()
            .map(|s| &s.what[..])
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut wrong = Vec::new();
    for args in [
        &["--mode", "polling"][..],
        &["--mode", "interrupt"],
        &["--mode", "two-level"],
        &["--mode", "polling", "--forward-in", "xdp"],
        &["--mode", "polling", "--time-shared", "--slice-us", "100"],
        &["--backend", "packet", "--mode", "polling"],
        &["--backend", "packet", "--mode", "interrupt"],
    ] {
        let mut a = vec!["route", "--duration", "60"];
        a.extend_from_slice(args);
        let route = start(l, Role::Dut, &a);
        let seen = run_clients(l);
        stop(&route);
        let r: RouterReport = report(route);
        assert!(r.forwarded > 0, "{args:?} forwarded nothing: {r:?}");
        eprintln!(
            "route {args:?}: {} of {} checks passed; forwarded {}, to the stack {:?}",
            seen.iter().filter(|s| s.ok).count(),
            seen.len(),
            r.forwarded,
            r.to_stack
        );
        for s in seen.iter().filter(|s| !s.ok) {
            wrong.push(format!("{args:?}: {}:\n{}\nreport {r:?}", s.what, s.out));
        }
    }
    assert!(
        wrong.is_empty(),
        "passes through the kernel, fails through rxsched:\n{}",
        wrong.join("\n")
    );
}

/// Ping and TCP from the generator to the DUT's own address on d0.
fn to_dut(l: &Lab) -> Vec<Seen> {
    let (ok, out) = client(
        l,
        Role::Dut,
        5,
        &["iperf3", "-s", "-1", "-D", "-B", "198.18.0.2"],
    );
    assert!(ok, "iperf3 server: {out}");
    std::thread::sleep(Duration::from_millis(300));
    vec![
        check(
            l,
            "ping the DUT",
            Role::Gen,
            5,
            &["ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.0.2"],
            |_, o| o.contains(" 0% packet loss"),
        ),
        check(
            l,
            "TCP to the DUT",
            Role::Gen,
            20,
            &["iperf3", "-c", "198.18.0.2", "-t", "1", "-f", "m"],
            |s, o| s && o.contains("receiver"),
        ),
    ]
}

/// A lab for the host-traffic tests, once [`to_dut`] works with nothing
/// running on the DUT; `None` (skipped, said why) without root or the
/// clients.
fn host_lab(name: &str, tools: &[(&str, &str)]) -> Option<TestLab> {
    for tool in [("ping", "iputils-ping"), ("iperf3", "iperf3")]
        .iter()
        .chain(tools)
    {
        if !rxsched_linux::needs::tool(tool.0, tool.1) {
            return None;
        }
    }
    let t = TestLab::new(name)?;
    let reference = to_dut(&t.0);
    assert!(
        reference.iter().all(|s| s.ok),
        "with nothing running: {}",
        reference.iter().map(|s| &s.out[..]).collect::<String>()
    );
    Some(t)
}

/// Runs `args` on the DUT and [`to_dut`] while it runs; returns what the
/// clients saw and the command's report.
fn to_dut_while<T: DeserializeOwned>(l: &Lab, args: &[&str]) -> (Vec<Seen>, T) {
    let c = start(l, Role::Dut, args);
    let seen = to_dut(l);
    stop(&c);
    (seen, report(c))
}

/// While `serve` takes its consumers' datagrams from d0, the host keeps the
/// rest: ping and TCP to the DUT's own address succeed, as they do with
/// nothing running, and the server counts what it left to the stack.
#[test]
fn the_host_keeps_its_traffic_while_serve_runs() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = host_lab("h", &[]) else { return };
    let args = [
        "serve",
        "-i",
        "d0",
        "--consumer",
        "7001",
        "--duration",
        "30",
    ];
    let (seen, r): (_, ServeReport) = to_dut_while(&t.0, &args);
    for s in &seen {
        assert!(s.ok, "{} while serve runs:\n{}\nserve {r:?}", s.what, s.out);
    }
    assert!(
        r.to_stack > 0,
        "serve counted nothing left to the stack: {r:?}"
    );
}

/// `capture` is passive, as tcpdump is: on either backend, ping and TCP to
/// the DUT's own address succeed while it captures on d0, and the echo
/// requests are in its file (read back by tcpdump). Taking the frames
/// (`--take`, for a dedicated monitor port) is the control: the host then
/// loses them.
#[test]
fn the_host_keeps_its_traffic_while_capture_runs() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = host_lab("m", &[("tcpdump", "tcpdump")]) else {
        return;
    };
    let l = &t.0;
    let dir = std::env::temp_dir().join(format!("rxsched-passive-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for backend in ["xdp", "packet"] {
        let file = dir.join(format!("{backend}.pcap"));
        let f = file.to_str().unwrap();
        let args = [
            "capture",
            "-i",
            "d0",
            "-w",
            f,
            "--backend",
            backend,
            "--duration",
            "30",
        ];
        let (seen, r): (_, CaptureReport) = to_dut_while(l, &args);
        for s in &seen {
            assert!(
                s.ok,
                "{} while capture --backend {backend} runs:\n{}\ncapture {r:?}",
                s.what, s.out
            );
        }
        let o = Command::new("tcpdump")
            .args([
                "-n",
                "-r",
                f,
                "icmp[icmptype] == icmp-echo and dst host 198.18.0.2",
            ])
            .output()
            .expect("tcpdump");
        let text = String::from_utf8_lossy(&o.stdout);
        let echoes = text
            .lines()
            .filter(|l| l.contains("ICMP echo request"))
            .count();
        assert!(
            echoes >= 3,
            "capture --backend {backend}: {echoes} echo requests in its file (tcpdump -r: {}{}); capture {r:?}",
            text,
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(r.mode, "copy", "{r:?}");
        let taken = [
            "capture",
            "-i",
            "d0",
            "-w",
            "/dev/null",
            "--backend",
            backend,
            "--take",
            "--duration",
            "30",
        ];
        let c = start(l, Role::Dut, &taken);
        let (_, out) = client(
            l,
            Role::Gen,
            5,
            &["ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.0.2"],
        );
        stop(&c);
        let r: CaptureReport = report(c);
        assert!(
            out.contains(" 0 received"),
            "ping to the DUT went through while capture --take --backend {backend} took d0's frames:\n{out}\ncapture {r:?}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
