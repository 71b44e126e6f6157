//! What the reports say beyond the figures: examples of every error outcome
//! with their reasons, the partial mark in the CSVs, counts in words, and
//! stages numbered alike everywhere.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use volley::report::{self, LoadMeta, RunReport};
use volley::stats::{SecondRow, EXAMPLES_PER_OUTCOME, EXCERPT_BYTES};

/// A header value that must never be written anywhere.
const SECRET: &str = "s3cret-header-value";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-report-details-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Writes the report's files into a fresh directory; returns it.
fn written(report: &RunReport, name: &str) -> PathBuf {
    let dir = temp_dir(name);
    report::write_files(&dir, report).expect("the files are written");
    dir
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

fn summary_json(dir: &Path) -> Value {
    serde_json::from_str(&read(dir, "summary.json")).unwrap()
}

/// `requests` calls of `eth_chainId` over `target`, four at a time, with a
/// secret header; `extra` goes at the top of the scenario.
fn scenario_against(target: &str, extra: &str, requests: u64) -> String {
    format!(
        "target = \"{target}\"\n{extra}\n[headers]\nAuthorization = \"Bearer {SECRET}\"\n[load]\nconcurrency = 4\nrequests = {requests}\n[[calls]]\nmethod = \"eth_chainId\"\n"
    )
}

/// Each id picks one bad answer: a JSON-RPC error, an HTML error page, a
/// body cut short, an answer to another id.
fn four_bad_answers(request: &Value) -> (u16, String) {
    let id = request["id"].as_u64().unwrap();
    match id % 4 {
        0 => (
            200,
            json!({"jsonrpc": "2.0", "error": {"code": -32000, "message": "header not found"}, "id": id})
                .to_string(),
        ),
        1 => (
            503,
            format!("<html>\n<body>busy{}</body></html>", "!".repeat(500)),
        ),
        2 => (200, "{\"jsonrpc\":\"2.0\",\"res".to_string()),
        _ => (
            200,
            json!({"jsonrpc": "2.0", "result": "0x1", "id": id + 1_000_000}).to_string(),
        ),
    }
}

/// The examples summary.json keeps for the first method, by outcome.
fn kept_examples(json: &Value) -> &serde_json::Map<String, Value> {
    json["summary"]["methods"][0]["error_examples"]
        .as_object()
        .unwrap_or_else(|| panic!("no error_examples in {json:#}"))
}

/// An example's field as text.
fn field<'a>(example: &'a Value, name: &str) -> &'a str {
    example[name]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} in {example}"))
}

#[test]
fn every_error_outcome_keeps_a_few_examples_with_their_reason() {
    let addr = common::crafted_server(four_bad_answers);
    let text = scenario_against(&format!("http://{addr}"), "timeout = \"2s\"", 60);
    let report = common::run(&common::scenario(&text));
    let dir = written(&report, "examples");
    let json = summary_json(&dir);
    let kept = kept_examples(&json);
    let outcomes = ["http_status", "invalid_json", "protocol", "rpc_error"];
    assert_eq!(kept.keys().map(String::as_str).collect::<Vec<_>>(), outcomes);
    for (outcome, examples) in kept {
        // Each outcome happened 15 times: only the first few are kept.
        let examples = examples.as_array().unwrap();
        assert_eq!(examples.len(), EXAMPLES_PER_OUTCOME, "{outcome}: {examples:?}");
        assert!(examples.iter().all(|e| e["method"] == "eth_chainId"));
    }
    let first = |outcome: &str| &kept[outcome][0];
    let rpc = first("rpc_error");
    assert_eq!(field(rpc, "outcome"), "rpc_error(-32000)");
    assert!(field(rpc, "reason").contains("-32000"), "{rpc}");
    assert!(field(rpc, "answer").contains("header not found"), "{rpc}");
    let status = first("http_status");
    assert_eq!(field(status, "outcome"), "http_status(503)");
    assert!(field(status, "reason").contains("503"), "{status}");
    assert!(field(status, "answer").starts_with("<html>"), "{status}");
    assert_eq!(field(status, "answer").len(), EXCERPT_BYTES, "the answer is cut");
    assert!(
        status["answer_bytes"].as_u64().unwrap() > EXCERPT_BYTES as u64,
        "{status}"
    );
    assert_eq!(
        field(first("invalid_json"), "answer"),
        "{\"jsonrpc\":\"2.0\",\"res"
    );
    let protocol = first("protocol");
    assert_eq!(field(protocol, "outcome"), "protocol(id_mismatch)");
    assert!(
        field(protocol, "reason").starts_with("id_mismatch: "),
        "{protocol}"
    );
    let total = json["summary"]["total"]["error_examples"].as_object().unwrap();
    assert_eq!(total.len(), outcomes.len());

    let table = report::render_table(&report);
    let section = table
        .split("\nexamples (")
        .nth(1)
        .unwrap_or_else(|| panic!("no examples section in:\n{table}"));
    for outcome in outcomes {
        let line = section
            .lines()
            .find(|l| l.trim_start().starts_with(outcome))
            .unwrap_or_else(|| panic!("no {outcome} example in:\n{table}"));
        assert!(line.contains("eth_chainId: "), "{line}");
    }
    // The HTML page's line break stays off the table's lines.
    assert!(section.contains("answer: <html> <body>busy"), "{table}");
    for output in [read(&dir, "summary.json"), table] {
        assert!(!output.contains(SECRET), "a header value was written:\n{output}");
    }
}

