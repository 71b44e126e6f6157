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
