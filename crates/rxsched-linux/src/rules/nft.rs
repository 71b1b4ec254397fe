//! The rules as an nftables ruleset: the same screening in the kernel,
//! the peer `bench real screen` measures against.

use super::*;

impl Rules {
    /// The same rules as an nftables ruleset for Linux's own forwarding
    /// path: table `inet rxsched` (IPv4 and IPv6, as the rules), a
    /// forward-hook chain whose policy is the default deny, one counted
    /// rule per rule in order: `proto` as `meta l4proto`, the addresses
    /// as `ip saddr`/`ip daddr` (which, as the rules' addresses, match
    /// IPv4 only). nftables, like these rules, matches ports only in
    /// unfragmented first fragments; for an IPv6 packet with extension
    /// headers it looks past them, where the rules stop at the first.
    pub fn to_nft(&self) -> String {
        let mut out = String::from(
            "table inet rxsched {\n  chain forward {\n    type filter hook forward priority 0; policy drop;\n",
        );
        for (i, r) in self.rules.iter().enumerate() {
            let mut m = Vec::new();
            if let Some(p) = r.proto {
                m.push(format!("meta l4proto {p}"));
            }
            if let Some(n) = r.from {
                m.push(format!("ip saddr {n}"));
            }
            if let Some(n) = r.to {
                m.push(format!("ip daddr {n}"));
            }
            let l4 = if r.proto == Some(TCP) { "tcp" } else { "udp" };
            for (k, ports) in [("sport", r.sport), ("dport", r.dport)] {
                if let Some(p) = ports {
                    let range = if p.lo == p.hi {
                        p.lo.to_string()
                    } else {
                        format!("{}-{}", p.lo, p.hi)
                    };
                    m.push(format!("{l4} {k} {range}"));
                }
            }
            let verdict = match r.action {
                Action::Accept => "accept",
                Action::Deny => "drop",
            };
            m.push(format!(
                "counter {verdict} comment \"{}\"",
                self.label(Decided::Rule(i))
            ));
            out.push_str(&format!("    {}\n", m.join(" ")));
        }
        out.push_str("  }\n}\n");
        out
    }
}
