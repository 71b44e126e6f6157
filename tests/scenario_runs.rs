//! The scenario language against the built-in server: counts exact, and
//! what the scenario asked for is what was sent and judged.

mod common;

use volley::serve::{self, ServeConfig, ServerStats};
use volley::stats::OutcomeKind;

fn server() -> serve::ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        shuffle_batches: true,
        ..ServeConfig::default()
    })
    .unwrap()
}

#[test]
fn batches_of_1_to_20_with_notifications_match_the_server() {
    let server = server();
    let text = format!(
        r#"
target = "{}"
seed = 5
[load]
concurrency = 4
requests = 400
[batch]
size = {{ min = 1, max = 20 }}
notifications = 0.1
[[calls]]
method = "eth_blockNumber"
weight = 2
[[calls]]
method = "add"
params = ["${{int(1, 9)}}", 1]
weight = 1
"#,
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let summary = &report.summary;
    let get = |c| ServerStats::get(c);
    let batches = summary.batches.as_ref().expect("batches were sent");
    assert_eq!(batches.requests, 400);
    assert_eq!(get(&server.stats.batches), 400);
    assert_eq!(*batches.sizes.keys().min().unwrap(), 1);
    assert_eq!(*batches.sizes.keys().max().unwrap(), 20);
    assert_eq!(batches.sizes.values().sum::<u64>(), 400);
    // Every call volley counted, the server saw; notifications included.
    assert_eq!(
        summary.total.calls,
        get(&server.stats.calls) + get(&server.stats.notifications)
    );
    assert_eq!(summary.total.ok, summary.total.calls);
    let share = get(&server.stats.notifications) as f64 / summary.total.calls as f64;
    assert!(
        (0.06..0.14).contains(&share),
        "about 10% notifications, got {share}"
    );
}

#[test]
fn expectations_turn_wrong_answers_into_assertions_with_examples() {
    let server = server();
    let text = format!(
        r#"
target = "{}"
[load]
concurrency = 2
requests = 300
[[calls]]
method = "no_such_method"
expect = {{ error = -32601 }}
[[calls]]
method = "eth_blockNumber"
expect = {{ regex = "^[0-9]+$" }}
[[calls]]
method = "eth_chainId"
expect = {{ equals = "0x539" }}
"#,
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let method = |name: &str| {
        report
            .summary
            .methods
            .iter()
            .find(|m| m.method == name)
            .unwrap()
            .clone()
    };
    let negative = method("no_such_method");
    assert!(negative.calls > 0);
    assert_eq!(
        negative.ok, negative.calls,
        "the expected error is a right answer"
    );
    let wrong = method("eth_blockNumber");
    assert!(wrong.calls > 0);
    assert_eq!(wrong.outcome(OutcomeKind::Assertion), wrong.calls);
    assert_eq!(wrong.assertion_examples.len(), 5, "a bounded number of examples");
    assert!(
        wrong.assertion_examples[0].contains("matching /^[0-9]+$/"),
        "{:?}",
        wrong.assertion_examples
    );
    assert!(
        wrong.assertion_examples[0].contains("\"result\":\"0x"),
        "{:?}",
        wrong.assertion_examples
    );
    assert_eq!(method("eth_chainId").ok, method("eth_chainId").calls);
    let json = serde_json::to_value(&report).unwrap();
    let examples = &json["summary"]["methods"][1]["assertion_examples"];
    assert_eq!(examples.as_array().unwrap().len(), 5);
}

#[test]
fn a_replay_rewrites_ids_and_keeps_notifications() {
    let server = server();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("captured.jsonl"),
        concat!(
            "{\"jsonrpc\":\"2.0\",\"method\":\"eth_chainId\",\"id\":1}\n",
            "[{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1},{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1}]\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[\"n\"]}\n",
        ),
    )
    .unwrap();
    let text = format!(
        "target = \"{}\"\nreplay = \"captured.jsonl\"\n[load]\nconcurrency = 3\nrequests = 30\n",
        server.url()
    );
    let path = dir.join("replay.toml");
    std::fs::write(&path, text).unwrap();
    let scenario = volley::scenario::Scenario::load(&path).unwrap();
    let report = common::run(&scenario);
    let summary = &report.summary;
    // Ten passes over three lines: 10 chainId, 20 echo calls in batches, 10 notifications.
    assert_eq!(summary.requests, 30);
    assert_eq!(summary.total.calls, 40);
    assert_eq!(
        summary.total.ok, 40,
        "recorded id 1 was sent three times a pass, yet all matched"
    );
    assert_eq!(ServerStats::get(&server.stats.calls), 30);
    assert_eq!(ServerStats::get(&server.stats.notifications), 10);
}

#[test]
fn setup_calls_run_once_per_connection_outside_the_figures() {
    let server = server();
    let text = format!(
        r#"
target = "{}"
[load]
concurrency = 3
requests = 60
[[setup]]
method = "eth_chainId"
[[setup]]
method = "echo"
notification = true
[[calls]]
method = "eth_blockNumber"
"#,
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let setup = report.summary.setup.as_ref().unwrap();
    assert_eq!((setup.connections_ok, setup.connections_failed), (3, 0));
    assert_eq!(report.summary.total.calls, 60);
    assert_eq!(ServerStats::get(&server.stats.calls), 63);
    assert_eq!(ServerStats::get(&server.stats.notifications), 3);
}

#[test]
fn a_failed_setup_is_reported_plainly() {
    let server = server();
    let text = format!(
        "target = \"{}\"\n[load]\nconcurrency = 1\nrequests = 3\n[[setup]]\nmethod = \"session_open\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let setup = report.summary.setup.as_ref().unwrap();
    assert_eq!(setup.connections_ok, 0);
    assert!(setup.connections_failed >= 1);
    assert_eq!(
        setup.first_error.as_deref(),
        Some("setup call `session_open` failed: rpc_error(-32601)")
    );
}

#[test]
fn polled_values_feed_the_params() {
    let server = server();
    // A block past the polled head does not exist yet: its result is null.
    let text = format!(
        r#"
target = "{}"
[load]
concurrency = 2
requests = 50
[poll.head]
method = "eth_blockNumber"
every = "1s"
[[calls]]
method = "eth_getBlockByNumber"
params = ["${{head + 1000}}", false]
expect = {{ type = "null" }}
"#,
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    assert_eq!(
        report.summary.total.ok, 50,
        "{:?}",
        report.summary.total.assertion_examples
    );
}

#[test]
fn stages_split_the_summary() {
    let server = server();
    let text = format!(
        r#"
target = "{}"
[load]
stages = [{{ duration = "1s", concurrency = 1 }}, {{ duration = "1s", concurrency = 4 }}]
[[calls]]
method = "eth_chainId"
"#,
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let stages = &report.summary.stages;
    assert_eq!(stages.len(), 2);
    assert_eq!(
        (stages[0].start_s, stages[0].end_s, stages[1].end_s),
        (0.0, 1.0, 2.0)
    );
    let in_stages: u64 = stages.iter().map(|s| s.total.calls).sum();
    assert_eq!(in_stages, report.summary.total.calls);
    assert!(stages[0].total.calls > 0 && stages[1].total.calls > 0);
    assert_eq!(report.summary.timeseries.len(), 2);
}

#[test]
fn subscriptions_that_bring_nothing_show_no_gap_figures_and_warn() {
    // A head an hour apart: the run's subscriptions receive nothing.
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        heads_every: std::time::Duration::from_secs(3600),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap();
    let text = format!(
        "target = \"{}\"\n[load]\nconcurrency = 2\nconnections = 2\nrequests = 40\n[[subscribe]]\nmethod = \"eth_subscribe\"\nparams = [\"newHeads\"]\n[[calls]]\nmethod = \"eth_blockNumber\"\n",
        server.ws_url().unwrap()
    );
    let report = common::run(&common::scenario(&text));
    let subs = report.summary.subscriptions.as_ref().unwrap();
    assert_eq!((subs.opened, subs.notifications), (2, 0));
    assert_eq!(ServerStats::get(&server.stats.subscriptions), 2);
    assert!(subs.gap.is_none(), "{:?}", subs.gap);
    let table = volley::report::render_table(&report);
    assert!(
        table.contains("subscriptions: 2 opened, no notifications (no gap figures)"),
        "{table}"
    );
    assert!(!table.contains("gap between"), "{table}");
    let warned = report.summary.warnings.iter().any(|w| {
        w.code == volley::stats::WarningCode::NoNotifications
            && w.message
                .starts_with("subscriptions received nothing: 2 subscriptions opened")
    });
    assert!(warned, "{:?}", report.summary.warnings);
}

/// A shipped scenario as a test runs it: 60 requests, no warmup, against
/// `target` (the lines naming its target or command), loaded from text
/// (nothing in these files is relative to their directory).
fn shipped(name: &str, target: &str) -> volley::scenario::Scenario {
    let path = format!("{}/scenarios/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            !["command =", "framing =", "target =", "duration =", "warmup ="]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .collect();
    let text = format!("{target}\n{}", kept.join("\n")).replacen("[load]", "[load]\nrequests = 60", 1);
    common::scenario(&text)
}

/// Whatever is called, a result of `null`: a server that knows nothing.
fn null_server() -> String {
    let addr = common::crafted_server(|req| match req.get("id") {
        Some(id) => (
            200,
            serde_json::json!({"jsonrpc": "2.0", "result": null, "id": id}).to_string(),
        ),
        None => (204, String::new()),
    });
    format!("target = \"http://{addr}\"")
}

#[test]
fn the_shipped_lsp_and_mcp_scenarios_pass_the_stand_in_and_fail_null_answers() {
    let volley = env!("CARGO_BIN_EXE_volley");
    let stdio = |framing: &str| {
        format!("command = [{volley:?}, \"serve\", \"--stdio\", \"--framing\", \"{framing}\"]\nframing = \"{framing}\"")
    };
    let http = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        mcp: true,
        ..ServeConfig::default()
    })
    .unwrap();
    let stand_ins = [
        ("lsp-stdio.toml", stdio("content-length")),
        ("mcp-stdio.toml", stdio("ndjson")),
        ("mcp-http.toml", format!("target = \"{}/mcp\"", http.url())),
    ];
    for (name, target) in stand_ins {
        let report = common::run(&shipped(name, &target));
        assert_eq!(report.summary.requests, 60, "{name}");
        let outcomes = common::outcomes(&report);
        assert_eq!(outcomes, [("ok", 60)].into(), "{name}");
        // Each answer against a null one: every call an `assertion`.
        let report = common::run(&shipped(name, &null_server()));
        assert_eq!(
            report.summary.setup.as_ref().unwrap().connections_failed,
            0,
            "{name}"
        );
        for method in &report.summary.methods {
            assert!(method.calls > 0, "{name}: {method:?}");
            assert_eq!(
                method.outcome(OutcomeKind::Assertion),
                method.calls,
                "{name}: {} passed a null answer",
                method.method
            );
        }
    }
}

#[test]
fn the_shipped_batch_scenario_takes_anvils_chain_id() {
    // anvil and Hardhat answer 31337; the built-in server 1337.
    let addr = common::crafted_server(|req| {
        let answer = |call: &serde_json::Value| {
            let result = match call["method"].as_str().unwrap() {
                "eth_chainId" => serde_json::json!("0x7a69"),
                "eth_getBlockByNumber" => serde_json::json!({ "number": "0x10" }),
                _ => serde_json::json!("0x20"),
            };
            serde_json::json!({"jsonrpc": "2.0", "result": result, "id": call["id"]})
        };
        let body = match req.as_array() {
            Some(batch) => serde_json::Value::Array(batch.iter().map(answer).collect()),
            None => answer(req),
        };
        (200, body.to_string())
    });
    let path = format!("{}/scenarios/ethereum-batch.toml", env!("CARGO_MANIFEST_DIR"));
    let overrides = volley::scenario::Overrides {
        target: Some(format!("http://{addr}")),
        rate: Some(200.0),
        requests: Some(40),
        warmup: Some(std::time::Duration::ZERO),
        ..Default::default()
    };
    let scenario =
        volley::scenario::Scenario::with_flags(Some(std::path::Path::new(&path)), &overrides).unwrap();
    let report = common::run(&scenario);
    let chain_id = report
        .summary
        .methods
        .iter()
        .find(|m| m.method == "eth_chainId")
        .unwrap();
    assert!(chain_id.calls > 0);
    assert_eq!(chain_id.ok, chain_id.calls, "{:?}", chain_id.outcomes);
    assert_eq!(report.summary.total.ok, report.summary.total.calls);
}
