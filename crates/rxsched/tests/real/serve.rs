//! `serve`: a modest consumer beside a flooded one.

use super::*;

/// `serve`: SRP's early demultiplexing in XDP isolates consumers. One
/// consumer is flooded as fast as the generator goes while another gets a
/// modest stream mixed into the flood; the frames that die on the device's
/// ring die whoever they are for, so the modest consumer keeps at least
/// the share of its datagrams that reached the device's program, less 5
/// points; its own ring drops nothing; the flooded one's excess dies before
/// its consumer works on it; feedback held the queue while the flooded
/// channel was full; each consumer runs apart from the other; and every
/// frame the program took is accounted for.
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
            "--duration",
            "20",
        ],
    );
    let gen: GenReport = report(spawn(
        l,
        Role::Gen,
        &[
            "gen",
            "--rate",
            "1e9",
            "--dport",
            "7001",
            "--mix",
            "7002:5000",
            "--duration",
            "3",
        ],
    ));
    std::thread::sleep(Duration::from_millis(300));
    stop(&srv);
    let r: ServeReport = report(srv);
    let (f, m) = (&r.consumers[0], &r.consumers[1]);
    assert!(
        f.pid != m.pid && f.exit_code == Some(0) && m.exit_code == Some(0),
        "each consumer runs apart and stops cleanly: {r:?}"
    );
    assert_eq!(r.demux, "xdp", "{r:?}");
    let per: u64 = r
        .consumers
        .iter()
        .map(|x| x.received + x.bad_checksum + x.uiq_drops + x.in_flight)
        .sum();
    assert_eq!(r.rx, per, "conservation: {r:?}");
    let sent = gen.mix_sent.unwrap_or(0);
    let ring = r.drops.get(&DropPoint::NicRxRing).copied().unwrap_or(0);
    let ring_share = ring as f64 / (r.rx + ring).max(1) as f64;
    let floor = (1.0 - ring_share - 0.05).max(0.0);
    let holds = r.feedback_holds.unwrap_or(0);
    let saw = format!(
        "the modest consumer got {} of {sent} (floor {:.0}: the device's ring dropped {:.1}% of all frames), its ring dropped {}; the flooded one got {} (its ring dropped {}); feedback held the queue {holds} times",
        m.received,
        floor * sent as f64,
        100.0 * ring_share,
        m.uiq_drops,
        f.received,
        f.uiq_drops,
    );
    let ok = sent > 10_000
        && m.received as f64 >= floor * sent as f64
        && m.uiq_drops == 0
        && f.uiq_drops + ring > 0
        && holds > 0;
    if ok {
        Ok(saw)
    } else {
        Err(format!("{saw}\nserve {r:?}\ngen {gen:?}"))
    }
}
