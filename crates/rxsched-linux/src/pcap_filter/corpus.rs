//! Frames and expressions for testing the filter against tcpdump: varied
//! frames whose fields come from small pools, and random expressions over
//! the same pools, so that primitives match often enough to matter.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};

const MACS: [[u8; 6]; 3] = [
    [0x02, 0, 0, 0, 0, 1],
    [0x02, 0, 0, 0, 0, 2],
    [0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
];
const V4: [[u8; 4]; 5] = [
    [198, 18, 0, 1],
    [198, 18, 1, 2],
    [198, 19, 0, 1],
    [198, 19, 5, 5],
    [198, 18, 200, 9],
];
const V6: [&str; 4] = ["2001:db8::1", "2001:db8:1::2", "fe80::1", "2001:db9::5"];
const PORTS: [u16; 8] = [22, 53, 80, 443, 1000, 5353, 8080, 9000];
const VIDS: [u16; 3] = [0, 5, 100];

fn pick<T: Copy>(r: &mut impl Rng, v: &[T]) -> T {
    v[r.gen_range(0..v.len())]
}

fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>()
        .expect("an IPv6 address")
        .octets()
}

/// A transport header (ports first, as TCP, UDP and SCTP have them) or an
/// ICMP one.
fn transport(r: &mut impl Rng, proto: u8, out: &mut Vec<u8>) {
    match proto {
        6 | 17 | 132 => {
            out.extend(pick(r, &PORTS).to_be_bytes());
            out.extend(pick(r, &PORTS).to_be_bytes());
            out.extend([0u8; 16]);
        }
        _ => out.extend([8, 0, 0, 0, 0, 1, 0, 1]),
    }
}

/// `n` frames from seed `seed`: IPv4 (with and without options, first
/// and later fragments), IPv6 (with a fragment header or a hop-by-hop one
/// before the transport header), ARP, RARP, LLDP, behind zero, one or two
/// VLAN tags, at least 60 bytes long.
pub fn frames(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let mut f = Vec::with_capacity(128);
            f.extend(pick(&mut r, &MACS));
            f.extend(pick(&mut r, &MACS));
            for _ in 0..pick(&mut r, &[0, 0, 0, 1, 1, 2]) {
                f.extend(pick(&mut r, &[0x8100u16, 0x88a8, 0x9100]).to_be_bytes());
                f.extend(pick(&mut r, &VIDS).to_be_bytes());
            }
            match r.gen_range(0..10) {
                0..=4 => {
                    f.extend(0x0800u16.to_be_bytes());
                    let opts = pick(&mut r, &[0usize, 0, 0, 1, 2]);
                    let proto = pick(&mut r, &[6u8, 17, 132, 1, 47, 6, 17]);
                    let frag: u16 = pick(&mut r, &[0, 0, 0, 0x2000, 0x00b9]);
                    f.push(0x45 + opts as u8);
                    f.extend([0, 0, 60, 0, 1]);
                    f.extend(frag.to_be_bytes());
                    f.extend([64, proto, 0, 0]);
                    f.extend(pick(&mut r, &V4));
                    f.extend(pick(&mut r, &V4));
                    f.extend(std::iter::repeat_n(1u8, 4 * opts));
                    transport(&mut r, proto, &mut f);
                }
                5..=7 => {
                    f.extend(0x86ddu16.to_be_bytes());
                    let first = pick(&mut r, &[6u8, 17, 58, 132, 44, 0, 6, 17]);
                    f.extend([0x60, 0, 0, 0, 0, 40, first, 64]);
                    f.extend(v6(pick(&mut r, &V6)));
                    f.extend(v6(pick(&mut r, &V6)));
                    let proto = if matches!(first, 44 | 0) {
                        let next = pick(&mut r, &[6u8, 17, 58]);
                        f.extend([next, 0, 0, 0, 0, 0, 0, 1]);
                        next
                    } else {
                        first
                    };
                    transport(&mut r, proto, &mut f);
                }
                8 => {
                    let et = pick(&mut r, &[0x0806u16, 0x0806, 0x8035]);
                    f.extend(et.to_be_bytes());
                    f.extend([0, 1, 8, 0, 6, 4, 0, 1]);
                    f.extend(pick(&mut r, &MACS));
                    f.extend(pick(&mut r, &V4));
                    f.extend([0u8; 6]);
                    f.extend(pick(&mut r, &V4));
                }
                _ => {
                    f.extend(0x88ccu16.to_be_bytes());
                    f.extend([2, 7, 4, 1, 2, 3, 4, 5, 6]);
                }
            }
            let pad = r.gen_range(0..80);
            f.extend(std::iter::repeat_n(0xa5u8, pad));
            if f.len() < 60 {
                f.resize(60, 0);
            }
            f
        })
        .collect()
}

