//! Zero-copy views of Ethernet, IPv4, IPv6 and UDP headers, in the manner of
//! smoltcp's `wire`: `new_checked` validates lengths once, then getters and
//! setters read and write the buffer in place.

use rxsched_core::DropPoint;
use std::fmt;

/// Why a frame could not be taken as what it claims to be. Each is its own
/// drop reason in the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Malformed {
    /// Shorter than the headers it needs.
    Truncated,
    /// Not IP (another EtherType, or an IP version other than the
    /// EtherType's).
    NotIpv4,
    /// IHL below 5, or total length outside the frame.
    BadIhl,
    /// The IPv4 header checksum does not verify.
    BadChecksum,
    /// TTL of 1 or 0: it may not be forwarded.
    TtlExpired,
}

impl Malformed {
    /// Every reason, in reporting order.
    pub const ALL: [Malformed; 5] = [
        Malformed::Truncated,
        Malformed::NotIpv4,
        Malformed::BadIhl,
        Malformed::BadChecksum,
        Malformed::TtlExpired,
    ];

    /// The drop point a frame refused for this reason is counted at.
    pub fn drop_point(self) -> DropPoint {
        match self {
            Malformed::Truncated => DropPoint::Truncated,
            Malformed::NotIpv4 => DropPoint::NotIpv4,
            Malformed::BadIhl => DropPoint::BadIhl,
            Malformed::BadChecksum => DropPoint::BadChecksum,
            Malformed::TtlExpired => DropPoint::TtlExpired,
        }
    }

    /// The reason's name in counters.
    pub fn name(self) -> &'static str {
        self.drop_point().name()
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// Parses `aa:bb:cc:dd:ee:ff`.
    pub fn parse(s: &str) -> Option<Mac> {
        let mut m = [0u8; 6];
        let mut parts = s.trim().split(':');
        for b in &mut m {
            *b = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        parts.next().is_none().then_some(Mac(m))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// The EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// Ethernet header length.
pub const ETH_LEN: usize = 14;
/// Minimum IPv4 header length.
pub const IPV4_MIN_LEN: usize = 20;
/// UDP header length.
pub const UDP_LEN: usize = 8;

/// An Ethernet II frame.
pub struct EthernetFrame<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer that holds at least an Ethernet header.
    pub fn new_checked(buf: T) -> Result<Self, Malformed> {
        if buf.as_ref().len() < ETH_LEN {
            return Err(Malformed::Truncated);
        }
        Ok(EthernetFrame(buf))
    }

    /// Destination address.
    pub fn dst(&self) -> Mac {
        Mac(self.0.as_ref()[0..6].try_into().expect("6 bytes"))
    }

    /// Source address.
    pub fn src(&self) -> Mac {
        Mac(self.0.as_ref()[6..12].try_into().expect("6 bytes"))
    }

    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        u16::from_be_bytes([self.0.as_ref()[12], self.0.as_ref()[13]])
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.0.as_ref()[ETH_LEN..]
    }

    /// The whole buffer back.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst(&mut self, m: Mac) {
        self.0.as_mut()[0..6].copy_from_slice(&m.0);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, m: Mac) {
        self.0.as_mut()[6..12].copy_from_slice(&m.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        self.0.as_mut()[12..14].copy_from_slice(&t.to_be_bytes());
    }

    /// The bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.0.as_mut()[ETH_LEN..]
    }
}

