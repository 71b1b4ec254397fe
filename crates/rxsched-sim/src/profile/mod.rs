//! Machine cost profiles: one per testbed, each cost with its source.

use crate::error::{from_toml, InputError};
use crate::scenario::KernelKind;
use serde::{Deserialize, Serialize};

mod calibrate;
mod lab;
mod reads;

pub use calibrate::{Calibrate, ClaimRef, Fitted, FreeParam};
pub use lab::LabCosts;

/// The profiles that ship with rxsched, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "dec3000-300",
        include_str!("../../../../profiles/dec3000-300.toml"),
    ),
    (
        "dec3000-500-fddi",
        include_str!("../../../../profiles/dec3000-500-fddi.toml"),
    ),
    (
        "dec3100-ultrix",
        include_str!("../../../../profiles/dec3100-ultrix.toml"),
    ),
    (
        "dual-p133-nt4",
        include_str!("../../../../profiles/dual-p133-nt4.toml"),
    ),
    (
        "mpc8250-linux",
        include_str!("../../../../profiles/mpc8250-linux.toml"),
    ),
    (
        "p2-266-freebsd",
        include_str!("../../../../profiles/p2-266-freebsd.toml"),
    ),
    (
        "linux-veth-lab",
        include_str!("../../../../profiles/linux-veth-lab.toml"),
    ),
];

/// The profile format as a JSON Schema, with each key's documentation.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Profile)).unwrap_or_default()
}

/// The link the host's interfaces sit on.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Wire {
    /// Line rate in bits per second.
    pub bit_rate_bps: f64,
    /// Bytes on the wire per frame beyond the frame itself (preamble, gap).
    #[serde(default)]
    pub framing_bytes: u32,
    /// Shortest frame the link carries; shorter frames are padded.
    #[serde(default)]
    pub min_frame_bytes: u32,
    /// A cell-switched link (ATM): a frame and its `framing_bytes` (the
    /// AAL5 trailer) are cut into cells of this much payload, the last one
    /// padded (0: not cells).
    #[serde(default)]
    pub cell_payload_bytes: u32,
    /// Bytes of one cell on the wire, header included (ATM: 53).
    #[serde(default)]
    pub cell_bytes: u32,
}

impl Wire {
    /// Bytes one frame of `bytes` occupies on the wire.
    fn wire_bytes(&self, bytes: u32) -> u32 {
        if self.cell_payload_bytes > 0 {
            let cells = (bytes.max(self.min_frame_bytes) + self.framing_bytes)
                .div_ceil(self.cell_payload_bytes);
            cells * self.cell_bytes
        } else {
            bytes.max(self.min_frame_bytes) + self.framing_bytes
        }
    }

    /// Time one frame of `bytes` occupies the wire, in picoseconds: exact
    /// to a part in 10^5 for the shortest Ethernet frame at 1.6 Tb/s.
    pub fn frame_ps(&self, bytes: u32) -> u64 {
        (self.wire_bytes(bytes) as f64 * 8.0 * 1e12 / self.bit_rate_bps).round() as u64
    }

    /// Time one frame of `bytes` occupies the wire, to the nearest ns.
    pub fn frame_ns(&self, bytes: u32) -> u64 {
        (self.frame_ps(bytes) as f64 / 1e3).round() as u64
    }

    /// The most frames of `bytes` per second the wire carries.
    pub fn line_rate_pps(&self, bytes: u32) -> f64 {
        1e12 / self.frame_ps(bytes) as f64
    }
}

/// Sizes of the network interface's rings.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nic {
    /// Receive descriptors; a packet arriving to a full ring is dropped.
    pub rx_ring: u32,
    /// Transmit descriptors the driver may load in one start.
    pub tx_ring: u32,
    /// One interrupt line per interface for receive and transmit events,
    /// served by one handler (the LANCE's `lnintr`), instead of one per
    /// direction. Under the polling kernel the two share one enable: an
    /// event either way disables both, and the driver re-enables them once
    /// neither direction has work and input is not inhibited.
    #[serde(default)]
    pub one_interrupt: bool,
}

