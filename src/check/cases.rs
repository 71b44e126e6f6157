//! The specification's cases: each rule of JSON-RPC 2.0 as a request and
//! the judge of its answer.

use serde_json::{json, Value};

use super::{Answer, Level};

/// One rule of the specification and the request that tests it.
pub struct Case {
    pub name: &'static str,
    pub level: Level,
    /// The rule, in a few words.
    pub rule: &'static str,
    /// The request, given the method to call.
    pub request: fn(&str) -> Vec<u8>,
    /// `Err(why)` when the answer breaks the rule.
    pub judge: fn(&Answer) -> Result<(), String>,
    /// Nothing must come back: on a stream, silence is waited for.
    pub silent: bool,
}

/// A method no server has: the `rpc.` prefix is reserved, so not that.
const NO_SUCH_METHOD: &str = "volley.check/no-such-method";
const UNICODE: &str = "héllo wörld ✓ 𝄞 日本語";
const LARGE_BYTES: usize = 1 << 20;

/// Every case, in the order they are probed.
pub const CASES: &[Case] = &[
    Case {
        name: "number_id",
        level: Level::Must,
        rule: "a call with a number id is answered with that id",
        request: |m| body(call(m, None, Some(json!(7)))),
        judge: |a| response(&parsed(a)?, &json!(7)),
        silent: false,
    },
    Case {
        name: "string_id",
        level: Level::Must,
        rule: "a call with a string id is answered with that string",
        request: |m| body(call(m, None, Some(json!("volley-1")))),
        judge: |a| response(&parsed(a)?, &json!("volley-1")),
        silent: false,
    },
    Case {
        name: "params_by_position",
        level: Level::Must,
        rule: "params as an array are taken (any answer but -32600/-32700)",
        request: |m| body(call(m, Some(json!([])), Some(json!(3)))),
        judge: |a| structure_taken(&parsed(a)?, &json!(3)),
        silent: false,
    },
    Case {
        name: "params_by_name",
        level: Level::Must,
        rule: "params as an object are taken (any answer but -32600/-32700)",
        request: |m| body(call(m, Some(json!({})), Some(json!(4)))),
        judge: |a| structure_taken(&parsed(a)?, &json!(4)),
        silent: false,
    },
    Case {
        name: "notification",
        level: Level::Must,
        rule: "a notification (no id) is answered with nothing",
        request: |m| body(call(m, None, None)),
        judge: nothing,
        silent: true,
    },
    Case {
        name: "unknown_method",
        level: Level::Must,
        rule: "an unknown method is error -32601 with the call's id",
        request: |_| body(call(NO_SUCH_METHOD, None, Some(json!(6)))),
        judge: |a| error_is(&parsed(a)?, -32601, &json!(6)),
        silent: false,
    },
    Case {
        name: "invalid_json",
        level: Level::Must,
        rule: "invalid JSON is error -32700 with id null",
        request: |_| br#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#.to_vec(),
        judge: |a| error_is(&parsed(a)?, -32700, &Value::Null),
        silent: false,
    },
    Case {
        name: "invalid_request",
        level: Level::Must,
        rule: "a request object with a method that is not a string is error -32600 with id null",
        request: |_| br#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#.to_vec(),
        judge: |a| error_is(&parsed(a)?, -32600, &Value::Null),
        silent: false,
    },
    Case {
        name: "not_an_object",
        level: Level::Must,
        rule: "a request that is not an object is error -32600 with id null",
        request: |_| b"42".to_vec(),
        judge: |a| error_is(&parsed(a)?, -32600, &Value::Null),
        silent: false,
    },
    Case {
        name: "empty_batch",
        level: Level::Must,
        rule: "an empty batch is one error -32600 with id null, not an array",
        request: |_| b"[]".to_vec(),
        judge: |a| error_is(&parsed(a)?, -32600, &Value::Null),
        silent: false,
    },
    Case {
        name: "batch_invalid_member",
        level: Level::Must,
        rule: "a batch member that is not a request is answered in the array with -32600",
        request: |m| body(json!([call(m, None, Some(json!(8))), 1])),
        judge: |a| batch_answers(&parsed(a)?, &[json!(8)], 1),
        silent: false,
    },
    Case {
        name: "batch_mixed",
        level: Level::Must,
        rule: "a batch of calls and a notification gets one answer per call, none for the notification",
        request: |m| {
            body(json!([
                call(m, None, Some(json!(10))),
                call(m, None, None),
                call(m, None, Some(json!(11)))
            ]))
        },
        judge: |a| batch_answers(&parsed(a)?, &[json!(10), json!(11)], 0),
        silent: false,
    },
    Case {
        name: "batch_all_notifications",
        level: Level::Must,
        rule: "a batch of notifications only is answered with nothing at all",
        request: |m| body(json!([call(m, None, None), call(m, None, None)])),
        judge: nothing,
        silent: true,
    },
    Case {
        name: "unicode",
        level: Level::Must,
        rule: "unicode in params and id is taken, and the id echoed exactly",
        request: |m| body(call(m, Some(json!([UNICODE])), Some(json!(UNICODE)))),
        judge: |a| response(&parsed(a)?, &json!(UNICODE)),
        silent: false,
    },
    Case {
        name: "large_payload",
        level: Level::Should,
        rule: "a 1 MiB request is answered (a result, or an error with its id)",
        request: |m| body(call(m, Some(json!(["x".repeat(LARGE_BYTES)])), Some(json!(12)))),
        judge: |a| response(&parsed(a)?, &json!(12)),
        silent: false,
    },
];

