//! The `expect` key: what an answer must look like.

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::error::{Locator, ScenarioError};
use crate::rpc::{Expectation, JsonType, ResultCheck};

/// A call's `expect = { ... }`, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub(super) result: Option<String>,
    #[serde(rename = "type")]
    pub(super) json_type: Option<String>,
    pub(super) pointer: Option<String>,
    pub(super) regex: Option<String>,
    pub(super) equals: Option<Value>,
    pub(super) error: Option<RawCodes>,
}

/// `expect.error`. Its name appears in serde's message for a value that
/// matches no variant, which `raw::SHAPES` replaces.
#[derive(Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawCodes {
    One(i64),
    Many(Vec<i64>),
    Any(String),
}

pub(super) fn expectation(
    at: &Locator,
    raw: &Spanned<RawExpect>,
    key: &str,
) -> Result<Expectation, ScenarioError> {
    let bad = |message: String| at.error(Some(raw.span()), Some(key), message);
    let e = raw.get_ref();
    if let Some(codes) = &e.error {
        if e.result.is_some()
            || e.json_type.is_some()
            || e.pointer.is_some()
            || e.regex.is_some()
            || e.equals.is_some()
        {
            return Err(bad("expect either an error or a result, not both".into()));
        }
        return Ok(Expectation::Error(match codes {
            RawCodes::One(code) => vec![*code],
            RawCodes::Many(codes) if !codes.is_empty() => codes.clone(),
            RawCodes::Any(any) if any == "any" => Vec::new(),
            _ => {
                return Err(bad(
                    "expect.error must be a code, a non-empty list of codes, or \"any\"".into(),
                ))
            }
        }));
    }
    let non_null = match e.result.as_deref() {
        None | Some("any") => false,
        Some("non-null") => true,
        Some(other) => {
            return Err(bad(format!(
                "expect.result `{other}`: expected \"any\" or \"non-null\""
            )))
        }
    };
    let json_type = match e.json_type.as_deref() {
        Some(name) => Some(JsonType::parse(name).ok_or_else(|| {
            bad(format!(
                "expect.type `{name}`: expected null, bool, number, string, array or object"
            ))
        })?),
        None => None,
    };
    if let Some(pointer) = &e.pointer {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(bad(format!(
                "expect.pointer `{pointer}` must start with `/` (a JSON pointer, e.g. /number)"
            )));
        }
    }
    let regex = match &e.regex {
        Some(pattern) => {
            Some(Regex::new(pattern).map_err(|err| bad(format!("expect.regex does not compile: {err}")))?)
        }
        None => None,
    };
    Ok(Expectation::Result(ResultCheck {
        non_null,
        json_type,
        pointer: e.pointer.clone(),
        regex,
        equals: e.equals.clone(),
    }))
}
