//! What an answer must look like beyond the protocol: a result of a shape,
//! or (for negative tests) an error with one of some codes.

use std::fmt;

use regex::Regex;
use serde_json::Value;

use crate::stats::Outcome;

#[derive(Clone, Debug)]
pub enum Expectation {
    Result(ResultCheck),
    /// Any of these codes (any code at all when empty) is the right answer.
    Error(Vec<i64>),
    /// The answer a capture recorded for this very call (`expect =
    /// "recorded"`): the same result, or the same error, by the rules of
    /// answer equality.
    Recorded(std::sync::Arc<RecordedAnswer>),
}

/// A call's recorded answer and the rules it is compared by.
#[derive(Debug)]
pub struct RecordedAnswer {
    pub method: String,
    /// The whole answer message as recorded (its `result` or `error`).
    pub answer: Value,
    pub rules: std::sync::Arc<[crate::rpc::same::EqualityRule]>,
}

#[derive(Clone, Debug, Default)]
pub struct ResultCheck {
    pub non_null: bool,
    pub json_type: Option<JsonType>,
    /// A JSON pointer (`/number`) to the part of the result checked.
    pub pointer: Option<String>,
    pub regex: Option<Regex>,
    pub equals: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    pub fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "null" => JsonType::Null,
            "bool" | "boolean" => JsonType::Bool,
            "number" => JsonType::Number,
            "string" => JsonType::String,
            "array" => JsonType::Array,
            "object" => JsonType::Object,
            _ => return None,
        })
    }

    fn of(value: &Value) -> JsonType {
        match value {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Bool,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }
}

impl Expectation {
    /// The outcome once the expectation is applied to what the protocol
    /// judged: a right answer stays (or becomes) `Ok`, a wrong one is an
    /// `Assertion`; transport and protocol failures are left as they are.
    pub fn apply(&self, outcome: Outcome, result: Option<&str>) -> Outcome {
        match (self, outcome) {
            (Expectation::Error(codes), Outcome::RpcError(code)) => {
                if codes.is_empty() || codes.contains(&code) {
                    Outcome::Ok
                } else {
                    Outcome::Assertion
                }
            }
            (Expectation::Error(_), Outcome::Ok) => Outcome::Assertion,
            // Compared with its message whole: see `apply_to`.
            (Expectation::Recorded(_), _) => outcome,
            (Expectation::Result(_), Outcome::RpcError(_)) => outcome,
            (Expectation::Result(check), Outcome::Ok) => match result {
                Some(result) if check.holds(result) => Outcome::Ok,
                _ => Outcome::Assertion,
            },
            _ => outcome,
        }
    }
}

impl Expectation {
    /// As [`Expectation::apply`], with the answer's `error` too, which a
    /// recorded answer is compared with.
    pub fn apply_to(&self, outcome: Outcome, result: Option<&str>, error: Option<&str>) -> Outcome {
        let Expectation::Recorded(recorded) = self else {
            return self.apply(outcome, result);
        };
        if !matches!(outcome, Outcome::Ok | Outcome::RpcError(_)) {
            return outcome;
        }
        let parse = |raw: Option<&str>| raw.and_then(|r| serde_json::from_str::<Value>(r).ok());
        let mut answer = serde_json::Map::new();
        match (outcome, parse(error)) {
            (Outcome::RpcError(_), Some(error)) => answer.insert("error".into(), error),
            _ => answer.insert("result".into(), parse(result).unwrap_or(Value::Null)),
        };
        let differences = crate::rpc::same::differences(
            &recorded.method,
            &recorded.answer,
            &Value::Object(answer),
            &recorded.rules,
        );
        if differences.is_empty() {
            Outcome::Ok
        } else {
            Outcome::Assertion
        }
    }
}

