//! The comparison of answers: differences in words, by kind, tallied by
//! pointer across answers, and the hints the tally gives.

use super::*;
use crate::rpc::same::{differences, DiffKind};
use crate::scenario::{IgnoreSet, RuleKind};
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

/// Each difference's pointer (in the whole answer), kind and values.
fn found(a: &Value, b: &Value, rules: &[EqualityRule]) -> Vec<(String, DiffKind, String, String)> {
    let found = diff("eth_getBlockByNumber", a, b, rules);
    (found.fields.into_iter())
        .map(|d| (d.pointer, d.kind, d.first, d.other))
        .collect()
}

fn at(pointer: &str, kind: DiffKind, first: &str, other: &str) -> (String, DiffKind, String, String) {
    (pointer.into(), kind, first.into(), other.into())
}

#[test]
fn a_missing_field_is_told_from_a_changed_value_and_a_changed_type() {
    let a = ok(json!({"gasLimit": "0x1c9c380", "blobGasUsed": "0x0", "nonce": "0x0", "txs": [1, 2], "n": 1}));
    let b = ok(json!({"gasLimit": "0x3938700", "extra": true, "nonce": 0, "txs": [1], "n": "0x1"}));
    assert_eq!(
        found(&a, &b, &[]),
        [
            at("/result/blobGasUsed", DiffKind::Missing, "\"0x0\"", ""),
            at("/result/extra", DiffKind::Extra, "", "true"),
            at(
                "/result/gasLimit",
                DiffKind::Value,
                "\"0x1c9c380\"",
                "\"0x3938700\""
            ),
            at("/result/n", DiffKind::Type, "1", "\"0x1\""),
            at("/result/nonce", DiffKind::Type, "\"0x0\"", "0"),
            at("/result/txs", DiffKind::Length, "2", "1"),
        ]
    );
    assert_eq!(
        found(&ok(json!("0x7a69")), &ok(json!("0x539")), &[]),
        [at("/result", DiffKind::Value, "\"0x7a69\"", "\"0x539\"")]
    );
    assert_eq!(
        found(&ok(json!(1)), &err(3, "reverted"), &[]),
        [at("", DiffKind::Outcome, "a result", "an error (code 3)")]
    );
    assert_eq!(
        found(&err(3, "a"), &err(3, "b"), &[]),
        [at("/error/message", DiffKind::Value, "\"a\"", "\"b\"")]
    );
}

#[test]
fn array_indices_become_stars_in_the_tally_and_stay_in_the_words() {
    let a = ok(json!({"transactions": [{"hash": "0x1"}, {"hash": "0x2"}, {"hash": "0x3"}]}));
    let b = ok(json!({"transactions": [{"hash": "0x7"}, {"hash": "0x8"}, {"hash": "0x3"}]}));
    assert_eq!(
        found(&a, &b, &[]),
        [at(
            "/result/transactions/*/hash",
            DiffKind::Value,
            "\"0x1\"",
            "\"0x7\""
        )]
    );
    assert_eq!(
        differences("m", &a, &b, &[]),
        [
            "/transactions/0/hash: \"0x1\" against \"0x7\"",
            "/transactions/1/hash: \"0x2\" against \"0x8\""
        ]
    );
}

#[test]
fn an_ignore_sets_pointer_leaves_out_the_value_but_not_the_field_or_its_type() {
    let set = IgnoreSet::named("dev_chain").unwrap();
    let rules: Vec<EqualityRule> = set.rules().collect();
    let a = ok(json!({"hash": "0x1", "mixHash": "0x2", "nonce": "0x0", "gasLimit": "0x1"}));
    let b = ok(json!({"hash": "0x9", "nonce": 0, "gasLimit": "0x2"}));
    assert_eq!(
        found(&a, &b, &rules),
        [
            at("/result/gasLimit", DiffKind::Value, "\"0x1\"", "\"0x2\""),
            at("/result/mixHash", DiffKind::Missing, "\"0x2\"", ""),
            at("/result/nonce", DiffKind::Type, "\"0x0\"", "0"),
        ]
    );
    assert!(
        found(&a, &b, &[]).iter().any(|f| f.0 == "/result/hash"),
        "without the set the hash differs"
    );
    // A rule of the file's own at the same pointer comes after the set's, and wins.
    let mut own = rules.clone();
    own.push(rule("*", Some("/nonce"), RuleKind::Ignore));
    assert!(found(&a, &b, &own).iter().all(|f| f.0 != "/result/nonce"));
}

