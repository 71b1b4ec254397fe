//! The forwarding path every mode shares: the routing table, the check and
//! rewrite of a frame (TTL, MACs, incremental checksum), why a frame is
//! refused, and the output queues.

use super::Counters;
use crate::backend::TxBackend;
use crate::stage::StageQueue;
use crate::sys::{self, SysResult};
use crate::wire::{
    EthernetFrame, Ipv4Packet, Ipv6Packet, Mac, Malformed, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_LEN,
};
use ipnet::Ipv4Net;
use rxsched_core::DropPoint;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering::Relaxed;

/// One route: a prefix, the port out, and the next hop's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The destination network.
    pub net: Ipv4Net,
    /// Index of the output port.
    pub port: usize,
    /// The neighbour's MAC (static neighbour table).
    pub next_hop: Mac,
}

impl Route {
    /// Parses `198.19.0.0/24=d1@02:72:78:00:01:01`, resolving the interface
    /// among `ports`. A bare address is a /32.
    pub fn parse(s: &str, ports: &[String]) -> Result<Route, String> {
        let (net, rest) = s.split_once('=').ok_or("expected PREFIX/LEN=IFACE@MAC")?;
        let (iface, mac) = rest
            .split_once('@')
            .ok_or("expected PREFIX/LEN=IFACE@MAC")?;
        let net: Ipv4Net = if net.contains('/') {
            net.parse()
                .map_err(|_| format!("{net:?} is not an IPv4 prefix"))?
        } else {
            let a: Ipv4Addr = net
                .parse()
                .map_err(|_| format!("{net:?} is not an IPv4 address"))?;
            Ipv4Net::from(a)
        };
        let port = ports
            .iter()
            .position(|p| p == iface)
            .ok_or(format!("{iface:?} is not one of the router's interfaces"))?;
        let next_hop = Mac::parse(mac).ok_or(format!("{mac:?} is not a MAC address"))?;
        Ok(Route {
            net: net.trunc(),
            port,
            next_hop,
        })
    }

    fn matches(&self, ip: [u8; 4]) -> bool {
        self.net.contains(&Ipv4Addr::from(ip))
    }
}

/// Why the forwarding path refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A malformed frame.
    Malformed(Malformed),
    /// No route to the destination.
    NoRoute,
    /// Larger than the egress port's MTU.
    TooBig,
}

impl Refused {
    /// The drop point it is counted at.
    pub fn drop_point(self) -> DropPoint {
        match self {
            Refused::Malformed(m) => m.drop_point(),
            Refused::NoRoute => DropPoint::NoRoute,
            Refused::TooBig => DropPoint::TooBig,
        }
    }
}

/// What the forwarding path knows of an output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Egress {
    /// Its MAC, the source of what it sends.
    pub mac: Mac,
    /// Its MTU.
    pub mtu: usize,
}

/// The forwarding decision and rewrite, shared by every mode: check the
/// frame, find its output port, decrement the TTL with an incremental
/// checksum update. With `routes` the port and next hop come from them,
/// and both MACs are rewritten; without, the device's program
/// (`bpf/route.bpf.c`) has already set the next hop from the kernel's
/// tables, and the frame carries its output port's MAC as its source.
/// Returns the output port.
pub fn forward_in_place(
    frame: &mut [u8],
    routes: &[Route],
    ports: &[Egress],
) -> Result<usize, Refused> {
    let len = frame.len();
    let mut eth = EthernetFrame::new_checked(&mut *frame).map_err(Refused::Malformed)?;
    if eth.ethertype() == ETHERTYPE_IPV6 {
        return forward_v6(eth, routes, ports);
    }
    if eth.ethertype() != ETHERTYPE_IPV4 {
        return Err(Refused::Malformed(Malformed::NotIpv4));
    }
    let route = {
        let ip = Ipv4Packet::new_checked(eth.payload()).map_err(Refused::Malformed)?;
        if !ip.verify_checksum() {
            return Err(Refused::Malformed(Malformed::BadChecksum));
        }
        if ip.ttl() <= 1 {
            return Err(Refused::Malformed(Malformed::TtlExpired));
        }
        let dst = ip.dst();
        if routes.is_empty() {
            (kernel_port(&eth, ports)?, None)
        } else {
            let r = routes
                .iter()
                .filter(|r| r.matches(dst))
                .max_by_key(|r| r.net.prefix_len())
                .ok_or(Refused::NoRoute)?;
            (r.port, Some(r.next_hop))
        }
    };
    let (port, next_hop) = route;
    if len - ETH_LEN > ports[port].mtu {
        return Err(Refused::TooBig);
    }
    if let Some(mac) = next_hop {
        eth.set_dst(mac);
        eth.set_src(ports[port].mac);
    }
    let mut ip = Ipv4Packet::new_checked(eth.payload_mut()).map_err(Refused::Malformed)?;
    ip.decrement_ttl();
    Ok(port)
}