/// A call of `method`; without an `id`, a notification.
fn call(method: &str, params: Option<Value>, id: Option<Value>) -> Value {
    let mut call = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        call["params"] = params;
    }
    if let Some(id) = id {
        call["id"] = id;
    }
    call
}

fn body(value: Value) -> Vec<u8> {
    serde_json::to_vec(&value).expect("a JSON value always serializes")
}

/// The answer as JSON; nothing, or not JSON, breaks every rule that wants one.
fn parsed(answer: &Answer) -> Result<Value, String> {
    if answer.body.iter().all(u8::is_ascii_whitespace) {
        return Err("no answer came".into());
    }
    serde_json::from_slice(&answer.body).map_err(|e| format!("the answer is not JSON: {e}"))
}

/// A response object by the rules: `"jsonrpc": "2.0"`, the id given back
/// exactly (type included), and a result or a well-formed error, not both.
fn response(answer: &Value, id: &Value) -> Result<(), String> {
    let Some(object) = answer.as_object() else {
        return Err("the answer is not a response object".into());
    };
    match object.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        Some(other) => return Err(format!("`jsonrpc` is {other}, not \"2.0\"")),
        None => return Err("no `jsonrpc` member (a JSON-RPC 1.0 answer?)".into()),
    }
    match object.get("id") {
        Some(got) if got == id => {}
        Some(got) => return Err(format!("the id came back as {got}, not {id}")),
        None => return Err(format!("no id: {id} was sent")),
    }
    match (object.get("result"), object.get("error")) {
        (Some(_), Some(_)) => Err("both `result` and `error`".into()),
        (None, None) => Err("neither `result` nor `error`".into()),
        (None, Some(error)) if !error["code"].is_i64() || !error["message"].is_string() => Err(format!(
            "the error object {error} needs an integer code and a string message"
        )),
        _ => Ok(()),
    }
}

/// A right response that is the error `code`.
fn error_is(answer: &Value, code: i64, id: &Value) -> Result<(), String> {
    response(answer, id)?;
    match answer["error"]["code"].as_i64() {
        Some(got) if got == code => Ok(()),
        Some(got) => Err(format!("error {got}, not {code}")),
        None => Err(format!("a result, not error {code}")),
    }
}