/// CPU costs, in nanoseconds unless the name says per byte.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Costs {
    /// Entering a device interrupt handler (and leaving it, unless
    /// `intr_exit` is given).
    pub intr_dispatch: u64,
    /// Leaving a device interrupt handler, charged after its last packet:
    /// interrupt-driven kernels.
    pub intr_exit: u64,
    /// Copying a received packet into a kernel buffer.
    pub rx_copy: u64,
    /// Extra copy cost per byte.
    pub rx_copy_per_byte: f64,
    /// Link-level input (header parsing, demultiplexing to IP).
    pub rx_link: u64,
    /// Enqueue on and dequeue from `ipintrq`: the work polling saves.
    pub ipintrq: u64,
    /// Switching into the IP software interrupt or kernel thread.
    pub ip_switch: u64,
    /// IP input up to the forwarding decision.
    pub ip_input: u64,
    /// `ip_output` up to the driver.
    pub ip_output: u64,
    /// The driver handing one packet to the device: the frame is the
    /// device's when this is done.
    pub driver_tx: u64,
    /// The output path's work after the frame was handed to the device
    /// (the rest of the IP thread or pass: freeing, returning): the device
    /// may be sending the frame meanwhile.
    pub output_done: u64,
    /// Reclaiming one transmitted buffer.
    pub tx_reclaim: u64,
    /// The polling kernel's interrupt handler: note the device, wake the thread.
    pub poll_intr: u64,
    /// Waking and switching to the polling thread.
    pub poll_switch: u64,
    /// Calling one polling callback, whatever it handles.
    pub poll_callback: u64,
    /// Re-enabling a device's interrupts.
    pub intr_enable: u64,
    /// screend's per-packet work: two system calls and the filter.
    pub screend: u64,
    /// Switching to a user process: from another, or back from a kernel
    /// thread (the IP thread, the polling thread) that took the CPU from it.
    pub context_switch: u64,
    /// The packet filter, run where the kernel takes a packet: the filter
    /// program, the enqueue on the capture queue and the reader's wake-up.
    pub pf_filter: u64,
    /// tcpdump's per-packet work: its share of a read call, copying the
    /// captured bytes out, and formatting them.
    pub capture_read: u64,
    /// tcpdump writing one packet's header to a disk file, beyond `capture_read`.
    pub capture_file: u64,
    /// UDP input and socket enqueue.
    pub udp_input: u64,
    /// The application's receive call, per packet.
    pub app_read: u64,
    /// The application's receive call, per byte copied out.
    pub app_read_per_byte: f64,
    /// The periodic clock interrupt, per tick. The clock is a level above
    /// the devices': a tick preempts a device handler.
    pub clock_tick: u64,
    /// Clock interrupts per second (0: none).
    pub clock_hz: u64,
    /// SRP/LRP: the early demultiplexer and next-stage submit at interrupt
    /// level (lookup, buffering check, enqueue, waking a sleeper).
    pub srp_demux: u64,
    /// SRP: posting SIGUIQ to an owner (interrupt level).
    pub srp_signal: u64,
    /// SRP: the receiver taking SIGUIQ (the kernel's delivery).
    pub srp_deliver: u64,
    /// SRP: a caught SIGUIQ's user handler, entry and return, beyond `srp_deliver`.
    pub srp_handler: u64,
    /// TCP input per segment, beyond IP input.
    pub tcp_input: u64,
    /// TCP input per byte (the checksum).
    pub tcp_input_per_byte: f64,
    /// Sending the ACK for a segment (tcp_output, ip_output, the driver, its reclaim).
    pub tcp_ack: u64,
    /// The application sending a datagram: the system call, UDP and IP
    /// output, the driver and its reclaim.
    pub udp_send: u64,
    /// Sending a datagram, per byte (the copy-in and the checksum).
    pub udp_send_per_byte: f64,
    /// The application reading one segment's data from a TCP socket (its
    /// share of a large read call, and the copy-out).
    pub tcp_read: u64,
    /// The data cache a server's locality plays out in, in bytes (one
    /// level, least recently used; 0: not modelled).
    pub cache_bytes: u64,
    /// A byte that misses that cache, beyond what a hit costs, in ns.
    pub cache_miss_per_byte: f64,
}