/// The output port of a frame whose next hop the device's program set from
/// the kernel's tables: the port whose MAC it now carries as its source.
fn kernel_port<T: AsRef<[u8]>>(eth: &EthernetFrame<T>, ports: &[Egress]) -> Result<usize, Refused> {
    let src = eth.src();
    ports
        .iter()
        .position(|p| p.mac == src)
        .ok_or(Refused::NoRoute)
}

/// IPv6: only with next hops from the kernel (routes by hand are IPv4's;
/// the device's program leaves IPv6 to the stack then). The hop limit is
/// decremented; IPv6 has no header checksum to patch.
fn forward_v6(
    mut eth: EthernetFrame<&mut [u8]>,
    routes: &[Route],
    ports: &[Egress],
) -> Result<usize, Refused> {
    let ip = Ipv6Packet::new_checked(eth.payload()).map_err(Refused::Malformed)?;
    if ip.hop_limit() <= 1 {
        return Err(Refused::Malformed(Malformed::TtlExpired));
    }
    if !routes.is_empty() {
        return Err(Refused::NoRoute);
    }
    let port = kernel_port(&eth, ports)?;
    if eth.payload().len() > ports[port].mtu {
        return Err(Refused::TooBig);
    }
    Ipv6Packet::new_checked(eth.payload_mut())
        .map_err(Refused::Malformed)?
        .decrement_hop_limit();
    Ok(port)
}

/// Frames waiting to be sent on one port.
#[derive(Debug, Default)]
pub struct OutQueue {
    frames: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    /// Protected frames at the head, in their order of arrival: they go
    /// out before every ordinary frame queued (a NIC's priority transmit
    /// queue, on the one queue a port transmits through).
    urgent: usize,
}

impl OutQueue {
    /// Queues a copy of `frame`; false (and counted) if `cap` frames wait.
    pub fn push(&mut self, frame: &[u8], cap: usize, c: &Counters) -> bool {
        if self.frames.len() >= cap {
            c.output_queue.fetch_add(1, Relaxed);
            return false;
        }
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        self.frames.push_back(b);
        true
    }

