//! The answer judge on arbitrary bytes: never a panic, every entry judged once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volley::rpc::{Entry, Judge, Version};

fuzz_target!(|data: &[u8]| {
    let (head, body) = data.split_at(data.len().min(2));
    let calls = head.first().map_or(1, |b| (b % 8) as usize + 1);
    let notifications = head.get(1).map_or(0, |b| (b % 3) as usize);
    let mut entries: Vec<Entry> = (0..calls as u64)
        .map(|i| Entry {
            method: 0,
            call: 0,
            id: Some(i),
        })
        .collect();
    entries.extend((0..notifications).map(|_| Entry {
        method: 0,
        call: 0,
        id: None,
    }));
    let cases = [
        (true, 200, Version::V2),
        (false, 200, Version::V2),
        (true, 503, Version::V2),
        (false, 200, Version::V1),
    ];
    for (batch, status, version) in cases {
        let entries = if batch { &entries[..] } else { &entries[..1] };
        let mut seen = vec![0u8; entries.len()];
        Judge::new(version).judge(status, body, entries, batch, &[], |i, _, _| seen[i] += 1);
        assert!(seen.iter().all(|n| *n == 1));
    }
});
