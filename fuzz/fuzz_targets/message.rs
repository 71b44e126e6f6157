//! The fast reading of a message against serde_json's on arbitrary bytes:
//! the same members, or the same refusal, every time.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volley::rpc::wire::Message;

fuzz_target!(|data: &[u8]| {
    assert_eq!(Message::parse(data), Message::parse_with_serde(data));
    let mut wrapped = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":".to_vec();
    wrapped.extend_from_slice(data);
    wrapped.push(b'}');
    assert_eq!(Message::parse(&wrapped), Message::parse_with_serde(&wrapped));
});
