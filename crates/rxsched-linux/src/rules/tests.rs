//! The rule language: parsing, first-match decisions, frames read into
//! flows, and the nftables translation (checked by nft where installed).

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
        "meta l4proto 6 tcp dport 22 counter drop comment \"rule1_line1\""
    );
    assert_eq!(
        lines[4],
        "meta l4proto 17 ip saddr 198.18.0.0/24 ip daddr 198.19.0.1/32 udp sport 1-2 counter accept comment \"rule2_line2\""
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
            v6: false,
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
            v6: false,
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
    let n = crate::wire::UdpProbe {
        ports: (4000, 9000),
        ..Default::default()
    }
    .write(&mut b);
    let f = Flow::of_frame(&b[..n]);
    assert_eq!(
        f.ip,
        Some(IpFlow {
            proto: UDP,
            v6: false,
            src: [198, 18, 0, 1],
            dst: [198, 19, 0, 1],
            ports: Some((4000, 9000))
        })
    );
    assert_eq!(Flow::of_frame(&b[..10]), Flow::default());
    // IPv6: the next header and the ports; no addresses.
    let six = IpFlow {
        proto: TCP,
        v6: true,
        src: [0; 4],
        dst: [0; 4],
        ports: Some((40_000, 179)),
    };
    let f = frame_of(&Flow { ip: Some(six) }, 0);
    assert_eq!(Flow::of_frame(&f).ip, Some(six));
    let frag = frame_of(&Flow { ip: Some(six) }, 2);
    assert_eq!(
        Flow::of_frame(&frag).ip.map(|i| (i.proto, i.ports)),
        Some((44, None))
    );
    let addressed = Rules::parse("t", "accept proto tcp from 0.0.0.0/0\n").unwrap();
    assert_eq!(addressed.verdict(&Flow::of_frame(&f)).0, Action::Deny);
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
                    && !(ip.v6 && (r.from.is_some() || r.to.is_some()))
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
    let net = || (addr(), 22u8..=32).prop_map(|(a, l)| Ipv4Net::new(a.into(), l).unwrap().trunc());
    let ports = || {
        (0u16..8, 0u16..8).prop_map(|(a, b)| Ports {
            lo: 9000 + a.min(b),
            hi: 9000 + a.max(b),
        })
    };
    (
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![TCP, UDP, ICMP, ICMP6])),
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
        prop::sample::select(vec![TCP, UDP, ICMP, ICMP6, 47]),
        any::<bool>(),
        addr(),
        addr(),
        (9000u16..9010, 9000u16..9010),
    )
        .prop_map(|(proto, v6, src, dst, p)| IpFlow {
            proto,
            v6,
            // IPv6's addresses are not read.
            src: if v6 { [0; 4] } else { src },
            dst: if v6 { [0; 4] } else { dst },
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

/// A frame carrying `f` (an ARP frame when it has no IPv4 fields), in one
/// of the shapes the program must read as user space does: 0 plain, 1 with
/// IP options, 2 a later fragment, 3 cut short inside the IP header, 4 a
/// transport header too short for ports, 5 a total length past the frame.
fn frame_of(f: &Flow, shape: u8) -> Vec<u8> {
    let mut b = vec![0u8; 14];
    b[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    b[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    let Some(ip) = f.ip else {
        b[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        b.resize(42, 0);
        return b;
    };
    if ip.v6 {
        return frame6_of(b, &ip, shape);
    }
    b[12..14].copy_from_slice(&crate::wire::ETHERTYPE_IPV4.to_be_bytes());
    let ihl = if shape == 1 { 24 } else { 20 };
    let l4 = if shape == 4 { 2 } else { 16 };
    let mut h = vec![0u8; ihl + l4];
    h[0] = 0x40 | (ihl / 4) as u8;
    let tot = (ihl + l4 + if shape == 5 { 40 } else { 0 }) as u16;
    h[2..4].copy_from_slice(&tot.to_be_bytes());
    if shape == 2 {
        h[6..8].copy_from_slice(&185u16.to_be_bytes());
    }
    h[8] = 64;
    h[9] = ip.proto;
    h[12..16].copy_from_slice(&ip.src);
    h[16..20].copy_from_slice(&ip.dst);
    let (sp, dp) = ip.ports.unwrap_or((7, 7));
    let ports = [sp.to_be_bytes(), dp.to_be_bytes()].concat();
    let n = l4.min(4);
    h[ihl..ihl + n].copy_from_slice(&ports[..n]);
    b.extend_from_slice(&h);
    if shape == 3 {
        b.truncate(14 + 12);
    }
    b
}

/// [`frame_of`] for an IPv6 packet behind the Ethernet header `b`: 1 and
/// 2 (options, a later fragment) put a fragment header first, which the
/// rules read as the protocol.
fn frame6_of(mut b: Vec<u8>, ip: &IpFlow, shape: u8) -> Vec<u8> {
    b[12..14].copy_from_slice(&crate::wire::ETHERTYPE_IPV6.to_be_bytes());
    let l4 = if shape == 4 { 2 } else { 16 };
    let ext = if matches!(shape, 1 | 2) { 8 } else { 0 };
    let mut h = vec![0u8; 40 + ext + l4];
    h[0] = 0x60;
    let len = (ext + l4 + if shape == 5 { 40 } else { 0 }) as u16;
    h[4..6].copy_from_slice(&len.to_be_bytes());
    h[6] = if ext > 0 { 44 } else { ip.proto };
    h[7] = 64;
    h[8] = 0xfd;
    h[24] = 0xfd;
    if ext > 0 {
        h[40] = ip.proto;
    }
    let (sp, dp) = ip.ports.unwrap_or((7, 7));
    let ports = [sp.to_be_bytes(), dp.to_be_bytes()].concat();
    let n = l4.min(4);
    h[40 + ext..40 + ext + n].copy_from_slice(&ports[..n]);
    b.extend_from_slice(&h);
    if shape == 3 {
        b.truncate(14 + 30);
    }
    b
}

/// The devices' program screens as user space does (`route --screen`
/// forwarding in XDP): for random rule sets and frames of every shape,
/// `xdp_screen` (the program's matcher, run by BPF_PROG_TEST_RUN) accepts
/// exactly what [`Rules::verdict`] accepts, and counts the decision under
/// the same rule.
#[test]
fn the_xdp_program_screens_as_the_rules_do() {
    use crate::bpf::{run_once, Object, ROUTE, SCREEN_RULES};
    use proptest::test_runner::{Config, TestRunner};
    use strum::VariantArray;
    if !crate::needs::root("the XDP screening test") {
        return;
    }
    let o = std::cell::RefCell::new(Object::load(ROUTE, "route (test)").unwrap());
    let fd = o.borrow_mut().prog_fd("xdp_screen").unwrap();
    let base = crate::bpf::RouteOutcome::VARIANTS.len();
    let decided = |o: &mut Object| o.route_counts().unwrap()[base..].to_vec();
    let cases = (
        prop::collection::vec(rule(), 0..8),
        prop::collection::vec((flow(), 0u8..6), 1..24),
    );
    let mut runner = TestRunner::new(Config::with_cases(48));
    runner
        .run(&cases, |(rules, frames)| {
            let set = Rules { rules };
            let o = &mut *o.borrow_mut();
            o.setup_screen(&set).unwrap();
            for (f, shape) in &frames {
                let b = frame_of(f, *shape);
                let (want, by) = set.verdict(&Flow::of_frame(&b));
                let before = decided(o);
                let got = run_once(fd, &b).unwrap();
                let after = decided(o);
                let moved: Vec<usize> = (0..after.len())
                    .filter(|&i| after[i] != before[i])
                    .collect();
                let want_idx = match by {
                    Decided::Rule(i) => i,
                    Decided::Default => SCREEN_RULES,
                };
                let want_ret = if want == Action::Accept { 2 } else { 1 };
                prop_assert_eq!(got, want_ret, "frame {:?} shape {}: {:?}", f, shape, set);
                prop_assert_eq!(
                    moved,
                    vec![want_idx],
                    "frame {:?} shape {}: {:?}",
                    f,
                    shape,
                    set
                );
            }
            Ok(())
        })
        .unwrap();
}

/// The default protection rules protect ICMP and ICMPv6, OSPF and BGP
/// either way, over IPv4 and IPv6, and nothing else: not UDP, not other
/// TCP, not a frame that is not IP.
#[test]
fn default_protection_rules_take_the_control_plane_only() {
    let r = crate::backend::Steer::default_rules();
    let protected = |f: &Flow| r.verdict(f).0 == Action::Accept;
    for v6 in [false, true] {
        let ip = |proto, ports| Flow {
            ip: Some(IpFlow {
                proto,
                v6,
                src: [0; 4],
                dst: [0; 4],
                ports,
            }),
        };
        assert!(protected(&ip(if v6 { ICMP6 } else { ICMP }, None)));
        assert!(protected(&ip(89, None)));
        assert!(protected(&ip(6, Some((40_000, 179)))));
        assert!(protected(&ip(6, Some((179, 40_000)))));
        assert!(!protected(&ip(6, Some((40_000, 80)))));
        assert!(!protected(&ip(UDP, Some((179, 179)))));
    }
    let ip = |proto, ports| Flow {
        ip: Some(IpFlow {
            proto,
            v6: false,
            src: [198, 18, 0, 1],
            dst: [198, 19, 0, 1],
            ports,
        }),
    };
    let protected = |f: &Flow| r.verdict(f).0 == Action::Accept;
    assert!(protected(&ip(ICMP, None)));
    assert!(protected(&ip(89, None)));
    assert!(protected(&ip(6, Some((40_000, 179)))));
    assert!(protected(&ip(6, Some((179, 40_000)))));
    assert!(!protected(&ip(6, Some((40_000, 80)))));
    assert!(!protected(&ip(UDP, Some((179, 179)))));
    assert!(!protected(&Flow::default()));
}
