//! `volley check`: every case passes against `volley serve` (HTTP and a
//! stream), exactly the broken cases fail against a server that breaks
//! chosen rules, an expected-failures file turns failures into passes and
//! passes into stale entries, and a 1.0 server is recognised.

mod common;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::bin::{temp_dir, text, volley, wait_or_kill};

#[derive(Clone, Copy)]
enum Mode {
    /// Breaks three rules and passes everything else to a right server.
    Broken(SocketAddr),
    /// Answers every call as JSON-RPC 1.0 does.
    Version1,
}

/// The three rules the broken server breaks: it answers a notification,
/// answers an empty batch with `[]`, and calls an unknown method an
/// invalid request.
const BROKEN: [&str; 3] = ["notification", "empty_batch", "unknown_method"];

fn broken(body: &[u8]) -> Option<Vec<u8>> {
    let request: Value = serde_json::from_slice(body).ok()?;
    let answer = if request == json!([]) {
        json!([])
    } else if request.is_object() && request.get("id").is_none() && request["method"].is_string() {
        json!({"jsonrpc": "2.0", "result": null, "id": null})
    } else if request["method"] == "volley.check/no-such-method" {
        json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": request["id"]})
    } else {
        return None;
    };
    Some(answer.to_string().into_bytes())
}

/// The right server's answer, over a connection of its own.
async fn forward(upstream: SocketAddr, body: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(upstream).await.unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {upstream}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = std::str::from_utf8(&answer[9..12]).unwrap().parse().unwrap();
    (status, answer[end + 4..].to_vec())
}

fn version_1(body: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(body) {
        Ok(request) if !request["id"].is_null() => json!({"result": 1, "error": null, "id": request["id"]}),
        Ok(_) => return Vec::new(),
        Err(_) => json!({"result": null, "error": {"code": -32700, "message": "Parse error"}, "id": null}),
    }
    .to_string()
    .into_bytes()
}

fn server(mode: Mode) -> SocketAddr {
    common::serve_on_a_thread(move |listener| async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| async move {
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        let (status, answer) = match mode {
                            Mode::Broken(upstream) => match broken(&body) {
                                Some(answer) => (200, answer),
                                None => forward(upstream, &body).await,
                            },
                            Mode::Version1 => (200, version_1(&body)),
                        };
                        let mut response = Response::new(Full::new(Bytes::from(answer)));
                        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        Ok::<_, Infallible>(response)
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

fn check(args: &[&str]) -> (Output, Value) {
    let child = volley()
        .arg("check")
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(60));
    let document: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&output.stdout), text(&output.stderr)));
    (output, document["targets"][0].clone())
}

