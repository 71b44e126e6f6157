//! `volley record` between a real run and `volley serve`, then the capture
//! replayed at its recorded pace: the second server sees the same calls in
//! the same order; `speed` divides every recorded time; `expect =
//! "recorded"` counts exactly the answers the second server spoiled; and a
//! header's value never reaches the capture.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::bin::{summary_json, temp_dir, text, volley, wait_or_kill};
use serde_json::Value;
use volley::serve::{self, ServeConfig, ServerStats};

/// `volley serve` on a loopback port, in this process.
fn upstream() -> serve::ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap()
}

/// `volley record` in front of `upstream`, writing `out`; the child and
/// the proxy's URL.
fn record(upstream: &str, out: &Path, extra: &[&str]) -> (Child, String) {
    let mut child = volley()
        .args([
            "record",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream,
            "--out",
        ])
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("the address is said: {first}"))
        .trim_end_matches(',')
        .to_string();
    (child, url)
}

/// Ctrl-C, as a user stops it; the file is then whole.
fn stop(child: Child) -> String {
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = wait_or_kill(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    text(&output.stdout)
}

fn run(args: &[&str], out: &Path) -> Value {
    let child = volley()
        .arg("run")
        .args(args)
        .args(["--no-tui", "-q", "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    summary_json(out)
}

fn lines(capture: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(capture).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A server that keeps every request body in the order they came (with
/// the client's port in `"port"`), and answers `add` as `volley serve` does.
fn logging_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    use http_body_util::{BodyExt, Full};
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    let addr = common::serve_on_a_thread(move |listener| async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                        let log = log.clone();
                        async move {
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let mut call: Value = serde_json::from_slice(&body).unwrap();
                            let sum =
                                call["params"][0].as_i64().unwrap() + call["params"][1].as_i64().unwrap();
                            let answer =
                                serde_json::json!({"jsonrpc": "2.0", "result": sum, "id": call["id"]});
                            call["port"] = peer.port().into();
                            log.lock().unwrap().push(call);
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                bytes::Bytes::from(answer.to_string()),
                            )))
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

/// 100 `add` calls with drawn params, over one connection, recorded.
fn recorded_run(root: &Path, extra: &[&str]) -> PathBuf {
    let upstream = upstream();
    let capture = root.join("capture.jsonl");
    std::fs::create_dir_all(root).unwrap();
    let (proxy, url) = record(&upstream.url(), &capture, &["--answers"]);
    let mut args = vec![
        "--target",
        &url,
        "--method",
        "add",
        "--params",
        r#"["${int(1,1000)}", 2]"#,
        "--rate",
        "200",
        "--requests",
        "100",
        "--seed",
        "5",
    ];
    args.extend_from_slice(extra);
    if !extra.contains(&"--connections") {
        args.extend_from_slice(&["--connections", "1"]);
    }
    let summary = run(&args, &root.join("original"));
    assert_eq!(summary["summary"]["total"]["ok"], 100);
    let said = stop(proxy);
    assert!(said.contains("recorded 100 requests"), "{said}");
    capture
}

fn replay_scenario(root: &Path, target: &str, settings: &str) -> PathBuf {
    let file = root.join(format!("replay-{}.toml", settings.len()));
    std::fs::write(
        &file,
        format!("target = \"{target}\"\nreplay = {{ file = \"capture.jsonl\", {settings} }}\n"),
    )
    .unwrap();
    file
}

#[test]
fn a_replay_sends_the_recorded_calls_in_order_at_their_times() {
    let root = temp_dir("record-replay");
    let capture = recorded_run(&root, &[]);
    let recorded = lines(&capture);
    assert_eq!(recorded.len(), 100);
    let (target, seen) = logging_server();
    let scenario = replay_scenario(&root, &target, "timing = \"recorded\", speed = 2.0");
    let out = root.join("replayed");
    let summary = run(&[scenario.to_str().unwrap(), "--connections", "1"], &out);
    assert_eq!(summary["summary"]["total"]["ok"], 100);
    let sent: Vec<(Value, Value)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|c| (c["method"].clone(), c["params"].clone()))
        .collect();
    let captured: Vec<(Value, Value)> = recorded
        .iter()
        .map(|l| (l["request"]["method"].clone(), l["request"]["params"].clone()))
        .collect();
    assert_eq!(sent, captured, "the same calls, in the same order");
    // Each request is due at its recorded time over the speed, exactly;
    // how far the sends were from that is the start delay, in the summary.
    let scenario = volley::scenario::Scenario::load(&scenario).unwrap();
    let plan = scenario.compile().plan;
    let due = plan.recorded.expect("a recorded pace");
    let first = recorded[0]["at"].as_f64().unwrap();
    for (line, due) in recorded.iter().zip(due.iter()) {
        assert_eq!(*due, (line["at"].as_f64().unwrap() - first) / 2.0);
    }
    assert!(summary["summary"]["schedule"]["start_delay"]["p99_ms"].is_number());
    let once =
        volley::scenario::Scenario::load(&replay_scenario(&root, &target, "timing = \"recorded\"")).unwrap();
    let once = once.compile().plan;
    let (volley::plan::Pacing::Open { rate: twice }, volley::plan::Pacing::Open { rate }) =
        (plan.pacing, once.pacing)
    else {
        panic!("both in the open model");
    };
    assert!(
        (twice - 2.0 * rate).abs() < 1e-9 * rate,
        "speed 2: twice the rate ({twice} against {rate})"
    );
}

#[test]
fn expect_recorded_counts_exactly_the_answers_that_differ() {
    let root = temp_dir("record-expect");
    recorded_run(&root, &[]);
    let spoiling = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        error_rate: 0.2,
        seed: 9,
        ..ServeConfig::default()
    })
    .unwrap();
    let scenario = replay_scenario(&root, &spoiling.url(), "expect = \"recorded\", on_end = \"stop\"");
    let summary = run(
        &[scenario.to_str().unwrap(), "--rate", "500"],
        &root.join("expected"),
    );
    let injected = ServerStats::get(&spoiling.stats.injected_errors);
    assert!(injected > 0, "the server spoiled some");
    let total = &summary["summary"]["total"];
    assert_eq!(total["calls"], 100);
    assert_eq!(total["outcomes"]["assertion"].as_u64(), Some(injected), "{total}");
    assert_eq!(total["ok"].as_u64(), Some(100 - injected));
}

#[test]
fn a_header_value_never_reaches_the_capture() {
    let root = temp_dir("record-secret");
    let capture = recorded_run(&root, &["-H", "Authorization: Bearer s3cr3t-token-value"]);
    let text = std::fs::read_to_string(&capture).unwrap();
    assert!(!text.contains("s3cr3t"), "a header value was recorded");
    assert!(text.contains("\"authorization\""), "its name is");
}

#[test]
fn init_from_a_capture_weighs_the_mix_as_recorded() {
    let root = temp_dir("record-init");
    std::fs::create_dir_all(&root).unwrap();
    let upstream = upstream();
    let capture = root.join("capture.jsonl");
    let (proxy, url) = record(&upstream.url(), &capture, &[]);
    let mix = root.join("mix.toml");
    std::fs::write(
        &mix,
        format!(
            "target = \"{url}\"\nseed = 3\n[load]\nconcurrency = 2\nrequests = 400\n\
             [[calls]]\nmethod = \"add\"\nparams = [\"${{int(1, 50)}}\", 1]\nweight = 3\n\
             [[calls]]\nmethod = \"eth_chainId\"\nweight = 1\n"
        ),
    )
    .unwrap();
    run(&[mix.to_str().unwrap()], &root.join("original"));
    stop(proxy);
    let recorded = lines(&capture);
    let adds = recorded
        .iter()
        .filter(|l| l["request"]["method"] == "add")
        .count() as u64;
    let out = root.join("from-capture.toml");
    let made = volley()
        .args(["init", "--from-capture"])
        .arg(&capture)
        .arg(&out)
        .args(["--target", &upstream.url()])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let scenario = volley::scenario::Scenario::load(&out).unwrap();
    let weights: Vec<(&str, u64)> = scenario
        .calls
        .iter()
        .map(|c| (c.method.as_str(), u64::from(c.weight)))
        .collect();
    assert_eq!(
        weights,
        [("add", adds), ("eth_chainId", 400 - adds)],
        "the capture's own counts"
    );
    let share = adds as f64 / 400.0;
    assert!((share - 0.75).abs() < 0.06, "a seeded draw of 3:1 ({share})");
    let data = std::fs::read_to_string(root.join("from-capture-data/add.jsonl")).unwrap();
    assert_eq!(data.lines().count() as u64, adds, "every recorded params");
    // And it runs: its params are the recorded ones.
    let summary = run(
        &[out.to_str().unwrap(), "--requests", "50"],
        &root.join("generated"),
    );
    assert_eq!(summary["summary"]["total"]["ok"], 50);
}

/// One HTTP/1.1 request by hand; the status line's code, 0 when the
/// proxy is gone (it stops at its size bound).
fn post(url: &str, method: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    let request = format!(
        "{method} / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut answer = String::new();
    if stream.write_all(request.as_bytes()).is_err() || stream.read_to_string(&mut answer).is_err() {
        return 0;
    }
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

#[test]
fn only_calls_are_recorded_and_the_size_bound_is_counted_exactly() {
    let root = temp_dir("record-bounds");
    std::fs::create_dir_all(&root).unwrap();
    let upstream = upstream();
    let capture = root.join("capture.jsonl");
    let (proxy, url) = record(&upstream.url(), &capture, &["--max-size", "1KB"]);
    // Passed on, never recorded: a string, an empty batch, a GET, not JSON.
    assert_eq!(post(&url, "POST", r#""just a string""#), 200);
    assert_eq!(post(&url, "POST", "[]"), 200);
    assert_eq!(post(&url, "GET", ""), 405);
    assert_eq!(post(&url, "POST", "<html>"), 200);
    // Then calls until the bound: those past it are passed on, unrecorded.
    let call = r#"{"jsonrpc":"2.0","method":"eth_chainId","id":1}"#;
    for _ in 0..20 {
        if post(&url, "POST", call) != 200 {
            break;
        }
    }
    let said = stop(proxy);
    let lines = lines(&capture);
    assert!(!lines.is_empty() && lines.len() < 20, "{said}");
    assert!(lines.iter().all(|l| l["request"]["method"] == "eth_chainId"));
    assert!(
        said.contains(&format!("recorded {} requests", lines.len())),
        "{said}"
    );
    assert!(said.contains("4 messages not a JSON-RPC call"), "{said}");
    assert!(
        std::fs::metadata(&capture).unwrap().len() <= 1000,
        "within the bound"
    );
}

#[test]
fn a_capture_with_notifications_replays_with_expect_recorded() {
    let root = temp_dir("record-notes");
    std::fs::create_dir_all(&root).unwrap();
    let upstream = upstream();
    let capture = root.join("capture.jsonl");
    let (proxy, url) = record(&upstream.url(), &capture, &["--answers"]);
    let mix = root.join("mix.toml");
    std::fs::write(
        &mix,
        format!(
            "target = \"{url}\"\nseed = 1\n[load]\nconcurrency = 1\nrequests = 60\n\
             [[calls]]\nmethod = \"eth_chainId\"\n[[calls]]\nmethod = \"log\"\nnotification = true\n"
        ),
    )
    .unwrap();
    run(&[mix.to_str().unwrap()], &root.join("original"));
    stop(proxy);
    assert!(
        lines(&capture).iter().any(|l| l.get("answer").is_none()),
        "a notification has none"
    );
    let scenario = replay_scenario(&root, &upstream.url(), "expect = \"recorded\", on_end = \"stop\"");
    let summary = run(
        &[scenario.to_str().unwrap(), "--rate", "500"],
        &root.join("replayed"),
    );
    assert_eq!(
        summary["summary"]["total"]["outcomes"]["assertion"], 0,
        "{}",
        summary["summary"]["total"]
    );
}

#[test]
fn a_replay_can_keep_the_captured_connections() {
    let root = temp_dir("record-conns");
    let capture = recorded_run(&root, &["--connections", "3"]);
    let by_conn = |calls: Vec<(u64, Value)>| {
        let mut groups: std::collections::BTreeMap<u64, Vec<Value>> = Default::default();
        for (conn, params) in calls {
            groups.entry(conn).or_default().push(params);
        }
        let mut groups: Vec<Vec<Value>> = groups.into_values().collect();
        groups.sort_by_key(|g| g[0].to_string());
        groups
    };
    let recorded = by_conn(
        lines(&capture)
            .iter()
            .map(|l| (l["conn"].as_u64().unwrap(), l["request"]["params"].clone()))
            .collect(),
    );
    assert_eq!(recorded.len(), 3, "three connections carried calls");
    let (target, seen) = logging_server();
    let scenario = replay_scenario(
        &root,
        &target,
        "timing = \"recorded\", connections = \"recorded\"",
    );
    let summary = run(&[scenario.to_str().unwrap()], &root.join("grouped"));
    assert_eq!(summary["summary"]["total"]["ok"], 100);
    assert_eq!(summary["meta"]["load"]["connections"], 3);
    let replayed = by_conn(
        seen.lock()
            .unwrap()
            .iter()
            .map(|c| (c["port"].as_u64().unwrap(), c["params"].clone()))
            .collect(),
    );
    assert_eq!(
        replayed, recorded,
        "each connection's calls, in their order, on one connection"
    );
}
