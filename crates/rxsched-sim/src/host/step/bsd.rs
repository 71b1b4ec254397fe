//! The steps of the BSD network stack (the bsd, emulated and polling
//! kernels, and SRP's gateway output).

use crate::engine::packet::Packet;

/// Work of the BSD stack.
#[derive(Debug, Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Step {
    /// The receive interrupt's link-level work for one frame: copy, parse,
    /// enqueue on `ipintrq`.
    RxLink(Packet),
    /// Switching into the IP software interrupt or kernel thread.
    IpSwitch,
    /// IP input up to the forwarding or delivery decision.
    IpInput(Packet),
    /// `ip_output` and the driver, up to handing the frame to the device.
    IpOutput(Packet),
    /// The output path's work after the frame was handed to the device.
    OutputDone,
    /// UDP input and the socket enqueue.
    UdpInput(Packet),
    /// TCP input, the socket enqueue and the ACK (a receiving host).
    TcpInput(Packet),
    /// The packet filter: match, enqueue for the capture process, wake it.
    Filter(Packet),
    /// Reclaiming one transmitted buffer on port `n`.
    TxReclaim(u8, Packet),
    /// Loading one prepared frame onto port `n`'s transmit ring.
    Load(u8),
}

impl Step {
    /// The packet the step carries.
    pub fn packet(&self) -> Option<Packet> {
        match *self {
            Step::RxLink(p)
            | Step::IpInput(p)
            | Step::IpOutput(p)
            | Step::UdpInput(p)
            | Step::TcpInput(p)
            | Step::Filter(p) => Some(p),
            Step::IpSwitch | Step::TxReclaim(..) | Step::Load(_) | Step::OutputDone => None,
        }
    }
}
