use proptest::prelude::*;

use super::{block_mask, block_mask_bytewise, message, Skimmed, MAX_DEPTH};
use crate::rpc::wire::Message;

/// The fast reading of `text`, which must agree with serde_json's on
/// UTF-8 and refuse the rest.
fn skim(text: &[u8]) -> Skimmed<'_> {
    let serde = Message::parse_with_serde(text).filter(|_| std::str::from_utf8(text).is_ok());
    let skimmed = message(text);
    match &skimmed {
        Skimmed::Message(msg) => assert_eq!(Some(msg), serde.as_ref(), "{:?}", String::from_utf8_lossy(text)),
        Skimmed::Invalid => assert_eq!(serde, None, "{:?}", String::from_utf8_lossy(text)),
        Skimmed::Unsure => {}
    }
    assert_eq!(Message::parse(text), serde);
    skimmed
}

fn read(text: &str) -> Message<'_> {
    match skim(text.as_bytes()) {
        Skimmed::Message(msg) => msg,
        other => panic!("{text:?} read as {other:?}"),
    }
}

fn invalid(text: &str) {
    assert!(
        matches!(skim(text.as_bytes()), Skimmed::Invalid),
        "{text:?} not refused"
    );
}

fn unsure(text: &[u8]) {
    assert!(
        matches!(skim(text), Skimmed::Unsure),
        "{:?} read",
        String::from_utf8_lossy(text)
    );
}

