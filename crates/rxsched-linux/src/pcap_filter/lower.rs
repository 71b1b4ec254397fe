//! Each primitive as the loads and comparisons libpcap makes for it on an
//! Ethernet frame (what `tcpdump -d` prints), so that a frame is accepted
//! here exactly when tcpdump accepts it.

use super::lex::Rel;
use super::parse::parse_num;
use super::{Node, Test};
use std::net::{Ipv4Addr, Ipv6Addr};

/// A protocol qualifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Proto {
    Ether,
    Ip,
    Ip6,
    Arp,
    Rarp,
    Tcp,
    Udp,
    Sctp,
    Icmp,
    Icmp6,
}

impl Proto {
    pub fn of(w: &str) -> Option<Proto> {
        Some(match w {
            "ether" => Proto::Ether,
            "ip" => Proto::Ip,
            "ip6" => Proto::Ip6,
            "arp" => Proto::Arp,
            "rarp" => Proto::Rarp,
            "tcp" => Proto::Tcp,
            "udp" => Proto::Udp,
            "sctp" => Proto::Sctp,
            "icmp" => Proto::Icmp,
            "icmp6" => Proto::Icmp6,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Proto::Ether => "ether",
            Proto::Ip => "ip",
            Proto::Ip6 => "ip6",
            Proto::Arp => "arp",
            Proto::Rarp => "rarp",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
            Proto::Icmp => "icmp",
            Proto::Icmp6 => "icmp6",
        }
    }
}

/// A direction qualifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    Src,
    Dst,
    /// `src or dst` (the default).
    Either,
    /// `src and dst`.
    Both,
}

/// A type qualifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Host,
    Net,
    Port,
    Portrange,
}

impl Kind {
    pub fn of(w: &str) -> Option<Kind> {
        Some(match w {
            "host" => Kind::Host,
            "net" => Kind::Net,
            "port" => Kind::Port,
            "portrange" => Kind::Portrange,
            _ => return None,
        })
    }
}

/// The qualifiers of a primitive with a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Quals {
    pub proto: Option<Proto>,
    pub dir: Option<Dir>,
    pub kind: Option<Kind>,
}

/// Where the link layer's payload sits: 14 bytes on, plus 4 for each
/// `vlan` before.
#[derive(Debug, Clone, Copy)]
pub(super) struct L2 {
    pub shift: u16,
}

impl L2 {
    /// The ethertype's offset.
    fn lt(self) -> u16 {
        12 + self.shift
    }
    /// The network header's offset.
    fn pl(self) -> u16 {
        14 + self.shift
    }
}

/// Which part of a primitive an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Qualifier,
    Value,
    Mask,
}

type Lowered = Result<Node, (Part, String)>;

fn or(a: Node, b: Node) -> Node {
    Node::Or(Box::new(a), Box::new(b))
}

fn and(a: Node, b: Node) -> Node {
    Node::And(Box::new(a), Box::new(b))
}

fn any(v: impl IntoIterator<Item = Node>) -> Node {
    v.into_iter().reduce(or).expect("at least one alternative")
}

fn field(off: u16, size: u8, v: u32) -> Node {
    Node::Test(Test::Field {
        off,
        size,
        lo: v,
        hi: v,
    })
}

fn ethertype(l2: L2, t: u16) -> Node {
    field(l2.lt(), 2, t as u32)
}

/// `bytes` at `off`, under `mask`.
fn bytes(off: u16, value: &[u8], mask: &[u8]) -> Node {
    let (mut val, mut m) = ([0u8; 16], [0u8; 16]);
    for (i, (v, k)) in value.iter().zip(mask).enumerate() {
        m[i] = *k;
        val[i] = v & k;
    }
    Node::Test(Test::Bytes {
        off,
        len: value.len() as u8,
        val,
        mask: m,
    })
}

fn v4_proto(l2: L2, v: u8) -> Node {
    and(ethertype(l2, 0x0800), field(l2.pl() + 9, 1, v as u32))
}

