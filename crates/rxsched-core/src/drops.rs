//! Named drop points. Every discarded packet is counted at exactly one.

use std::collections::BTreeMap;

/// Where a packet was discarded. Its name in metrics records is the
/// variant's name in snake case (`nic_rx_ring`, `ipintrq`, ...).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::VariantArray,
    serde::Serialize,
    serde::Deserialize,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum DropPoint {
    /// The NIC receive ring was full: dropped before the host touched it (M6).
    NicRxRing,
    /// The IP input queue (`ipintrq`) was full, after link-level work was spent.
    Ipintrq,
    /// The interface output queue was full, after IP work was spent.
    OutputQueue,
    /// The user-level screening queue (screend) was full.
    ScreenQueue,
    /// The socket receive buffer was full.
    SocketBuffer,
    /// An SRP unprocessed input queue was full (the buffering check).
    Uiq,
    /// An LRP channel was full: dropped at the interface.
    LrpChannel,
    /// A TCP segment out of order at a host that keeps no reassembly queue.
    TcpOutOfOrder,
    /// A packet-filter (capture) queue was full.
    FilterQueue,
    /// A per-CPU backlog queue was full (Linux RPS).
    Backlog,
    /// The screening stage denied the packet (a policy drop, not overload).
    ScreenDenied,
    /// An AF_XDP socket's receive ring (or fill ring) was full: dropped by
    /// the kernel after its receive work was spent on the frame.
    XskRxRing,
    /// The output port was down or gone.
    PortDown,
    /// No consumer owns the datagram (SRP's demultiplexer found no stage).
    NoPcb,
    /// Refused: shorter than its headers say.
    Truncated,
    /// Refused: not IPv4.
    NotIpv4,
    /// Refused: an IPv4 header length below 20 bytes or past the frame.
    BadIhl,
    /// Refused: a wrong IPv4 header checksum.
    BadChecksum,
    /// Refused: the TTL would reach zero.
    TtlExpired,
    /// Refused: no route to the destination.
    NoRoute,
    /// Refused: larger than the egress port's MTU.
    TooBig,
    /// Addressed to another host's MAC: a NIC out of promiscuous mode
    /// would not have taken it.
    OtherHost,
    /// A monitor's copy ring was full: the frame went on to the host's
    /// stack uncopied.
    CopyRing,
}

impl DropPoint {
    /// Every drop point, in reporting order.
    pub const ALL: &'static [DropPoint] = <DropPoint as strum::VariantArray>::VARIANTS;

    /// Whether a packet dropped here died before the host spent work on
    /// it: at the NIC's ring, or at an early demultiplexer's queue (LRP's
    /// channel, SRP's buffering check, no consumer), or as another host's
    /// frame, or uncopied by a monitor. Drops after work are livelock's
    /// waste; the cure moves drops before the work.
    pub fn before_work(self) -> bool {
        matches!(
            self,
            DropPoint::NicRxRing
                | DropPoint::LrpChannel
                | DropPoint::Uiq
                | DropPoint::NoPcb
                | DropPoint::OtherHost
                | DropPoint::CopyRing
        )
    }

    /// The name used in metrics records.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The drop point of this name, if there is one.
    pub fn from_name(name: &str) -> Option<DropPoint> {
        DropPoint::ALL.iter().copied().find(|p| p.name() == name)
    }
}

impl std::fmt::Display for DropPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Drop counters indexed by [`DropPoint`]; cheap enough for a hot path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropCounts {
    counts: [u64; DropPoint::ALL.len()],
}

impl DropCounts {
    /// Counts one drop at `point`.
    pub fn add(&mut self, point: DropPoint) {
        self.counts[point as usize] += 1;
    }

    /// The count at `point`.
    pub fn get(&self, point: DropPoint) -> u64 {
        self.counts[point as usize]
    }

    /// All drops together.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Non-zero counts by name, in a stable order.
    pub fn to_map(&self) -> BTreeMap<String, u64> {
        DropPoint::ALL
            .iter()
            .filter(|p| self.get(**p) > 0)
            .map(|p| (p.name().to_string(), self.get(*p)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_point() {
        let mut d = DropCounts::default();
        d.add(DropPoint::Ipintrq);
        d.add(DropPoint::Ipintrq);
        d.add(DropPoint::NicRxRing);
        assert_eq!(d.get(DropPoint::Ipintrq), 2);
        assert_eq!(d.total(), 3);
        let m = d.to_map();
        assert_eq!(m.len(), 2);
        assert_eq!(m["nic_rx_ring"], 1);
    }

    #[test]
    fn names_round_trip_through_serde_and_strum_alike() {
        for p in DropPoint::ALL {
            let json = serde_json::to_string(p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(DropPoint::from_name(p.name()), Some(*p));
        }
        assert_eq!(DropPoint::from_name("nowhere"), None);
    }
}
