//! What `calibrate --real` measures and where: the trial rates, the
//! keys it gives in the profile's order, and the forwarders whose receive
//! work it reads.

use crate::bench::forward::Forwarder;

/// The receive work's and the polling router's trial rates: from one low
/// enough that the slowest forwarder keeps up with room to spare (about
/// one frame a NAPI run) to one with some 20 frames a run, so that a cost
/// per frame and a cost per run can be told apart. (The NAPI threads run
/// some 10,000 to 16,000 times a second at every rate here: the
/// generator's batches wake them when they sleep.)
pub const RATES: [f64; 3] = [20_000.0, 100_000.0, 250_000.0];

/// The interrupt-mode router's trial rates: more frames a wake-up at each,
/// and all well under its peak.
pub const INTERRUPT_RATES: [f64; 3] = [20_000.0, 60_000.0, 100_000.0];

/// The rate at which the interrupt router's cost per frame is measured:
/// past its peak (some 150,000 to 300,000 pkts/s here), where it is never
/// short of frames, and well short of where its receive work takes the
/// whole CPU. (Fitted from the low rates beside its runs, the cost per frame
/// came out between 0.50 and 0.92 µs over two calibrations, with a spread
/// of 155%; in the benches' points from 100,000 pkts/s up it spent 0.75 to
/// 1.14 µs a frame beside its runs.)
pub const INTERRUPT_LOADED_RATE: f64 = 400_000.0;

/// The rates at which M4's accounting is measured: the polling router
/// with `--cycle-limit 50` where it still forwards every frame (its input
/// is inhibited late in most periods, every wake-up being charged, and
/// the frames wait on the rings), short of where it drops (from about
/// 100,000 pkts/s on the EPYC guest).
pub const CHARGE_RATES: [f64; 2] = [20_000.0, 50_000.0];

/// The lowest trial rate.
pub const RATE: f64 = RATES[0];

/// The rate at which the device's receive work for the polling router's
/// socket (and for the monitor's, copying and taking) is measured where
/// frames, not NAPI runs, fill its time: well past what the router
/// forwards, so that the receive work runs beside a busy router as it
/// does under overload. At the low rates (some 12,000
/// runs a second at each) the runs take most of the NAPI threads' time and
/// the cost per frame is poorly fixed (a spread of 120% over repeats).
pub const LOADED_RATE: f64 = 1_000_000.0;

/// Every value `measure` gives, in the order the profile lists them.
pub const KEYS: [&str; 35] = [
    "napi_kernel_forward",
    "napi_xdp_forward",
    "napi_xdp_route",
    "napi_xsk_redirect",
    "napi_kernel_run",
    "napi_xdp_run",
    "napi_route_run",
    "napi_xsk_run",
    "napi_xsk_full",
    "napi_xsk_wake",
    "napi_xsk_interrupt",
    "router_polling",
    "router_polling_run",
    "router_charge",
    "router_interrupt",
    "router_interrupt_run",
    "router_screen",
    "router_screen_run",
    "router_interrupt_screen",
    "router_interrupt_screen_run",
    "screen_frame",
    "screen_run",
    "napi_xdp_screen",
    "napi_nft_forward",
    "napi_copy",
    "napi_copy_run",
    "napi_copy_full",
    "capture_copy",
    "capture_run",
    "capture_take",
    "capture_take_run",
    "writer_frame",
    "writer_run",
    "wake",
    "gen_batches_per_s",
];

/// The device's receive work of each forwarder: (key per frame, key per
/// run, forwarder, what).
pub(super) const NAPI: &[(&str, &str, Forwarder, &str)] = &[
    (
        "napi_kernel_forward",
        "napi_kernel_run",
        Forwarder::Kernel,
        "Linux forwarding",
    ),
    (
        "napi_xdp_forward",
        "napi_xdp_run",
        Forwarder::XdpFwd,
        "xdp-fwd forwarding",
    ),
    (
        "napi_xdp_route",
        "napi_route_run",
        Forwarder::PollingInXdp,
        "route --forward-in xdp forwarding",
    ),
    (
        "napi_xsk_redirect",
        "napi_xsk_run",
        Forwarder::Polling,
        "redirecting to the polling router's socket",
    ),
];
