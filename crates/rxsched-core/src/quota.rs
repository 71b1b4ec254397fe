//! Per-callback packet quota (M2).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How many packets one callback may handle before it returns to the
/// polling loop. Mogul & Ramakrishnan 1996 §6.5 study 5, 10, 20, 100 and
/// unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// At most this many packets per callback (always at least 1).
    Limited(u32),
    /// Run until the device has no more work.
    Unlimited,
}

impl Quota {
    /// Whether `done` packets exhaust the quota.
    pub fn exhausted(self, done: u32) -> bool {
        match self {
            Quota::Limited(q) => done >= q,
            Quota::Unlimited => false,
        }
    }

    /// The quota as a count, with `u32::MAX` standing for unlimited.
    pub fn as_count(self) -> u32 {
        match self {
            Quota::Limited(q) => q,
            Quota::Unlimited => u32::MAX,
        }
    }

    /// Parses `5`, `unlimited`, `inf` or `none`.
    pub fn parse(s: &str) -> Option<Quota> {
        match s.trim() {
            "unlimited" | "inf" | "none" | "∞" => Some(Quota::Unlimited),
            t => t.parse::<u32>().ok().filter(|q| *q > 0).map(Quota::Limited),
        }
    }
}

impl std::fmt::Display for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Quota::Limited(q) => write!(f, "{q}"),
            Quota::Unlimited => f.write_str("unlimited"),
        }
    }
}

impl Serialize for Quota {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Quota::Limited(q) => s.serialize_u32(*q),
            Quota::Unlimited => s.serialize_str("unlimited"),
        }
    }
}

impl<'de> Deserialize<'de> for Quota {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quota;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a positive packet count or \"unlimited\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quota, E> {
                if v > 0 && v <= u32::MAX as i64 {
                    Ok(Quota::Limited(v as u32))
                } else {
                    Err(E::custom(format!("quota must be at least 1, got {v}")))
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quota, E> {
                self.visit_i64(v.min(i64::MAX as u64) as i64)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quota, E> {
                Quota::parse(v).ok_or_else(|| {
                    E::custom(format!(
                        "quota must be a positive count or \"unlimited\", got {v:?}"
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_exhaust() {
        assert_eq!(Quota::parse("10"), Some(Quota::Limited(10)));
        assert_eq!(Quota::parse("unlimited"), Some(Quota::Unlimited));
        assert_eq!(Quota::parse("0"), None);
        assert!(Quota::Limited(3).exhausted(3));
        assert!(!Quota::Limited(3).exhausted(2));
        assert!(!Quota::Unlimited.exhausted(u32::MAX));
    }
}
