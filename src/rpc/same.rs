//! When two answers to the same call are the same: structurally (key
//! order and `id` ignored, hex quantities as numbers), under rules per
//! method and JSON pointer. What answer equality across targets and a
//! replay's `expect = "recorded"` both judge by.

use serde_json::Value;

/// Differences listed per comparison.
const DIFFERENCES: usize = 8;

/// A rule for the answers of methods matching `method` (`*` matches any
/// run of characters), at JSON pointers matching `pointer` (within the
/// result; `*` matches one step) or, without one, for the whole answer.
#[derive(Clone, Debug, PartialEq)]
pub struct EqualityRule {
    pub method: String,
    pub pointer: Option<String>,
    pub kind: RuleKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RuleKind {
    /// The value is not compared.
    Ignore,
    /// Numbers (or hex quantities) equal within this share of the larger.
    NumericTolerance(f64),
    /// Two errors are equal when their codes are.
    ErrorCodeOnly,
    /// Two errors are equal, whatever their codes.
    ErrorPresenceOnly,
}

/// Whether `text` matches `pattern`, where `*` stands for any run of
/// characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

/// Whether a JSON pointer `path` matches `pattern`, step by step, where a
/// step `*` matches any one step.
pub fn pointer_matches(pattern: &str, path: &str) -> bool {
    let (mut a, mut b) = (pattern.split('/'), path.split('/'));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) if p == "*" || p == s => {}
            _ => return false,
        }
    }
}

/// Whether a rule leaves `method`'s answers out whole: `ignore` without a
/// pointer.
pub fn method_ignored(method: &str, rules: &[EqualityRule]) -> bool {
    rules
        .iter()
        .any(|r| r.pointer.is_none() && r.kind == RuleKind::Ignore && glob(&r.method, method))
}

/// How two answers to the same call differ, in words (empty: alike).
pub fn differences(method: &str, a: &Value, b: &Value, rules: &[EqualityRule]) -> Vec<String> {
    if method_ignored(method, rules) {
        return Vec::new();
    }
    let rules: Vec<&EqualityRule> = rules.iter().filter(|r| glob(&r.method, method)).collect();
    fn error(v: &Value) -> Option<&Value> {
        v.get("error").filter(|e| !e.is_null())
    }
    let whole = |kind: RuleKind| rules.iter().any(|r| r.pointer.is_none() && r.kind == kind);
    let mut out = Vec::new();
    match (error(a), error(b)) {
        (Some(_), Some(_)) if whole(RuleKind::ErrorPresenceOnly) => {}
        (Some(x), Some(y)) if whole(RuleKind::ErrorCodeOnly) => {
            if x["code"] != y["code"] {
                out.push(format!("error code {} against {}", x["code"], y["code"]));
            }
        }
        (Some(x), Some(y)) => compare_at("/error", x, y, &[], &mut out),
        (Some(x), None) => out.push(format!("an error (code {}) against a result", x["code"])),
        (None, Some(y)) => out.push(format!("a result against an error (code {})", y["code"])),
        (None, None) => {
            let (x, y) = (&a["result"], &b["result"]);
            compare_at("", x, y, &rules, &mut out);
        }
    }
    out
}

/// Compares two values at JSON pointer `path`, recording each difference.
fn compare_at(path: &str, a: &Value, b: &Value, rules: &[&EqualityRule], out: &mut Vec<String>) {
    if out.len() >= DIFFERENCES {
        return;
    }
    let rule = rules.iter().rev().find(|r| applies(r, path));
    match rule.map(|r| r.kind) {
        Some(RuleKind::Ignore) => return,
        Some(RuleKind::NumericTolerance(share)) => {
            if let (Some(x), Some(y)) = (number(a), number(b)) {
                if (x - y).abs() > share * x.abs().max(y.abs()) {
                    out.push(format!(
                        "{}: {a} against {b}, beyond {}%",
                        shown(path),
                        share * 100.0
                    ));
                }
                return;
            }
        }
        _ => {}
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let at = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => compare_at(&at, u, v, rules, out),
                    (Some(_), None) if !ignored(&at, rules) => out.push(format!("{at}: only in the first")),
                    (None, Some(_)) if !ignored(&at, rules) => {
                        out.push(format!("{at}: missing in the first"))
                    }
                    _ => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                compare_at(&format!("{path}/{i}"), u, v, rules, out);
            }
        }
        (Value::Array(x), Value::Array(y)) => out.push(format!(
            "{}: {} entries against {}",
            shown(path),
            x.len(),
            y.len()
        )),
        _ if same_scalar(a, b) => {}
        _ => out.push(format!("{}: {} against {}", shown(path), cut(a), cut(b))),
    }
}

fn ignored(path: &str, rules: &[&EqualityRule]) -> bool {
    rules
        .iter()
        .any(|r| r.kind == RuleKind::Ignore && applies(r, path))
}

/// Whether a value rule (`ignore`, `numeric_tolerance`) applies at `path`
/// of the result: at its pointer, or without one at the whole result.
fn applies(rule: &EqualityRule, path: &str) -> bool {
    matches!(rule.kind, RuleKind::Ignore | RuleKind::NumericTolerance(_))
        && rule
            .pointer
            .as_deref()
            .map_or(path.is_empty(), |p| pointer_matches(p, path))
}

fn shown(path: &str) -> &str {
    if path.is_empty() {
        "the result"
    } else {
        path
    }
}

fn cut(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Equal values, where hex quantities are numbers (`0x01` is `0x1`).
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a.as_str().and_then(hex_digits), b.as_str().and_then(hex_digits)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The digits of a hex quantity, lowercase, without leading zeros.
fn hex_digits(text: &str) -> Option<String> {
    let digits = text.strip_prefix("0x")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0').to_ascii_lowercase();
    Some(if trimmed.is_empty() { "0".into() } else { trimmed })
}

/// A JSON number, or a hex quantity, as a number.
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let digits = hex_digits(s)?;
            u128::from_str_radix(&digits, 16).ok().map(|n| n as f64)
        }
        _ => None,
    }
}
