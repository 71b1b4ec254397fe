//! Screening rule files: parsed, or refused with file:line; a parsed rule
//! set gives every frame a verdict, and prints as an nftables ruleset.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxsched_linux::rules::{Flow, Rules};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Rules::parse("fuzz.rules", text) {
        Ok(rules) => {
            let frame = [0u8; 64];
            let _ = rules.verdict(&Flow::of_frame(&frame));
            let _ = rules.to_nft();
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with("fuzz.rules:"), "{msg}");
        }
    }
});
