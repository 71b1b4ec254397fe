//! `capture` as a tcpdump user drives it: a filter in tcpdump's language
//! run in XDP and judged by tcpdump itself, pcapng whose counts `capinfos`
//! prints, rotation across files with no frame lost, and `-c`.

use super::*;

/// A scratch directory of this test's own, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("rxsched-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn path(&self, f: &str) -> String {
        self.0.join(f).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The probes' sequence numbers in a capture file (pcap or pcapng).
fn probe_seqs(file: &str) -> Vec<u64> {
    use pcap_file::pcapng::Block;
    let data = std::fs::read(file).unwrap();
    let mut frames: Vec<Vec<u8>> = vec![];
    if let Ok(mut r) = pcap_file::pcap::PcapReader::new(&data[..]) {
        while let Some(p) = r.next_raw_packet() {
            frames.push(p.unwrap().data.to_vec());
        }
    } else {
        let mut r = pcap_file::pcapng::PcapNgReader::new(&data[..]).unwrap();
        while let Some(b) = r.next_block() {
            if let Block::EnhancedPacket(p) = b.unwrap() {
                frames.push(p.data.to_vec());
            }
        }
    }
    frames
        .iter()
        .filter_map(|f| rxsched_linux::wire::parse_probe(f).map(|(seq, _)| seq))
        .collect()
}

