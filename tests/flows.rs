//! Flows against `volley serve`, exact counts: a transaction sent, then
//! its receipt asked for until it comes (the server counts every ask, and
//! every hash it handed out); a block's transactions each asked for, capped;
//! a capture that finds nothing skipping the rest; over HTTP/1.1,
//! WebSocket and a child's stdio, in the closed and the open model; and
//! the mistakes `validate` names before anything is sent.

mod common;

use std::net::SocketAddr;

use common::{run, scenario};
use volley::report::RunReport;
use volley::serve::{self, ServeConfig, ServerHandle, ServerStats};
use volley::stats::MethodSummary;

/// A server whose receipts come on the third ask, with a WebSocket
/// listener beside its HTTP one.
fn chain(block_transactions: u64) -> ServerHandle {
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    serve::spawn(ServeConfig {
        listen: loopback,
        ws: Some(loopback),
        threads: 1,
        block_transactions,
        receipts_after: 2,
        ..ServeConfig::default()
    })
    .unwrap()
}

/// Send a transaction, then ask for its receipt every 10 ms until it has
/// one whose hash is the one sent.
const SEND_THEN_WAIT: &str = r#"
[[flows]]
name = "send"

[[flows.steps]]
method = "eth_sendRawTransaction"
params = ["${hex(120)}"]
capture = { tx = "" }

[[flows.steps]]
method = "eth_getTransactionReceipt"
params = ["${tx}"]
until = { result = "non-null", every = "10ms", within = "5s" }
expect = { pointer = "/transactionHash", equals = "${tx}" }
"#;

/// A block's transactions, then the receipt of one: against an empty
/// block the capture finds nothing.
const EMPTY_BLOCK: &str = r#"
[[flows]]
name = "receipts"

[[flows.steps]]
method = "eth_getBlockByNumber"
params = ["latest", false]
capture = { tx = "/transactions/*" }

[[flows.steps]]
method = "eth_getTransactionReceipt"
params = ["${tx}"]
"#;

fn row<'a>(report: &'a RunReport, name: &str) -> &'a MethodSummary {
    (report.summary.methods.iter())
        .find(|m| m.method == name)
        .unwrap_or_else(|| panic!("no row {name}"))
}

fn count(counter: &std::sync::atomic::AtomicU64) -> u64 {
    ServerStats::get(counter)
}

/// 6 flows of send → wait: 6 sends, 18 receipt calls (two `null`s then
/// the receipt), each flow whole; what the server counted agrees.
fn assert_send_then_wait(report: &RunReport, flows: u64) {
    let send = row(report, "eth_sendRawTransaction");
    assert_eq!((send.calls, send.ok), (flows, flows));
    let receipts = row(report, "eth_getTransactionReceipt");
    assert_eq!(
        (receipts.calls, receipts.ok),
        (3 * flows, 3 * flows),
        "{receipts:?}"
    );
    let flow = row(report, "flow:send");
    assert_eq!((flow.calls, flow.ok, flow.errors), (flows, flows, 0));
    assert_eq!(report.summary.total.calls, 4 * flows);
    assert_eq!(report.summary.flows[0].started, flows);
    // The seconds count the flows that ended in them.
    let by_second: u64 = report.summary.timeseries.iter().map(|s| s.flows).sum();
    assert_eq!(by_second, flows);
}

#[test]
fn a_sent_transaction_is_waited_for_over_http_and_websocket() {
    for websocket in [false, true] {
        let server = chain(0);
        let target = match websocket {
            false => server.url(),
            true => server.ws_url().unwrap(),
        };
        let text = format!(
            "target = \"{target}\"\nseed = 3\n[load]\nrequests = 6\nconcurrency = 2\n{SEND_THEN_WAIT}"
        );
        let report = run(&scenario(&text));
        assert_send_then_wait(&report, 6);
        let stats = &server.stats;
        // The server saw the hashes it handed out, and no other.
        assert_eq!(count(&stats.transactions_handed_out), 6, "websocket: {websocket}");
        assert_eq!(count(&stats.receipts_asked), 18);
        assert_eq!(count(&stats.receipts_found), 6);
        assert_eq!(count(&stats.receipts_unknown), 0);
    }
}

