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
)]
#[strum(serialize_all = "snake_case")]
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
}

impl DropPoint {
    /// Every drop point, in reporting order.
    pub const ALL: &'static [DropPoint] = <DropPoint as strum::VariantArray>::VARIANTS;

    /// The name used in metrics records.
    pub fn name(self) -> &'static str {
        self.into()
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
}
