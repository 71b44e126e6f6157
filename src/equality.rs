//! Whether several targets answered the same requests alike. Each request
//! every target kept in its sample (request N is the same everywhere) is
//! compared call by call with the first target's answer: structurally
//! (key order and `id` ignored, hex quantities as numbers), under the
//! scenario's rules per method and JSON pointer.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::engine::Captured;
use crate::rpc::same::{differences, method_ignored};
use crate::scenario::EqualityRule;

/// Examples of mismatches kept per method.
pub const EXAMPLES: usize = 5;

/// One target's kept requests, and how to reach it for a `curl` line.
pub struct TargetAnswers<'a> {
    pub name: &'a str,
    pub url: &'a str,
    /// Header names sent (their values are never shown).
    pub header_names: &'a [String],
    pub captured: &'a [Captured],
}

/// A call answered differently, with what reproduces it.
#[derive(Clone, Debug, Serialize)]
pub struct Mismatch {
    pub method: String,
    /// The target that answered unlike the first.
    pub target: String,
    pub differences: Vec<String>,
    /// The request as sent to the first target.
    pub request: String,
    /// A command that sends the request to the target again.
    pub reproduce: String,
}

/// One method's answers from one target, against the first target's.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MethodEquality {
    pub method: String,
    pub target: String,
    /// Calls whose answers were compared.
    pub compared: u64,
    pub mismatched: u64,
    pub mismatch_rate: f64,
    /// Calls a rule left out whole (`rule = "ignore"` without a pointer):
    /// neither compared nor counted as not compared.
    pub ignored: u64,
    pub examples: Vec<Mismatch>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct EqualityReport {
    pub compared: u64,
    pub mismatched: u64,
    /// Calls of methods a rule ignores whole.
    pub ignored: u64,
    /// Sampled calls not compared: a target got no answer to it. Requests
    /// past the last one both targets kept (a warmup by time or a run by
    /// duration ends at another request on each) are left out of the
    /// comparison and of this count: the other target never sent them.
    pub not_compared: u64,
    pub methods: Vec<MethodEquality>,
}

impl EqualityReport {
    pub fn passed(&self) -> bool {
        self.mismatched == 0
    }
}

/// Compares every other target's answers with the first's.
pub fn compare(targets: &[TargetAnswers], rules: &[EqualityRule]) -> EqualityReport {
    let mut report = EqualityReport::default();
    let mut methods: BTreeMap<(String, usize), MethodEquality> = BTreeMap::new();
    let Some((first, others)) = targets.split_first() else {
        return report;
    };
    let last_kept = |t: &TargetAnswers| t.captured.iter().map(|c| c.seq).max();
    for (n, other) in others.iter().enumerate() {
        let theirs: BTreeMap<u64, &Captured> = other.captured.iter().map(|c| (c.seq, c)).collect();
        // The requests both sent: up to the first of their last ones.
        let Some(reach) = last_kept(first).min(last_kept(other)) else {
            continue;
        };
        for kept in first.captured.iter().filter(|c| c.seq <= reach) {
            let request: Value = serde_json::from_slice(&kept.request).unwrap_or(Value::Null);
            let pair = Pair {
                kept,
                theirs: theirs.get(&kept.seq).copied(),
                request: &request,
                other,
            };
            for k in 0..kept.entries.len() {
                pair.tally(k, n, rules, &mut report, &mut methods);
            }
        }
    }
    report.methods = methods
        .into_values()
        .map(|mut m| {
            m.mismatch_rate = m.mismatched as f64 / m.compared.max(1) as f64;
            m
        })
        .collect();
    report
}

/// One request kept by the first target, and the other target's copy.
struct Pair<'a> {
    kept: &'a Captured,
    theirs: Option<&'a Captured>,
    request: &'a Value,
    other: &'a TargetAnswers<'a>,
}

