//! The screening rule language shared by `route --screen` and `capture
//! --filter`: ordered accept/deny rules on protocol, source and destination
//! prefixes and port ranges; the first rule that matches decides, and a
//! packet no rule matches is denied.
//!
//! ```text
//! # comment
//! accept proto udp from 198.18.0.0/24 to 198.19.0.0/24 dport 9000-9100
//! deny proto tcp dport 22
//! accept from 198.18.0.1
//! ```
//!
//! A rule is an action followed by clauses, each at most once: `proto`
//! (`tcp`, `udp`, `icmp` or a number 0-255), `from` and `to` (an IPv4
//! prefix or address, or `any`), `sport` and `dport` (a port `N`, a range
//! `N-M` or `any`; only with `proto tcp` or `proto udp`). A rule with no
//! clauses matches every frame, IPv4 or not; any clause makes it match IPv4
//! packets only, and a port clause unfragmented first fragments only.

use crate::wire::{EthernetFrame, Ipv4Packet, ETHERTYPE_IPV4};
use ipnet::Ipv4Net;
use std::fmt;
use std::net::Ipv4Addr;

/// What a rule does with a packet it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Let it through.
    Accept,
    /// Drop it.
    Deny,
}

/// An inclusive port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// Lowest port.
    pub lo: u16,
    /// Highest port.
    pub hi: u16,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Its action.
    pub action: Action,
    /// IP protocol number.
    pub proto: Option<u8>,
    /// Source prefix.
    pub from: Option<Ipv4Net>,
    /// Destination prefix.
    pub to: Option<Ipv4Net>,
    /// Source ports.
    pub sport: Option<Ports>,
    /// Destination ports.
    pub dport: Option<Ports>,
    /// The line of the file it came from (1-based; 0 if built in code).
    pub line: usize,
}

/// What the rules look at in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flow {
    /// IPv4 fields, or `None` for a frame that is not an intact IPv4 packet.
    pub ip: Option<IpFlow>,
}

/// An IPv4 packet's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpFlow {
    /// Protocol number.
    pub proto: u8,
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Source and destination ports (TCP or UDP first fragments only).
    pub ports: Option<(u16, u16)>,
}

impl Flow {
    /// Reads the fields the rules need from an Ethernet frame.
    pub fn of_frame(frame: &[u8]) -> Flow {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return Flow::default();
        };
        if eth.ethertype() != ETHERTYPE_IPV4 {
            return Flow::default();
        }
        let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
            return Flow::default();
        };
        let proto = ip.protocol();
        let l4 = ip.payload();
        let ports = ((proto == TCP || proto == UDP) && ip.fragment_offset() == 0 && l4.len() >= 4)
            .then(|| {
                (
                    u16::from_be_bytes([l4[0], l4[1]]),
                    u16::from_be_bytes([l4[2], l4[3]]),
                )
            });
        Flow {
            ip: Some(IpFlow {
                proto,
                src: ip.src(),
                dst: ip.dst(),
                ports,
            }),
        }
    }
}

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;

impl Rule {
    /// Whether the rule matches `f`.
    pub fn matches(&self, f: &Flow) -> bool {
        let any_clause = self.proto.is_some()
            || self.from.is_some()
            || self.to.is_some()
            || self.sport.is_some()
            || self.dport.is_some();
        let Some(ip) = f.ip else {
            return !any_clause;
        };
        let port_ok = |want: Option<Ports>, got: Option<u16>| match (want, got) {
            (None, _) => true,
            (Some(r), Some(p)) => (r.lo..=r.hi).contains(&p),
            (Some(_), None) => false,
        };
        self.proto.is_none_or(|p| p == ip.proto)
            && self
                .from
                .is_none_or(|n| n.contains(&Ipv4Addr::from(ip.src)))
            && self.to.is_none_or(|n| n.contains(&Ipv4Addr::from(ip.dst)))
            && port_ok(self.sport, ip.ports.map(|p| p.0))
            && port_ok(self.dport, ip.ports.map(|p| p.1))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.action {
            Action::Accept => "accept",
            Action::Deny => "deny",
        })?;
        if let Some(p) = self.proto {
            match p {
                TCP => write!(f, " proto tcp")?,
                UDP => write!(f, " proto udp")?,
                ICMP => write!(f, " proto icmp")?,
                n => write!(f, " proto {n}")?,
            }
        }
        if let Some(n) = self.from {
            write!(f, " from {n}")?;
        }
        if let Some(n) = self.to {
            write!(f, " to {n}")?;
        }
        for (k, r) in [("sport", self.sport), ("dport", self.dport)] {
            if let Some(r) = r {
                write!(f, " {k} {}-{}", r.lo, r.hi)?;
            }
        }
        Ok(())
    }
}

