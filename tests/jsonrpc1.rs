//! JSON-RPC 1.0: requests written as 1.0 servers (Bitcoin-derived nodes)
//! take them, answers judged by 1.0's rules, counted exactly against a
//! server that speaks only 1.0.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

const REQUESTS: u64 = 200;

/// A 1.0 server's answer to `request`, or `None` where 1.0 says nothing
/// comes back (a notification: `id` null). A request that is not 1.0 (a
/// `jsonrpc` member, params that are not an array) gets an answer with both
/// members set, which no judge takes.
fn answer_as_1_0(request: &Value) -> Option<Value> {
    let id = request["id"].clone();
    let is_1_0 = request.get("jsonrpc").is_none() && request["params"].is_array();
    if !is_1_0 {
        return Some(json!({"result": "not 1.0", "error": {"code": 1, "message": "not 1.0"}, "id": id}));
    }
    if id.is_null() {
        return None;
    }
    Some(match request["method"].as_str() {
        Some("getblockcount") => json!({"result": 812_000, "error": null, "id": id}),
        // Bitcoin Core's answer to a method that returns nothing.
        Some("setlabel") => json!({"result": null, "error": null, "id": id}),
        // The null member left out, as servers in use do.
        Some("getbestblockhash") => json!({"result": "00ab", "id": id}),
        _ => json!({"result": null, "error": {"code": -32601, "message": "Method not found"}, "id": id}),
    })
}

fn serve(request: &Value, seen: &AtomicU64, not_1_0: &AtomicU64) -> (u16, String) {
    seen.fetch_add(1, Ordering::Relaxed);
    if request.get("jsonrpc").is_some() || !request["params"].is_array() {
        not_1_0.fetch_add(1, Ordering::Relaxed);
    }
    (
        200,
        answer_as_1_0(request).map_or_else(String::new, |a| a.to_string()),
    )
}

const MIX: &str = r#"
[[calls]]
method = "getblockcount"
weight = 3
[[calls]]
method = "setlabel"
params = ["addr", "label"]
[[calls]]
method = "getbestblockhash"
[[calls]]
method = "getnothing"
[[calls]]
method = "ping"
notification = true
"#;

fn scenario(addr: std::net::SocketAddr, protocol: &str) -> String {
    format!(
        "target = \"http://{addr}\"\n{protocol}\nseed = 7\ntimeout = \"2s\"\n[load]\nconcurrency = 4\nrequests = {REQUESTS}\n{MIX}"
    )
}

/// Each method's outcomes, by name.
fn by_method(report: &volley::report::RunReport) -> BTreeMap<String, BTreeMap<&'static str, u64>> {
    report
        .summary
        .methods
        .iter()
        .map(|m| {
            let outcomes = m
                .outcomes
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (*k, *n))
                .collect();
            (m.method.clone(), outcomes)
        })
        .collect()
}

#[test]
fn a_1_0_server_is_spoken_to_and_judged_in_1_0() {
    static SEEN: AtomicU64 = AtomicU64::new(0);
    static NOT_1_0: AtomicU64 = AtomicU64::new(0);
    let addr = common::crafted_server(|request| serve(request, &SEEN, &NOT_1_0));
    let report = common::run(&common::scenario(&scenario(addr, "protocol = \"1.0\"")));

    assert_eq!(
        SEEN.load(Ordering::Relaxed),
        REQUESTS,
        "every request reached the server"
    );
    assert_eq!(NOT_1_0.load(Ordering::Relaxed), 0, "every request was 1.0");
    assert_eq!(report.summary.total.calls, REQUESTS);
    assert_eq!(report.meta.jsonrpc, "1.0");
    let methods = by_method(&report);
    let count = |method: &str| methods[method].values().sum::<u64>();
    for method in ["getblockcount", "setlabel", "getbestblockhash", "ping"] {
        assert_eq!(
            methods[method],
            BTreeMap::from([("ok", count(method))]),
            "{method}: {methods:?}"
        );
        assert!(count(method) > 0, "{method} was drawn");
    }
    assert_eq!(
        methods["getnothing"],
        BTreeMap::from([("rpc_error", count("getnothing"))])
    );
    assert_eq!(
        report
            .summary
            .methods
            .iter()
            .find(|m| m.method == "getnothing")
            .unwrap()
            .rpc_error_codes,
        BTreeMap::from([(-32601, count("getnothing"))])
    );
}

#[test]
fn the_same_server_judged_by_2_0_breaks_its_rules() {
    static SEEN: AtomicU64 = AtomicU64::new(0);
    static NOT_1_0: AtomicU64 = AtomicU64::new(0);
    let addr = common::crafted_server(|request| serve(request, &SEEN, &NOT_1_0));
    let report = common::run(&common::scenario(&scenario(addr, "")));
    assert_eq!(
        NOT_1_0.load(Ordering::Relaxed),
        REQUESTS,
        "2.0 requests were sent"
    );
    // Answers hold both members (a notification's too), which 2.0 takes
    // for neither: no version member, and an answer to a notification.
    assert_eq!(
        common::outcomes(&report),
        BTreeMap::from([("protocol", REQUESTS)])
    );
}

#[test]
fn what_1_0_cannot_say_is_refused_before_a_run() {
    let refused = |text: &str| {
        volley::scenario::Scenario::parse(text, "t.toml", "t", &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let head = "target = \"http://127.0.0.1:1\"\nprotocol = \"1.0\"\n";
    let batch = refused(&format!("{head}[[calls]]\nmethod = \"m\"\nbatch = 3\n"));
    assert!(
        batch.contains("t.toml:2:12: key `protocol`: JSON-RPC 1.0 has no batches, but `calls[0].batch`"),
        "{batch}"
    );
    let object = refused(&format!(
        "{head}[[calls]]\nmethod = \"m\"\nparams = {{ a = 1 }}\n"
    ));
    assert!(object.contains("`calls[0].params` is an object"), "{object}");
    let setup = refused(&format!(
        "{head}[[setup]]\nmethod = \"s\"\nparams = {{ a = 1 }}\n[[calls]]\nmethod = \"m\"\n"
    ));
    assert!(setup.contains("`setup[0].params` is an object"), "{setup}");
    let mix = refused(&format!("{head}[batch]\nsize = 2\n[[calls]]\nmethod = \"m\"\n"));
    assert!(mix.contains("`batch` sends every request as one"), "{mix}");
    let version = refused("target = \"http://127.0.0.1:1\"\nprotocol = \"3.0\"\n[[calls]]\nmethod = \"m\"\n");
    assert!(
        version.contains("key `protocol`: `3.0` is not a JSON-RPC version"),
        "{version}"
    );
}

#[test]
fn the_flag_speaks_1_0_and_names_itself_when_the_file_cannot() {
    let dir = common::bin::temp_dir("jsonrpc1-flag");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "target = \"http://127.0.0.1:1\"\n[[calls]]\nmethod = \"m\"\nparams = { a = 1 }\n",
    )
    .unwrap();
    let out = common::bin::volley()
        .args(["run", file.to_str().unwrap(), "--jsonrpc", "1.0"])
        .output()
        .unwrap();
    let stderr = common::bin::text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--jsonrpc: JSON-RPC 1.0 params are an array, but `calls[0].params` is an object"),
        "{stderr}"
    );
    let bad = common::bin::volley()
        .args(["run", file.to_str().unwrap(), "--jsonrpc", "1.1"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(common::bin::text(&bad.stderr).contains("expected 2.0 or 1.0"));
}
