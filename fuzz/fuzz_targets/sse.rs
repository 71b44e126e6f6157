//! An MCP event stream of any bytes: the answer found is part of the input
//! and nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|stream: &[u8]| {
    let (answer, others) = volley::transport::sse::decode(stream);
    assert!(answer.len() <= stream.len());
    assert!(others as usize <= stream.len());
});