/// Per-packet costs of the Linux forwarding path, named after Spanos et
/// al.'s decomposition of T_const, in nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxCosts {
    /// Context switch into the interrupt service routine.
    pub t_cs_in: u64,
    /// Context switch out of it.
    pub t_cs_out: u64,
    /// Receive bookkeeping per packet (descriptor, skb).
    pub t_rx: u64,
    /// Copy, per byte of frame.
    pub t_copy_per_byte: f64,
    /// IP processing and forwarding decision.
    pub t_ip: u64,
    /// Transmit bookkeeping per packet (driver start_xmit).
    pub t_tx: u64,
    /// Freeing a transmitted socket buffer whose lines are still cached.
    pub t_skb: u64,
    /// Extra cost of freeing one whose lines have been evicted.
    pub t_skb_cold: u64,
    /// How many later frames a buffer survives in the cache: a buffer
    /// reclaimed after more than this many other frames were sent is cold.
    pub cache_buffers: u64,
}

/// A testbed's cost profile.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name, used in scenarios and results.
    pub name: String,
    /// The machine and OS measured.
    pub testbed: String,
    /// The published numbers the costs were calibrated from.
    pub calibrated_from: Vec<String>,
    /// The link.
    pub wire: Wire,
    /// The interface.
    pub nic: Nic,
    /// CPU costs.
    #[serde(default)]
    pub cost: Costs,
    /// The Linux forwarding path's costs, for `kernel.kind = "linux"`.
    #[serde(default)]
    pub linux: Option<LinuxCosts>,
    /// The Windows NT receive path's costs, for `kernel.kind = "nt"`.
    #[serde(default)]
    pub nt: Option<NtCosts>,
    /// The profile's free parameters and the published claims that fix
    /// them (`rxsched calibrate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrate: Option<Calibrate>,
    /// The lab's measured costs (`rxsched calibrate --real`): a Linux
    /// host forwarding between veth interfaces, its receive work in NAPI
    /// threads, and rxsched's own dataplane on AF_XDP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabCosts>,
    /// The dotted keys of the costs the profile's text gives (the rest
    /// are zero, and a scenario whose host reads one is refused).
    #[serde(skip)]
    pub given: std::collections::BTreeSet<String>,
}

/// The costs of an NT-style multiprocessor host (Hansen & Jul 1997): the
/// interrupt service routine, the deferred procedure call that does the
/// receive work, the threads that consume it, in nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NtCosts {
    /// The ISR: acknowledge the adapter, disable its interrupts, queue the DPC.
    pub isr: u64,
    /// Entering and leaving one DPC run (or one polling pass).
    pub dpc_entry: u64,
    /// The receive work for one datagram: driver, IP, UDP, the IRP that
    /// completes the consumer's receive.
    pub dpc_packet: u64,
    /// The same, per byte.
    pub dpc_per_byte: f64,
    /// The two-level scheme's monitoring: reading the cycle counter at the
    /// DPC's entry and exit, and the detector's arithmetic.
    pub monitor: u64,
    /// Readying a waiting thread (setting its event, choosing its CPU).
    pub wake: u64,
    /// Switching a CPU from one thread to another.
    pub context_switch: u64,
    /// The consumer's receive call for one datagram, back in user mode.
    pub recv: u64,
    /// The same, per byte (the copy to user memory).
    pub recv_per_byte: f64,
    /// Sending one datagram (the echo reply).
    pub send: u64,
    /// The same, per byte.
    pub send_per_byte: f64,
    /// Taking and releasing an uncontended lock.
    pub lock: u64,
}

impl NtCosts {
    /// Checks the costs' ranges; on failure returns the dotted key and the reason.
    fn check(&self) -> Result<(), (&'static str, &'static str)> {
        for (key, v) in [
            ("nt.isr", self.isr),
            ("nt.dpc_entry", self.dpc_entry),
            ("nt.dpc_packet", self.dpc_packet),
            ("nt.monitor", self.monitor),
            ("nt.wake", self.wake),
            ("nt.context_switch", self.context_switch),
            ("nt.recv", self.recv),
            ("nt.send", self.send),
            ("nt.lock", self.lock),
        ] {
            if v > 1_000_000_000 {
                return Err((key, "a cost must be at most 1e9 ns"));
            }
        }
        if self.dpc_packet == 0 && self.dpc_per_byte == 0.0 {
            return Err((
                "nt.dpc_packet",
                "the receive work must cost something (or no load could ever saturate)",
            ));
        }
        Ok(())
    }
}

