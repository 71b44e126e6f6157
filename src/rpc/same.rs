//! When two answers to the same call are the same: structurally (key
//! order and `id` ignored, hex quantities as numbers), under rules per
//! method and JSON pointer. What answer equality across targets and a
//! replay's `expect = "recorded"` both judge by.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// Differences listed per comparison, each at its own pointer.
const DIFFERENCES: usize = 8;
/// Pointers (array indices as `*`) kept per comparison: past it, a hostile
/// answer of a million keys costs no more.
pub const FIELDS: usize = 256;

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
    /// The value is not compared, but it must be there, of the same JSON
    /// type: what an ignore set's pointers get (a hash differs by
    /// construction; a hash missing, or a number, is still a difference).
    IgnoreValue,
    /// Numbers (or hex quantities) equal within this share of the larger.
    NumericTolerance(f64),
    /// Two errors are equal when their codes are.
    ErrorCodeOnly,
    /// Two errors are equal, whatever their codes.
    ErrorPresenceOnly,
}

/// What differs at a pointer: a field missing is told from a changed
/// value, and both from a changed type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    /// A result against an error, or an error against a result.
    Outcome,
    /// In the first target's answer, not in the other's.
    Missing,
    /// In the other target's answer, not in the first's.
    Extra,
    /// Values of two JSON types (a string against a number).
    Type,
    /// Arrays of two lengths.
    Length,
    /// Two values of one type.
    Value,
}

/// One difference between two answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// Where, in the whole answer: `/result/gasLimit`, `/error/code`; empty
    /// for an `Outcome`. In `Differences::fields`, each array index is `*`.
    pub pointer: String,
    pub kind: DiffKind,
    /// The first target's value, cut short (empty where it has none; an
    /// array's length for `Length`; what it answered for `Outcome`).
    pub first: String,
    /// The other target's, likewise.
    pub other: String,
    /// The share a `numeric_tolerance` rule allowed, passed.
    pub beyond: Option<f64>,
}

impl Difference {
    fn new(kind: DiffKind, first: String, other: String) -> Difference {
        Difference {
            pointer: String::new(),
            kind,
            first,
            other,
            beyond: None,
        }
    }

    fn beyond(self, share: f64) -> Difference {
        Difference {
            beyond: Some(share),
            ..self
        }
    }
}

/// In words, as an example shows it: within the result, as rules name it.
impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let within = self.pointer.strip_prefix("/result").unwrap_or(&self.pointer);
        let shown = if within.is_empty() { "the result" } else { within };
        let (first, other) = (&self.first, &self.other);
        match self.kind {
            DiffKind::Outcome => write!(f, "{first} against {other}"),
            DiffKind::Missing => write!(f, "{within}: only in the first"),
            DiffKind::Extra => write!(f, "{within}: missing in the first"),
            DiffKind::Length => write!(f, "{shown}: {first} entries against {other}"),
            DiffKind::Type | DiffKind::Value => {
                write!(f, "{shown}: {first} against {other}")?;
                match self.beyond {
                    Some(share) => write!(f, ", beyond {}%", share * 100.0),
                    None => Ok(()),
                }
            }
        }
    }
}

/// What one comparison found.
#[derive(Debug, Default)]
pub struct Differences {
    /// Where the pointers start: `/result`, or `/error` for two errors.
    root: &'static str,
    /// The first few, each at its own pointer.
    pub listed: Vec<Difference>,
    /// Each pointer pattern (array indices as `*`) once per kind, with its
    /// first difference: what a tally across answers counts.
    pub fields: Vec<Difference>,
    seen: BTreeSet<(String, DiffKind)>,
}

impl Differences {
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }

    fn full(&self) -> bool {
        self.listed.len() >= DIFFERENCES && self.fields.len() >= FIELDS
    }

    fn push(&mut self, at: &At, found: Difference) {
        if self.listed.len() < DIFFERENCES {
            let pointer = format!("{}{}", self.root, at.path);
            self.listed.push(Difference {
                pointer,
                ..found.clone()
            });
        }
        let pattern = format!("{}{}", self.root, at.pattern);
        if self.fields.len() < FIELDS && self.seen.insert((pattern.clone(), found.kind)) {
            self.fields.push(Difference {
                pointer: pattern,
                ..found
            });
        }
    }
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

/// How two answers to the same call differ, in words (empty: alike): the
/// first few, each at its own pointer.
pub fn differences(method: &str, a: &Value, b: &Value, rules: &[EqualityRule]) -> Vec<String> {
    let found = diff(method, a, b, rules);
    found.listed.iter().map(ToString::to_string).collect()
}

