//! The borrowed shape of a JSON-RPC message, shared by the judge and the
//! built-in server. Members are kept as raw JSON text so nothing is built
//! that is not needed, and so that a present `null` (a valid `result`, or
//! `id: null`) is told apart from an absent member.

use std::ops::Range;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One request or response object: each member the raw JSON text of its
/// value, borrowed from the input (`Some("null")` for a present `null`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Message<'a> {
    pub jsonrpc: Option<&'a str>,
    pub method: Option<&'a str>,
    pub params: Option<&'a str>,
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    pub id: Option<&'a str>,
}

impl<'a> Message<'a> {
    /// Reads one message; `None` where serde_json would refuse the text as
    /// one (not JSON, not an object or array, a member twice), or where it
    /// is not UTF-8 (RFC 8259 §8.1).
    pub fn parse(body: &'a [u8]) -> Option<Message<'a>> {
        match super::skim::message(body) {
            super::skim::Skimmed::Message(msg) => Some(msg),
            super::skim::Skimmed::Invalid => None,
            super::skim::Skimmed::Unsure => Message::parse_with_serde(body),
        }
    }

    /// The same reading, done by serde_json alone: what [`Message::parse`]
    /// falls back on, and what the fast reading is tested against.
    pub fn parse_with_serde(body: &'a [u8]) -> Option<Message<'a>> {
        let raw: RawMessage = serde_json::from_slice(body).ok()?;
        Some(Message {
            jsonrpc: raw.jsonrpc.map(RawValue::get),
            method: raw.method.map(RawValue::get),
            params: raw.params.map(RawValue::get),
            result: raw.result.map(RawValue::get),
            error: raw.error.map(RawValue::get),
            id: raw.id.map(RawValue::get),
        })
    }
}

/// A message as serde reads it.
#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
}

/// An error object's two required members.
#[derive(Deserialize)]
pub struct ErrorObject<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    pub code: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub message: Option<&'a RawValue>,
}

/// A member that is present, even as `null`, is `Some`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// `"2.0"` exactly, as JSON text.
pub fn is_version_2(raw: Option<&str>) -> bool {
    match raw {
        Some("\"2.0\"") => true,
        // "2\u002e0" is the same string, written otherwise.
        Some(text) if text.contains('\\') => serde_json::from_str::<String>(text).is_ok_and(|v| v == "2.0"),
        _ => false,
    }
}

/// The integer value of an error code, if it is one.
pub fn error_code(error: &str) -> Option<(i64, bool)> {
    let obj: ErrorObject = serde_json::from_str(error).ok()?;
    let code: i64 = obj.code?.get().parse().ok()?;
    let message_is_string = obj.message.is_some_and(|m| m.get().starts_with('"'));
    Some((code, message_is_string))
}

/// The first byte that is not JSON whitespace.
pub fn first_significant_byte(body: &[u8]) -> Option<u8> {
    body.iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// How messages are told apart on a byte stream (a child's stdio, the
/// built-in server's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// LSP: `Content-Length` headers before each message.
    ContentLength,
    /// MCP: one JSON message a line.
    Ndjson,
}

/// A message head (LSP's, or HTTP's) larger than this is refused: real
/// ones are a few dozen bytes, and one that never ends must not grow the
/// buffer without bound.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The value of a `Content-Length` field: a decimal number, or the same
/// number repeated as a list (which RFC 9110 §8.6 lets a recipient take as
/// one); `None` for anything else (a sign, a space inside, another digit).
/// Checked arithmetic: a number past u64 saturates to u64::MAX, larger
/// than any limit, and never wraps.
pub fn content_length(value: &[u8]) -> Option<u64> {
    let mut length = None;
    for element in value.split(|b| *b == b',') {
        let digits = trim_ows(element);
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let number = digits.iter().fold(0u64, |n, digit| {
            n.checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(digit - b'0')))
                .unwrap_or(u64::MAX)
        });
        if length.is_some_and(|earlier| earlier != number) {
            return None;
        }
        length = Some(number);
    }
    length
}