/// A rule file that could not be read: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {msg}")]
pub struct RuleError {
    /// The file.
    pub file: String,
    /// The line (1-based).
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

/// An ordered rule set: the first match decides, no match denies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// The rules in order.
    pub rules: Vec<Rule>,
}

/// Which rule decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Rule `i` (0-based, in file order).
    Rule(usize),
    /// No rule matched: the default deny.
    Default,
}

impl Rules {
    /// Reads a rule file.
    pub fn load(path: &str) -> Result<Rules, RuleError> {
        let text = std::fs::read_to_string(path).map_err(|e| RuleError {
            file: path.to_string(),
            line: 0,
            msg: format!("cannot read the rule file: {e}"),
        })?;
        Rules::parse(path, &text)
    }

    /// Parses rule text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Rules, RuleError> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let rule = parse_rule(line, i + 1).map_err(|msg| RuleError {
                file: file.to_string(),
                line: i + 1,
                msg,
            })?;
            rules.push(rule);
        }
        Ok(Rules { rules })
    }

    /// The verdict for `f`, and which rule gave it.
    pub fn verdict(&self, f: &Flow) -> (Action, Decided) {
        match self.rules.iter().position(|r| r.matches(f)) {
            Some(i) => (self.rules[i].action, Decided::Rule(i)),
            None => (Action::Deny, Decided::Default),
        }
    }

    /// A counter name for what decided: `rule3_line7` or `default`.
    pub fn label(&self, d: Decided) -> String {
        match d {
            Decided::Rule(i) => format!("rule{}_line{}", i + 1, self.rules[i].line),
            Decided::Default => "default".to_string(),
        }
    }
}

