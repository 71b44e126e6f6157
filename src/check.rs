//! `volley check`: an endpoint probed against the JSON-RPC 2.0
//! specification, one case per rule, each with its evidence (the request
//! sent, the answer received). A failed MUST fails the check; a failed
//! SHOULD warns. Known failures can be listed in a file, as conformance
//! suites do: listed and failing passes, listed and passing is a stale entry.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::transport::{Connection, Target};

/// How binding a case's rule is, in the specification's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Must,
    Should,
}

/// What a probe brought back: the HTTP status where there is one, and the
/// body (empty: nothing came).
#[derive(Clone, Debug, Default)]
pub struct Answer {
    pub status: Option<u16>,
    pub body: Vec<u8>,
}

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

/// What became of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    /// A MUST broken, and not listed as expected.
    Fail,
    /// A SHOULD broken, not listed as expected.
    Warn,
    /// Broken, and listed as expected to be.
    ExpectedFailure,
    /// Listed as expected to fail, but passed: the list is out of date.
    Stale,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Warn => "warn",
            Verdict::ExpectedFailure => "expected failure",
            Verdict::Stale => "STALE (listed, passes)",
        }
    }

    /// Fails the check (exit 2).
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::Stale)
    }
}

/// A case's outcome and its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub case: &'static str,
    pub level: Level,
    pub rule: &'static str,
    pub verdict: Verdict,
    /// Why the rule was broken.
    pub reason: Option<String>,
    /// The request sent and the answer received, cut to a readable size.
    pub sent: String,
    pub received: String,
}

/// Judges each case's answer (or the transport's failure) into a finding.
pub fn judge(
    case: &Case,
    method: &str,
    answer: &Result<Answer, String>,
    expected: &BTreeSet<String>,
) -> Finding {
    let broken = match answer {
        Ok(answer) => (case.judge)(answer).err(),
        Err(failure) => Some(failure.clone()),
    };
    let listed = expected.contains(case.name);
    let verdict = match (broken.is_some(), listed, case.level) {
        (false, false, _) => Verdict::Pass,
        (false, true, _) => Verdict::Stale,
        (true, true, _) => Verdict::ExpectedFailure,
        (true, false, Level::Must) => Verdict::Fail,
        (true, false, Level::Should) => Verdict::Warn,
    };
    Finding {
        case: case.name,
        level: case.level,
        rule: case.rule,
        verdict,
        reason: broken,
        sent: excerpt(&(case.request)(method)),
        received: match answer {
            Ok(Answer { status, body }) if body.is_empty() => {
                status.map_or("nothing".into(), |s| format!("HTTP {s}, empty body"))
            }
            Ok(Answer {
                status: Some(s),
                body,
            }) => format!("HTTP {s}: {}", excerpt(body)),
            Ok(Answer { status: None, body }) => excerpt(body),
            Err(_) => "the transport failed".into(),
        },
    }
}