/// An IPv4 packet.
pub struct Ipv4Packet<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer holding a whole IPv4 header whose IHL and total length
    /// fit the buffer. Does not verify the checksum.
    pub fn new_checked(buf: T) -> Result<Self, Malformed> {
        let b = buf.as_ref();
        if b.len() < IPV4_MIN_LEN {
            return Err(Malformed::Truncated);
        }
        if b[0] >> 4 != 4 {
            return Err(Malformed::NotIpv4);
        }
        let ihl = (b[0] & 0x0f) as usize * 4;
        let total = u16::from_be_bytes([b[2], b[3]]) as usize;
        if ihl < IPV4_MIN_LEN || ihl > b.len() || total < ihl || total > b.len() {
            return Err(Malformed::BadIhl);
        }
        Ok(Ipv4Packet(buf))
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        (self.0.as_ref()[0] & 0x0f) as usize * 4
    }

    /// Total length field.
    pub fn total_len(&self) -> usize {
        u16::from_be_bytes([self.0.as_ref()[2], self.0.as_ref()[3]]) as usize
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.0.as_ref()[8]
    }

    /// Protocol number.
    pub fn protocol(&self) -> u8 {
        self.0.as_ref()[9]
    }

    /// Fragment offset, in 8-byte units (0 for an unfragmented packet or
    /// a first fragment).
    pub fn fragment_offset(&self) -> u16 {
        u16::from_be_bytes([self.0.as_ref()[6], self.0.as_ref()[7]]) & 0x1fff
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.0.as_ref()[10], self.0.as_ref()[11]])
    }

    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        self.0.as_ref()[12..16].try_into().expect("4 bytes")
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        self.0.as_ref()[16..20].try_into().expect("4 bytes")
    }

    /// Whether the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum(&self.0.as_ref()[..self.header_len()]) == 0
    }

    /// The bytes after the header, up to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.0.as_ref()[self.header_len()..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Decrements the TTL and patches the checksum incrementally (RFC 1624).
    pub fn decrement_ttl(&mut self) {
        let b = self.0.as_mut();
        let old = u16::from_be_bytes([b[8], b[9]]);
        b[8] = b[8].wrapping_sub(1);
        let new = u16::from_be_bytes([b[8], b[9]]);
        let sum = u16::from_be_bytes([b[10], b[11]]);
        b[10..12].copy_from_slice(&update_checksum(sum, old, new).to_be_bytes());
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        let b = self.0.as_mut();
        b[10] = 0;
        b[11] = 0;
        let c = checksum(&b[..hl]);
        b[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// The IPv6 EtherType.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// IPv6's fixed header.
pub const IPV6_LEN: usize = 40;

/// An IPv6 packet (its fixed header).
pub struct Ipv6Packet<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer holding a whole IPv6 header whose payload length
    /// fits the buffer.
    pub fn new_checked(buf: T) -> Result<Self, Malformed> {
        let b = buf.as_ref();
        if b.len() < IPV6_LEN {
            return Err(Malformed::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(Malformed::NotIpv4);
        }
        if IPV6_LEN + u16::from_be_bytes([b[4], b[5]]) as usize > b.len() {
            return Err(Malformed::BadIhl);
        }
        Ok(Ipv6Packet(buf))
    }

    /// The hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.0.as_ref()[7]
    }

    /// The next header (the protocol, without extension headers).
    pub fn next_header(&self) -> u8 {
        self.0.as_ref()[6]
    }

    /// What follows the fixed header, as long as its payload length says.
    pub fn payload(&self) -> &[u8] {
        let b = self.0.as_ref();
        &b[IPV6_LEN..IPV6_LEN + u16::from_be_bytes([b[4], b[5]]) as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Decrements the hop limit (IPv6 has no header checksum).
    pub fn decrement_hop_limit(&mut self) {
        let b = self.0.as_mut();
        b[7] = b[7].wrapping_sub(1);
    }
}

/// A UDP datagram.
pub struct UdpPacket<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer holding at least a UDP header.
    pub fn new_checked(buf: T) -> Result<Self, Malformed> {
        if buf.as_ref().len() < UDP_LEN {
            return Err(Malformed::Truncated);
        }
        Ok(UdpPacket(buf))
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.0.as_ref()[0], self.0.as_ref()[1]])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.0.as_ref()[2], self.0.as_ref()[3]])
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.0.as_ref()[UDP_LEN..]
    }
}

