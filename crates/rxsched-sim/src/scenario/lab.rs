//! `[lab]`: the lab's dataplane under `kernel.kind = "lab"` (see
//! `crate::lab`): which forwarder runs on the DUT.

use serde::{Deserialize, Serialize};

/// Which forwarder the lab's DUT runs, as `rxsched bench real` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LabForwarder {
    /// Linux's own `ip_forward`, in the device's NAPI thread at normal
    /// priority.
    Kernel,
    /// Forwarding in XDP (`xdp-fwd`), in the NAPI thread at normal priority.
    XdpFwd,
    /// `route --mode interrupt`: the NAPI thread at device priority fills
    /// the AF_XDP socket's ring, a normal-priority thread forwards.
    Interrupt,
    /// `route --mode polling`: the polling thread owns the receive work
    /// (the NAPI thread just below it, held off by M3 and M4).
    #[default]
    Polling,
    /// `route --mode polling --forward-in xdp`: the NAPI thread forwards in
    /// XDP, the polling thread keeps the policy (M4).
    PollingInXdp,
}

impl LabForwarder {
    /// Whether rxsched's polling thread keeps the policy (its loop, M4).
    pub fn polls(self) -> bool {
        matches!(self, LabForwarder::Polling | LabForwarder::PollingInXdp)
    }

    /// Whether the receive work hands frames to the router's AF_XDP
    /// socket, rather than forwarding them itself.
    pub fn to_socket(self) -> bool {
        matches!(self, LabForwarder::Polling | LabForwarder::Interrupt)
    }

    /// Whether rxsched's router runs at all (a thread of its own).
    pub fn ours(self) -> bool {
        self.polls() || self.to_socket()
    }
}

/// `[lab]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LabCfg {
    /// The forwarder.
    pub forwarder: LabForwarder,
}
