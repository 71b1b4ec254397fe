//! Any bytes as a received frame: the forwarding path accepts and rewrites
//! it, leaving a verifying IPv4 checksum and a TTL one lower, or refuses it
//! with a named reason; the probe and rule-matching parsers never fail.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxsched_linux::router::{forward_in_place, Route};
use rxsched_linux::rules::Flow;
use rxsched_linux::wire::{parse_probe, EthernetFrame, Ipv4Packet, Mac, UdpPacket};

fuzz_target!(|data: &[u8]| {
    let ports = ["p0".to_string(), "p1".to_string()];
    let routes = [
        Route::parse("198.19.0.0/16=p1@02:00:00:00:00:01", &ports).expect("route"),
        Route::parse("198.18.0.0/24=p0@02:00:00:00:00:02", &ports).expect("route"),
        Route::parse("198.19.7.7=p0@02:00:00:00:00:03", &ports).expect("route"),
    ];
    let macs = [Mac([2, 0, 0, 0, 1, 0]), Mac([2, 0, 0, 0, 1, 1])];
    let ttl_before = EthernetFrame::new_checked(data)
        .ok()
        .and_then(|e| Ipv4Packet::new_checked(e.payload()).ok().map(|ip| ip.ttl()));
    let mut frame = data.to_vec();
    if let Ok(port) = forward_in_place(&mut frame, &routes, &macs) {
        assert!(port < ports.len());
        let eth = EthernetFrame::new_checked(&frame[..]).expect("forwarded frames parse");
        assert_eq!(eth.src(), macs[port]);
        let ip = Ipv4Packet::new_checked(eth.payload()).expect("forwarded packets parse");
        assert!(
            ip.verify_checksum(),
            "the incremental checksum update broke the header"
        );
        assert_eq!(Some(ip.ttl() + 1), ttl_before);
        assert_eq!(frame.len(), data.len());
    } else {
        assert_eq!(frame, data, "a refused frame is left as it was");
    }
    let _ = parse_probe(data);
    let _ = Flow::of_frame(data);
    if let Ok(eth) = EthernetFrame::new_checked(data) {
        if let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) {
            let _ = (ip.src(), ip.dst(), ip.protocol(), ip.fragment_offset());
            if let Ok(udp) = UdpPacket::new_checked(ip.payload()) {
                let _ = (udp.src_port(), udp.dst_port(), udp.payload().len());
            }
        }
    }
});