#[test]
fn members_are_kept_as_their_raw_text() {
    let msg = read(
        r#" { "jsonrpc" : "2.0", "id":7 ,"result": {"a": [1, -2.5e+3, "x\"y", null, true, false, {}, []]}, "extra": [{"id": 9}] } "#,
    );
    assert_eq!(msg.jsonrpc, Some(r#""2.0""#));
    assert_eq!(msg.id, Some("7"));
    assert_eq!(
        msg.result,
        Some(r#"{"a": [1, -2.5e+3, "x\"y", null, true, false, {}, []]}"#)
    );
    assert_eq!((msg.error, msg.method, msg.params), (None, None, None));
    let msg = read(r#"{"method":"m","params":[],"error":null,"id":null}"#);
    assert_eq!(
        (msg.method, msg.params, msg.error, msg.id),
        (Some(r#""m""#), Some("[]"), Some("null"), Some("null"))
    );
    // An array where an object was open before at the same depth, and the
    // other way round: each container is what it is, not what was there.
    let mixed = r#"[{"a":1},[1,2],{"b":[3,{}]},[[],{}],{"c":{"d":[{}]}},[4]]"#;
    assert_eq!(read(&format!(r#"{{"result":{mixed}}}"#)).result, Some(mixed));
    assert_eq!(read("{}"), Message::default());
    assert_eq!(read("\t{\r\n}\n").result, None);
}

#[test]
fn strings_are_followed_across_every_64_byte_window() {
    for len in 0..200 {
        let long = "a".repeat(len);
        assert_eq!(
            read(&format!(r#"{{"result":"{long}"}}"#)).result.map(str::len),
            Some(len + 2)
        );
        // An escape, and a control byte, at every place a window can cut.
        let escaped = format!(r#"{{"result":"{long}\"\\\u00e9","id":1}}"#);
        assert_eq!(read(&escaped).id, Some("1"));
        invalid(&format!("{{\"result\":\"{long}\u{1f}\"}}"));
        invalid(&format!(r#"{{"result":"{long}\"#));
        invalid(&format!(r#"{{"result":"{long}"#));
        invalid(&format!(r#"{{"result":"{long}\u12"}}"#));
    }
}

#[test]
fn what_serde_json_refuses_is_refused() {
    for text in [
        "{",
        "{\"id\"",
        "{\"id\":",
        "{\"id\":1",
        "{\"id\":1,}",
        "{\"id\" 1}",
        "{id:1}",
        "{\"id\":1}}",
        "{\"id\":1} x",
        "{\"id\":1,\"id\":2}",
        "{\"result\":1,\"result\":1}",
        "{\"id\":01}",
        "{\"id\":-}",
        "{\"id\":1.}",
        "{\"id\":.5}",
        "{\"id\":1e}",
        "{\"id\":1e+}",
        "{\"id\":+1}",
        "{\"id\":tru}",
        "{\"id\":nul}",
        "{\"id\":nulll}",
        "{\"id\":True}",
        "{\"result\":[1,]}",
        "{\"result\":[1 2]}",
        "{\"result\":{\"a\"}}",
        "{\"result\":{\"a\":1,}}",
        "{\"result\":{1:2}}",
        "{\"result\":[}",
        "{\"result\":{]}",
        "{\"result\":\"\\x\"}",
        "{\"result\":\"tab\there\"}",
        "{\"result\":[\"a\"",
        "{\"id\":1,,\"x\":2}",
        "{\"result\":[-01]}",
        "{\"result\":{\"a\":00}}",
        "{,}",
        "{\"a\":1 \"b\":2}",
        "{\"result\":'x'}",
    ] {
        invalid(text);
    }
}

#[test]
fn a_body_that_is_not_utf8_is_refused_even_where_serde_json_skips_the_bytes() {
    let skipped = b"{\"jsonrpc\":\"2.0\",\"result\":\"0x1\",\"id\":1,\"x\":\"\xff\"}";
    assert!(Message::parse_with_serde(skipped).is_some());
    assert!(matches!(skim(skipped), Skimmed::Invalid));
    assert!(matches!(skim(b"{\"result\":\"\xff\"}"), Skimmed::Invalid));
}

#[test]
fn what_it_does_not_read_serde_json_decides() {
    unsure(b"[\"2.0\"]");
    unsure(b"5");
    unsure(b"");
    unsure(b"{\"resul\\u0074\":1}");

    let deep = format!(
        r#"{{"result":{}{}}}"#,
        "[".repeat(MAX_DEPTH + 1),
        "]".repeat(MAX_DEPTH + 1)
    );
    unsure(deep.as_bytes());
    let deepest = format!(
        r#"{{"result":{}{}}}"#,
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    );
    assert_eq!(read(&deepest).result.map(str::len), Some(2 * MAX_DEPTH));
    let objects = format!(
        r#"{{"result":{}1{}}}"#,
        "{\"a\":[".repeat(MAX_DEPTH / 2),
        "]}".repeat(MAX_DEPTH / 2)
    );
    assert!(read(&objects).result.is_some());
}

/// Pieces of JSON, right and wrong, that random texts are made of.
const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    " ",
    "\n",
    "\"id\"",
    "\"result\"",
    "\"error\"",
    "\"jsonrpc\"",
    "\"2.0\"",
    "\"a\"",
    "\"\\\"\"",
    "\"\\u00e9\"",
    "\"\\u00g9\"",
    "\"\\q\"",
    "\"\u{1}\"",
    "\"é\"",
    "\"",
    "\\",
    "0",
    "-0",
    "01",
    "1.5",
    "1.",
    "-1e+9",
    "2E-3",
    "1e",
    "true",
    "false",
    "null",
    "nul",
    "x",
    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn any_text_of_json_pieces_is_read_as_serde_json_reads_it(
        pieces in prop::collection::vec(prop::sample::select(PIECES), 0..40),
        member in prop::sample::select(&["id", "result", "error", "x"][..]),
    ) {
        let text = format!("{{\"{member}\":{}}}", pieces.concat());
        skim(text.as_bytes());
        skim(pieces.concat().as_bytes());
    }

    #[test]
    fn a_windows_mask_marks_exactly_its_quotes_backslashes_and_control_bytes(
        block in prop::collection::vec(prop::sample::select(&[b'"', b'\\', 0, 0x1f, 0x20, b'a', 0x7f, 0x80, 0xff][..]), 64),
    ) {
        let block: [u8; 64] = block.try_into().unwrap();
        prop_assert_eq!(block_mask(&block), block_mask_bytewise(&block));
    }

    #[test]
    fn any_bytes_are_read_as_serde_json_reads_them(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut text = b"{\"result\":".to_vec();
        text.extend(&bytes);
        skim(&text);
        skim(&bytes);
    }
}