impl Rules {
    /// The same rules as an nftables ruleset for Linux's own forwarding
    /// path: table `ip rxsched`, a forward-hook chain whose policy is the
    /// default deny, one counted rule per rule in order. nftables, like
    /// these rules, matches ports only in unfragmented first fragments.
    pub fn to_nft(&self) -> String {
        let mut out = String::from(
            "table ip rxsched {\n  chain forward {\n    type filter hook forward priority 0; policy drop;\n",
        );
        for (i, r) in self.rules.iter().enumerate() {
            let mut m = Vec::new();
            if let Some(p) = r.proto {
                m.push(format!("ip protocol {p}"));
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

fn parse_rule(line: &str, n: usize) -> Result<Rule, String> {
    let mut words = line.split_whitespace();
    let action = match words.next() {
        Some("accept") => Action::Accept,
        Some("deny") => Action::Deny,
        Some(w) => return Err(format!("a rule starts with `accept` or `deny`, not {w:?}")),
        None => return Err("empty rule".into()),
    };
    let mut r = Rule {
        action,
        proto: None,
        from: None,
        to: None,
        sport: None,
        dport: None,
        line: n,
    };
    let mut seen: Vec<&str> = Vec::new();
    while let Some(key) = words.next() {
        if seen.contains(&key) {
            return Err(format!("`{key}` given twice"));
        }
        let val = words
            .next()
            .ok_or_else(|| format!("`{key}` needs a value"))?;
        match key {
            "proto" => r.proto = Some(proto(val)?),
            "from" => r.from = prefix(val)?,
            "to" => r.to = prefix(val)?,
            "sport" => r.sport = ports(val)?,
            "dport" => r.dport = ports(val)?,
            k => {
                return Err(format!(
                    "unknown clause {k:?}: expected proto, from, to, sport or dport"
                ))
            }
        }
        seen.push(key);
    }
    if (r.sport.is_some() || r.dport.is_some()) && !matches!(r.proto, Some(TCP | UDP)) {
        return Err("a port clause needs `proto tcp` or `proto udp`".into());
    }
    Ok(r)
}

fn proto(v: &str) -> Result<u8, String> {
    match v {
        "tcp" => Ok(TCP),
        "udp" => Ok(UDP),
        "icmp" => Ok(ICMP),
        n => n
            .parse()
            .map_err(|_| format!("proto {n:?}: expected tcp, udp, icmp or a number 0-255")),
    }
}

fn prefix(v: &str) -> Result<Option<Ipv4Net>, String> {
    if v == "any" {
        return Ok(None);
    }
    let net = if v.contains('/') {
        v.parse::<Ipv4Net>()
            .map_err(|_| format!("{v:?} is not an IPv4 prefix"))?
    } else {
        Ipv4Net::from(
            v.parse::<Ipv4Addr>()
                .map_err(|_| format!("{v:?} is not an IPv4 address or prefix"))?,
        )
    };
    Ok(Some(net.trunc()))
}

fn ports(v: &str) -> Result<Option<Ports>, String> {
    if v == "any" {
        return Ok(None);
    }
    let num = |s: &str| {
        s.parse::<u16>()
            .map_err(|_| format!("port {s:?} is not a number 0-65535"))
    };
    let (lo, hi) = match v.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => (num(v)?, num(v)?),
    };
    if lo > hi {
        return Err(format!("port range {v:?} runs backwards"));
    }
    Ok(Some(Ports { lo, hi }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn translates_to_an_nftables_ruleset() {
        let r = Rules::parse(
            "t",
            "deny proto tcp dport 22\naccept proto udp from 198.18.0.0/24 to 198.19.0.1 sport 1-2\naccept\n",
        )
        .unwrap();
        let nft = r.to_nft();
        let lines: Vec<&str> = nft.lines().map(str::trim).collect();
        assert_eq!(
            lines[2],
            "type filter hook forward priority 0; policy drop;"
        );
        assert_eq!(
            lines[3],
            "ip protocol 6 tcp dport 22 counter drop comment \"rule1_line1\""
        );
        assert_eq!(
            lines[4],
            "ip protocol 17 ip saddr 198.18.0.0/24 ip daddr 198.19.0.1/32 udp sport 1-2 counter accept comment \"rule2_line2\""
        );
        assert_eq!(lines[5], "counter accept comment \"rule3_line3\"");
        // nft itself accepts it (check mode changes nothing).
        if !crate::needs::tool("nft", "nftables") {
            return;
        }
        let mut f = tempfile_in_tmp("rxsched-nft-test");
        std::io::Write::write_all(&mut f.1, nft.as_bytes()).unwrap();
        let o = std::process::Command::new("nft")
            .args(["-c", "-f"])
            .arg(&f.0)
            .output()
            .expect("run nft");
        std::fs::remove_file(&f.0).ok();
        assert!(
            o.status.success(),
            "nft -c refused it: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn tempfile_in_tmp(name: &str) -> (std::path::PathBuf, std::fs::File) {
        let p = std::env::temp_dir().join(format!("{name}-{}.nft", std::process::id()));
        let f = std::fs::File::create(&p).unwrap();
        (p, f)
    }

    #[test]
    fn parses_and_decides_first_match() {
        let r = Rules::parse(
            "t.rules",
            "# screening\n\naccept proto udp from 198.18.0.0/24 dport 9000-9100\ndeny proto udp\naccept from 198.18.0.1 # a host\n",
        )
        .unwrap();
        assert_eq!(r.rules.len(), 3);
        assert_eq!(r.rules[2].line, 5);
        let udp = |src, dport| Flow {
            ip: Some(IpFlow {
                proto: UDP,
                src,
                dst: [198, 19, 0, 1],
                ports: Some((1, dport)),
            }),
        };
        assert_eq!(r.verdict(&udp([198, 18, 0, 7], 9050)).1, Decided::Rule(0));
        assert_eq!(r.verdict(&udp([198, 18, 0, 7], 80)).0, Action::Deny);
        let icmp = Flow {
            ip: Some(IpFlow {
                proto: ICMP,
                src: [198, 18, 0, 1],
                dst: [1, 2, 3, 4],
                ports: None,
            }),
        };
        assert_eq!(r.verdict(&icmp), (Action::Accept, Decided::Rule(2)));
        assert_eq!(
            r.verdict(&Flow::default()),
            (Action::Deny, Decided::Default)
        );
        assert_eq!(r.label(Decided::Rule(2)), "rule3_line5");
    }

    #[test]
    fn bad_rules_name_the_file_and_line() {
        for (text, line, what) in [
            ("accept\npermit proto udp\n", 2, "starts with"),
            ("accept proto xyz\n", 1, "proto"),
            ("deny from 300.1.1.1\n", 1, "not an IPv4"),
            ("deny proto udp dport 9-1\n", 1, "backwards"),
            ("deny dport 22\n", 1, "needs `proto tcp`"),
            ("deny proto tcp proto udp\n", 1, "twice"),
            ("deny to\n", 1, "needs a value"),
            ("\n\naccept via d0\n", 3, "unknown clause"),
        ] {
            let e = Rules::parse("bad.rules", text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.msg.contains(what), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("bad.rules:{line}: ")));
        }
    }

    #[test]
    fn reads_frames() {
        let mut b = vec![0u8; 128];
        let n = crate::wire::build_udp_frame(
            &mut b,
            64,
            crate::wire::Mac([2; 6]),
            crate::wire::Mac([4; 6]),
            [198, 18, 0, 1],
            [198, 19, 0, 1],
            (4000, 9000),
            0,
            0,
        );
        let f = Flow::of_frame(&b[..n]);
        assert_eq!(
            f.ip,
            Some(IpFlow {
                proto: UDP,
                src: [198, 18, 0, 1],
                dst: [198, 19, 0, 1],
                ports: Some((4000, 9000))
            })
        );
        assert_eq!(Flow::of_frame(&b[..10]), Flow::default());
    }

    /// A matcher written the simple way, for the property test: masks and
    /// comparisons, no prefix library.
    fn reference(rules: &[Rule], f: &Flow) -> Action {
        for r in rules {
            let clauses = r.proto.is_some()
                || r.from.is_some()
                || r.to.is_some()
                || r.sport.is_some()
                || r.dport.is_some();
            let ok = match f.ip {
                None => !clauses,
                Some(ip) => {
                    let inside = |net: Option<Ipv4Net>, a: [u8; 4]| match net {
                        None => true,
                        Some(n) => {
                            let len = n.prefix_len() as u32;
                            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                            u32::from_be_bytes(a) & mask == u32::from(n.network()) & mask
                        }
                    };
                    let port = |want: Option<Ports>, got: Option<u16>| match want {
                        None => true,
                        Some(p) => got.is_some_and(|g| p.lo <= g && g <= p.hi),
                    };
                    (r.proto.is_none() || r.proto == Some(ip.proto))
                        && inside(r.from, ip.src)
                        && inside(r.to, ip.dst)
                        && port(r.sport, ip.ports.map(|p| p.0))
                        && port(r.dport, ip.ports.map(|p| p.1))
                }
            };
            if ok {
                return r.action;
            }
        }
        Action::Deny
    }

    fn addr() -> impl Strategy<Value = [u8; 4]> {
        // A small space, so that random rules and packets meet often.
        (0u8..4, 0u8..4).prop_map(|(a, b)| [198, 18 + (a & 1), b, a])
    }

    fn rule() -> impl Strategy<Value = Rule> {
        let net =
            || (addr(), 22u8..=32).prop_map(|(a, l)| Ipv4Net::new(a.into(), l).unwrap().trunc());
        let ports = || {
            (0u16..8, 0u16..8).prop_map(|(a, b)| Ports {
                lo: 9000 + a.min(b),
                hi: 9000 + a.max(b),
            })
        };
        (
            any::<bool>(),
            prop::option::of(prop::sample::select(vec![TCP, UDP, ICMP])),
            prop::option::of(net()),
            prop::option::of(net()),
            prop::option::of(ports()),
            prop::option::of(ports()),
        )
            .prop_map(|(acc, proto, from, to, sport, dport)| {
                let tcpudp = matches!(proto, Some(TCP | UDP));
                Rule {
                    action: if acc { Action::Accept } else { Action::Deny },
                    proto,
                    from,
                    to,
                    sport: sport.filter(|_| tcpudp),
                    dport: dport.filter(|_| tcpudp),
                    line: 0,
                }
            })
    }

    fn flow() -> impl Strategy<Value = Flow> {
        let ip = (
            prop::sample::select(vec![TCP, UDP, ICMP, 47]),
            addr(),
            addr(),
            (9000u16..9010, 9000u16..9010),
        )
            .prop_map(|(proto, src, dst, p)| IpFlow {
                proto,
                src,
                dst,
                ports: matches!(proto, TCP | UDP).then_some(p),
            });
        prop::option::of(ip).prop_map(|ip| Flow { ip })
    }

    proptest! {
        /// The rule set and the simple matcher agree on every packet, and
        /// a rule set printed and read back decides the same way.
        #[test]
        fn agrees_with_a_simple_matcher(
            rules in prop::collection::vec(rule(), 0..8),
            flows in prop::collection::vec(flow(), 1..32),
        ) {
            let set = Rules { rules: rules.clone() };
            let text: String = rules.iter().map(|r| format!("{r}\n")).collect();
            let back = Rules::parse("printed", &text).unwrap();
            for f in &flows {
                prop_assert_eq!(set.verdict(f).0, reference(&rules, f));
                prop_assert_eq!(back.verdict(f), set.verdict(f));
            }
        }
    }
}