/// Answers to `eth_getBlockByNumber` (`count` of them, request N with
/// id N) from two targets, the second's made by `other` from N.
fn blocks(count: u64, first: fn(u64) -> Value, other: fn(u64) -> Value) -> EqualityReport {
    let kept = |answer: fn(u64) -> Value| -> Vec<Captured> {
        (0..count)
            .map(|n| Captured {
                seq: n,
                batch: false,
                entries: vec![crate::rpc::Entry {
                    method: 0,
                    call: 0,
                    id: Some(n),
                }],
                request: format!(r#"{{"jsonrpc":"2.0","method":"eth_getBlockByNumber","id":{n}}}"#).into(),
                answer: Some(answer(n).to_string().into()),
            })
            .collect()
    };
    let (a, b) = (kept(first), kept(other));
    let target = |name, captured| TargetAnswers {
        name,
        url: "http://127.0.0.1:1",
        header_names: &[],
        captured,
    };
    compare(
        &[target("anvil", &a), target("ganache", &b)],
        &Equality::sampled(1.0),
    )
}

#[test]
fn every_answer_is_tallied_by_pointer_ranked_with_a_hint_for_what_every_answer_differs_at() {
    let report = blocks(
        10,
        |_| ok(json!({"hash": "0x1", "gasLimit": "0x1", "author": "0x0", "blobGasUsed": "0x0"})),
        |n| ok(json!({"hash": "0x2", "gasLimit": "0x2", "author": format!("0x{}", (n + 1) % 3)})),
    );
    let row = &report.methods[0];
    assert_eq!((row.compared, row.mismatched), (10, 10));
    let tally: Vec<(&str, DiffKind, u64)> = row
        .fields
        .iter()
        .map(|f| (f.pointer.as_str(), f.kind, f.answers))
        .collect();
    // (n + 1) % 3 is 0 for 2, 5 and 8: the author differs in the other 7,
    // the first answer's first difference, yet ranked last.
    assert_eq!(
        tally,
        [
            ("/result/blobGasUsed", DiffKind::Missing, 10),
            ("/result/gasLimit", DiffKind::Value, 10),
            ("/result/hash", DiffKind::Value, 10),
            ("/result/author", DiffKind::Value, 7),
        ]
    );
    let remedies: Vec<(&str, &[String])> = report.hints[0]
        .remedies
        .iter()
        .map(|r| (r.write.as_str(), r.pointers.as_slice()))
        .collect();
    let strings = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(remedies.len(), 3, "{remedies:?}");
    assert_eq!(remedies[0].0, r#"ignore_sets = ["dev_chain"]"#);
    assert_eq!(remedies[0].1, strings(&["/result/hash"]));
    assert_eq!(
        remedies[1].0,
        r#"{ method = "eth_getBlockByNumber", pointer = "/blobGasUsed", rule = "ignore" }"#
    );
    assert_eq!(
        remedies[2].0,
        r#"{ method = "eth_getBlockByNumber", pointer = "/gasLimit", rule = "ignore" }"#
    );
}

#[test]
fn no_hint_where_answers_differ_only_now_and_then() {
    let report = blocks(
        4,
        |_| ok(json!({"miner": "0x0"})),
        |n| ok(json!({"miner": format!("0x{}", n % 2)})),
    );
    assert_eq!(report.methods[0].mismatched, 2);
    assert!(report.hints.is_empty(), "{:?}", report.hints);
}