impl Profile {
    /// Parses a profile from TOML text.
    pub fn parse(file: &str, src: &str) -> Result<Profile, InputError> {
        let mut p: Profile = toml::from_str(src).map_err(|e| from_toml(file, src, &e))?;
        p.given = reads::given(src);
        p.check().map_err(|(key, msg)| InputError {
            file: file.to_string(),
            line: crate::error::line_of(src, key),
            key: Some(key.to_string()),
            msg: msg.to_string(),
        })?;
        Ok(p)
    }

    /// Checks ranges; on failure returns the dotted key and the reason.
    fn check(&self) -> Result<(), (&'static str, &'static str)> {
        self.check_link()?;
        self.check_per_byte()?;
        if self.wire.cell_payload_bytes > 0
            && !(self.wire.cell_payload_bytes..=65_535).contains(&self.wire.cell_bytes)
        {
            return Err((
                "wire.cell_bytes",
                "a cell is at least its payload and at most 65535 bytes",
            ));
        }
        if let Some(n) = &self.nt {
            n.check()?;
        }
        let c = &self.cost;
        // A clock faster than 100 kHz, or whose tick costs its whole period,
        // leaves the model nothing but clock interrupts.
        if c.clock_hz > 100_000 {
            return Err((
                "cost.clock_hz",
                "must be at most 100000 interrupts per second",
            ));
        }
        if c.clock_hz > 0 && c.clock_tick.saturating_mul(c.clock_hz) >= 1_000_000_000 {
            return Err((
                "cost.clock_tick",
                "the clock interrupt must cost less than its period",
            ));
        }
        Ok(())
    }

    /// The line rate and the rings.
    fn check_link(&self) -> Result<(), (&'static str, &'static str)> {
        let bps = self.wire.bit_rate_bps;
        if !(bps.is_finite() && (1e3..=1e12).contains(&bps)) {
            return Err((
                "wire.bit_rate_bps",
                "must be a rate from 1e3 to 1e12 bits per second",
            ));
        }
        for (key, v) in [
            ("nic.rx_ring", self.nic.rx_ring),
            ("nic.tx_ring", self.nic.tx_ring),
        ] {
            if !(1..=1 << 20).contains(&v) {
                return Err((key, "must be from 1 to 1048576 descriptors"));
            }
        }
        Ok(())
    }