/// A right response that does not refuse the request's shape.
fn structure_taken(answer: &Value, id: &Value) -> Result<(), String> {
    response(answer, id)?;
    match answer["error"]["code"].as_i64() {
        Some(code @ (-32700 | -32600)) => Err(format!("refused as error {code}")),
        _ => Ok(()),
    }
}

/// An array holding one right response per id in `ids` (any order) and
/// `invalid` errors -32600 with id null, and nothing else.
fn batch_answers(answer: &Value, ids: &[Value], invalid: usize) -> Result<(), String> {
    let Some(entries) = answer.as_array() else {
        return Err("the answer is not an array".into());
    };
    if entries.len() != ids.len() + invalid {
        return Err(format!("{} entries, not {}", entries.len(), ids.len() + invalid));
    }
    for id in ids {
        let entry = entries
            .iter()
            .find(|e| e.get("id") == Some(id))
            .ok_or_else(|| format!("no entry answers id {id}"))?;
        response(entry, id)?;
    }
    let nulls = entries.iter().filter(|e| e.get("id") == Some(&Value::Null));
    let refused = nulls
        .filter(|e| error_is(e, -32600, &Value::Null).is_ok())
        .count();
    match refused == invalid {
        true => Ok(()),
        false => Err(format!("{refused} errors -32600 with id null, not {invalid}")),
    }
}

