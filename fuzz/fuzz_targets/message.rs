//! The fast reading of a message against serde_json's on arbitrary bytes:
//! the same members, or the same refusal, every time (and a refusal of
//! what is not UTF-8, which serde_json lets through where it skips).
#![no_main]

use libfuzzer_sys::fuzz_target;
use volley::rpc::wire::Message;

fn serde_json_reading(data: &[u8]) -> Option<Message<'_>> {
    Message::parse_with_serde(data).filter(|_| std::str::from_utf8(data).is_ok())
}

fuzz_target!(|data: &[u8]| {
    assert_eq!(Message::parse(data), serde_json_reading(data));
    let mut wrapped = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":".to_vec();
    wrapped.extend_from_slice(data);
    wrapped.push(b'}');
    assert_eq!(Message::parse(&wrapped), serde_json_reading(&wrapped));
});