    /// Every per-byte cost, of every kernel's table.
    fn check_per_byte(&self) -> Result<(), (&'static str, &'static str)> {
        let c = &self.cost;
        let nt = |f: fn(&NtCosts) -> f64| self.nt.as_ref().map_or(0.0, f);
        for (key, v) in [
            ("cost.rx_copy_per_byte", c.rx_copy_per_byte),
            ("cost.app_read_per_byte", c.app_read_per_byte),
            ("cost.tcp_input_per_byte", c.tcp_input_per_byte),
            ("cost.udp_send_per_byte", c.udp_send_per_byte),
            (
                "linux.t_copy_per_byte",
                self.linux.as_ref().map_or(0.0, |l| l.t_copy_per_byte),
            ),
            ("nt.dpc_per_byte", nt(|n| n.dpc_per_byte)),
            ("nt.recv_per_byte", nt(|n| n.recv_per_byte)),
            ("nt.send_per_byte", nt(|n| n.send_per_byte)),
        ] {
            if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                return Err((key, "a per-byte cost must be a number from 0 to 1e6 ns"));
            }
        }
        Ok(())
    }

    /// Checks that the profile has the costs kernel `kind` needs (`[linux]`
    /// for Linux, `[nt]` for NT); `name` is the scenario's name for it.
    pub fn check_kernel(&self, kind: KernelKind, name: &str) -> Result<(), InputError> {
        let (table, has, example) = match kind {
            KernelKind::Linux => ("linux", self.linux.is_some(), "mpc8250-linux"),
            KernelKind::Nt => ("nt", self.nt.is_some(), "dual-p133-nt4"),
            KernelKind::Lab => ("lab", self.lab.is_some(), "linux-veth-lab"),
            _ => return Ok(()),
        };
        if has {
            return Ok(());
        }
        Err(InputError {
            file: crate::IN_SCENARIO.into(),
            line: None,
            key: Some("kernel.kind".into()),
            msg: format!(
                "\"{table}\" needs a profile with [{table}] costs; profile {name:?} has none (try \"{example}\")"
            ),
        })
    }

    /// A built-in profile by name, or a profile file by path.
    pub fn load(name: &str, base: Option<&std::path::Path>) -> Result<Profile, InputError> {
        if let Some((_, src)) = BUILTIN.iter().find(|(n, _)| *n == name) {
            return Profile::parse(&format!("profiles/{name}.toml"), src);
        }
        let path = match base {
            Some(b) if !std::path::Path::new(name).is_absolute() => b.join(name),
            _ => std::path::PathBuf::from(name),
        };
        if name.ends_with(".toml") {
            let src = std::fs::read_to_string(&path).map_err(|e| InputError {
                file: path.display().to_string(),
                line: None,
                key: None,
                msg: format!("cannot read profile: {e}"),
            })?;
            return Profile::parse(&path.display().to_string(), &src);
        }
        let names: Vec<_> = BUILTIN.iter().map(|(n, _)| *n).collect();
        Err(InputError {
            file: crate::IN_SCENARIO.into(),
            line: None,
            key: Some("profile".into()),
            msg: format!(
                "unknown profile {name:?}; built-in profiles are {}, or give a path ending in .toml",
                names.join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for (name, src) in BUILTIN {
            let p = Profile::parse(name, src).unwrap();
            assert_eq!(&p.name, name);
            assert!(!p.calibrated_from.is_empty());
        }
    }

    #[test]
    fn ethernet_minimum_frame_time() {
        let w = Wire {
            bit_rate_bps: 10e6,
            framing_bytes: 20,
            min_frame_bytes: 64,
            cell_payload_bytes: 0,
            cell_bytes: 0,
        };
        // 84 bytes on the wire at 10 Mb/s: 14,880 frames/s.
        assert_eq!(w.frame_ns(60), 67_200);
        assert!((1e9 / w.frame_ns(64) as f64 - 14_881.0).abs() < 1.0);
    }

    #[test]
    fn line_rate_is_exact_at_400_gbe() {
        let w = Wire {
            bit_rate_bps: 400e9,
            framing_bytes: 20,
            min_frame_bytes: 64,
            cell_payload_bytes: 0,
            cell_bytes: 0,
        };
        // 84 bytes at 400 Gb/s: 595.238 M frames/s, 1.68 ns each.
        let want = 400e9 / (84.0 * 8.0);
        assert!((w.line_rate_pps(64) / want - 1.0).abs() < 1e-4);
    }

    #[test]
    fn atm_cells_pad_the_last_one() {
        // OC-3c's 149.76 Mb/s of payload; AAL5's 8-byte trailer; 48 of 53.
        let w = Wire {
            bit_rate_bps: 149.76e6,
            framing_bytes: 8,
            min_frame_bytes: 0,
            cell_payload_bytes: 48,
            cell_bytes: 53,
        };
        // 1,024 bytes of UDP payload + UDP, IP and LLC/SNAP headers = 1,060:
        // with the trailer 1,068 bytes, 23 cells.
        assert_eq!(
            w.frame_ns(1060),
            (23.0 * 53.0 * 8.0 * 1e9 / 149.76e6_f64).round() as u64
        );
        // 23 cells carry 1,104 bytes: up to 1,096 with the trailer.
        assert_eq!(w.frame_ns(1096), w.frame_ns(1060));
        assert!(w.frame_ns(1097) > w.frame_ns(1096));
    }

    #[test]
    fn unknown_key_names_line() {
        let src = "name='x'\ntestbed='t'\ncalibrated_from=[]\n[wire]\nbit_rate_bps=1.0\n[nic]\nrx_ring=1\ntx_ring=1\n[cost]\nbogus=3\n";
        let e = Profile::parse("p.toml", src).unwrap_err();
        assert_eq!(e.line, Some(10));
        assert_eq!(e.key.as_deref(), Some("bogus"));
    }
}