/// Without the optional whitespace (spaces and tabs) at either end.
pub fn trim_ows(text: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = text.iter().position(|b| !is_ows(b)).unwrap_or(text.len());
    let end = text.iter().rposition(|b| !is_ows(b)).map_or(start, |at| at + 1);
    &text[start..end]
}

/// Why a stream of headed messages cannot be followed past this point:
/// whoever reads it must give the connection up.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadedError {
    /// A complete head without a `Content-Length`.
    NoLength,
    /// A `Content-Length` that is not a number, or two that differ.
    BadLength,
    /// A message larger than the reader's limit.
    TooLarge { length: u64, limit: usize },
    /// No end of the head within `MAX_HEAD_BYTES`.
    HeadTooLong,
}

impl std::fmt::Display for HeadedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadedError::NoLength => f.write_str("a message head without a Content-Length"),
            HeadedError::BadLength => {
                f.write_str("a message head whose Content-Length is not a number, or two that differ")
            }
            HeadedError::TooLarge { length, limit } => write!(
                f,
                "a message of {length} bytes by its Content-Length, larger than the limit of {limit} bytes"
            ),
            HeadedError::HeadTooLong => {
                write!(f, "a message head larger than {MAX_HEAD_BYTES} bytes")
            }
        }
    }
}

/// The number an answer's id names, and whether it came as a string ("5"
/// for 5): the one reading of ids, so that the transport routes an answer
/// to the call the judge then matches it to.
pub fn id_number(text: &str) -> Option<(u64, bool)> {
    let (digits, quoted) = match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) => (inner, true),
        None => (text, false),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, quoted))
}

/// Appends `body` to `out` framed as LSP frames a message: a
/// `Content-Length` head, then the body. The one writer of that framing,
/// for volley's requests and the built-in server's answers.
pub fn write_lsp_message(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}

/// `next_lsp_message_within` with no limit on the body but memory's: sizes
/// are still checked, and none can overflow.
pub fn next_lsp_message(input: &[u8]) -> Result<Option<Range<usize>>, HeadedError> {
    next_lsp_message_within(input, usize::MAX)
}

/// LSP's framing: where the next message in `input` lies, as the range of
/// its body, when it has all arrived. Every size the peer names is checked
/// before it is used: the head's against `MAX_HEAD_BYTES`, the body's
/// against `limit`, so no offset computed here can overflow.
pub fn next_lsp_message_within(input: &[u8], limit: usize) -> Result<Option<Range<usize>>, HeadedError> {
    let searched = &input[..input.len().min(MAX_HEAD_BYTES)];
    let Some(head_end) = searched.windows(4).position(|w| w == b"\r\n\r\n") else {
        if input.len() >= MAX_HEAD_BYTES {
            return Err(HeadedError::HeadTooLong);
        }
        return Ok(None);
    };
    const NAME: &[u8] = b"content-length";
    let mut length = None;
    for line in input[..head_end].split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        if !trim_ows(&line[..colon]).eq_ignore_ascii_case(NAME) {
            continue;
        }
        let value = line[colon + 1..]
            .strip_suffix(b"\r")
            .unwrap_or(&line[colon + 1..]);
        let value = content_length(value).ok_or(HeadedError::BadLength)?;
        if length.is_some_and(|earlier| earlier != value) {
            return Err(HeadedError::BadLength);
        }
        length = Some(value);
    }
    let length = length.ok_or(HeadedError::NoLength)?;
    let body = usize::try_from(length)
        .ok()
        .filter(|body| *body <= limit)
        .ok_or(HeadedError::TooLarge { length, limit })?;
    let start = head_end + 4;
    // `input.len() - start` cannot underflow (the head is in the input),
    // and `start + body` is only added once it is known to fit in it.
    Ok((input.len() - start >= body).then(|| start..start + body))
}

#[cfg(test)]
mod tests {
    use super::{
        content_length, next_lsp_message, next_lsp_message_within, write_lsp_message, HeadedError,
        MAX_HEAD_BYTES,
    };

    #[test]
    fn ids_are_numbers_or_strings_of_digits() {
        let id = |text: &str| super::id_number(text);
        assert_eq!(id("5"), Some((5, false)));
        assert_eq!(id("\"5\""), Some((5, true)));
        for not_ours in [
            "\"\"",
            "\"+5\"",
            "-5",
            "5.0",
            "\"5 \"",
            "null",
            "18446744073709551616",
        ] {
            assert_eq!(id(not_ours), None, "{not_ours}");
        }
    }