#[test]
fn flows_run_over_a_childs_stdio_and_in_the_open_model() {
    let volley = env!("CARGO_BIN_EXE_volley");
    let text = format!(
        "command = [\"{volley}\", \"serve\", \"--stdio\", \"--receipts-after\", \"2\"]\nseed = 5\n[load]\nrequests = 6\nrate = 50\nconnections = 2\n{SEND_THEN_WAIT}"
    );
    let report = run(&scenario(&text));
    assert_send_then_wait(&report, 6);
    assert!(report.summary.schedule.is_some(), "an open-model run");
}

/// Over HTTP/1.1 and h2, flows of the open model give their connection
/// back between steps and while they wait: over one connection, every
/// flow whole and each call answered once, with no connection reopened.
#[test]
fn flows_over_http_share_one_connection_between_their_steps() {
    for http2 in [false, true] {
        let server = chain(0);
        let text = format!(
            "target = \"{}\"\nhttp2 = {http2}\nseed = 5\n[load]\nrequests = 6\nrate = 50\nconnections = 1\n{SEND_THEN_WAIT}",
            server.url()
        );
        let report = run(&scenario(&text));
        assert_send_then_wait(&report, 6);
        let connections = &report.summary.connections;
        assert_eq!(
            (connections.opened_in_all, connections.reopened),
            (1, 0),
            "http2: {http2}"
        );
        assert_eq!(report.summary.flows[0].held_connection, 0);
        assert_eq!(count(&server.stats.receipts_asked), 18);
    }
}

/// One block of 5 transactions: each of the first 3 asked for until its
/// receipt comes (`for_each` capped), the receipt's hash the one asked for.
#[test]
fn for_each_goes_through_the_captured_values_up_to_its_cap() {
    let server = chain(5);
    let text = format!(
        r#"target = "{}"
[load]
requests = 1
concurrency = 1

[[flows]]
name = "receipts"

[[flows.steps]]
method = "eth_getBlockByNumber"
params = ["latest", false]
capture = {{ tx = {{ pointer = "/transactions/*", pick = "all" }} }}

[[flows.steps]]
method = "eth_getTransactionReceipt"
params = ["${{tx}}"]
for_each = "tx"
for_each_limit = 3
until = {{ result = "non-null", every = "10ms", within = "5s" }}
expect = {{ pointer = "/transactionHash", equals = "${{tx}}" }}
"#,
        server.url()
    );
    let report = run(&scenario(&text));
    let receipts = row(&report, "eth_getTransactionReceipt");
    assert_eq!((receipts.calls, receipts.ok), (9, 9));
    assert_eq!(row(&report, "flow:receipts").ok, 1);
    let stats = &server.stats;
    assert_eq!(count(&stats.receipts_asked), 9);
    assert_eq!(count(&stats.receipts_found), 3);
    assert_eq!(count(&stats.receipts_unknown), 0);
}