fn ip4() -> impl Strategy<Value = String> {
    (0..V4.len()).prop_map(|i| {
        let a = V4[i];
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    })
}

fn port() -> impl Strategy<Value = u16> {
    (0..PORTS.len()).prop_map(|i| PORTS[i])
}

/// One primitive (or a short chain whose later values take the first's
/// qualifiers).
fn primitive() -> impl Strategy<Value = String> {
    let dir = prop_oneof![
        Just(""),
        Just("src "),
        Just("dst "),
        Just("src or dst "),
        Just("src and dst ")
    ];
    let l4 = prop_oneof![Just(""), Just("tcp "), Just("udp "), Just("sctp ")];
    let v4q = prop_oneof![Just(""), Just("ip "), Just("arp "), Just("rarp ")];
    let mac = (0..MACS.len()).prop_map(|i| {
        MACS[i]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    });
    prop_oneof![
        (v4q.clone(), dir.clone(), ip4()).prop_map(|(p, d, a)| format!("{p}{d}host {a}")),
        (dir.clone(), ip4())
            .prop_map(|(d, a)| format!("{d}{a}"))
            .prop_filter("a qualifier", |s| s.contains(' ')),
        (
            v4q,
            dir.clone(),
            prop_oneof![
                Just("198.19.5.0/24"),
                Just("198.18"),
                Just("198.18.0.0/15"),
                Just("198.18.1.0 mask 255.255.255.0"),
                Just("198.19")
            ]
        )
            .prop_map(|(p, d, n)| format!("{p}{d}net {n}")),
        (
            prop_oneof![Just(""), Just("ip6 ")],
            dir.clone(),
            (0..V6.len())
        )
            .prop_map(|(p, d, i)| format!("{p}{d}host {}", V6[i])),
        (
            dir.clone(),
            prop_oneof![
                Just("2001:db8::/32"),
                Just("fe80::/10"),
                Just("2001:db8:1::/48")
            ]
        )
            .prop_map(|(d, n)| format!("{d}net {n}")),
        (dir.clone(), mac).prop_map(|(d, m)| format!("ether {d}host {m}")),
        (l4.clone(), dir.clone(), port()).prop_map(|(p, d, n)| format!("{p}{d}port {n}")),
        (l4, dir, port(), port()).prop_map(|(p, d, a, b)| format!(
            "{p}{d}portrange {}-{}",
            a.min(b),
            a.max(b)
        )),
        prop_oneof![
            Just("tcp"),
            Just("udp"),
            Just("sctp"),
            Just("icmp"),
            Just("icmp6"),
            Just("ip"),
            Just("ip6"),
            Just("arp"),
            Just("rarp"),
            Just("ip proto 47"),
            Just("proto 17"),
            Just("ip6 proto 58"),
            Just("ip proto \\tcp"),
            Just("vlan"),
            Just("vlan 5"),
            Just("vlan 100")
        ]
        .prop_map(str::to_string),
        (
            prop_oneof![
                Just("len <="),
                Just("len >"),
                Just("len =="),
                Just("len !="),
                Just("less"),
                Just("greater")
            ],
            60u32..200
        )
            .prop_map(|(r, n)| format!("{r} {n}")),
        (port(), port()).prop_map(|(a, b)| format!("port {a} or {b}")),
        (ip4(), ip4()).prop_map(|(a, b)| format!("host {a} and not {b}")),
    ]
}

/// A random expression: primitives joined by `and`, `or`, `not`, with and
/// without parentheses.
pub fn expression() -> impl Strategy<Value = String> {
    primitive().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop_oneof![Just(" and "), Just(" or "), Just(" && "), Just(" || ")],
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a}{op}{b}")),
            (
                inner.clone(),
                prop_oneof![Just(" and "), Just(" or ")],
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a}){op}({b})")),
            inner.clone().prop_map(|a| format!("not ({a})")),
            inner.prop_map(|a| format!("! {a}")),
        ]
    })
}