    #[test]
    fn a_written_message_is_read_back_whole() {
        let mut out = b"[]".to_vec();
        write_lsp_message(&mut out, b"{\"id\":1}");
        assert_eq!(&out[2..], b"Content-Length: 8\r\n\r\n{\"id\":1}");
        let found = next_lsp_message(&out[2..]).unwrap().unwrap();
        assert_eq!(&out[2..][found], b"{\"id\":1}");
    }

    const LIMIT: usize = 1024;

    #[test]
    fn headed_messages_are_found_whole_or_not_at_all() {
        let input = b"Content-Type: x\r\ncontent-LENGTH: 2\r\n\r\n{}Content-Length: 5\r\n\r\n[";
        assert_eq!(next_lsp_message_within(input, LIMIT), Ok(Some(38..40)));
        assert_eq!(next_lsp_message_within(&input[40..], LIMIT), Ok(None));
        assert_eq!(next_lsp_message_within(b"Content-Length: 2\r\n", LIMIT), Ok(None));
        assert_eq!(
            next_lsp_message_within(b"X: 1\r\n\r\n{}", LIMIT),
            Err(HeadedError::NoLength)
        );
    }

    #[test]
    fn a_length_past_the_limit_or_past_u64_is_refused_before_any_arithmetic() {
        let huge = b"Content-Length: 18446744073709551615\r\n\r\n{}";
        assert_eq!(
            next_lsp_message_within(huge, LIMIT),
            Err(HeadedError::TooLarge {
                length: u64::MAX,
                limit: LIMIT
            })
        );
        let past_u64 = b"Content-Length: 99999999999999999999999999\r\n\r\n";
        assert!(matches!(
            next_lsp_message_within(past_u64, LIMIT),
            Err(HeadedError::TooLarge { .. })
        ));
        assert_eq!(
            next_lsp_message_within(b"Content-Length: 1025\r\n\r\n", LIMIT),
            Err(HeadedError::TooLarge {
                length: 1025,
                limit: LIMIT
            })
        );
        assert_eq!(
            next_lsp_message_within(b"Content-Length: 1024\r\n\r\n", LIMIT),
            Ok(None)
        );
        // Without a limit, as large a length as any is only waited for.
        assert_eq!(next_lsp_message(&huge[..40]), Ok(None));
    }

    #[test]
    fn a_length_that_is_not_one_number_is_refused() {
        for bad in ["+2", "-2", "2a", "0x2", "2 2", "", "2, 3"] {
            let input = format!("Content-Length: {bad}\r\n\r\n{{}}");
            assert_eq!(
                next_lsp_message_within(input.as_bytes(), LIMIT),
                Err(HeadedError::BadLength),
                "{bad}"
            );
        }
        let differing = b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}";
        assert_eq!(
            next_lsp_message_within(differing, LIMIT),
            Err(HeadedError::BadLength)
        );
        let same = b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(next_lsp_message_within(same, LIMIT), Ok(Some(40..42)));
    }

    #[test]
    fn a_head_that_never_ends_is_refused_at_its_bound() {
        let endless = vec![b'x'; MAX_HEAD_BYTES];
        assert_eq!(
            next_lsp_message_within(&endless, LIMIT),
            Err(HeadedError::HeadTooLong)
        );
        assert_eq!(next_lsp_message_within(&endless[1..], LIMIT), Ok(None));
    }

    #[test]
    fn content_lengths_are_digits_or_a_list_of_the_same_digits() {
        assert_eq!(content_length(b" 42\t"), Some(42));
        assert_eq!(content_length(b"42, 42"), Some(42));
        assert_eq!(content_length(b"42, 43"), None);
        assert_eq!(content_length(b"+42"), None);
        assert_eq!(content_length(b"4 2"), None);
        assert_eq!(content_length(b"42,"), None);
        assert_eq!(content_length(b"00000000000000000000000042"), Some(42));
        assert_eq!(content_length(b"18446744073709551616"), Some(u64::MAX));
    }
}