/// A server of HTTP/1.1 that answers the h2c preface with a 400 and
/// closes, as node's does.
/// A server that answers HTTP/2's preface with bytes of another protocol
/// and closes: the connection opens (it said something that is not
/// HTTP/1.1, which is refused before the run), and every call on it fails.
fn server_of_another_protocol() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut preface = [0u8; 24];
            let _ = std::io::Read::read_exact(&mut stream, &mut preface);
            let _ = std::io::Write::write_all(&mut stream, b"SSH-2.0-OpenSSH_9.2\r\n");
        }
    });
    addr
}

#[test]
fn http2_against_a_server_of_another_protocol_says_why_its_calls_fail() {
    let addr = server_of_another_protocol();
    let text = scenario_against(&format!("http://{addr}"), "http2 = true\ntimeout = \"2s\"", 20);
    let report = common::run(&common::scenario(&text));
    assert_eq!(common::outcomes(&report), [("io", 20)].into());
    let json = summary_json(&written(&report, "http2"));
    let examples = kept_examples(&json)["io"].as_array().unwrap();
    assert!(!examples.is_empty() && examples.len() <= EXAMPLES_PER_OUTCOME);
    let io = &examples[0];
    assert_eq!((field(io, "outcome"), field(io, "answer")), ("io", ""));
    let reason = field(io, "reason");
    assert!(
        reason.contains("no HTTP/2 answer ever came on this connection: does the server speak HTTP/2?"),
        "the transport's error is kept, with the likely cause: {io}"
    );
    assert_eq!(
        json["summary"]["total"]["error_examples"]["io"][0]["reason"],
        reason
    );
    let table = report::render_table(&report);
    assert!(
        table.contains(&format!("  io            eth_chainId: {reason} · no answer")),
        "{table}"
    );
}

#[test]
fn connections_that_never_work_are_reopened_with_a_backoff_not_a_spin() {
    // Each HTTP/2 connection opens (the server says something) and
    // its first call fails: before, the next opened at once, thousands a
    // second.
    let addr = server_of_another_protocol();
    let report = common::run(&common::scenario(&format!(
        "target = \"http://{addr}\"\nhttp2 = true\n[load]\nconcurrency = 1\nduration = \"1s\"\n[[calls]]\nmethod = \"m\"\n"
    )));
    let io = common::outcomes(&report)["io"];
    // 10 ms, then 20, 40, ... 640: seven openings fit in a second. A busy
    // machine only makes fewer.
    assert!((1..=8).contains(&io), "{io} connections failed in 1 s");
}