impl Pair<'_> {
    /// Entry `k`'s answers compared (other target number `n`), counted in
    /// the report and its method's row.
    fn tally(
        &self,
        k: usize,
        n: usize,
        rules: &[EqualityRule],
        report: &mut EqualityReport,
        methods: &mut BTreeMap<(String, usize), MethodEquality>,
    ) {
        if self.kept.entries[k].id.is_none() {
            return;
        }
        let call = if self.kept.batch {
            &self.request[k]
        } else {
            self.request
        };
        let method = call["method"].as_str().unwrap_or("?").to_string();
        if method_ignored(&method, rules) {
            let stats = methods_row(methods, &method, n, self.other.name);
            stats.ignored += 1;
            report.ignored += 1;
            return;
        }
        let (Some(a), Some(b)) = (answer(self.kept, k), self.theirs.and_then(|t| answer(t, k))) else {
            report.not_compared += 1;
            return;
        };
        let differences = differences(&method, &a, &b, rules);
        let stats = methods_row(methods, &method, n, self.other.name);
        stats.compared += 1;
        report.compared += 1;
        if differences.is_empty() {
            return;
        }
        stats.mismatched += 1;
        report.mismatched += 1;
        if stats.examples.len() < EXAMPLES {
            let request = serde_json::to_string(call).unwrap_or_default();
            stats.examples.push(Mismatch {
                method,
                target: self.other.name.to_string(),
                differences,
                reproduce: reproduce(&request, self.other),
                request,
            });
        }
    }
}

/// The row of `method` against other target number `n`, made on first use.
fn methods_row<'m>(
    methods: &'m mut BTreeMap<(String, usize), MethodEquality>,
    method: &str,
    n: usize,
    target: &str,
) -> &'m mut MethodEquality {
    methods
        .entry((method.to_string(), n))
        .or_insert_with(|| MethodEquality {
            method: method.to_string(),
            target: target.to_string(),
            ..Default::default()
        })
}

/// The answer to entry `k` of a kept request: the whole answer of a single
/// call, or the batch element carrying the entry's id.
fn answer(kept: &Captured, k: usize) -> Option<Value> {
    let body: Value = serde_json::from_slice(kept.answer.as_ref()?).ok()?;
    if !kept.batch {
        return Some(body);
    }
    let id = kept.entries.get(k)?.id?;
    body.as_array()?
        .iter()
        .find(|e| e["id"].as_u64() == Some(id))
        .cloned()
}