/// The Internet checksum of `data` (one's complement of the one's
/// complement sum); 0 when `data` includes a correct checksum field.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// RFC 1624 eqn. 3: the new checksum after a 16-bit word changes from
/// `old` to `new`: HC' = ~(~HC + ~m + m').
pub fn update_checksum(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!hc as u32) + (!old as u32) + new as u32;
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// What the generator puts first in every UDP payload.
pub const PROBE_MAGIC: u32 = 0x5258_5343; // "RXSC"
/// Bytes of probe data: magic, sequence number, send time.
pub const PROBE_LEN: usize = 4 + 8 + 8;

/// An Ethernet/IPv4/UDP frame carrying a probe (a sequence number and a
/// send time) at the start of its UDP payload: what the generator sends and
/// what tests feed the dataplane. Fields not given take the lab's forms
/// ([`UdpProbe::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpProbe {
    /// Frame length in bytes, without CRC (at least 62, padded).
    pub frame_len: usize,
    /// Source MAC.
    pub src_mac: Mac,
    /// Destination MAC.
    pub dst_mac: Mac,
    /// Source address.
    pub src_ip: [u8; 4],
    /// Destination address.
    pub dst_ip: [u8; 4],
    /// UDP source and destination ports.
    pub ports: (u16, u16),
    /// IPv4 time to live.
    pub ttl: u8,
    /// The probe's sequence number.
    pub seq: u64,
    /// The probe's send time, in ns.
    pub sent_ns: u64,
}

impl Default for UdpProbe {
    /// 64 bytes from the lab's generator (198.18.0.1) to its sink
    /// (198.19.0.1), UDP 9000 to 9001, TTL 64, sequence 0.
    fn default() -> Self {
        UdpProbe {
            frame_len: 64,
            src_mac: Mac([2, 0, 0, 0, 0, 1]),
            dst_mac: Mac([2, 0, 0, 0, 0, 2]),
            src_ip: [198, 18, 0, 1],
            dst_ip: [198, 19, 0, 1],
            ports: (9000, 9001),
            ttl: 64,
            seq: 0,
            sent_ns: 0,
        }
    }
}

