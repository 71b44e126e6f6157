//! The borrowed shape of a JSON-RPC message, shared by the judge and the
//! built-in server. Members are kept as raw JSON text so nothing is built
//! that is not needed, and so that a present `null` (a valid `result`, or
//! `id: null`) is told apart from an absent member.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One request or response object, members borrowed from the input.
#[derive(Deserialize, Default)]
pub struct Message<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    pub jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub error: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub id: Option<&'a RawValue>,
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
pub fn is_version_2(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|v| v.get() == "\"2.0\"")
}

/// The integer value of an error code, if it is one.
pub fn error_code(error: &RawValue) -> Option<(i64, bool)> {
    let obj: ErrorObject = serde_json::from_str(error.get()).ok()?;
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

/// A message head without a `Content-Length`: the stream cannot be
/// followed after it.
#[derive(Debug, PartialEq, Eq)]
pub struct NoLength;

/// LSP's framing: where the next message in `input` lies, as the range of
/// its body, when it has all arrived.
pub fn next_headed(input: &[u8]) -> Result<Option<std::ops::Range<usize>>, NoLength> {
    let Some(head_end) = input.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    const NAME: &[u8] = b"content-length:";
    let length = input[..head_end]
        .split(|b| *b == b'\n')
        .filter(|line| line.len() > NAME.len() && line[..NAME.len()].eq_ignore_ascii_case(NAME))
        .find_map(|line| {
            std::str::from_utf8(&line[NAME.len()..])
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        })
        .ok_or(NoLength)?;
    let start = head_end + 4;
    Ok((input.len() >= start + length).then_some(start..start + length))
}

#[cfg(test)]
mod tests {
    use super::{next_headed, NoLength};

    #[test]
    fn headed_messages_are_found_whole_or_not_at_all() {
        let input = b"Content-Type: x\r\ncontent-LENGTH: 2\r\n\r\n{}Content-Length: 5\r\n\r\n[";
        assert_eq!(next_headed(input), Ok(Some(38..40)));
        assert_eq!(next_headed(&input[40..]), Ok(None));
        assert_eq!(next_headed(b"Content-Length: 2\r\n"), Ok(None));
        assert_eq!(next_headed(b"X: 1\r\n\r\n{}"), Err(NoLength));
    }
}
