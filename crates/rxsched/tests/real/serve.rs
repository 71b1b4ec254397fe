//! `serve`: a modest consumer beside a flooded one.

use super::*;

/// `serve`: SRP's early demultiplexing isolates consumers. One consumer
/// is flooded as fast as the generator goes while another gets a modest
/// stream; the flooded one's excess dies at its own UIQ, the modest one
/// keeps at least 90% of what was sent to it, less the share the receive
/// threads drop before the demultiplexer sees them (a few percent at this
/// rate, which die whoever they are for; `bench real srp` measures it
/// across rates), each consumer is a process of its own, and every frame taken is
/// accounted for.
#[test]
fn serve_isolates_a_modest_consumer_from_a_flooded_one() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(t) = TestLab::new("v") else { return };
    trials(3, "a modest consumer beside a flooded one", || {
        serve_trial(&t.0)
    });
}

/// One trial of serve with a flooded and a modest consumer: asserts what
/// must always hold, and judges the modest consumer's share.
fn serve_trial(l: &Lab) -> Result<String, String> {
    let srv = spawn(
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
            "--duration",
            "20",
        ],
    );
    std::thread::sleep(Duration::from_millis(800));
    let gen = |rate: &str, port: &str, count: &str| {
        spawn(
            l,
            Role::Gen,
            &[
                "gen",
                "--rate",
                rate,
                "--dport",
                port,
                "--count",
                count,
                "--duration",
                "3",
            ],
        )
    };
    let flood = gen("1e9", "7001", "0");
    let modest: GenReport = report(gen("5000", "7002", "5000"));
    let flood: GenReport = report(flood);
    std::thread::sleep(Duration::from_millis(300));
    stop(&srv);
    let r: ServeReport = report(srv);
    let (f, m) = (&r.consumers[0], &r.consumers[1]);
    assert!(
        f.pid != m.pid && f.exit_code == Some(0),
        "each consumer is a process of its own: {r:?}"
    );
    let per: u64 = r
        .consumers
        .iter()
        .map(|x| x.received + x.bad_checksum + x.uiq_drops + x.in_flight)
        .sum();
    let dropped = |p| r.drops.get(&p).copied().unwrap_or(0);
    assert_eq!(r.rx, per + dropped(DropPoint::NoPcb), "conservation: {r:?}");
    let sent = modest.sent;
    // Frames the receive threads drop before the demultiplexer die whoever
    // they are for: the modest consumer may lose that share (a few percent,
    // more when the host steals the VM's CPU), and no more than 3 points
    // beyond it; its own queue drops nothing.
    let early = dropped(DropPoint::NicRxRing) + dropped(DropPoint::XskRxRing);
    let early_share = early as f64 / (r.rx + early).max(1) as f64;
    let floor = (1.0 - early_share - 0.03).clamp(0.0, 0.90);
    let saw = format!(
        "the modest consumer got {} of {sent} (floor {:.0}), its UIQ dropped {}; the flood's UIQ dropped {}; the receive threads dropped {:.1}% before demultiplexing",
        m.received,
        floor * sent as f64,
        m.uiq_drops,
        f.uiq_drops,
        100.0 * early_share
    );
    let ok = sent > 4000
        && m.received as f64 >= floor * sent as f64
        && early_share < 0.25
        && m.uiq_drops == 0
        && f.uiq_drops > 0;
    if ok {
        Ok(saw)
    } else {
        Err(format!(
            "{saw}\nserve {r:?}\nflood {flood:?}\nmodest {modest:?}"
        ))
    }
}