/// A command that sends `request` to the target again: `curl` for HTTP,
/// the request and the URL otherwise. Header values are never shown.
fn reproduce(request: &str, target: &TargetAnswers) -> String {
    let quoted = request.replace('\'', "'\\''");
    // The URL as every output shows it: a key in it stays out of the report.
    let url = crate::redact::url(target.url);
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return format!("send '{quoted}' to {url}");
    }
    let mut line = String::from("curl -sS -X POST -H 'Content-Type: application/json'");
    for name in target.header_names {
        line.push_str(&format!(" -H '{name}: <value not shown>'"));
    }
    line.push_str(&format!(" --data '{quoted}' {url}"));
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::RuleKind;
    use serde_json::json;

    fn rule(method: &str, pointer: Option<&str>, kind: RuleKind) -> EqualityRule {
        EqualityRule {
            method: method.into(),
            pointer: pointer.map(String::from),
            kind,
        }
    }

    fn ok(result: Value) -> Value {
        json!({"jsonrpc": "2.0", "result": result, "id": 1})
    }

    fn err(code: i64, message: &str) -> Value {
        json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": 2})
    }

    fn alike(a: &Value, b: &Value, rules: &[EqualityRule]) -> bool {
        differences("eth_call", a, b, rules).is_empty()
    }

    #[test]
    fn key_order_ids_and_hex_zeros_do_not_count() {
        let a = json!({"jsonrpc": "2.0", "result": {"a": 1, "b": "0x01"}, "id": 1});
        let b: Value =
            serde_json::from_str(r#"{"id": 99, "result": {"b": "0x1", "a": 1}, "jsonrpc": "2.0"}"#).unwrap();
        assert!(alike(&a, &b, &[]));
        assert!(!alike(&ok(json!("0x1")), &ok(json!("0x2")), &[]));
        assert!(
            !alike(&ok(json!("0xzz")), &ok(json!("0xZZ")), &[]),
            "not hex: compared as text"
        );
        assert_eq!(
            differences(
                "m",
                &ok(json!({"a": [1, 2]})),
                &ok(json!({"a": [1, 3], "c": 0})),
                &[]
            ),
            ["/a/1: 2 against 3", "/c: missing in the first"]
        );
    }

    #[test]
    fn ignore_skips_the_pointers_it_names() {
        let ignore = [rule("eth_*", Some("/blocks/*/timestamp"), RuleKind::Ignore)];
        let a = ok(json!({"blocks": [{"timestamp": 1, "n": 1}]}));
        let b = ok(json!({"blocks": [{"timestamp": 2, "n": 1}]}));
        let c = ok(json!({"blocks": [{"timestamp": 2, "n": 2}]}));
        assert!(alike(&a, &b, &ignore));
        assert!(!alike(&a, &c, &ignore), "only the pointer named");
        assert!(
            !differences("net_version", &a, &b, &ignore).is_empty(),
            "only the methods named"
        );
    }

    #[test]
    fn a_rule_without_a_pointer_takes_the_whole_answer() {
        let ignore = [rule("eth_blockNumber", None, RuleKind::Ignore)];
        let (a, b) = (ok(json!("0x1")), ok(json!("0x2")));
        assert!(differences("eth_blockNumber", &a, &b, &ignore).is_empty());
        assert!(differences("eth_blockNumber", &a, &err(-1, "x"), &ignore).is_empty());
        assert!(
            !differences("eth_chainId", &a, &b, &ignore).is_empty(),
            "only the method named"
        );
        let close = [rule("eth_gasPrice", None, RuleKind::NumericTolerance(0.1))];
        assert!(differences("eth_gasPrice", &ok(json!("0x64")), &ok(json!("0x6a")), &close).is_empty());
        assert!(!differences("eth_gasPrice", &ok(json!("0x64")), &ok(json!("0x78")), &close).is_empty());
        // An error rule before a value rule does not hide it.
        let both = [
            rule("*", Some("/a"), RuleKind::Ignore),
            rule("*", None, RuleKind::ErrorCodeOnly),
        ];
        assert!(differences("m", &ok(json!({"a": 1})), &ok(json!({"a": 2})), &both).is_empty());
    }

    #[test]
    fn numeric_tolerance_takes_close_numbers_and_hex_quantities() {
        let tolerance = [rule("*", Some("/gas"), RuleKind::NumericTolerance(0.05))];
        assert!(
            alike(
                &ok(json!({"gas": "0x64"})),
                &ok(json!({"gas": "0x67"})),
                &tolerance
            ),
            "100 and 103"
        );
        assert!(
            !alike(
                &ok(json!({"gas": "0x64"})),
                &ok(json!({"gas": "0x6e"})),
                &tolerance
            ),
            "100 and 110"
        );
        assert!(
            alike(&ok(json!({"gas": 1000})), &ok(json!({"gas": 1050})), &tolerance),
            "within 5% of the larger"
        );
        assert!(!alike(
            &ok(json!({"gas": 1000})),
            &ok(json!({"gas": 1060})),
            &tolerance
        ));
    }

    #[test]
    fn errors_are_equal_by_code_or_presence_only_when_a_rule_says() {
        let (a, b, c) = (
            err(-32000, "out of gas"),
            err(-32000, "execution reverted"),
            err(3, "reverted"),
        );
        assert!(!alike(&a, &b, &[]), "by default the whole error counts");
        let by_code = [rule("eth_call", None, RuleKind::ErrorCodeOnly)];
        assert!(alike(&a, &b, &by_code));
        assert!(!alike(&a, &c, &by_code));
        let by_presence = [rule("eth_call", None, RuleKind::ErrorPresenceOnly)];
        assert!(alike(&a, &c, &by_presence));
        assert!(
            !alike(&a, &ok(json!(null)), &by_presence),
            "an error is no result"
        );
        assert_eq!(
            differences("eth_call", &ok(json!(1)), &c, &[]),
            ["a result against an error (code 3)"]
        );
    }

    #[test]
    fn a_mismatch_can_be_sent_again_without_showing_secrets() {
        let target = TargetAnswers {
            name: "b",
            url: "http://127.0.0.1:8545",
            header_names: &["Authorization".to_string()],
            captured: &[],
        };
        let line = reproduce(r#"{"method":"it's"}"#, &target);
        assert_eq!(
            line,
            r#"curl -sS -X POST -H 'Content-Type: application/json' -H 'Authorization: <value not shown>' --data '{"method":"it'\''s"}' http://127.0.0.1:8545"#
        );
    }
}