/// IPv6's next header, or the one after a fragment header.
fn v6_proto(l2: L2, v: u8) -> Node {
    let nxt = |v: u8| field(l2.pl() + 6, 1, v as u32);
    let after_frag = and(nxt(44), field(l2.pl() + 40, 1, v as u32));
    and(ethertype(l2, 0x86dd), or(nxt(v), after_frag))
}

/// `ip proto V`, `ip6 proto V`, or (`None`) `proto V`: either.
pub(super) fn ip_proto(l2: L2, p: Option<Proto>, v: u8) -> Node {
    match p {
        Some(Proto::Ip) => v4_proto(l2, v),
        Some(Proto::Ip6) => v6_proto(l2, v),
        _ => or(v4_proto(l2, v), v6_proto(l2, v)),
    }
}

/// A protocol on its own (`tcp`, `ip6`, `arp`); `None` for `ether`.
pub(super) fn proto_alone(l2: L2, p: Proto) -> Option<Node> {
    Some(match p {
        Proto::Ether => return None,
        Proto::Ip => ethertype(l2, 0x0800),
        Proto::Ip6 => ethertype(l2, 0x86dd),
        Proto::Arp => ethertype(l2, 0x0806),
        Proto::Rarp => ethertype(l2, 0x8035),
        Proto::Tcp => ip_proto(l2, None, 6),
        Proto::Udp => ip_proto(l2, None, 17),
        Proto::Sctp => ip_proto(l2, None, 132),
        Proto::Icmp => v4_proto(l2, 1),
        Proto::Icmp6 => v6_proto(l2, 58),
    })
}

/// `vlan` or `vlan ID`: an 802.1Q, 802.1ad or old QinQ tag here.
pub(super) fn vlan(l2: L2, id: Option<u16>) -> Node {
    let tag = any([0x8100, 0x88a8, 0x9100].map(|t| ethertype(l2, t)));
    match id {
        Some(id) => and(tag, bytes(l2.pl(), &id.to_be_bytes(), &[0x0f, 0xff])),
        None => tag,
    }
}

/// `len REL N`, `less N`, `greater N`: the frame's length on the wire.
pub(super) fn len(rel: Rel, n: u32) -> Node {
    let range = |lo, hi| Node::Test(Test::Len { lo, hi });
    match rel {
        Rel::Lt => match n.checked_sub(1) {
            Some(m) => range(0, m),
            None => Node::Not(Box::new(range(0, u32::MAX))),
        },
        Rel::Le => range(0, n),
        Rel::Gt => match n.checked_add(1) {
            Some(m) => range(m, u32::MAX),
            None => Node::Not(Box::new(range(0, u32::MAX))),
        },
        Rel::Ge => range(n, u32::MAX),
        Rel::Eq => range(n, n),
        Rel::Ne => Node::Not(Box::new(range(n, n))),
    }
}

/// Combines a test of the source and one of the destination by `dir`.
fn by_dir(dir: Option<Dir>, src: impl Fn() -> Node, dst: impl Fn() -> Node) -> Node {
    match dir.unwrap_or(Dir::Either) {
        Dir::Src => src(),
        Dir::Dst => dst(),
        Dir::Either => or(src(), dst()),
        Dir::Both => and(src(), dst()),
    }
}