#[test]
fn a_call_never_answered_is_kept_as_a_timeout_example() {
    // Accepts, reads, and never answers.
    let addr = common::serve_on_a_thread(|listener| async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut sink = tokio::io::sink();
                let _ = tokio::io::copy(&mut stream, &mut sink).await;
            });
        }
    });
    let text = scenario_against(&format!("http://{addr}"), "timeout = \"200ms\"", 4);
    let report = common::run(&common::scenario(&text));
    assert_eq!(common::outcomes(&report), [("timeout", 4)].into());
    let json = summary_json(&written(&report, "timeout"));
    let examples = kept_examples(&json)["timeout"].as_array().unwrap();
    assert_eq!(examples.len(), EXAMPLES_PER_OUTCOME);
    assert_eq!(field(&examples[0], "reason"), "no answer within 200ms");
}

fn ok_answer(request: &Value) -> (u16, String) {
    (
        200,
        json!({"jsonrpc": "2.0", "result": "0x1", "id": request["id"]}).to_string(),
    )
}

/// Whether every line of a CSV (header included) ends with `last`.
fn last_column_is(csv: &str, header: &str, value: &str) -> bool {
    let mut lines = csv.lines();
    lines.next().is_some_and(|h| h.ends_with(&format!(",{header}")))
        && lines.all(|row| row.ends_with(&format!(",{value}")))
}

#[test]
fn the_csvs_of_a_run_stopped_early_say_partial() {
    let addr = common::crafted_server(ok_answer);
    let text = format!(
        "target = \"http://{addr}\"\n[load]\nconcurrency = 1\nrequests = 100000000\n[[calls]]\nmethod = \"eth_chainId\"\n"
    );
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Stopped as soon as calls are counted, as `q` or Ctrl-C would stop it.
    let report = runtime
        .block_on(volley::execute(
            &common::scenario(&text),
            None,
            cancel,
            std::sync::Arc::new(volley::engine::Control::new()),
            move |snapshot| {
                if snapshot.total.calls > 0 {
                    stop.cancel();
                }
            },
        ))
        .expect("the run starts");
    assert!(report.summary.partial);
    let dir = written(&report, "partial");
    let (summary, series) = (read(&dir, "summary.csv"), read(&dir, "timeseries.csv"));
    assert!(last_column_is(&summary, "partial", "true"), "{summary}");
    assert_eq!(summary.lines().count(), 3, "a method and TOTAL: {summary}");
    assert!(last_column_is(&series, "partial", "true"), "{series}");
    assert!(series.lines().count() >= 2, "{series}");

    let whole = common::run(&common::scenario(&text.replace("100000000", "5")));
    let dir = written(&whole, "whole");
    assert!(last_column_is(&read(&dir, "summary.csv"), "partial", "false"));
    assert!(last_column_is(&read(&dir, "timeseries.csv"), "partial", "false"));
}

#[test]
fn the_csvs_name_calls_a_second_for_what_it_is() {
    let addr = common::crafted_server(ok_answer);
    let text = format!(
        "target = \"http://{addr}\"\n[load]\nconcurrency = 1\nrequests = 5\n[[calls]]\nmethod = \"eth_chainId\"\n"
    );
    let dir = written(&common::run(&common::scenario(&text)), "calls-per-s");
    let summary = read(&dir, "summary.csv");
    assert!(
        summary.starts_with("method,calls,ok,errors,error_rate,calls_per_s,mean_ms,"),
        "{summary}"
    );
    let series = read(&dir, "timeseries.csv");
    assert!(
        series.starts_with("second,calls,ok,errors,calls_per_s,p50_ms,"),
        "{series}"
    );
    let json = summary_json(&dir);
    assert!(json["summary"]["total"]["calls_per_s"].as_f64().unwrap() > 0.0);
    assert!(json["summary"]["total"].get("rps").is_none());
}

/// One connection and its setup, in an open model of two stages, ended
/// early by its request count.
const STAGED: &str = "timeout = \"2s\"\n[load]\nconnections = 1\nrequests = 10\nstages = [{ duration = \"30s\", rate = 100 }, { duration = \"30s\", rate = 200 }]\n[[setup]]\nmethod = \"eth_chainId\"\n[[calls]]\nmethod = \"eth_chainId\"\n";

fn staged_run() -> RunReport {
    let addr = common::crafted_server(ok_answer);
    common::run(&common::scenario(&format!(
        "target = \"http://{addr}\"\n{STAGED}"
    )))
}