/// An empty block: the capture finds nothing, its step fails as `capture`
/// with the pointer and the answer in its example, and the receipt is
/// never asked for.
#[test]
fn a_capture_that_finds_nothing_fails_its_step_and_skips_the_rest() {
    let server = chain(0);
    let text = format!(
        "target = \"{}\"\n[load]\nrequests = 3\nconcurrency = 1\n{EMPTY_BLOCK}",
        server.url()
    );
    let report = run(&scenario(&text));
    let blocks = row(&report, "eth_getBlockByNumber");
    assert_eq!((blocks.calls, blocks.outcomes["capture"]), (3, 3));
    let example = &blocks.error_examples["capture"][0];
    assert!(example.reason.contains("/transactions/*"), "{example:?}");
    assert!(
        example.reason.contains("`/transactions` is an empty array"),
        "{example:?}"
    );
    // The answer's first bytes, and its whole size.
    assert!(
        example
            .answer
            .starts_with(r#"{"jsonrpc":"2.0","result":{"number""#),
        "{example:?}"
    );
    assert!(example.answer_bytes > example.answer.len(), "{example:?}");
    assert!(report
        .summary
        .methods
        .iter()
        .all(|m| m.method != "eth_getTransactionReceipt" || m.calls == 0));
    let flows = &report.summary.flows[0];
    assert_eq!((flows.started, flows.failed, flows.skipped_steps), (3, 3, 3));
    assert_eq!(flows.failed_at[0].outcomes["capture"], 3);
    assert_eq!(count(&server.stats.receipts_asked), 0);
}

/// A receipt that never comes within its time: every try a call, the last
/// one the step's `until` failure.
#[test]
fn an_until_that_never_holds_fails_its_step() {
    let server = chain(0);
    let text = format!(
        r#"target = "{}"
[load]
requests = 1
concurrency = 1

[[flows]]
name = "never"

[[flows.steps]]
method = "eth_getTransactionReceipt"
params = ["0x{}"]
until = {{ result = "non-null", every = "10ms", within = "50ms" }}
"#,
        server.url(),
        "ab".repeat(32)
    );
    let report = run(&scenario(&text));
    let receipts = row(&report, "eth_getTransactionReceipt");
    assert_eq!(receipts.outcomes["until"], 1);
    assert_eq!(receipts.calls, receipts.ok + 1);
    assert_eq!(count(&server.stats.receipts_unknown), receipts.calls);
    assert_eq!(report.summary.flows[0].failed_at[0].outcomes["until"], 1);
}

/// LSP's open → complete → close on one child, a document per flow.
#[test]
fn an_lsp_journey_opens_completes_and_closes_its_own_document() {
    let volley = env!("CARGO_BIN_EXE_volley");
    let text = format!(
        r#"command = ["{volley}", "serve", "--stdio", "--framing", "content-length"]
framing = "content-length"
[load]
requests = 4
concurrency = 1

[[setup]]
method = "initialize"
params = {{ processId = 0, rootUri = "file:///w", capabilities = {{}} }}

[[flows]]
name = "open-complete-close"
vars = {{ uri = "file:///w/doc${{seq()}}.py" }}

[[flows.steps]]
method = "textDocument/didOpen"
notification = true
params = {{ textDocument = {{ uri = "${{uri}}", languageId = "python", version = 1, text = "import os\nos.\n" }} }}

[[flows.steps]]
method = "textDocument/completion"
params = {{ textDocument = {{ uri = "${{uri}}" }}, position = {{ line = 1, character = 3 }} }}
expect = {{ pointer = "/items/0/label", type = "string" }}

[[flows.steps]]
method = "textDocument/didClose"
notification = true
params = {{ textDocument = {{ uri = "${{uri}}" }} }}
"#
    );
    let report = run(&scenario(&text));
    for method in [
        "textDocument/didOpen",
        "textDocument/completion",
        "textDocument/didClose",
    ] {
        let row = row(&report, method);
        assert_eq!((row.calls, row.ok), (4, 4), "{method}");
    }
    assert_eq!(row(&report, "flow:open-complete-close").ok, 4);
}

/// What `validate` (and `run`) refuse in a flow, naming the file, line and
/// key, before anything is sent.
#[test]
fn mistakes_in_a_flow_are_named_before_anything_is_sent() {
    let head = "target = \"http://127.0.0.1:1\"\n[[flows]]\nname = \"f\"\n[[flows.steps]]\nmethod = \"a\"\n";
    let cases = [
        (
            "params = [\"${tx}\"]\n",
            "flows[0].steps[0].params",
            "unknown name `tx`",
        ),
        (
            "capture = { tx = \"transactions\" }\n",
            "flows[0].steps[0].capture.tx",
            "starts with `/`",
        ),
        (
            "until = { result = \"non-null\", every = \"1s\" }\n",
            "flows[0].steps[0].until",
            "needs `within`",
        ),
        (
            "for_each = \"nope\"\n",
            "flows[0].steps[0].for_each",
            "`nope` is made by no earlier step",
        ),
        (
            "capture = { x = { pointer = \"/a\", pick = \"last\" } }\n",
            "flows[0].steps[0].capture.x",
            "pick `last`",
        ),
        (
            "capture = { x = { pointer = \"/a\", optional = true } }\n",
            "flows[0].steps[0].capture.x",
            "optional = true goes with pick = \"all\"",
        ),
        ("always = 1\n", "steps[0].always", "invalid type"),
        (
            "capture = { x = 3 }\n",
            "steps[0].capture",
            "a capture is a JSON pointer",
        ),
        (
            "notification = true\ncapture = { x = \"/a\" }\n",
            "flows[0].steps[0].capture",
            "a notification gets no answer",
        ),
    ];
    for (extra, key, message) in cases {
        let text = format!("{head}{extra}");
        let error = volley::scenario::Scenario::parse(&text, "f.toml", "f", &|_| None)
            .expect_err(extra)
            .to_string();
        assert!(error.contains(key) && error.contains(message), "{extra}: {error}");
        assert!(error.contains("f.toml:"), "{error}");
    }
    let vars = "target = \"http://127.0.0.1:1\"\n[[flows]]\nname = \"f\"\nvars = { a = \"${int(1, 2)}\", b = \"x${a}\" }\n[[flows.steps]]\nmethod = \"m\"\n";
    let error = volley::scenario::Scenario::parse(vars, "f.toml", "f", &|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("flows[0].vars.b") && error.contains("`a` is another of this flow's vars"),
        "{error}"
    );
    // A later step reads what an earlier one captured; its own capture is
    // not yet made when it is sent.
    let own = format!("{head}params = [\"${{x}}\"]\ncapture = {{ x = \"/a\" }}\n");
    assert!(volley::scenario::Scenario::parse(&own, "f.toml", "f", &|_| None).is_err());
    let later =
        format!("{head}capture = {{ x = \"/a\" }}\n[[flows.steps]]\nmethod = \"b\"\nparams = [\"${{x}}\"]\n");
    assert!(volley::scenario::Scenario::parse(&later, "f.toml", "f", &|_| None).is_ok());
}

/// A shipped scenario's text with each `(line prefix, replacement)` made.
fn shipped(file: &str, lines: &[(&str, String)]) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let mut text = std::fs::read_to_string(path).unwrap();
    for (prefix, with) in lines {
        let found: Vec<String> = (text.lines())
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect();
        assert!(!found.is_empty(), "{file} has no line starting {prefix:?}");
        for line in found {
            text = text.replace(&line, with);
        }
    }
    text
}

