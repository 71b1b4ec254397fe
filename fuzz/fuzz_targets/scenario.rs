//! TOML text to a validated scenario or profile, or a clean error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxsched_sim::{Loaded, Profile};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(l) = Loaded::parse("fuzz.toml", text.to_string(), None) {
        // What the loader accepts, validation accepts, and it expands.
        assert!(l.scenario.validate().is_ok());
        assert!(l.scenario.expanded().process.len() <= 64);
        let _ = l.with(&[]).expect("no overrides, no new error");
    }
    if let Ok(p) = Profile::parse("fuzz-profile.toml", text) {
        // An accepted profile's wire gives a positive, finite frame time.
        for bytes in [0, 64, 1518, 65_535] {
            let _ = p.wire.frame_ns(bytes);
        }
    }
});
