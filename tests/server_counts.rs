//! volley's counts against the built-in server's own, exactly.

mod common;

use volley::serve::{self, ServeConfig, ServerStats};
use volley::stats::OutcomeKind;

fn server(config: ServeConfig) -> serve::ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..config
    })
    .unwrap()
}

#[test]
fn injected_errors_are_counted_exactly() {
    let server = server(ServeConfig {
        error_rate: 0.1,
        seed: 7,
        ..ServeConfig::default()
    });
    let text = format!(
        "target = \"{}\"\n[load]\nconcurrency = 8\nrequests = 5000\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let total = &report.summary.total;
    let injected = ServerStats::get(&server.stats.injected_errors);
    assert!(
        injected > 300 && injected < 700,
        "about 10% of 5000, got {injected}"
    );
    assert_eq!(total.calls, 5000);
    assert_eq!(total.outcome(OutcomeKind::RpcError), injected);
    assert_eq!(total.rpc_error_codes.get(&-32000).copied(), Some(injected));
    assert_eq!(total.ok, 5000 - injected);
    assert_eq!(ServerStats::get(&server.stats.calls), 5000);
}

#[test]
fn batches_and_notifications_match_the_server_call_for_call() {
    let server = server(ServeConfig {
        shuffle_batches: true,
        error_rate: 0.05,
        seed: 3,
        ..ServeConfig::default()
    });
    let text = format!(
        r#"
target = "{}"
seed = 11
[load]
concurrency = 6
requests = 3000
[[calls]]
method = "eth_getBalance"
params = ["0x00000000219ab540356cBB839Cbe05303d7705Fa", "latest"]
weight = 3
[[calls]]
method = "eth_blockNumber"
batch = 7
weight = 2
[[calls]]
method = "echo"
params = ["note"]
notification = true
weight = 1
[[calls]]
method = "no_such_method"
weight = 1
"#,
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let summary = &report.summary;
    let by_method = |name: &str| summary.methods.iter().find(|m| m.method == name).unwrap();
    let stats = &server.stats;

    assert_eq!(summary.requests, 3000);
    assert_eq!(ServerStats::get(&stats.requests), 3000);
    assert_eq!(by_method("echo").calls, ServerStats::get(&stats.notifications));
    assert_eq!(by_method("echo").ok, by_method("echo").calls);
    let answered = summary.total.calls - by_method("echo").calls;
    assert_eq!(answered, ServerStats::get(&stats.calls));
    assert_eq!(by_method("eth_blockNumber").calls % 7, 0);
    assert_eq!(
        ServerStats::get(&stats.batches) * 7,
        by_method("eth_blockNumber").calls
    );
    // Every error the server sent is counted, by code; nothing else failed.
    let injected = ServerStats::get(&stats.injected_errors);
    let unknown = by_method("no_such_method");
    assert_eq!(
        summary.total.rpc_error_codes.get(&-32000).copied().unwrap_or(0),
        injected
    );
    assert_eq!(
        summary.total.rpc_error_codes.get(&-32601).copied().unwrap_or(0) + injected,
        ServerStats::get(&stats.error_answers)
    );
    assert_eq!(unknown.outcome(OutcomeKind::RpcError), unknown.calls);
    assert_eq!(summary.total.errors, summary.total.outcome(OutcomeKind::RpcError));
    assert_eq!(summary.extra_batch_entries, 0);
}