/// How two answers to the same call differ: the first few as they are, and
/// every pointer once by kind, for a tally across answers.
pub fn diff(method: &str, a: &Value, b: &Value, rules: &[EqualityRule]) -> Differences {
    let mut out = Differences::default();
    if method_ignored(method, rules) {
        return out;
    }
    let rules: Vec<&EqualityRule> = rules.iter().filter(|r| glob(&r.method, method)).collect();
    fn error(v: &Value) -> Option<&Value> {
        v.get("error").filter(|e| !e.is_null())
    }
    let whole = |kind: RuleKind| rules.iter().any(|r| r.pointer.is_none() && r.kind == kind);
    let code = |v: &Value| format!("an error (code {})", v["code"]);
    match (error(a), error(b)) {
        (Some(_), Some(_)) if whole(RuleKind::ErrorPresenceOnly) => {}
        (Some(x), Some(y)) if whole(RuleKind::ErrorCodeOnly) => {
            if x["code"] != y["code"] {
                out.root = "/error";
                let at = At::new("/code", "/code");
                out.push(
                    &at,
                    Difference::new(DiffKind::Value, cut(&x["code"]), cut(&y["code"])),
                );
            }
        }
        (Some(x), Some(y)) => {
            out.root = "/error";
            compare_at(&At::new("", ""), x, y, &[], &mut out);
        }
        (Some(x), None) => out.push(
            &At::new("", ""),
            Difference::new(DiffKind::Outcome, code(x), "a result".into()),
        ),
        (None, Some(y)) => out.push(
            &At::new("", ""),
            Difference::new(DiffKind::Outcome, "a result".into(), code(y)),
        ),
        (None, None) => {
            out.root = "/result";
            compare_at(&At::new("", ""), &a["result"], &b["result"], &rules, &mut out);
        }
    }
    out
}

/// A place in the answers compared: its pointer within the result (or the
/// error), which rules match, and the same with each array index a `*`,
/// which a tally counts by (and a rule can name).
struct At {
    path: String,
    pattern: String,
}

impl At {
    fn new(path: &str, pattern: &str) -> At {
        At {
            path: path.into(),
            pattern: pattern.into(),
        }
    }

    fn key(&self, key: &str) -> At {
        let step = key.replace('~', "~0").replace('/', "~1");
        At::new(
            &format!("{}/{step}", self.path),
            &format!("{}/{step}", self.pattern),
        )
    }

    fn index(&self, i: usize) -> At {
        At::new(&format!("{}/{i}", self.path), &format!("{}/*", self.pattern))
    }
}

/// Compares two values at `at`, recording each difference.
fn compare_at(at: &At, a: &Value, b: &Value, rules: &[&EqualityRule], out: &mut Differences) {
    if out.full() {
        return;
    }
    let rule = rules.iter().rev().find(|r| applies(r, &at.path));
    match rule.map(|r| r.kind) {
        Some(RuleKind::Ignore) => return,
        // A value that differs by construction: still there, of its type.
        Some(RuleKind::IgnoreValue) if type_name(a) == type_name(b) => return,
        Some(RuleKind::NumericTolerance(share)) => {
            if let (Some(x), Some(y)) = (number(a), number(b)) {
                if (x - y).abs() > share * x.abs().max(y.abs()) {
                    out.push(at, Difference::new(DiffKind::Value, cut(a), cut(b)).beyond(share));
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
                let inner = at.key(key);
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => compare_at(&inner, u, v, rules, out),
                    (Some(u), None) if !ignored(&inner.path, rules) => {
                        out.push(&inner, Difference::new(DiffKind::Missing, cut(u), String::new()))
                    }
                    (None, Some(v)) if !ignored(&inner.path, rules) => {
                        out.push(&inner, Difference::new(DiffKind::Extra, String::new(), cut(v)))
                    }
                    _ => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                compare_at(&at.index(i), u, v, rules, out);
            }
        }
        (Value::Array(x), Value::Array(y)) => out.push(
            at,
            Difference::new(DiffKind::Length, x.len().to_string(), y.len().to_string()),
        ),
        _ if same_scalar(a, b) => {}
        _ if type_name(a) != type_name(b) => out.push(at, Difference::new(DiffKind::Type, cut(a), cut(b))),
        _ => out.push(at, Difference::new(DiffKind::Value, cut(a), cut(b))),
    }
}

fn ignored(path: &str, rules: &[&EqualityRule]) -> bool {
    rules
        .iter()
        .any(|r| r.kind == RuleKind::Ignore && applies(r, path))
}

/// Whether a value rule (`ignore`, an ignore set's, `numeric_tolerance`) applies at `path`
/// of the result: at its pointer, or without one at the whole result.
fn applies(rule: &EqualityRule, path: &str) -> bool {
    matches!(
        rule.kind,
        RuleKind::Ignore | RuleKind::IgnoreValue | RuleKind::NumericTolerance(_)
    ) && rule
        .pointer
        .as_deref()
        .map_or(path.is_empty(), |p| pointer_matches(p, path))
}

/// A value's JSON type, by name.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
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