    /// Moves the frame queued last ahead of every ordinary frame, behind
    /// the protected frames already waiting there.
    pub fn promote_last(&mut self) {
        if let Some(f) = self.frames.pop_back() {
            let at = self.urgent.min(self.frames.len());
            self.frames.insert(at, f);
            self.urgent = at + 1;
        }
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Sends up to `max` frames in batches; returns how many left. Stops
    /// early when the device takes fewer than offered (it is full).
    pub fn flush(&mut self, tx: &mut impl TxBackend, max: usize, c: &Counters) -> SysResult<usize> {
        let mut sent = 0;
        while sent < max && !self.frames.is_empty() {
            let n = self.frames.len().min(max - sent).min(64);
            let (a, b) = self.frames.as_slices();
            let frames: Vec<&[u8]> = a
                .iter()
                .chain(b.iter())
                .take(n)
                .map(|v| v.as_slice())
                .collect();
            let k = match tx.send(&frames) {
                Ok(k) => k,
                // The port is down or gone: what waits for it is lost
                // there (the link watch reports the port).
                Err(e) if sys::is_link_error(&e.source) => {
                    let lost = self.frames.len();
                    self.spare.extend(self.frames.drain(..));
                    self.urgent = 0;
                    c.port_down.fetch_add(lost as u64, Relaxed);
                    break;
                }
                Err(e) => return Err(e),
            };
            for _ in 0..k {
                if let Some(f) = self.frames.pop_front() {
                    self.spare.push(f);
                }
            }
            sent += k;
            self.urgent = self.urgent.saturating_sub(k);
            c.forwarded.fetch_add(k as u64, Relaxed);
            if k < n {
                break; // the device queue is full: try again later
            }
        }
        Ok(sent)
    }
}

/// Where a routed frame goes next.
pub enum Onward<'a> {
    /// Onto its output port's queue, which holds `cap` frames.
    Out {
        /// Every port's queue.
        outq: &'a mut [OutQueue],
        /// Their limit.
        cap: usize,
    },
    /// To the screening process, which sends it if its rules accept it.
    Screen(&'a StageQueue),
}

/// Checks a frame, routes it and rewrites it in `buf` (a copy), then hands
/// it on (see [`Onward`]) or counts why not. Returns the output port if the
/// frame went onto an output queue.
pub fn forward_one(
    frame: &[u8],
    buf: &mut [u8],
    routes: &[Route],
    ports: &[Egress],
    onward: Onward<'_>,
    c: &Counters,
) -> Option<usize> {
    let n = frame.len().min(buf.len());
    let b = &mut buf[..n];
    b.copy_from_slice(&frame[..n]);
    match (forward_in_place(b, routes, ports), onward) {
        (Ok(out), Onward::Out { outq, cap }) => outq[out].push(b, cap, c).then_some(out),
        (Ok(out), Onward::Screen(q)) => {
            if !q.push(b, usize::MAX, out as u32, 0) {
                c.screen_queue.fetch_add(1, Relaxed);
            }
            None
        }
        (Err(r), _) => {
            c.refuse(r);
            None
        }
    }
}

#[cfg(test)]
mod parse_tests {
    use super::*;
    use crate::wire::UdpProbe;

    fn table() -> (Vec<Route>, Vec<Egress>) {
        let ports = vec!["d0".to_string(), "d1".to_string()];
        let r = vec![
            Route::parse("198.19.0.0/24=d1@02:00:00:00:01:01", &ports).unwrap(),
            Route::parse("198.18.0.0/24=d0@02:00:00:00:00:01", &ports).unwrap(),
        ];
        let port = |mac| Egress { mac, mtu: 1500 };
        (
            r,
            vec![port(Mac([2, 0, 0, 0, 0, 2])), port(Mac([2, 0, 0, 0, 1, 2]))],
        )
    }

    fn frame(ttl: u8, dst: [u8; 4]) -> Vec<u8> {
        UdpProbe {
            src_mac: Mac([2; 6]),
            dst_ip: dst,
            ttl,
            ..UdpProbe::default()
        }
        .to_vec()
    }

