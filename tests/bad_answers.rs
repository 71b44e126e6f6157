//! Each kind of bad answer, sent by a crafted server, lands in its outcome,
//! exactly, and the run goes on.

mod common;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use volley::report::RunReport;
use volley::stats::OutcomeKind;

const REQUESTS: u64 = 40;

fn ok(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "result": "0x1", "id": id})
}

/// Runs REQUESTS requests of `call` (a `[[calls]]` body) against `craft`.
fn run_against(craft: common::Craft, call: &str) -> RunReport {
    let addr = common::crafted_server(craft);
    let text = format!(
        "target = \"http://{addr}\"\ntimeout = \"2s\"\n[load]\nconcurrency = 4\nrequests = {REQUESTS}\n[[calls]]\n{call}\n"
    );
    common::run(&common::scenario(&text))
}

use common::outcomes;

fn protocol(report: &RunReport) -> BTreeMap<&'static str, u64> {
    report.summary.total.protocol_errors.clone()
}

const SINGLE: &str = "method = \"eth_blockNumber\"";
const BATCH: &str = "method = \"eth_blockNumber\"\nbatch = 3";

#[test]
fn a_wrong_id_is_an_id_mismatch() {
    let report = run_against(
        |req| {
            (
                200,
                ok(&json!(req["id"].as_u64().unwrap() + 1_000_000)).to_string(),
            )
        },
        SINGLE,
    );
    assert_eq!(outcomes(&report), BTreeMap::from([("protocol", REQUESTS)]));
    assert_eq!(protocol(&report), BTreeMap::from([("id_mismatch", REQUESTS)]));
}

#[test]
fn an_id_of_the_wrong_type_is_told_apart() {
    let report = run_against(|req| (200, ok(&json!(req["id"].to_string())).to_string()), SINGLE);
    assert_eq!(protocol(&report), BTreeMap::from([("id_wrong_type", REQUESTS)]));
}

#[test]
fn a_missing_batch_entry_fails_that_call_only() {
    let report = run_against(
        |req| {
            let answers: Vec<Value> = req
                .as_array()
                .unwrap()
                .iter()
                .skip(1)
                .map(|r| ok(&r["id"]))
                .collect();
            (200, Value::Array(answers).to_string())
        },
        BATCH,
    );
    assert_eq!(
        outcomes(&report),
        BTreeMap::from([("ok", 2 * REQUESTS), ("protocol", REQUESTS)])
    );
    assert_eq!(protocol(&report), BTreeMap::from([("missing_entry", REQUESTS)]));
}

#[test]
fn a_duplicate_batch_entry_fails_that_call_only() {
    let report = run_against(
        |req| {
            let mut answers: Vec<Value> = req.as_array().unwrap().iter().map(|r| ok(&r["id"])).collect();
            answers.push(answers[1].clone());
            (200, Value::Array(answers).to_string())
        },
        BATCH,
    );
    assert_eq!(
        outcomes(&report),
        BTreeMap::from([("ok", 2 * REQUESTS), ("protocol", REQUESTS)])
    );
    assert_eq!(protocol(&report), BTreeMap::from([("duplicate_entry", REQUESTS)]));
}

#[test]
fn an_extra_batch_entry_is_counted_beside_the_calls() {
    let report = run_against(
        |req| {
            let mut answers: Vec<Value> = req
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .map(|r| ok(&r["id"]))
                .collect();
            answers.push(ok(&json!(987_654_321_000u64)));
            (200, Value::Array(answers).to_string())
        },
        BATCH,
    );
    assert_eq!(outcomes(&report), BTreeMap::from([("ok", 3 * REQUESTS)]));
    assert_eq!(report.summary.extra_batch_entries, REQUESTS);
    // The table says so, though no call failed.
    let table = volley::report::render_table(&report);
    assert!(
        table.contains(&format!("  batch answer entries matching no call: {REQUESTS}\n")),
        "{table}"
    );
}

