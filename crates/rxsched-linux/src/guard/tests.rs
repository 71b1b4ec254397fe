use super::*;

/// The outcomes are the program's counters, in its order: the names of
/// `bpf/guard.bpf.c`'s enum, `G_ROOM` to `G_UNREADABLE`, are the variants'.
#[test]
fn outcomes_follow_the_programs_counters() {
    let src = include_str!("../../bpf/guard.bpf.c");
    let start = src.find("G_ROOM,").expect("the counters' enum");
    let end = src[start..].find("G_N\n").expect("G_N") + start;
    let names: Vec<String> = src[start..end]
        .lines()
        .filter_map(|l| l.trim().split(',').next())
        .filter(|n| n.starts_with("G_"))
        .map(|n| n.trim_start_matches("G_").replace('_', "").to_lowercase())
        .collect();
    let ours: Vec<String> = GuardOutcome::VARIANTS
        .iter()
        .map(|o| format!("{o:?}").to_lowercase())
        .collect();
    assert_eq!(names, ours);
}

/// A local address's key is the frame's destination as the program reads
/// it (network order in memory), and it names itself as `ss` would.
#[test]
fn keys_hold_addresses_in_network_order() {
    let k = SockKey::local("198.18.0.1".parse().unwrap());
    assert_eq!(k.addr[0].to_ne_bytes(), [198, 18, 0, 1]);
    assert_eq!(k.family, libc::AF_INET as u32);
    let named = SockKey { port: 7001, ..k };
    assert_eq!(named.name(), "198.18.0.1:7001");
    let k6 = SockKey::local("2001:db8::5".parse().unwrap());
    assert_eq!(k6.addr[0].to_ne_bytes(), [0x20, 0x01, 0x0d, 0xb8]);
    assert_eq!(k6.addr[3].to_ne_bytes(), [0, 0, 0, 5]);
    assert_eq!(SockKey { port: 53, ..k6 }.name(), "[2001:db8::5]:53");
}

/// This namespace's addresses include loopback's.
#[test]
fn local_addresses_include_loopback() {
    let a = local_addresses().unwrap();
    assert!(
        a.iter().any(|a| a.is_loopback()),
        "getifaddrs gave {a:?}, without 127.0.0.1 or ::1"
    );
}

/// Guarding an interface that does not exist fails before anything is
/// loaded or attached, naming it.
#[test]
fn an_unknown_interface_is_refused() {
    let e = Guard::attach("rxs-nosuch0", None, Hook::Xdp)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("rxs-nosuch0"), "{e}");
}