/// A primitive with a value: `host`, `net`, `port`, `portrange`, with
/// their protocol and direction.
pub(super) fn id(l2: L2, q: Quals, value: &str, mask: Option<&str>) -> Lowered {
    let bad = |what: String| Err((Part::Qualifier, what));
    match q.kind {
        Some(Kind::Port) | Some(Kind::Portrange) => {
            let (lo, hi) = ports(value, q.kind == Some(Kind::Portrange))?;
            let protos: &[u8] = match q.proto {
                None => &[132, 6, 17],
                Some(Proto::Tcp) => &[6],
                Some(Proto::Udp) => &[17],
                Some(Proto::Sctp) => &[132],
                Some(p) => return bad(format!("`{}` cannot qualify a port", p.name())),
            };
            Ok(port(l2, q.dir, protos, lo, hi))
        }
        Some(Kind::Net) => {
            if q.proto == Some(Proto::Ether) {
                return bad("`ether net` is not a thing: say `ether host`".into());
            }
            match net(value, mask)? {
                Addr::V4(a, m) => v4_addr(l2, q, &a, &m),
                Addr::V6(a, m) => v6_addr(l2, q, &a, &m),
            }
        }
        Some(Kind::Host) | None => {
            if q.proto == Some(Proto::Ether) {
                let mac = mac(value).ok_or((
                    Part::Value,
                    format!("`{value}` is not a MAC address (aa:bb:cc:dd:ee:ff)"),
                ))?;
                return Ok(by_dir(
                    q.dir,
                    || bytes(6, &mac, &[0xff; 6]),
                    || bytes(0, &mac, &[0xff; 6]),
                ));
            }
            if let Ok(a) = value.parse::<Ipv4Addr>() {
                return v4_addr(l2, q, &a.octets(), &[0xff; 4]);
            }
            if let Ok(a) = value.parse::<Ipv6Addr>() {
                return v6_addr(l2, q, &a.octets(), &[0xff; 16]);
            }
            if mac(value).is_some() {
                return bad(format!("a MAC address needs `ether`: `ether host {value}`"));
            }
            let what = if parse_num(value).is_some() {
                format!("`{value}` is a number where a host address should be: say `port {value}` for a port")
            } else if value.chars().all(|c| c.is_ascii_alphabetic()) {
                format!("`{value}` is neither a word of the filter language (host, net, port, portrange, proto, ...) nor an address (names are not looked up)")
            } else {
                format!("`{value}` is not an IPv4 or IPv6 address (names are not looked up)")
            };
            Err((Part::Value, what))
        }
    }
}

fn v4_addr(l2: L2, q: Quals, a: &[u8; 4], m: &[u8; 4]) -> Lowered {
    let pl = l2.pl();
    let on = |et: u16, src: u16, dst: u16| {
        and(
            ethertype(l2, et),
            by_dir(q.dir, || bytes(src, a, m), || bytes(dst, a, m)),
        )
    };
    let ip = || on(0x0800, pl + 12, pl + 16);
    let arp = |et| on(et, pl + 14, pl + 24);
    Ok(match q.proto {
        None => any([ip(), arp(0x0806), arp(0x8035)]),
        Some(Proto::Ip) => ip(),
        Some(Proto::Arp) => arp(0x0806),
        Some(Proto::Rarp) => arp(0x8035),
        Some(p) => {
            return Err((
                Part::Qualifier,
                format!("`{}` cannot qualify an IPv4 host or network", p.name()),
            ))
        }
    })
}

fn v6_addr(l2: L2, q: Quals, a: &[u8; 16], m: &[u8; 16]) -> Lowered {
    let pl = l2.pl();
    match q.proto {
        None | Some(Proto::Ip6) => Ok(and(
            ethertype(l2, 0x86dd),
            by_dir(q.dir, || bytes(pl + 8, a, m), || bytes(pl + 24, a, m)),
        )),
        Some(p) => Err((
            Part::Qualifier,
            format!("`{}` cannot qualify an IPv6 host or network", p.name()),
        )),
    }
}

/// Ports `lo..=hi` of the protocols `protos`, IPv4 (first fragments, past
/// the header's options) and IPv6 (the next header only).
fn port(l2: L2, dir: Option<Dir>, protos: &[u8], lo: u16, hi: u16) -> Node {
    let pl = l2.pl();
    let v4 = and(
        and(
            ethertype(l2, 0x0800),
            any(protos.iter().map(|&p| field(pl + 9, 1, p as u32))),
        ),
        and(
            bytes(pl + 6, &[0, 0], &[0x1f, 0xff]),
            by_dir(
                dir,
                || {
                    Node::Test(Test::L4Port {
                        l3: pl,
                        k: 0,
                        lo,
                        hi,
                    })
                },
                || {
                    Node::Test(Test::L4Port {
                        l3: pl,
                        k: 2,
                        lo,
                        hi,
                    })
                },
            ),
        ),
    );
    let range = |off: u16| {
        Node::Test(Test::Field {
            off,
            size: 2,
            lo: lo as u32,
            hi: hi as u32,
        })
    };
    let v6 = and(
        and(
            ethertype(l2, 0x86dd),
            any(protos.iter().map(|&p| field(pl + 6, 1, p as u32))),
        ),
        by_dir(dir, || range(pl + 40), || range(pl + 42)),
    );
    or(v4, v6)
}