impl ResultCheck {
    fn holds(&self, text: &str) -> bool {
        if self.json_type.is_none() && self.pointer.is_none() && self.regex.is_none() && self.equals.is_none()
        {
            return !self.non_null || text != "null";
        }
        let Ok(whole) = serde_json::from_str::<Value>(text) else {
            return false;
        };
        let value = match &self.pointer {
            Some(pointer) => match whole.pointer(pointer) {
                Some(value) => value,
                None => return false,
            },
            None => &whole,
        };
        if self.non_null && value.is_null() {
            return false;
        }
        if self.json_type.is_some_and(|t| t != JsonType::of(value)) {
            return false;
        }
        if let Some(regex) = &self.regex {
            match value.as_str() {
                Some(s) if regex.is_match(s) => {}
                _ => return false,
            }
        }
        self.equals.as_ref().is_none_or(|expected| expected == value)
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expectation::Recorded(recorded) => {
                let text = recorded.answer.to_string();
                write!(
                    f,
                    "the recorded answer {}",
                    crate::stats::excerpt(text.as_bytes())
                )
            }
            Expectation::Error(codes) if codes.is_empty() => f.write_str("an error"),
            Expectation::Error(codes) => {
                let codes: Vec<String> = codes.iter().map(i64::to_string).collect();
                write!(f, "an error with code {}", codes.join(" or "))
            }
            Expectation::Result(check) => {
                f.write_str("a result")?;
                if let Some(pointer) = &check.pointer {
                    write!(f, " whose {pointer}")?;
                }
                let mut parts = Vec::new();
                if check.non_null {
                    parts.push("non-null".to_string());
                }
                if let Some(t) = check.json_type {
                    parts.push(format!("of type {t:?}").to_lowercase());
                }
                if let Some(r) = &check.regex {
                    parts.push(format!("matching /{}/", r.as_str()));
                }
                if let Some(v) = &check.equals {
                    parts.push(format!("equal to {v}"));
                }
                // "a result whose /number is equal to 1", "a result of type string".
                let verb = if check.pointer.is_some() { " is" } else { "" };
                if !parts.is_empty() {
                    write!(f, "{verb} {}", parts.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(check: ResultCheck, text: &str) -> Outcome {
        Expectation::Result(check).apply(Outcome::Ok, Some(text))
    }

    #[test]
    fn result_checks() {
        let hex = ResultCheck {
            regex: Some(Regex::new("^0x[0-9a-f]+$").unwrap()),
            ..Default::default()
        };
        assert_eq!(result(hex.clone(), r#""0x1b4""#), Outcome::Ok);
        assert_eq!(result(hex.clone(), r#""0x1B4G""#), Outcome::Assertion);
        assert_eq!(result(hex, "436"), Outcome::Assertion);
        let non_null = ResultCheck {
            non_null: true,
            ..Default::default()
        };
        assert_eq!(result(non_null.clone(), "null"), Outcome::Assertion);
        assert_eq!(result(non_null, "0"), Outcome::Ok);
        let typed = ResultCheck {
            json_type: Some(JsonType::Object),
            ..Default::default()
        };
        assert_eq!(result(typed.clone(), "{}"), Outcome::Ok);
        assert_eq!(result(typed, "[]"), Outcome::Assertion);
        let pointer = ResultCheck {
            pointer: Some("/number".into()),
            equals: Some(Value::String("0x1".into())),
            ..Default::default()
        };
        assert_eq!(result(pointer.clone(), r#"{"number":"0x1"}"#), Outcome::Ok);
        assert_eq!(result(pointer.clone(), r#"{"number":"0x2"}"#), Outcome::Assertion);
        assert_eq!(result(pointer, r#"{"other":1}"#), Outcome::Assertion);
    }

    #[test]
    fn an_expectation_reads_as_a_sentence() {
        let at = |pointer: Option<&str>| ResultCheck {
            pointer: pointer.map(str::to_string),
            equals: Some(Value::String("0x1".into())),
            ..Default::default()
        };
        let text = |check| Expectation::Result(check).to_string();
        assert_eq!(
            text(at(Some("/status"))),
            r#"a result whose /status is equal to "0x1""#
        );
        assert_eq!(text(at(None)), r#"a result equal to "0x1""#);
    }

    #[test]
    fn negative_tests_expect_errors() {
        let expect = Expectation::Error(vec![-32601]);
        assert_eq!(expect.apply(Outcome::RpcError(-32601), None), Outcome::Ok);
        assert_eq!(expect.apply(Outcome::RpcError(-32602), None), Outcome::Assertion);
        assert_eq!(expect.apply(Outcome::Ok, Some("1")), Outcome::Assertion);
        assert_eq!(expect.apply(Outcome::Timeout, None), Outcome::Timeout);
        assert_eq!(
            Expectation::Error(vec![]).apply(Outcome::RpcError(5), None),
            Outcome::Ok
        );
    }
}
