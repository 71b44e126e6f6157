//! LSP framing (`Content-Length` heads) over any bytes: every message found
//! lies inside the input and under the limit, and nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volley::rpc::wire::next_lsp_message_within;

const LIMIT: usize = 4096;

fuzz_target!(|input: &[u8]| {
    let mut rest = input;
    while let Ok(Some(message)) = next_lsp_message_within(rest, LIMIT) {
        assert!(message.start <= message.end && message.end <= rest.len());
        assert!(message.end - message.start <= LIMIT);
        if message.end == 0 {
            break;
        }
        rest = &rest[message.end..];
    }
});