/// The table's first line: what ran against what.
fn headline(table: &str) -> &str {
    table.lines().find(|l| l.contains(" · ")).unwrap()
}

#[test]
fn counts_are_said_in_words() {
    let table = report::render_table(&staged_run());
    assert!(headline(&table).contains(", 1 connection ·"), "{table}");
    assert!(table.contains("setup: 1 connection set up, 0 failed"), "{table}");
    assert!(!table.contains(" 1 connections"), "{table}");
    let row = SecondRow {
        second: 0,
        calls: 1,
        ok: 1,
        errors: 0,
        rps: 1.0,
        p50_ms: 1.0,
        p99_ms: 1.0,
        max_ms: 1.0,
        error_outcomes: Default::default(),
        flows: 0,
        flow_errors: 0,
        server_cpu_cores: None,
        server_rss_bytes: None,
    };
    let line = report::progress_line(&row);
    assert!(line.contains(" 1 call ") && !line.contains("1 calls"), "{line}");
}

#[test]
fn stages_are_numbered_from_one_in_the_table_and_in_summary_json() {
    let report = staged_run();
    let table = report::render_table(&report);
    let numbers: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("stage "))
        .skip(1)
        .take(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(numbers, ["1", "2"], "{table}");
    let json = summary_json(&written(&report, "stages"));
    let stages = json["summary"]["stages"].as_array().unwrap();
    let in_json: Vec<u64> = stages.iter().map(|s| s["stage"].as_u64().unwrap()).collect();
    assert_eq!(in_json, [1, 2], "{json}");
}

#[test]
fn the_table_states_no_single_rate_for_a_staged_run() {
    let table = report::render_table(&staged_run());
    let headline = headline(&table);
    assert!(headline.contains("open model in 2 stages,"), "{table}");
    // The plan's first rate is not what a staged run ran.
    assert!(!headline.contains("requests/s"), "{table}");
}

#[test]
fn the_load_meta_of_a_staged_run_states_no_single_rate() {
    let staged = common::scenario(&format!("target = \"http://127.0.0.1:1\"\n{STAGED}"));
    let load = LoadMeta::new(&staged.compile().plan);
    assert_eq!((load.model, load.rate, load.stages), ("open", None, 2));
    let constant = common::scenario(
        "target = \"http://127.0.0.1:1\"\n[load]\nrate = 50\nrequests = 5\n[[calls]]\nmethod = \"m\"\n",
    );
    let load = LoadMeta::new(&constant.compile().plan);
    assert_eq!((load.model, load.rate, load.stages), ("open", Some(50.0), 0));
}
/// Refuses the handshake (`initialize`) and answers everything else.
fn refuse_initialize(request: &Value) -> (u16, String) {
    if request["method"] == "initialize" {
        let error = json!({"code": -32601, "message": "no handshake here"});
        return (
            200,
            json!({"jsonrpc": "2.0", "error": error, "id": request["id"]}).to_string(),
        );
    }
    ok_answer(request)
}

#[test]
fn a_connection_that_cannot_be_set_up_is_kept_as_a_connect_example() {
    let addr = common::crafted_server(refuse_initialize);
    let setup = "timeout = \"2s\"\n[[setup]]\nmethod = \"initialize\"";
    let text = scenario_against(&format!("http://{addr}"), setup, 6);
    let report = common::run(&common::scenario(&text));
    assert_eq!(common::outcomes(&report), [("connect", 6)].into());
    let json = summary_json(&written(&report, "connect"));
    let examples = kept_examples(&json)["connect"].as_array().unwrap();
    assert_eq!(examples.len(), EXAMPLES_PER_OUTCOME);
    assert_eq!(
        field(&examples[0], "reason"),
        "setup call `initialize` failed: rpc_error(-32601)"
    );
}