impl UdpProbe {
    /// Writes the frame into `buf` (cut to `buf`'s length if shorter);
    /// returns its length.
    pub fn write(&self, buf: &mut [u8]) -> usize {
        let frame_len = self
            .frame_len
            .clamp(ETH_LEN + IPV4_MIN_LEN + UDP_LEN + PROBE_LEN, buf.len());
        let b = &mut buf[..frame_len];
        b.fill(0);
        b[0..6].copy_from_slice(&self.dst_mac.0);
        b[6..12].copy_from_slice(&self.src_mac.0);
        b[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip_len = (frame_len - ETH_LEN) as u16;
        let ip = &mut b[ETH_LEN..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = self.ttl;
        ip[9] = 17; // UDP
        ip[12..16].copy_from_slice(&self.src_ip);
        ip[16..20].copy_from_slice(&self.dst_ip);
        let c = checksum(&ip[..IPV4_MIN_LEN]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let udp = &mut ip[IPV4_MIN_LEN..];
        udp[0..2].copy_from_slice(&self.ports.0.to_be_bytes());
        udp[2..4].copy_from_slice(&self.ports.1.to_be_bytes());
        udp[4..6].copy_from_slice(&(ip_len - IPV4_MIN_LEN as u16).to_be_bytes());
        // UDP checksum 0: none (allowed for IPv4); the probe carries its own identity.
        let p = &mut udp[UDP_LEN..];
        p[0..4].copy_from_slice(&PROBE_MAGIC.to_be_bytes());
        p[4..12].copy_from_slice(&self.seq.to_be_bytes());
        p[12..20].copy_from_slice(&self.sent_ns.to_be_bytes());
        frame_len
    }

    /// The frame, in a buffer of its own.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = vec![
            0u8;
            self.frame_len
                .max(ETH_LEN + IPV4_MIN_LEN + UDP_LEN + PROBE_LEN)
        ];
        let n = self.write(&mut b);
        b.truncate(n);
        b
    }
}

/// Reads the probe (sequence, send time) from a frame [`UdpProbe`] wrote,
/// if it is one.
pub fn parse_probe(frame: &[u8]) -> Option<(u64, u64)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != 17 {
        return None;
    }
    let udp = UdpPacket::new_checked(ip.payload()).ok()?;
    let p = udp.payload();
    if p.len() < PROBE_LEN || u32::from_be_bytes(p[0..4].try_into().ok()?) != PROBE_MAGIC {
        return None;
    }
    Some((
        u64::from_be_bytes(p[4..12].try_into().ok()?),
        u64::from_be_bytes(p[12..20].try_into().ok()?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A known-good header: the textbook example (checksum 0xb861).
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn checksum_of_known_header() {
        assert_eq!(checksum(&HDR), 0);
        let mut h = HDR;
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn views_reject_each_malformed_class() {
        assert_eq!(
            EthernetFrame::new_checked(&[0u8; 13][..]).err(),
            Some(Malformed::Truncated)
        );
        assert_eq!(
            Ipv4Packet::new_checked(&HDR[..19]).err(),
            Some(Malformed::Truncated)
        );
        let mut v6 = HDR;
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).err(),
            Some(Malformed::NotIpv4)
        );
        let mut ihl = [0u8; 0x73];
        ihl[..20].copy_from_slice(&HDR);
        ihl[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&ihl[..]).err(),
            Some(Malformed::BadIhl)
        );
        // Total length (0x73) longer than the buffer.
        assert_eq!(
            Ipv4Packet::new_checked(&HDR[..]).err(),
            Some(Malformed::BadIhl)
        );
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut buf = [0u8; 128];
        let n = UdpProbe {
            seq: 7,
            sent_ns: 99,
            ..UdpProbe::default()
        }
        .write(&mut buf);
        assert_eq!(n, 64);
        let mut ip = Ipv4Packet::new_checked(&mut buf[ETH_LEN..n]).unwrap();
        assert!(ip.verify_checksum());
        for _ in 0..63 {
            ip.decrement_ttl();
            assert!(ip.verify_checksum());
        }
        assert_eq!(ip.ttl(), 1);
        assert_eq!(parse_probe(&buf[..n]), Some((7, 99)));
    }

    #[test]
    fn mac_round_trip() {
        let m = Mac::parse("02:72:78:00:01:0a").unwrap();
        assert_eq!(m.to_string(), "02:72:78:00:01:0a");
        assert_eq!(Mac::parse("02:72:78:00:01"), None);
        assert_eq!(Mac::parse("02:72:78:00:01:0a:00"), None);
    }

    proptest! {
        /// No input makes a view or the probe parser panic.
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(eth) = EthernetFrame::new_checked(&bytes[..]) {
                let _ = (eth.dst(), eth.src(), eth.ethertype());
                if let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) {
                    let _ = (ip.ttl(), ip.src(), ip.dst(), ip.verify_checksum(), ip.payload().len());
                    let _ = UdpPacket::new_checked(ip.payload()).map(|u| (u.src_port(), u.payload().len()));
                }
            }
            let _ = parse_probe(&bytes);
        }

        /// The incremental update equals recomputing from scratch.
        #[test]
        fn incremental_equals_full(mut hdr in prop::array::uniform20(any::<u8>()), ttl in 2u8..=255) {
            hdr[0] = 0x45;
            hdr[2] = 0; hdr[3] = 20;
            hdr[8] = ttl;
            let mut a = Ipv4Packet::new_checked(hdr).unwrap();
            a.fill_checksum();
            a.decrement_ttl();
            let inc = a.checksum();
            a.fill_checksum();
            prop_assert_eq!(inc, a.checksum());
        }
    }
}
