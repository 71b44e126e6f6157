//! The scenario loader on arbitrary text: an error or a scenario, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = volley::scenario::Scenario::parse(text, "fuzz.toml", "fuzz", &|_| None);
    }
});
