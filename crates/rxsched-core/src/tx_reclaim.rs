//! M8: when transmitted buffers are reclaimed.

/// How a driver learns that frames have left and frees their buffers
/// (Spanos et al. 2008).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxReclaim {
    /// One transmit-complete interrupt per frame (ORIGINAL).
    PerPacket,
    /// One interrupt per `n` frames, reclaiming all of them inside the
    /// interrupt with interrupts off (TX-128 with n = 128).
    Every(u32),
    /// No transmit interrupts: completed descriptors are reclaimed just
    /// before each new transmit, outside interrupt context (TX-OFF).
    BeforeSend,
}

impl TxReclaim {
    /// Whether the frame that completes as the `completed`-th since the last
    /// transmit interrupt raises one.
    pub fn interrupt_now(self, completed: u32) -> bool {
        match self {
            TxReclaim::PerPacket => true,
            TxReclaim::Every(n) => completed >= n.max(1),
            TxReclaim::BeforeSend => false,
        }
    }

    /// Whether the driver reclaims before handing the device a new frame.
    pub fn before_send(self) -> bool {
        self == TxReclaim::BeforeSend
    }

    /// Parses `per-packet`, `every-128` (or `tx-128`), `before-send` (or `off`).
    pub fn parse(s: &str) -> Option<TxReclaim> {
        match s {
            "per-packet" | "original" => Some(TxReclaim::PerPacket),
            "before-send" | "off" | "tx-off" => Some(TxReclaim::BeforeSend),
            _ => {
                let n = s.strip_prefix("every-").or_else(|| s.strip_prefix("tx-"))?;
                n.parse().ok().filter(|n| *n > 0).map(TxReclaim::Every)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_forms() {
        assert_eq!(TxReclaim::parse("every-128"), Some(TxReclaim::Every(128)));
        assert_eq!(TxReclaim::parse("tx-128"), Some(TxReclaim::Every(128)));
        assert_eq!(TxReclaim::parse("before-send"), Some(TxReclaim::BeforeSend));
        assert_eq!(TxReclaim::parse("per-packet"), Some(TxReclaim::PerPacket));
        assert_eq!(TxReclaim::parse("every-0"), None);
    }

    proptest! {
        /// `Every(n)` interrupts exactly once per n completions; `BeforeSend`
        /// never; `PerPacket` always.
        #[test]
        fn interrupt_counts(n in 1u32..300, frames in 0u32..5000) {
            let mut since = 0;
            let mut irqs = 0;
            for _ in 0..frames {
                since += 1;
                if TxReclaim::Every(n).interrupt_now(since) { irqs += 1; since = 0; }
                prop_assert!(!TxReclaim::BeforeSend.interrupt_now(since.max(1)));
                prop_assert!(TxReclaim::PerPacket.interrupt_now(1));
            }
            prop_assert_eq!(irqs, frames / n);
        }
    }
}