#[test]
fn a_file_that_cannot_be_written_leaves_no_truncated_files_behind() {
    let report = staged_run();
    let dir = temp_dir("blocked");
    std::fs::create_dir_all(dir.join(".latency.hlog.partial")).unwrap();
    let error = report::write_files(&dir, &report).expect_err("the hlog cannot be written");
    assert!(error.to_string().contains("latency.hlog"), "{error}");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [".latency.hlog.partial"], "nothing half-written stays");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_html_is_one_self_contained_page_and_volley_report_renders_it_again() {
    let server = volley::serve::spawn(volley::serve::ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        error_rate: 0.2,
        ..Default::default()
    })
    .unwrap();
    let report = common::run(&common::scenario(&format!(
        "target = \"{}\"\n[load]\nconnections = 4\nstages = [{{ duration = \"1500ms\", rate = 200 }}, {{ duration = \"1500ms\", rate = 400 }}]\n\
         [[calls]]\nmethod = \"eth_blockNumber\"\n[[calls]]\nmethod = \"eth_chainId\"\n[thresholds]\nchecks = [\"p99 < 1s\"]\n",
        server.url()
    )));
    let dir = written(&report, "html");
    let page = read(&dir, "report.html");
    // Self-contained: nothing to fetch, nothing to run.
    for outside in ["<script", " src=", " href=", "@import", "url("] {
        assert!(!page.contains(outside), "{outside} in the page");
    }
    assert_eq!(page.matches("<svg ").count(), 5, "five plots");
    for title in [
        "Latency by percentile",
        "p99 by method over time",
        "Calls per second",
        "Latency over time",
        "Errors per second, by outcome",
    ] {
        assert!(page.contains(&format!(">{title}</text>")), "{title}");
    }
    for label in [
        "percentile (log scale)",
        "latency ms",
        "second of the run",
        "calls/s",
    ] {
        assert!(page.contains(&format!(">{label}</text>")), "axis label {label}");
    }
    // The percentile axis reads in nines; the second stage is marked.
    assert!(
        page.contains(">90%</text>") && page.contains(">99%</text>"),
        "{page}"
    );
    assert!(page.contains("<title>stage 2</title>"), "the stage boundary");
    assert!(
        page.contains("<code>p99 &lt; 1s</code>"),
        "the threshold, escaped"
    );
    for method in ["eth_blockNumber", "eth_chainId", "TOTAL"] {
        assert!(
            page.contains(&format!("<title>{method}</title>")),
            "{method}'s spectrum"
        );
    }
    // The injected errors, as a line of their own outcome.
    assert!(page.contains("<title>rpc_error</title>"), "errors by outcome");
    // From the directory alone, the same page.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(read(&dir, "report.html"), page);
}

/// The table's errors, outcome by outcome in their order, each with its
/// codes, statuses or kinds, as counted.
#[test]
fn the_table_lists_each_error_outcome_with_its_details() {
    use volley::serve::{self, ServeConfig};
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        seed: 5,
        error_rate: 0.2,
        chaos: "wrong-id=0.2,http-503=0.2".parse().unwrap(),
        ..ServeConfig::default()
    })
    .unwrap();
    let text = format!(
        "target = \"{}\"\n[load]\nconcurrency = 2\nrequests = 300\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let total = &report.summary.total;
    let table = volley::report::render_table(&report);
    let first = headline(&table);
    assert!(
        first.contains("closed model, 2 connections ·") && !first.contains("stage"),
        "{first}"
    );
    let errors = table
        .split("errors by outcome:\n")
        .nth(1)
        .expect("an errors section");
    let lines: Vec<&str> = errors.lines().take_while(|l| l.starts_with("  ")).collect();
    let line =
        |name: &str, detail: String| format!("  {:<13} {:>10}  ({detail})", name, total.outcomes[name]);
    assert_eq!(
        lines,
        [
            line("rpc_error", format!("-32000: {}", total.rpc_error_codes[&-32000])),
            line("http_status", format!("503: {}", total.http_statuses[&503])),
            line(
                "protocol",
                format!("id_mismatch: {}", total.protocol_errors["id_mismatch"])
            ),
        ],
        "{table}"
    );
    let statuses: Vec<String> = (report.summary.http_statuses.iter())
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    let requests = format!(
        "requests: {} · HTTP statuses: {}",
        report.summary.requests,
        statuses.join(", ")
    );
    assert!(table.lines().any(|l| l == requests), "{requests}\n{table}");
    let example = table
        .lines()
        .find(|l| l.starts_with("  rpc_error     eth_chainId: "))
        .expect(&table);
    assert!(
        example.ends_with('}'),
        "a short answer is shown whole, unmarked: {example}"
    );
    let clean = volley::serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap();
    let report = common::run(&common::scenario(&text.replace(&server.url(), &clean.url())));
    assert!(!volley::report::render_table(&report).contains("errors by outcome"));
}