    #[test]
    fn forwards_and_rewrites() {
        let (r, macs) = table();
        let mut f = frame(64, [198, 19, 0, 1]);
        assert_eq!(forward_in_place(&mut f, &r, &macs), Ok(1));
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.dst(), Mac([2, 0, 0, 0, 1, 1]));
        assert_eq!(eth.src(), macs[1].mac);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn each_malformed_class_has_its_reason() {
        let (r, macs) = table();
        let mut short = frame(64, [198, 19, 0, 1]);
        short.truncate(20);
        assert_eq!(
            forward_in_place(&mut short, &r, &macs),
            Err(Refused::Malformed(Malformed::Truncated))
        );
        let mut arp = frame(64, [198, 19, 0, 1]);
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(
            forward_in_place(&mut arp, &r, &macs),
            Err(Refused::Malformed(Malformed::NotIpv4))
        );
        let mut ihl = frame(64, [198, 19, 0, 1]);
        ihl[14] = 0x44;
        assert_eq!(
            forward_in_place(&mut ihl, &r, &macs),
            Err(Refused::Malformed(Malformed::BadIhl))
        );
        let mut sum = frame(64, [198, 19, 0, 1]);
        sum[14 + 10] ^= 0xff;
        assert_eq!(
            forward_in_place(&mut sum, &r, &macs),
            Err(Refused::Malformed(Malformed::BadChecksum))
        );
        let mut ttl = frame(1, [198, 19, 0, 1]);
        assert_eq!(
            forward_in_place(&mut ttl, &r, &macs),
            Err(Refused::Malformed(Malformed::TtlExpired))
        );
        let mut far = frame(64, [198, 20, 0, 1]);
        assert_eq!(forward_in_place(&mut far, &r, &macs), Err(Refused::NoRoute));
    }

    /// An IPv6 frame of `payload` bytes whose next hop the device's
    /// program has set (its source is `port`'s MAC).
    fn frame6(hops: u8, payload: usize, port: Mac) -> Vec<u8> {
        let mut f = vec![0u8; ETH_LEN + crate::wire::IPV6_LEN + payload];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
        f[6..12].copy_from_slice(&port.0);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        f[14] = 0x60;
        f[18..20].copy_from_slice(&(payload as u16).to_be_bytes());
        f[20] = 17;
        f[21] = hops;
        f
    }

    #[test]
    fn forwards_ipv6_by_the_kernel_s_next_hop() {
        let (r, macs) = table();
        let mut f = frame6(64, 100, macs[1].mac);
        assert_eq!(forward_in_place(&mut f, &[], &macs), Ok(1));
        assert_eq!(f[21], 63, "hop limit decremented");
        let mut last = frame6(1, 100, macs[1].mac);
        assert_eq!(
            forward_in_place(&mut last, &[], &macs),
            Err(Refused::Malformed(Malformed::TtlExpired))
        );
        assert_eq!(last[21], 1, "a refused frame is left as it was");
        let mut big = frame6(64, 1500 - crate::wire::IPV6_LEN + 1, macs[1].mac);
        assert_eq!(forward_in_place(&mut big, &[], &macs), Err(Refused::TooBig));
        let mut fits = frame6(64, 1500 - crate::wire::IPV6_LEN, macs[1].mac);
        assert_eq!(forward_in_place(&mut fits, &[], &macs), Ok(1));
        let mut short = frame6(64, 100, macs[0].mac);
        short.truncate(ETH_LEN + crate::wire::IPV6_LEN + 20);
        assert_eq!(
            forward_in_place(&mut short, &[], &macs),
            Err(Refused::Malformed(Malformed::BadIhl))
        );
        // Routes by hand are IPv4's.
        let mut f = frame6(64, 100, macs[1].mac);
        assert_eq!(forward_in_place(&mut f, &r, &macs), Err(Refused::NoRoute));
    }

    #[test]
    fn routes_parse_and_match_longest_prefix() {
        let ports = vec!["a".to_string(), "b".to_string()];
        assert!(Route::parse("198.19.0.0/24=c@02:00:00:00:00:01", &ports).is_err());
        assert!(Route::parse("198.19.0.0/33=a@02:00:00:00:00:01", &ports).is_err());
        assert!(
            Route::parse("198.19.0.9=a@02:00:00:00:00:01", &ports)
                .unwrap()
                .net
                .prefix_len()
                == 32
        );
        let wide = Route::parse("198.18.0.0/15=a@02:00:00:00:00:01", &ports).unwrap();
        let narrow = Route::parse("198.19.0.0/24=b@02:00:00:00:00:02", &ports).unwrap();
        assert!(wide.matches([198, 19, 0, 9]) && narrow.matches([198, 19, 0, 9]));
        assert!(!narrow.matches([198, 18, 0, 9]));
    }
}