/// Every flow of a run completed and no call failed.
fn assert_whole(report: &RunReport, flows: &[&str]) {
    let summary = &report.summary;
    assert_eq!(summary.total.errors, 0, "{:?}", summary.total.outcomes);
    assert!(summary.total.calls > 0);
    for flow in flows {
        let row = row(report, flow);
        assert!(row.calls > 0 && row.ok == row.calls, "{flow}: {row:?}");
    }
}

/// The shipped journeys run clean: Ethereum's against the built-in chain,
/// MCP's and LSP's against the stdio stand-ins.
#[test]
fn the_shipped_journeys_run_clean_against_the_built_in_server() {
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        block_transactions: 20,
        receipts_after: 3,
        ..ServeConfig::default()
    })
    .unwrap();
    for file in ["ethereum-journeys.toml", "ethereum-send.toml"] {
        let text = shipped(
            file,
            &[
                ("target = ", format!("target = \"{}\"", server.url())),
                ("requests = ", "requests = 12".into()),
                (
                    "until = ",
                    "until = { result = \"non-null\", every = \"1ms\", within = \"10s\" }".into(),
                ),
            ],
        );
        // Read as if from the file's place, whose data file it names.
        let path = format!("{}/scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
        let ethereum = volley::scenario::Scenario::parse(&text, &path, file, &|_| None).unwrap();
        let report = run(&ethereum);
        assert_whole(&report, &["flow:send"]);
        assert!(
            report.thresholds.iter().all(|t| t.passed),
            "{:?}",
            report.thresholds
        );
        assert_eq!(count(&server.stats.receipts_unknown), 0);
    }
    let volley = env!("CARGO_BIN_EXE_volley");
    let stand_ins = [
        (
            "mcp-journey.toml",
            format!("command = [\"{volley}\", \"serve\", \"--stdio\"]"),
            "flow:list-read",
        ),
        (
            "lsp-journey.toml",
            format!("command = [\"{volley}\", \"serve\", \"--stdio\", \"--framing\", \"content-length\"]"),
            "flow:open-complete-close",
        ),
    ];
    for (file, command, flow) in stand_ins {
        let mut lines = vec![("command = ", command), ("duration = ", "requests = 40".into())];
        if file.starts_with("lsp") {
            lines.push(("warmup = ", String::new()));
        }
        let text = shipped(file, &lines);
        let report = run(&scenario(&text));
        assert_whole(&report, &[flow]);
    }
}