/// A long answer is shown cut, and marked; batch sizes past twelve are
/// cut to twelve, and marked, and twelve are not.
#[test]
fn the_table_marks_what_it_cuts() {
    fn long_html(_: &Value) -> (u16, String) {
        (200, format!("<html>{}</html>", "x".repeat(300)))
    }
    let addr = common::crafted_server(long_html);
    let text = format!(
        "target = \"http://{addr}\"\n[load]\nconcurrency = 1\nrequests = 3\n[[calls]]\nmethod = \"m\"\n"
    );
    let table = report::render_table(&common::run(&common::scenario(&text)));
    let example = table
        .lines()
        .find(|l| l.starts_with("  invalid_json  m: "))
        .expect(&table);
    assert!(example.ends_with(" …"), "{example}");
    let batches = |max: u32| {
        let addr = common::crafted_server(ok_batch);
        let text = format!(
            "target = \"http://{addr}\"\nseed = 4\n[load]\nconcurrency = 1\nrequests = 400\n[[calls]]\nmethod = \"m\"\nbatch = {{ min = 1, max = {max} }}\n"
        );
        let table = report::render_table(&common::run(&common::scenario(&text)));
        table
            .lines()
            .find(|l| l.starts_with("batches: "))
            .expect(&table)
            .to_string()
    };
    let twelve = batches(12);
    assert!(
        twelve.contains("12: ") && twelve.contains("sizes 1: ") && !twelve.contains("…"),
        "{twelve}"
    );
    let thirteen = batches(13);
    assert!(
        thirteen.contains(", …)") && !thirteen.contains("13: "),
        "{thirteen}"
    );
}

fn ok_batch(request: &Value) -> (u16, String) {
    let answers: Vec<Value> = (request.as_array().into_iter().flatten())
        .map(|call| json!({"jsonrpc": "2.0", "result": "0x1", "id": call["id"]}))
        .collect();
    (200, Value::Array(answers).to_string())
}

#[test]
fn the_headline_says_a_constant_rate_or_the_recorded_pace() {
    let mut report = staged_run();
    report.meta.load.stages = 0;
    let said = |report: &RunReport| {
        let table = report::render_table(report);
        let line = headline(&table).to_string();
        line.split(" model")
            .nth(1)
            .unwrap()
            .split(',')
            .nth(1)
            .unwrap()
            .trim()
            .to_string()
    };
    report.meta.load.rate = Some(1.0);
    assert_eq!(said(&report), "1 request/s");
    report.meta.load.rate = Some(2.5);
    assert_eq!(said(&report), "2.5 requests/s");
    // A replay at its recorded times has no one rate either.
    report.meta.load.rate = None;
    report.meta.load.recorded_pace = true;
    assert_eq!(said(&report), "at the recorded pace");
    report.meta.load.recorded_pace = false;
    assert!(said(&report).starts_with("1 connection ·"));
}

#[test]
fn each_method_row_and_total_give_that_methods_figures_in_order() {
    let report = staged_run();
    let table = report::render_table(&report);
    let summary = &report.summary;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip_while(|l| !l.starts_with("method "))
        .skip(1)
        .take(summary.methods.len() + 1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let expected: Vec<Vec<String>> = summary
        .methods
        .iter()
        .chain([&summary.total])
        .map(|m| {
            let l = &m.latency;
            vec![
                m.method.clone(),
                m.calls.to_string(),
                m.ok.to_string(),
                m.errors.to_string(),
                format!("{:.1}", m.rps),
                format!("{:.3}", l.p50_ms),
                format!("{:.3}", l.p90_ms),
                format!("{:.3}", l.p99_ms),
                format!("{:.3}", l.p999_ms),
                format!("{:.3}", l.max_ms),
            ]
        })
        .collect();
    assert_eq!(rows, expected, "{table}");
    assert!(summary.total.calls > 0);
}
