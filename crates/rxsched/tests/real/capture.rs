//! `capture`: the pcap file against what the generator sent.

use super::*;

/// Frames a command-line reader (tcpdump or tshark) lists in a pcap file;
/// `None` (having said so) when the reader is not installed.
fn listed(cmd: &str, package: &str, args: &[&str], file: &str) -> Option<usize> {
    if !rxsched_linux::needs::tool(cmd, package) {
        return None;
    }
    let o = Command::new(cmd)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(String::from_utf8_lossy(&o.stdout).lines().count())
}

/// The monitor in the DUT writes every frame the generator sent, cut to
/// the snap length with its original length kept, and tcpdump and tshark
/// read the file back frame for frame; the filter turns everything else
/// away, counted by rule; nothing is lost without a drop point.
#[test]
fn capture_writes_what_the_generator_sent() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new("c") else { return };
    let l = &t.0;
    let dir = std::env::temp_dir().join(format!("rxsched-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("gen.rules");
    std::fs::write(
        &rules,
        "# the generator's probes only\naccept proto udp from 198.18.0.1\n",
    )
    .unwrap();
    let file = dir.join("d0.pcap");
    trials(3, "every frame captured", || {
        capture_trial(l, rules.to_str().unwrap(), file.to_str().unwrap())
    });
    std::fs::remove_dir_all(&dir).ok();
}

/// One trial of [`capture_writes_what_the_generator_sent`]: the file's
/// form, the frames' contents and conservation are asserted; whether every
/// frame reached the file through a VM that may stall is judged.
fn capture_trial(l: &Lab, rules_s: &str, file_s: &str) -> Result<String, String> {
    let cap = start(
        l,
        Role::Dut,
        &[
            "capture",
            "-i",
            "d0",
            "-w",
            file_s,
            "-s",
            "128",
            "--filter",
            rules_s,
            "--duration",
            "20",
        ],
    );
    send(l, 2000, &["--size", "300"]);
    std::thread::sleep(Duration::from_millis(500));
    stop(&cap);
    let r: CaptureReport = report(cap);
    let dropped: u64 = r.drops.values().sum();
    let filtered: u64 = r.filtered.values().sum();
    assert_eq!(
        r.arrived,
        r.written + dropped + filtered + r.in_flight,
        "conservation: {r:?}"
    );
    let data = std::fs::read(file_s).unwrap();
    let mut rd = pcap_file::pcap::PcapReader::new(&data[..]).unwrap();
    assert_eq!(rd.header().snaplen, 128);
    let mut seqs = Vec::new();
    while let Some(p) = rd.next_raw_packet() {
        let p = p.unwrap();
        assert_eq!((p.orig_len, p.incl_len), (300, 128));
        // The probe starts the UDP payload (after 14 + 20 + 8 header bytes);
        // the cut frame's IP length no longer matches, so read it in place.
        let probe = &p.data[42..42 + rxsched_linux::wire::PROBE_LEN];
        assert_eq!(probe[..4], rxsched_linux::wire::PROBE_MAGIC.to_be_bytes());
        seqs.push(u64::from_be_bytes(probe[4..12].try_into().unwrap()));
    }
    assert_eq!(
        seqs.len() as u64,
        r.written,
        "the file holds what was written"
    );
    // What the file's readers of choice make of it, where they are installed.
    for (cmd, pkg) in [("tcpdump", "tcpdump"), ("tshark", "tshark")] {
        if let Some(n) = listed(cmd, pkg, &["-n", "-r"], file_s) {
            assert_eq!(n, seqs.len(), "{cmd} -r lists {n} frames of {}", seqs.len());
        }
    }
    seqs.sort_unstable();
    seqs.dedup();
    let saw = format!(
        "{} frames written, {} distinct probes of 2000; drops {:?}",
        r.written,
        seqs.len(),
        r.drops
    );
    if r.written == 2000 && seqs == (0..2000).collect::<Vec<u64>>() {
        Ok(saw)
    } else {
        Err(saw)
    }
}
