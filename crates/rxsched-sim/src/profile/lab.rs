//! `[lab]`: the costs of the XDP lab's DUT (`kernel.kind = "lab"`).

use serde::{Deserialize, Serialize};

/// Per-frame costs of the lab's dataplanes, in nanoseconds of the DUT
/// CPU, each measured in isolation at a low rate by `rxsched calibrate
/// --real` (CPU time of the thread that does the work, over the frames it
/// forwarded); the spread over repeats is in `spread`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LabCosts {
    /// The device's receive work with Linux's own forwarding: the veth
    /// NAPI poll, `ip_forward`, and the transmit to the next interface.
    pub napi_kernel_forward: u64,
    /// The device's receive work forwarding in XDP (`xdp-fwd`: the FIB
    /// lookup and the redirect).
    pub napi_xdp_forward: u64,
    /// The device's receive work forwarding in route's own XDP program
    /// (`route --forward-in xdp`).
    pub napi_xdp_route: u64,
    /// The device's receive work redirecting a frame to an AF_XDP socket
    /// (copy mode: the program, the redirect and the copy into the UMEM).
    pub napi_xsk_redirect: u64,
    /// A NAPI thread's run beside the frames it handles (being woken,
    /// entering and leaving its poll, flushing what it sent, going back to
    /// sleep), with Linux forwarding.
    pub napi_kernel_run: u64,
    /// The same, forwarding in XDP (`xdp-fwd`).
    pub napi_xdp_run: u64,
    /// The same, forwarding in route's own XDP program.
    pub napi_route_run: u64,
    /// The same, redirecting to an AF_XDP socket (the router sends).
    pub napi_xsk_run: u64,
    /// The device's receive work per frame redirected to an AF_XDP socket
    /// whose ring is full: the work is spent and the frame dropped there.
    pub napi_xsk_full: u64,
    /// The polling router's own work per frame: taking it from the
    /// socket's ring, the forwarding decision, the transmit and the ring
    /// refills (its share of a batch's kick).
    pub router_polling: u64,
    /// A run of the polling router's thread beside its frames: woken by
    /// the socket, its poll calls, going back to sleep.
    pub router_polling_run: u64,
    /// A polling router's accounting for M4 (`--cycle-limit`, or an
    /// objective's), per wake-up of its thread: reading its own CPU clock
    /// and wake-ups and its receive threads' (`/proc/TID/schedstat`) to
    /// charge the loop, on top of `router_polling_run`.
    pub router_charge: u64,
    /// The device's receive work beside the interrupt-mode router, per
    /// wake-up of the router's sleeping thread by the frames it puts on
    /// the socket: what it costs over the same work beside the polling
    /// router (`napi_xsk_run`, `napi_xsk_redirect`).
    pub napi_xsk_wake: u64,
    /// The device's receive work per frame redirected to the interrupt-mode
    /// router's socket (what `napi_xsk_redirect` is beside the polling
    /// router), measured with that router loaded: beside it a frame costs
    /// the receive work more than beside the polling router.
    pub napi_xsk_interrupt: u64,
    /// The interrupt-mode router's work per frame.
    pub router_interrupt: u64,
    /// A run of the interrupt-mode router's forwarding thread beside its
    /// frames.
    pub router_interrupt_run: u64,
    /// The polling router's work per frame handed to the screening
    /// process (forwarding decision, the copy into the screening queue),
    /// instead of transmitting it.
    pub router_screen: u64,
    /// A run of the polling router's thread beside its frames, handing
    /// them to the screening process (and kicking it when it sleeps).
    pub router_screen_run: u64,
    /// The same two of the interrupt-mode router.
    pub router_interrupt_screen: u64,
    /// See [`LabCosts::router_interrupt_screen`].
    pub router_interrupt_screen_run: u64,
    /// The screening process's work per frame: the rules' verdict and,
    /// for a frame they accept, the send on the output port.
    pub screen_frame: u64,
    /// A run of the screening process beside its frames: woken by the
    /// router's kick, a batch, waiting again.
    pub screen_run: u64,
    /// The device's receive work per frame forwarding in route's own XDP
    /// program with the screening rules in it.
    pub napi_xdp_screen: u64,
    /// The device's receive work per frame with Linux's forwarding and the
    /// same rules as an nftables ruleset.
    pub napi_nft_forward: u64,
    /// The device's receive work per frame with the monitor copying
    /// (`capture`'s default): its XDP program's copy into the ring buffer,
    /// and the host's stack taking the frame on (to its discard in the
    /// lab, the frames being for another host).
    pub napi_copy: u64,
    /// A NAPI thread's run beside its frames, with the monitor copying.
    pub napi_copy_run: u64,
    /// The same receive work per frame when the ring buffer is full: the
    /// copy is not made, the frame goes on to the host's stack.
    pub napi_copy_full: u64,
    /// The monitor's polling thread per copy it reads onto the
    /// packet-filter queue (its timestamp and the copy into the queue).
    pub capture_copy: u64,
    /// A run of the monitor's polling thread beside its copies.
    pub capture_run: u64,
    /// The monitor's polling thread per frame taken off its AF_XDP socket
    /// (`--take`), and a run of it beside its frames.
    pub capture_take: u64,
    /// See [`LabCosts::capture_take`].
    pub capture_take_run: u64,
    /// The monitor's writer thread per frame written (pcap, to /dev/null).
    pub writer_frame: u64,
    /// A run of the writer thread beside its frames.
    pub writer_run: u64,
    /// The monitor's ring buffer of copies, in records of the lab's
    /// 64-byte frames (its size over a record's).
    pub copy_ring: u64,
    /// Unread records at which a copy wakes the monitor (the program's
    /// `WAKE_BYTES` over a record's size).
    pub copy_wake: u64,
    /// A wake-up of a sleeping thread from outside the CPU (a batch waking
    /// the receive work, a timer): what the task it interrupts loses
    /// (`wakecost`). The lab host charges it when that task is the compute
    /// process; the other threads' costs were measured with their
    /// interrupts in them.
    pub wake: u64,
    /// The generator's transmit batches a second, at random (exponential
    /// gaps); each wakes the DUT's receive work if it sleeps: how it
    /// paces, not a DUT cost.
    pub gen_batches_per_s: u64,
    /// The veth receive ring (fixed in the driver), in frames.
    pub veth_ring: u64,
    /// The kernel's scheduler tick rate (`CONFIG_HZ`): a fair thread is
    /// preempted for another only at a tick, unless one wakes.
    pub tick_hz: u64,
    /// An AF_XDP socket's receive ring, in frames.
    pub xsk_rx_ring: u64,
    /// Each cost's spread over the repeats: (largest - smallest) / median.
    pub spread: std::collections::BTreeMap<String, f64>,
    /// Repeats per cost.
    pub repeats: u64,
    /// The machine's pace through the calibration, at its start and after
    /// each repeat: the receive work's CPU per frame refused at the stopped
    /// polling router's socket, 1,000,000 pkts/s offered (ns). Not a cost:
    /// `bench real --predict` reads its own and says when the two differ.
    pub pace: Vec<f64>,
}