/// Two shards of a run with flows, merged: the flows' rows and where the
/// failed ones stopped add up to the whole run's arrivals.
#[test]
fn shards_of_a_run_with_flows_merge_their_flows() {
    use common::bin::{temp_dir, volley, wait_or_kill};
    use std::time::{Duration, SystemTime};
    let server = chain(0);
    let root = temp_dir("flow-shards");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("flows.toml");
    let text = with_an_empty_flow(&server.url());
    std::fs::write(&file, text).unwrap();
    let start = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3;
    let dirs: Vec<std::path::PathBuf> = (0..2).map(|i| root.join(format!("shard-{i}"))).collect();
    let children: Vec<_> = (0..2)
        .map(|i| {
            volley()
                .arg("run")
                .arg(&file)
                .args(["--no-tui", "-q", "--seed", "7", "--shard", &format!("{i}/2")])
                .args(["--start-at", &start.to_string(), "--out"])
                .arg(&dirs[i])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = wait_or_kill(child, Duration::from_secs(90));
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            common::bin::text(&output.stderr)
        );
    }
    let merged = root.join("merged");
    let output = wait_or_kill(
        volley()
            .arg("merge")
            .args(&dirs)
            .arg("--out")
            .arg(&merged)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        common::bin::text(&output.stderr)
    );
    let summary = common::bin::summary_json(&merged)["summary"].clone();
    let flows = summary["flows"].as_array().expect("the merged run's flows");
    let started = |name: &str| {
        let flow = flows.iter().find(|f| f["flow"] == name).unwrap();
        flow["started"].as_u64().unwrap()
    };
    let (sends, empties) = (started("flow:send"), started("flow:receipts"));
    assert_eq!(sends + empties, 20, "{flows:?}");
    let empty = flows.iter().find(|f| f["flow"] == "flow:receipts").unwrap();
    assert_eq!(empty["failed"].as_u64(), Some(empties));
    assert_eq!(empty["skipped_steps"].as_u64(), Some(empties));
    assert_eq!(
        empty["failed_at"][0]["outcomes"]["capture"].as_u64(),
        Some(empties)
    );
    let receipts = (summary["methods"].as_array().unwrap().iter())
        .find(|m| m["method"] == "eth_getTransactionReceipt")
        .unwrap();
    assert_eq!(receipts["calls"].as_u64(), Some(3 * sends));
}

/// An error answer to a capturing step: `capture`, its reason the error.
#[test]
fn an_error_answer_to_a_capture_says_the_error() {
    let server = chain(0);
    let text = format!(
        "target = \"{}\"\n[load]\nrequests = 2\nconcurrency = 1\n[[flows]]\nname = \"bad\"\n[[flows.steps]]\nmethod = \"eth_sendRawTransaction\"\nparams = [\"not hex\"]\ncapture = {{ tx = \"\" }}\n",
        server.url()
    );
    let report = run(&scenario(&text));
    let sends = row(&report, "eth_sendRawTransaction");
    assert_eq!((sends.calls, sends.outcomes["capture"]), (2, 2));
    let example = &sends.error_examples["capture"][0];
    assert!(
        example.reason.contains("the answer is an error, no result") && example.reason.contains("-32602"),
        "{example:?}"
    );
}

/// A server that reads each request and closes the connection without an
/// answer: a flow's first step fails as `io`, the flow with it, the rest
/// skipped, and each flow opens a connection of its own.
#[test]
fn a_flow_whose_connection_drops_fails_at_that_step() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::AsyncReadExt;
    static ACCEPTED: AtomicU64 = AtomicU64::new(0);
    let addr = common::serve_on_a_thread(|listener| async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            ACCEPTED.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
            });
        }
    });
    let text = format!("target = \"http://{addr}\"\ntimeout = \"5s\"\n[load]\nrequests = 3\nconcurrency = 1\n{SEND_THEN_WAIT}");
    let report = run(&scenario(&text));
    let send = row(&report, "eth_sendRawTransaction");
    assert_eq!((send.calls, send.outcomes["io"]), (3, 3), "{:?}", send.outcomes);
    let flows = &report.summary.flows[0];
    assert_eq!((flows.started, flows.failed, flows.skipped_steps), (3, 3, 3));
    assert_eq!(flows.failed_at[0].outcomes["io"], 3);
    assert!(ACCEPTED.load(Ordering::Relaxed) >= 3);
}

/// SEND_THEN_WAIT and a flow that fails at once on an empty block.
fn with_an_empty_flow(url: &str) -> String {
    format!("target = \"{url}\"\n[load]\nrequests = 20\nconcurrency = 2\n{SEND_THEN_WAIT}{EMPTY_BLOCK}")
}