/// Sends every case's request to `target`, one at a time on one
/// connection (opened again when the server closed it), and returns what
/// came back for each, or why nothing could. An answer is awaited up to
/// `timeout`; where nothing must come, a stream is listened to for `quiet`.
pub async fn probe(
    target: &Target,
    method: &str,
    timeout: Duration,
    quiet: Duration,
) -> Vec<Result<Answer, String>> {
    let mut connection: Option<Connection> = None;
    let mut answers = Vec::new();
    for case in CASES {
        let open = match connection.take() {
            Some(c) if !c.is_closed() => Ok(c),
            _ => Connection::open(target, timeout).await,
        };
        let answer = match open {
            Ok(mut c) => {
                let within = if case.silent { quiet } else { timeout };
                let probed = c.probe((case.request)(method).into(), within).await;
                connection = Some(c);
                probed.map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        answers.push(answer.map(|reply| match reply {
            Some(reply) if matches!(target, Target::Http(_)) => Answer {
                status: Some(reply.status),
                body: reply.body.to_vec(),
            },
            Some(reply) => Answer {
                status: None,
                body: reply.body.to_vec(),
            },
            None => Answer::default(),
        }));
    }
    answers
}

/// How a target answered a method of the `--methods` list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "support", content = "detail")]
pub enum Support {
    /// A result: the method is there.
    Answered,
    /// -32601: no such method.
    NotFound,
    /// Another error: the method is there and refused the empty params,
    /// or the server says "not supported" with a code of its own (-32700,
    /// a parse error for the valid JSON sent, says nothing).
    Error(i64),
    /// No right answer: why.
    NoAnswer(String),
}

impl Support {
    fn of(answer: Result<Option<crate::transport::Reply>, String>) -> Support {
        let body = match answer {
            Ok(Some(reply)) => reply.body,
            Ok(None) => return Support::NoAnswer("nothing came back".into()),
            Err(e) => return Support::NoAnswer(e),
        };
        let Ok(value) = serde_json::from_slice::<Value>(&body) else {
            return Support::NoAnswer("the answer is not JSON".into());
        };
        match value["error"]["code"].as_i64() {
            Some(-32601) => Support::NotFound,
            Some(code) => Support::Error(code),
            None if value.get("result").is_some() => Support::Answered,
            None => Support::NoAnswer("neither a result nor an error".into()),
        }
    }

    pub fn shown(&self) -> String {
        match self {
            Support::Answered => "yes".into(),
            Support::NotFound => "no (-32601)".into(),
            // A parse error for the valid JSON sent says nothing of the method.
            Support::Error(-32700) => "error -32700 (on valid JSON)".into(),
            // Refused params, or a server's own "not supported" code: its words.
            Support::Error(code) => format!("error {code}"),
            Support::NoAnswer(why) => format!("? {why}"),
        }
    }
}

/// The methods to ask about: an OpenRPC document's (`{"methods": [{"name":
/// ...}]}`), or one name a line (`#` comments).
pub fn read_methods(path: &Path, text: &str) -> Result<Vec<String>, String> {
    if let Ok(document) = serde_json::from_str::<Value>(text) {
        let methods = document["methods"]
            .as_array()
            .ok_or_else(|| format!("{}: an OpenRPC document with no `methods` array", path.display()))?;
        return methods
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m["name"].as_str().map(String::from).ok_or_else(|| {
                    format!(
                        "{}: methods[{i}] has no `name` (a `$ref` is not followed)",
                        path.display()
                    )
                })
            })
            .collect();
    }
    let names: Vec<String> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim().to_string())
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        return Err(format!("{}: no method named", path.display()));
    }
    Ok(names)
}

/// Calls each method once, params `[]`, on one connection (opened again
/// when the server closed it), and says how the target answered.
pub async fn probe_methods(target: &Target, methods: &[String], timeout: Duration) -> Vec<Support> {
    let mut connection: Option<Connection> = None;
    let mut support = Vec::new();
    for (i, method) in methods.iter().enumerate() {
        let open = match connection.take() {
            Some(c) if !c.is_closed() => Ok(c),
            _ => Connection::open(target, timeout).await,
        };
        let body = json!({"jsonrpc": "2.0", "method": method, "params": [], "id": 1000 + i});
        let answer = match open {
            Ok(mut c) => {
                let probed = c.probe(body.to_string().into(), timeout).await;
                connection = Some(c);
                probed.map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        support.push(Support::of(answer));
    }
    support
}

/// Whether the answer to a plain call looks like JSON-RPC 1.0's: no
/// `jsonrpc` member, the id echoed, `result` or `error` there.
pub fn speaks_version_1(answer: &Answer) -> bool {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(&answer.body) else {
        return false;
    };
    !object.contains_key("jsonrpc")
        && object.get("id") == Some(&json!(7))
        && (object.contains_key("result") || object.contains_key("error"))
}

/// The case names listed in an expected-failures file: one a line, `#`
/// comments and blank lines skipped. An unknown name is an error naming
/// its line, so a typo cannot hide a failure.
pub fn read_expected(path: &Path, text: &str) -> Result<BTreeSet<String>, String> {
    let known: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    let mut listed = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        let name = line.split('#').next().unwrap_or("").trim();
        if name.is_empty() {
            continue;
        }
        if !known.contains(&name) {
            return Err(format!(
                "{}:{}: `{name}` is not a case of volley check (cases: {})",
                path.display(),
                index + 1,
                known.join(", ")
            ));
        }
        listed.insert(name.to_string());
    }
    Ok(listed)
}

/// The findings as a table, each broken rule followed by its evidence.
pub fn table(findings: &[Finding]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<26} {:<7} verdict", "case", "level");
    for f in findings {
        let level = match f.level {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
        };
        let _ = writeln!(out, "{:<26} {:<7} {}", f.case, level, f.verdict.name());
        if f.verdict != Verdict::Pass {
            let _ = writeln!(out, "    rule:     {}", f.rule);
            if let Some(reason) = &f.reason {
                let _ = writeln!(out, "    why:      {reason}");
            }
            let _ = writeln!(out, "    sent:     {}", f.sent);
            let _ = writeln!(out, "    received: {}", f.received);
        }
    }
    let count = |v: Verdict| findings.iter().filter(|f| f.verdict == v).count();
    let _ = writeln!(
        out,
        "\n{} passed, {} failed, {} warnings, {} expected failures, {} stale",
        count(Verdict::Pass),
        count(Verdict::Fail),
        count(Verdict::Warn),
        count(Verdict::ExpectedFailure),
        count(Verdict::Stale)
    );
    out
}

