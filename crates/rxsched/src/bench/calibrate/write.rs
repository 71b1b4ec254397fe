//! The profile `calibrate --real` writes: every cost with how it was
//! measured and its spread over the repeats.

use super::{list, Cost, LOADED_RATE, RATES};
use rxsched_linux::backend::copy::{RING_BYTES, SHORT_RECORD_BYTES, WAKE_BYTES};

/// The profile's `pace` line: the readings, and how far they moved.
fn pace_line(pace: &[f64]) -> String {
    let kv = format!("pace = [{}]", super::pace::readings(pace));
    format!(
        "{kv:<28} # the machine's pace at the start and after each repeat (ns): the receive \
         work's CPU per frame refused at the stopped polling router's socket, {LOADED_RATE:.0} \
         pkts/s, runs included; moved {:.0}%",
        100.0 * super::pace_moved(pace)
    )
}

/// The profile text: every cost with how it was measured and its spread,
/// and the machine's pace through the calibration.
pub fn profile(
    name: &str,
    costs: &[Cost],
    pace: &[f64],
    repeats: usize,
    host: &str,
    hz: u64,
) -> String {
    let mut s = format!(
        "# Written by `rxsched calibrate --real` on {host}: each cost measured in\n\
         # isolation on the DUT CPU ({repeats} repeats, the median), never fitted to an\n\
         # overload curve. Measure your own host the same way (README).\n\
         name = {name:?}\n\
         testbed = \"the XDP lab: three network namespaces joined by veth pairs, the DUT on one CPU ({host})\"\n\
         calibrated_from = [\"rxsched calibrate --real: per-thread CPU time at {}, and wakecost\"]\n\n\
         [wire]\n\
         bit_rate_bps = 1e11          # veth has no wire: frames move at memory speed, faster than the generator sends\n\
         min_frame_bytes = 60\n\n\
         [nic]\n\
         rx_ring = 256                # veth's receive ring (VETH_RING_SIZE, fixed in the driver)\n\
         tx_ring = 256                # veth transmits into the peer's receive ring\n\n\
         [lab]                        # nanoseconds of the DUT CPU (gen_batches_per_s: a second)\n",
        list(&[RATES[0], RATES[1], RATES[2], LOADED_RATE])
    );
    for c in costs {
        let kv = format!("{} = {}", c.key, c.median().round() as u64);
        s += &format!("{kv:<28} # {}; spread {:.0}%\n", c.how, 100.0 * c.spread());
    }
    s += &format!(
        "veth_ring = 256              # VETH_RING_SIZE\n\
         tick_hz = {}                # CONFIG_HZ of the running kernel: the scheduler's tick\n\
         xsk_rx_ring = {}            # the router's AF_XDP receive ring (XskConfig)\n\
         copy_ring = {}             # the monitor's ring buffer in records of a short frame ({} over {} bytes)\n\
         copy_wake = {}               # unread records at which a copy wakes the monitor ({} bytes)\n\
         repeats = {repeats}\n{}\n\n[lab.spread]\n",
        hz,
        rxsched_linux::backend::xdp::XskConfig::default().rx_ring,
        RING_BYTES / SHORT_RECORD_BYTES,
        RING_BYTES,
        SHORT_RECORD_BYTES,
        WAKE_BYTES / SHORT_RECORD_BYTES,
        WAKE_BYTES,
        pace_line(pace),
    );
    for c in costs {
        s += &format!("{} = {:.3}\n", c.key, c.spread());
    }
    s
}