#[test]
fn result_and_error_together_break_the_rules() {
    let report = run_against(
        |req| {
            let answer = json!({"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"m"},"id":req["id"]});
            (200, answer.to_string())
        },
        SINGLE,
    );
    assert_eq!(
        protocol(&report),
        BTreeMap::from([("result_and_error", REQUESTS)])
    );
}

#[test]
fn a_wrong_version_breaks_the_rules() {
    let report = run_against(
        |req| {
            (
                200,
                json!({"jsonrpc":"1.0","result":1,"id":req["id"]}).to_string(),
            )
        },
        SINGLE,
    );
    assert_eq!(protocol(&report), BTreeMap::from([("wrong_version", REQUESTS)]));
}

#[test]
fn http_500_with_a_valid_error_body_is_an_rpc_error() {
    let report = run_against(
        |req| {
            let answer =
                json!({"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"},"id":req["id"]});
            (500, answer.to_string())
        },
        SINGLE,
    );
    assert_eq!(outcomes(&report), BTreeMap::from([("rpc_error", REQUESTS)]));
    assert_eq!(
        report.summary.total.rpc_error_codes,
        BTreeMap::from([(-32603, REQUESTS)])
    );
    assert_eq!(report.summary.http_statuses, BTreeMap::from([(500, REQUESTS)]));
}

#[test]
fn statuses_without_a_json_rpc_body_are_counted_one_by_one() {
    // Counted as the server gives them, so each status's count is known.
    static TOO_MANY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let report = run_against(
        |req| match req["id"].as_u64().unwrap() % 3 {
            0 => {
                TOO_MANY.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                (429, "Too Many Requests".to_string())
            }
            _ => (503, String::new()),
        },
        SINGLE,
    );
    let too_many = TOO_MANY.load(std::sync::atomic::Ordering::SeqCst);
    assert!(too_many > 0 && too_many < REQUESTS, "{too_many}");
    let total = &report.summary.total;
    assert_eq!(total.outcome(OutcomeKind::HttpStatus), REQUESTS);
    assert_eq!(
        total.http_statuses,
        BTreeMap::from([(429, too_many), (503, REQUESTS - too_many)])
    );
    assert_eq!(report.summary.http_statuses, total.http_statuses);
}

#[test]
fn html_with_status_200_is_invalid_json() {
    let report = run_against(
        |_| (200, "<html><body>502 Bad Gateway</body></html>".to_string()),
        SINGLE,
    );
    assert_eq!(outcomes(&report), BTreeMap::from([("invalid_json", REQUESTS)]));
    assert_eq!(report.summary.http_statuses, BTreeMap::from([(200, REQUESTS)]));
}

#[test]
fn a_truncated_body_is_invalid_json() {
    let report = run_against(
        |req| {
            let full = ok(&req["id"]).to_string();
            (200, full[..full.len() / 2].to_string())
        },
        SINGLE,
    );
    assert_eq!(outcomes(&report), BTreeMap::from([("invalid_json", REQUESTS)]));
}

#[test]
fn an_answered_notification_breaks_the_rules() {
    let report = run_against(
        |_| (200, json!({"jsonrpc":"2.0","result":null,"id":null}).to_string()),
        "method = \"log\"\nnotification = true",
    );
    assert_eq!(
        protocol(&report),
        BTreeMap::from([("answer_to_notification", REQUESTS)])
    );
}

#[test]
fn a_null_result_is_a_valid_result() {
    let report = run_against(
        |req| {
            (
                200,
                json!({"jsonrpc":"2.0","result":null,"id":req["id"]}).to_string(),
            )
        },
        SINGLE,
    );
    assert_eq!(outcomes(&report), BTreeMap::from([("ok", REQUESTS)]));
}

/// The error that stops a run whose poll (of `eth_blockNumber`, feeding
/// the load's params) `craft` answers, before anything is measured.
fn poll_refused(craft: common::Craft) -> String {
    let addr = common::crafted_server(craft);
    let text = format!(
        "target = \"http://{addr}\"\ntimeout = \"2s\"\n[load]\nrequests = 4\n[poll.head]\nmethod = \"eth_blockNumber\"\nevery = \"1s\"\n[[calls]]\nmethod = \"eth_chainId\"\nparams = [\"${{head}}\"]\n"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = runtime.block_on(volley::execute(
        &common::scenario(&text),
        None,
        tokio_util::sync::CancellationToken::new(),
        std::sync::Arc::new(volley::engine::Control::new()),
        |_| {},
    ));
    let Err(error) = started else {
        panic!("the poll's answer went unseen: the run started");
    };
    error.to_string()
}

#[test]
fn a_poll_answered_with_a_wrong_id_is_judged_as_any_call() {
    // Polls and setup calls go the load's own way: the judge that counts
    // the load's wrong ids refuses a poll's too, before anything is measured.
    let message = poll_refused(|req| {
        let id = req["id"].as_u64().unwrap();
        (200, ok(&json!(id + 7)).to_string())
    });
    assert!(
        message.contains("poll `head`: protocol(id_mismatch)"),
        "{message}"
    );
}

#[test]
fn a_poll_answered_with_a_large_object_shows_only_its_first_bytes() {
    fn block() -> Value {
        json!({ "number": "0x10", "extraData": "ab".repeat(20_000) })
    }
    let message = poll_refused(|req| {
        let answer = json!({"jsonrpc": "2.0", "result": block(), "id": req["id"]});
        (200, answer.to_string())
    });
    let whole = block().to_string();
    let first = &whole[..volley::stats::EXCERPT_BYTES];
    assert!(
        message.ends_with(&format!(
            "poll `head`: expected a number or a hex quantity, got {first}… ({} bytes in all)",
            whole.len()
        )),
        "{message}"
    );
    assert!(message.len() < 400, "{} bytes: {message}", message.len());
}