/// The start of a message, for evidence.
fn excerpt(bytes: &[u8]) -> String {
    const SHOWN: usize = 160;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN)]);
    match bytes.len() > SHOWN {
        true => format!("{text}… ({} bytes)", bytes.len()),
        false => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: &str) -> Answer {
        Answer {
            status: Some(200),
            body: body.as_bytes().to_vec(),
        }
    }

    fn case(name: &str) -> &'static Case {
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
    fn listed_failures_pass_and_listed_passes_are_stale() {
        let expected = BTreeSet::from(["notification".to_string(), "number_id".to_string()]);
        let right = Ok(answer(r#"{"jsonrpc":"2.0","result":1,"id":7}"#));
        let wrong = Ok(answer(r#"{"jsonrpc":"2.0","result":1,"id":8}"#));
        let verdict = |name: &str, a: &Result<Answer, String>, e: &BTreeSet<String>| {
            judge(case(name), "m", a, e).verdict
        };
        assert_eq!(verdict("number_id", &right, &BTreeSet::new()), Verdict::Pass);
        assert_eq!(verdict("number_id", &wrong, &BTreeSet::new()), Verdict::Fail);
        assert_eq!(verdict("number_id", &wrong, &expected), Verdict::ExpectedFailure);
        assert_eq!(verdict("number_id", &right, &expected), Verdict::Stale);
        assert_eq!(verdict("large_payload", &wrong, &BTreeSet::new()), Verdict::Warn);
        assert_eq!(
            verdict("large_payload", &Err("reset".into()), &BTreeSet::new()),
            Verdict::Warn
        );
        assert!(Verdict::Stale.fails() && Verdict::Fail.fails());
        assert!(!Verdict::Warn.fails() && !Verdict::ExpectedFailure.fails());
    }

    #[test]
    fn an_expected_failures_file_names_known_cases_only() {
        let path = Path::new("known.txt");
        let listed = read_expected(path, "# known\nnotification  # answers them\n\nempty_batch\n").unwrap();
        assert_eq!(
            listed,
            BTreeSet::from(["notification".into(), "empty_batch".into()])
        );
        let error = read_expected(path, "notification\nnotifications\n").unwrap_err();
        assert!(
            error.starts_with("known.txt:2: `notifications` is not a case"),
            "{error}"
        );
    }

    #[test]
    fn methods_come_from_an_openrpc_document_or_a_list() {
        let path = Path::new("m");
        let openrpc =
            r#"{"openrpc": "1.2.6", "methods": [{"name": "eth_chainId"}, {"name": "net_version"}]}"#;
        assert_eq!(
            read_methods(path, openrpc).unwrap(),
            ["eth_chainId", "net_version"]
        );
        assert_eq!(
            read_methods(path, "# list\neth_call  # the one\n\nweb3_sha3\n").unwrap(),
            ["eth_call", "web3_sha3"]
        );
        assert!(read_methods(path, r#"{"methods": [{"$ref": "x"}]}"#)
            .unwrap_err()
            .contains("methods[0] has no `name`"));
        assert!(read_methods(path, "# nothing\n")
            .unwrap_err()
            .contains("no method named"));
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

    #[test]
    fn a_1_0_answer_is_recognised() {
        assert!(speaks_version_1(&answer(r#"{"result":1,"error":null,"id":7}"#)));
        assert!(!speaks_version_1(&answer(
            r#"{"jsonrpc":"2.0","result":1,"id":7}"#
        )));
        assert!(!speaks_version_1(&answer(r#"{"result":1,"id":8}"#)));
    }
}
