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
//! (`tcp`, `udp`, `icmp`, `icmp6` or a number 0-255), `from` and `to` (an
//! IPv4 prefix or address, or `any`), `sport` and `dport` (a port `N`, a
//! range `N-M` or `any`; only with `proto tcp` or `proto udp`). A rule with
//! no clauses matches every frame, IP or not. Any clause makes it match IP
//! packets only: `proto` and the ports look at IPv4 and IPv6 alike (IPv6's
//! next header, so a packet with extension headers has the first of them
//! as its protocol and no ports), `from` and `to` at IPv4 only, so a rule
//! with an address matches no IPv6 packet. A port clause matches
//! unfragmented first fragments only.

use crate::wire::{EthernetFrame, Ipv4Packet, Ipv6Packet, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
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
    /// IP fields, or `None` for a frame that is not an intact IPv4 or
    /// IPv6 packet.
    pub ip: Option<IpFlow>,
}

/// An IP packet's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpFlow {
    /// Protocol number (IPv6: the next header).
    pub proto: u8,
    /// IPv6 (whose addresses no rule looks at).
    pub v6: bool,
    /// Source address (IPv4; zeros for IPv6).
    pub src: [u8; 4],
    /// Destination address (IPv4; zeros for IPv6).
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
        let ports = |proto: u8, first: bool, l4: &[u8]| {
            ((proto == TCP || proto == UDP) && first && l4.len() >= 4).then(|| {
                (
                    u16::from_be_bytes([l4[0], l4[1]]),
                    u16::from_be_bytes([l4[2], l4[3]]),
                )
            })
        };
        let ip = match eth.ethertype() {
            ETHERTYPE_IPV4 => Ipv4Packet::new_checked(eth.payload()).ok().map(|ip| {
                let proto = ip.protocol();
                IpFlow {
                    proto,
                    v6: false,
                    src: ip.src(),
                    dst: ip.dst(),
                    ports: ports(proto, ip.fragment_offset() == 0, ip.payload()),
                }
            }),
            ETHERTYPE_IPV6 => Ipv6Packet::new_checked(eth.payload()).ok().map(|ip| {
                let proto = ip.next_header();
                IpFlow {
                    proto,
                    v6: true,
                    src: [0; 4],
                    dst: [0; 4],
                    ports: ports(proto, true, ip.payload()),
                }
            }),
            _ => None,
        };
        Flow { ip }
    }
}

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const ICMP6: u8 = 58;

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
        let addressed = self.from.is_some() || self.to.is_some();
        self.proto.is_none_or(|p| p == ip.proto)
            && !(ip.v6 && addressed)
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
                ICMP6 => write!(f, " proto icmp6")?,
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
        "icmp6" | "ipv6-icmp" => Ok(ICMP6),
        n => n
            .parse()
            .map_err(|_| format!("proto {n:?}: expected tcp, udp, icmp, icmp6 or a number 0-255")),
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

mod nft;

#[cfg(test)]
mod tests;