/// Each case's verdict, by case.
fn verdicts(report: &Value) -> BTreeMap<String, String> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["case"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn all_but(verdict: &str, others: &[(&str, &str)], report: &Value) -> BTreeMap<String, String> {
    let mut expected: BTreeMap<String, String> = verdicts(report)
        .keys()
        .map(|k| (k.clone(), verdict.to_string()))
        .collect();
    for (case, v) in others {
        expected.insert(case.to_string(), v.to_string());
    }
    expected
}

/// The built-in server, in this process, over HTTP and TCP.
fn right_server() -> volley::serve::ServerHandle {
    volley::serve::spawn(volley::serve::ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        threads: 1,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn volley_serve_passes_every_case_over_http_and_tcp() {
    let server = right_server();
    let http = format!("http://{}", server.addr);
    let tcp = format!("tcp://{}", server.tcp_addr.unwrap());
    for target in [http.as_str(), tcp.as_str()] {
        let (output, report) = check(&[target, "--quiet-for", "200ms"]);
        assert_eq!(output.status.code(), Some(0), "{target}: {report:#}");
        assert_eq!(verdicts(&report), all_but("pass", &[], &report), "{target}");
        assert_eq!(verdicts(&report).len(), 15);
        assert_eq!(report["jsonrpc_1_0"], false);
    }
}

#[test]
fn exactly_the_broken_rules_fail_with_their_evidence() {
    let right = right_server();
    let target = format!("http://{}", server(Mode::Broken(right.addr)));
    let (output, report) = check(&[&target]);
    assert_eq!(output.status.code(), Some(2), "a MUST failed");
    let failed: Vec<(&str, &str)> = BROKEN.iter().map(|c| (*c, "fail")).collect();
    assert_eq!(verdicts(&report), all_but("pass", &failed, &report));
    let case = |name: &str| {
        report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["case"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(case("unknown_method")["reason"], "error -32600, not -32601");
    assert_eq!(case("empty_batch")["sent"], "[]");
    assert_eq!(case("empty_batch")["received"], "HTTP 200: []");
    assert_eq!(case("notification")["reason"], "an answer came, where none may");

    // Listed: two failures now expected, and one that passes is stale.
    let dir = temp_dir("check-expected");
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("expected.txt");
    std::fs::write(&list, "# known\nnotification\nempty_batch\nparams_by_name\n").unwrap();
    let (output, report) = check(&[&target, "--expected-failures", list.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let expected = [
        ("notification", "expected_failure"),
        ("empty_batch", "expected_failure"),
        ("unknown_method", "fail"),
        ("params_by_name", "stale"),
    ];
    assert_eq!(verdicts(&report), all_but("pass", &expected, &report));

    std::fs::write(&list, BROKEN.join("\n")).unwrap();
    let (output, report) = check(&[&target, "--expected-failures", list.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert_eq!(report["passed"], true);

    std::fs::write(&list, "notifications\n").unwrap();
    let typo = volley()
        .args(["check", &target, "--expected-failures", list.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(typo.status.code(), Some(1));
    assert!(text(&typo.stderr).contains("expected.txt:1: `notifications` is not a case"));
}

#[test]
fn a_1_0_server_is_recognised_and_said_so() {
    let target = format!("http://{}", server(Mode::Version1));
    let (output, report) = check(&[&target]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(report["jsonrpc_1_0"], true);
    let table = volley().args(["check", &target]).output().unwrap();
    assert!(text(&table.stdout).contains("The server answers as JSON-RPC 1.0"));
    assert!(text(&table.stdout).contains("why:      no `jsonrpc` member (a JSON-RPC 1.0 answer?)"));
}

#[test]
fn an_unreachable_target_is_an_error_not_a_table_of_failures() {
    let out = volley().args(["check", "http://127.0.0.1:1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot connect to http://127.0.0.1:1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_methods_list_gives_a_support_matrix_across_targets() {
    let right = right_server();
    let broken = format!("http://{}", server(Mode::Broken(right.addr)));
    let direct = format!("http://{}", right.addr);
    let dir = temp_dir("check-methods");
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("methods.txt");
    std::fs::write(
        &list,
        "# what we need\neth_chainId\nvolley.check/no-such-method\nadd\n",
    )
    .unwrap();
    let out = volley()
        .args([
            "check",
            &direct,
            &broken,
            "--json",
            "--methods",
            list.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "the broken target fails its MUSTs");
    let document: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(document["passed"], false);
    assert_eq!(document["targets"][0]["passed"], true);
    assert_eq!(document["targets"][1]["passed"], false);
    let support = &document["support"];
    assert_eq!(
        support["methods"],
        json!(["eth_chainId", "volley.check/no-such-method", "add"])
    );
    assert_eq!(support["targets"][0][0], direct.as_str());
    assert_eq!(
        support["targets"][0][1],
        json!([{"support": "answered"}, {"support": "not_found"}, {"support": "error", "detail": -32602}])
    );
    // The broken one calls an unknown method an invalid request.
    assert_eq!(
        support["targets"][1][1][1],
        json!({"support": "error", "detail": -32600})
    );
    let table = volley()
        .args(["check", &direct, "--methods", list.to_str().unwrap()])
        .output()
        .unwrap();
    let shown = text(&table.stdout);
    assert!(
        shown.contains("volley.check/no-such-method  no (-32601)"),
        "{shown}"
    );
}