fn ports(value: &str, range: bool) -> Result<(u16, u16), (Part, String)> {
    let one = |s: &str| {
        parse_num(s).and_then(|n| u16::try_from(n).ok()).ok_or((
            Part::Value,
            format!("`{s}` is not a port number 0-65535 (names are not looked up)"),
        ))
    };
    if !range {
        let p = one(value)?;
        return Ok((p, p));
    }
    let Some((a, b)) = value.split_once('-') else {
        return Err((
            Part::Value,
            format!("`{value}` is not a port range (LO-HI)"),
        ));
    };
    let (a, b) = (one(a)?, one(b)?);
    Ok((a.min(b), a.max(b)))
}

enum Addr {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

fn prefix_mask<const N: usize>(bits: u32) -> [u8; N] {
    let mut m = [0u8; N];
    for (i, b) in m.iter_mut().enumerate() {
        let left = bits.saturating_sub(8 * i as u32).min(8);
        *b = if left == 0 { 0 } else { 0xffu8 << (8 - left) };
    }
    m
}

/// A network: `A.B.C.D/N`, `A.B.C.D mask M`, `A`, `A.B`, `A.B.C` (the
/// parts given, as libpcap reads them), or an IPv6 `ADDR/N`.
fn net(value: &str, mask: Option<&str>) -> Result<Addr, (Part, String)> {
    let bad = |what: String| Err((Part::Value, what));
    let (addr, bits) = match value.split_once('/') {
        Some((a, n)) => match n.parse::<u32>() {
            Ok(n) => (a, Some(n)),
            Err(_) => return bad(format!("`{n}` is not a prefix length")),
        },
        None => (value, None),
    };
    if bits.is_some() && mask.is_some() {
        return Err((
            Part::Mask,
            "a network with a prefix length takes no `mask`".into(),
        ));
    }
    if addr.contains(':') {
        let Ok(a) = addr.parse::<Ipv6Addr>() else {
            return bad(format!("`{addr}` is not an IPv6 address"));
        };
        if mask.is_some() {
            return Err((
                Part::Mask,
                "`mask` is for IPv4 networks: give IPv6 a /LENGTH".into(),
            ));
        }
        let bits = bits.unwrap_or(128);
        if bits > 128 {
            return bad(format!("/{bits} is longer than an IPv6 address"));
        }
        let (a, m) = (a.octets(), prefix_mask::<16>(bits));
        if a.iter().zip(&m).any(|(a, m)| a & !m != 0) {
            return bad(format!("non-network bits set in `{value}`"));
        }
        return Ok(Addr::V6(a, m));
    }
    let parts: Vec<&str> = addr.split('.').collect();
    let nums: Option<Vec<u8>> = parts
        .iter()
        .map(|p| parse_num(p).and_then(|n| u8::try_from(n).ok()))
        .collect();
    let Some(nums) = nums.filter(|n| (1..=4).contains(&n.len())) else {
        return bad(format!("`{addr}` is not an IPv4 network"));
    };
    let mut a = [0u8; 4];
    a[..nums.len()].copy_from_slice(&nums);
    let m = match (bits, mask) {
        (Some(b), _) if b > 32 => return bad(format!("/{b} is longer than an IPv4 address")),
        (Some(b), _) => prefix_mask::<4>(b),
        (None, Some(mk)) => match mk.parse::<Ipv4Addr>() {
            Ok(mk) => mk.octets(),
            Err(_) => return Err((Part::Mask, format!("`{mk}` is not a netmask"))),
        },
        (None, None) => prefix_mask::<4>(8 * nums.len() as u32),
    };
    if a.iter().zip(&m).any(|(a, m)| a & !m != 0) {
        return bad(format!("non-network bits set in `{value}`"));
    }
    Ok(Addr::V4(a, m))
}

fn mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split([':', '-', '.']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    Some(m)
}
