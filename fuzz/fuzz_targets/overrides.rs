//! `--set` and `--vary` values applied to a real scenario: an override or a
//! sweep is applied, or refused with a clean error naming the flag.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxsched_sim::scenario::parse_set;
use rxsched_sim::Loaded;

const BASE: &str = "profile = \"dec3000-300\"\n[kernel]\nkind = \"polling\"\n\
    [[traffic]]\nrate_pps = 5000\n[[traffic]]\nrate_pps = 100\nport = 1\n\
    [[process]]\nkind = \"screend\"\n[[process]]\nkind = \"onoff\"\ncount = 2\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = Loaded::parse("base.toml", BASE.into(), None).expect("the base loads");
    let mut sets = Vec::new();
    for line in text.lines().take(8) {
        if let Ok(s) = parse_set(line) {
            sets.push(s);
        }
        if let Ok((key, values)) = rxsched::flags::parse_vary(line) {
            assert!(!values.is_empty() && values.len() <= 10_000);
            assert!(values.iter().all(|v| v.is_finite()));
            let _ = key;
        }
    }
    match base.with(&sets) {
        Ok(s) => assert!(s.validate().is_ok()),
        Err(e) => assert!(e.file == "--set" || e.file == "base.toml", "{e}"),
    }
});
