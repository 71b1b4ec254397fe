//! `[lab]`: the lab's dataplane under `kernel.kind = "lab"` (see
//! `crate::lab`): which forwarder runs on the DUT.

use serde::{Deserialize, Serialize};

/// Which dataplane the lab's DUT runs: a forwarder as `rxsched bench real`
/// names them, or `rxsched capture` (`bench real capture`).
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
    /// `rxsched capture` copying (its default, passive): the device's XDP
    /// program copies each frame into a ring buffer (while it has room)
    /// and passes the frame on to the host's stack, in the NAPI thread at
    /// normal priority; the monitor's polling thread (`SCHED_FIFO` 1)
    /// reads the copies onto the packet-filter queue; a writer thread
    /// (normal) writes them. M3 watches that queue, M4 charges the polling
    /// thread alone (the receive work is the host's).
    CaptureCopy,
    /// `rxsched capture --take`: the frames go to the monitor's AF_XDP
    /// socket, its polling thread owns the receive work as the polling
    /// router does (gate, M4), and the writer writes them.
    CaptureTake,
}

impl LabForwarder {
    /// Whether rxsched's polling thread keeps the policy (its loop, M4).
    pub fn polls(self) -> bool {
        matches!(self, LabForwarder::Polling | LabForwarder::PollingInXdp) || self.captures()
    }

    /// Whether the receive work hands frames to the router's AF_XDP
    /// socket, rather than forwarding them itself.
    pub fn to_socket(self) -> bool {
        matches!(
            self,
            LabForwarder::Polling | LabForwarder::Interrupt | LabForwarder::CaptureTake
        )
    }

    /// Whether the DUT runs `rxsched capture` (a writer behind the
    /// polling thread, its packet-filter queue between them).
    pub fn captures(self) -> bool {
        matches!(self, LabForwarder::CaptureCopy | LabForwarder::CaptureTake)
    }

    /// Whether rxsched's router runs at all (a thread of its own).
    pub fn ours(self) -> bool {
        self.polls() || self.to_socket()
    }
}

/// Where the lab's DUT applies a screening rule set (`bench real screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LabScreen {
    /// No rules.
    #[default]
    None,
    /// A screening process behind the router (`route --screen`, the
    /// paper's screend): the router hands each frame to its queue of
    /// `screen_queue` frames, the process (a normal thread) judges it and
    /// sends what it accepts; M3 (`kernel.feedback`) watches that queue.
    Process,
    /// In the receive work: the router's XDP program (`polling-in-xdp`)
    /// or the kernel's nftables ruleset (`kernel`), at their own cost per
    /// frame.
    Program,
}

/// `[lab]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LabCfg {
    /// The forwarder.
    pub forwarder: LabForwarder,
    /// Where the rules run, if any.
    pub screen: LabScreen,
    /// The screening process's queue, in frames (`route --screen-queue`).
    pub screen_queue: u32,
    /// The monitor's packet-filter queue, in frames (`capture --queue`).
    pub filter_queue: u32,
}

impl Default for LabCfg {
    fn default() -> Self {
        LabCfg {
            forwarder: LabForwarder::default(),
            screen: LabScreen::None,
            // route's default --screen-queue, capture's default --queue.
            screen_queue: 1024,
            filter_queue: 1024,
        }
    }
}