/// Nothing came back: an empty body (HTTP, with a 2xx status), or silence.
fn nothing(answer: &Answer) -> Result<(), String> {
    if !answer.body.iter().all(u8::is_ascii_whitespace) {
        return Err("an answer came, where none may".into());
    }
    match answer.status {
        Some(status) if !(200..300).contains(&status) => Err(format!("HTTP {status}")),
        _ => Ok(()),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::check) fn answer(body: &str) -> Answer {
        Answer {
            status: Some(200),
            body: body.as_bytes().to_vec(),
        }
    }

    pub(in crate::check) fn case(name: &str) -> &'static Case {
        CASES.iter().find(|c| c.name == name).unwrap()
    }

    fn judged(name: &str, body: &str) -> Result<(), String> {
        (case(name).judge)(&answer(body))
    }

    #[test]
    fn ids_must_come_back_exactly_with_their_type() {
        assert_eq!(
            judged("number_id", r#"{"jsonrpc":"2.0","result":1,"id":7}"#),
            Ok(())
        );
        assert_eq!(
            judged("number_id", r#"{"jsonrpc":"2.0","result":1,"id":"7"}"#),
            Err(r#"the id came back as "7", not 7"#.into())
        );
        assert!(judged("number_id", r#"{"jsonrpc":"2.0","result":1,"id":7.0}"#).is_err());
        assert!(judged("string_id", r#"{"jsonrpc":"2.0","result":1,"id":"volley-1"}"#).is_ok());
        let unicode = format!(r#"{{"jsonrpc":"2.0","result":1,"id":"{UNICODE}"}}"#);
        assert!(judged("unicode", &unicode).is_ok());
        let escaped = r#"{"jsonrpc":"2.0","result":1,"id":"h\u00e9llo w\u00f6rld \u2713 \ud834\udd1e \u65e5\u672c\u8a9e"}"#;
        assert!(judged("unicode", escaped).is_ok(), "escapes are the same string");
        assert!(judged("unicode", r#"{"jsonrpc":"2.0","result":1,"id":"hello"}"#).is_err());
    }

    #[test]
    fn a_response_object_is_checked_member_by_member() {
        let number = |body: &str| judged("number_id", body).unwrap_err();
        assert_eq!(
            number(r#"{"result":1,"id":7}"#),
            "no `jsonrpc` member (a JSON-RPC 1.0 answer?)"
        );
        assert_eq!(
            number(r#"{"jsonrpc":"1.0","result":1,"id":7}"#),
            r#"`jsonrpc` is "1.0", not "2.0""#
        );
        assert_eq!(
            number(r#"{"jsonrpc":"2.0","result":1,"error":{},"id":7}"#),
            "both `result` and `error`"
        );
        assert_eq!(
            number(r#"{"jsonrpc":"2.0","id":7}"#),
            "neither `result` nor `error`"
        );
        assert!(
            number(r#"{"jsonrpc":"2.0","error":{"code":"x","message":"m"},"id":7}"#).contains("integer code")
        );
        assert_eq!(number(""), "no answer came");
        assert!(number("<html>").starts_with("the answer is not JSON"));
        assert_eq!(number("[]"), "the answer is not a response object");
        assert!(judged(
            "number_id",
            r#"{"jsonrpc":"2.0","error":{"code":-32601,"message":"m"},"id":7}"#
        )
        .is_ok());
    }

    #[test]
    fn errors_must_have_their_code_and_a_null_id() {
        let parse_error = r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#;
        assert_eq!(judged("invalid_json", parse_error), Ok(()));
        assert_eq!(
            judged("empty_batch", parse_error),
            Err("error -32700, not -32600".into())
        );
        assert_eq!(
            judged("empty_batch", "[]"),
            Err("the answer is not a response object".into())
        );
        assert_eq!(
            judged("unknown_method", r#"{"jsonrpc":"2.0","result":null,"id":6}"#),
            Err("a result, not error -32601".into())
        );
        let refused = r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"m"},"id":4}"#;
        assert_eq!(
            judged("params_by_name", refused),
            Err("refused as error -32600".into())
        );
        let invalid_params = r#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"m"},"id":4}"#;
        assert_eq!(
            judged("params_by_name", invalid_params),
            Ok(()),
            "the method's own refusal"
        );
    }

    #[test]
    fn batches_need_one_answer_per_call_in_any_order() {
        let ok = |id: u64| format!(r#"{{"jsonrpc":"2.0","result":1,"id":{id}}}"#);
        let invalid = r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"m"},"id":null}"#;
        assert_eq!(judged("batch_mixed", &format!("[{},{}]", ok(11), ok(10))), Ok(()));
        assert_eq!(
            judged("batch_mixed", &format!("[{},{},{}]", ok(10), ok(11), ok(12))),
            Err("3 entries, not 2".into())
        );
        assert_eq!(
            judged("batch_mixed", &format!("[{},{}]", ok(10), ok(10))),
            Err("no entry answers id 11".into())
        );
        assert_eq!(
            judged("batch_invalid_member", &format!("[{invalid},{}]", ok(8))),
            Ok(())
        );
        assert_eq!(
            judged("batch_invalid_member", &format!("[{},{}]", ok(8), ok(9))),
            Err("0 errors -32600 with id null, not 1".into())
        );
        assert_eq!(
            judged("batch_mixed", &ok(10)),
            Err("the answer is not an array".into())
        );
    }

    #[test]
    fn silence_is_the_answer_to_notifications() {
        assert_eq!(judged("notification", ""), Ok(()));
        assert_eq!(judged("batch_all_notifications", " \n"), Ok(()));
        assert_eq!(
            judged("batch_all_notifications", "[]"),
            Err("an answer came, where none may".into())
        );
        let server_error = Answer {
            status: Some(500),
            body: Vec::new(),
        };
        assert_eq!(
            (case("notification").judge)(&server_error),
            Err("HTTP 500".into())
        );
        assert_eq!(
            (case("notification").judge)(&Answer::default()),
            Ok(()),
            "silence on a stream"
        );
    }

    #[test]
    fn the_large_payload_is_a_mebibyte() {
        let request = (case("large_payload").request)("m");
        assert!(
            request.len() > LARGE_BYTES && LARGE_BYTES == 1 << 20,
            "{}",
            request.len()
        );
    }
}