/// The monitor with a tcpdump expression: the XDP program runs all of it
/// (the report says so, and counts the refused frames there), every frame
/// written is one `tcpdump -r FILE EXPR` accepts, and the frames it was
/// meant to keep are all there; pcapng's counts are what `capinfos`
/// prints.
#[test]
fn a_tcpdump_expression_runs_in_xdp_and_tcpdump_agrees() {
    if !rxsched_linux::needs::tool("tcpdump", "tcpdump")
        || !rxsched_linux::needs::tool("capinfos", "tshark")
    {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new("f") else { return };
    let l = &t.0;
    let dir = Scratch::new("expr");
    let file = dir.path("d0.pcapng");
    let expr = "udp and dst port 9001 and len > 200 or icmp";
    trials(3, "the expression's frames captured", || {
        let cap = start(
            l,
            Role::Dut,
            &["capture", "-i", "d0", "-w", &file, "--duration", "20", expr],
        );
        // Kept: 300-byte probes; refused in XDP: 64-byte ones.
        send(l, 1500, &["--size", "300"]);
        send(l, 1500, &[]);
        std::thread::sleep(Duration::from_millis(500));
        stop(&cap);
        let r: CaptureReport = report(cap);
        let e = r
            .expression
            .clone()
            .expect("the report names the expression");
        assert_eq!(e.in_xdp.as_deref(), Some(expr), "{e:?}");
        assert_eq!(e.in_polling_thread, None, "{e:?}");
        let dropped: u64 = r.drops.values().sum();
        let refused: u64 = r.filtered.values().sum();
        assert_eq!(
            r.arrived,
            r.written + dropped + refused + r.in_flight,
            "conservation: {r:?}"
        );
        // tcpdump reads the file and accepts every frame in it.
        let o = Command::new("tcpdump")
            .args(["-n", "-r", &file, expr])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let accepted = String::from_utf8_lossy(&o.stdout).lines().count() as u64;
        assert_eq!(
            accepted, r.written,
            "tcpdump accepts {accepted} of the {} written",
            r.written
        );
        // capinfos prints the counts.
        let o = Command::new("capinfos").arg(&file).output().unwrap();
        let info = String::from_utf8_lossy(&o.stdout);
        let says = format!("{} packets written of {} received", r.written, r.arrived);
        assert!(
            info.contains(&says),
            "capinfos does not say {says:?}:\n{info}"
        );
        let seqs = probe_seqs(&file);
        let in_xdp = r.filtered.get("expression in xdp").copied().unwrap_or(0);
        let saw = format!(
            "{} written ({} probes), {in_xdp} refused in XDP, drops {:?}",
            r.written,
            seqs.len(),
            r.drops
        );
        if seqs.len() == 1500 && in_xdp >= 1500 {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}

/// `-C` with `-W`: the files are tcpdump's names in order, each within
/// the size, and the probes' sequence numbers run on from file to file
/// with none missing; `-c` stops the capture by itself at that count.
#[test]
fn rotation_and_count_as_tcpdump_has_them() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new("r") else { return };
    let l = &t.0;
    let dir = Scratch::new("rot");
    let base = dir.path("ring.pcap");
    trials(3, "every probe across the rotated files", || {
        let cap = start(
            l,
            Role::Dut,
            &[
                "capture",
                "-i",
                "d0",
                "-w",
                &base,
                "-C",
                "0.1",
                "-W",
                "40",
                "--duration",
                "20",
                "udp",
            ],
        );
        send(l, 2000, &["--size", "300"]);
        std::thread::sleep(Duration::from_millis(500));
        stop(&cap);
        let r: CaptureReport = report(cap);
        assert!(r.files.len() >= 5, "{:?}", r.files);
        for (i, f) in r.files.iter().enumerate() {
            assert_eq!(f, &format!("{base}{i:02}"));
            let size = std::fs::metadata(f).unwrap().len();
            assert!(size <= 100_000 + 400, "{f}: {size} bytes");
        }
        let seqs: Vec<u64> = r.files.iter().flat_map(|f| probe_seqs(f)).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "out of order across files"
        );
        let saw = format!(
            "{} probes in {} files, drops {:?}",
            seqs.len(),
            r.files.len(),
            r.drops
        );
        if seqs == (0..2000).collect::<Vec<u64>>() {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
    // -c: the capture ends by itself with exactly that many frames.
    let file = dir.path("count.pcap");
    let cap = start(
        l,
        Role::Dut,
        &[
            "capture",
            "-i",
            "d0",
            "-w",
            &file,
            "-c",
            "100",
            "--duration",
            "20",
            "udp",
        ],
    );
    send(l, 500, &[]);
    let began = std::time::Instant::now();
    let r: CaptureReport = report(cap);
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "-c did not end the capture"
    );
    assert_eq!(r.written, 100, "{r:?}");
    assert_eq!(probe_seqs(&file).len(), 100);
}

/// The DUT kernel's count of IPv4 datagrams it received (`Ip:
/// InReceives`): what reached its stack.
fn stack_received(l: &Lab) -> u64 {
    let snmp = l.exec(Role::Dut, "cat", &["/proc/net/snmp"]).unwrap();
    let mut lines = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "InReceives")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// A port with two receive queues: with `--per-queue` each queue's frames
/// go to a file of their own (the generator on CPU q fills queue q); with
/// `--take` and a filter, the XDP program takes only what the filter
/// accepts, and the host's stack still gets the rest.
#[test]
fn every_queue_is_captured_and_take_leaves_the_rest_to_the_host() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::with_queues("m", 2) else {
        return;
    };
    let l = &t.0;
    let dir = Scratch::new("queues");
    let base = dir.path("q.pcap");
    let two_streams = |l: &Lab| {
        send(l, 1000, &["--cpu", "0", "--dport", "9001"]);
        send(l, 700, &["--cpu", "1", "--dport", "9002"]);
    };
    trials(3, "each queue's frames in its own file", || {
        let cap = start(
            l,
            Role::Dut,
            &[
                "capture",
                "-i",
                "d0",
                "-w",
                &base,
                "--per-queue",
                "--duration",
                "20",
                "udp",
            ],
        );
        two_streams(l);
        std::thread::sleep(Duration::from_millis(500));
        stop(&cap);
        let r: CaptureReport = report(cap);
        let (q0, q1) = (dir.path("q-q0.pcap"), dir.path("q-q1.pcap"));
        assert_eq!(r.files, [q0.clone(), q1.clone()], "{r:?}");
        let (a, b) = (probe_seqs(&q0), probe_seqs(&q1));
        let saw = format!(
            "queue 0: {} probes, queue 1: {}; drops {:?}",
            a.len(),
            b.len(),
            r.drops
        );
        if a == (0..1000).collect::<Vec<u64>>() && b == (0..700).collect::<Vec<u64>>() {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
    trials(3, "take the filter's frames, leave the rest", || {
        let before = stack_received(l);
        let file = dir.path("take.pcap");
        let cap = start(
            l,
            Role::Dut,
            &[
                "capture",
                "--take",
                "-i",
                "d0",
                "-w",
                &file,
                "--duration",
                "20",
                "udp dst port 9001",
            ],
        );
        two_streams(l);
        std::thread::sleep(Duration::from_millis(500));
        stop(&cap);
        let r: CaptureReport = report(cap);
        let stack = stack_received(l) - before;
        let in_xdp = r.filtered.get("expression in xdp").copied().unwrap_or(0);
        let seqs = probe_seqs(&file);
        let saw = format!(
            "{} probes taken, {in_xdp} left to the stack by XDP, the stack received {stack}",
            seqs.len()
        );
        if seqs == (0..1000).collect::<Vec<u64>>() && in_xdp >= 700 && (700..1000).contains(&stack)
        {
            Ok(saw)
        } else {
            Err(saw)
        }
    });
}
