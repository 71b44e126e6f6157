//! The edges of a run against real servers: calls in flight when the
//! schedule ends are answered in the grace and counted, on every
//! transport, so a kept schedule reads its rate and a threshold sees every
//! call; and the closed model's reconnection backoff is in no latency.
//! Counts are exact; a latency is only ever held to a bound the server's
//! own wait sets (never to how fast this machine is).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use volley::serve::{self, ServeConfig, ServerHandle};

use common::bin::{run_guarded, summary_json, temp_dir, text};

/// An HTTP server answering the `n`th request (from 0, as they come)
/// after `wait(n)`; it counts the requests.
fn waiting_server(wait: fn(u64) -> Duration) -> (SocketAddr, Arc<AtomicU64>) {
    let requests = Arc::new(AtomicU64::new(0));
    let counted = requests.clone();
    let addr = common::serve_on_a_thread(move |listener| async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let counted = counted.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let n = counted.fetch_add(1, Ordering::Relaxed);
                    async move {
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        let call: Value = serde_json::from_slice(&body).unwrap();
                        tokio::time::sleep(wait(n)).await;
                        let answer = serde_json::json!({"jsonrpc": "2.0", "id": call["id"], "result": "0x1"});
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(
                            answer.to_string(),
                        ))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, requests)
}

/// From the 20th request on, every other one waits 2 s.
fn slow_from_the_20th(n: u64) -> Duration {
    match n >= 20 && n.is_multiple_of(2) {
        true => Duration::from_secs(2),
        false => Duration::ZERO,
    }
}

/// The run, in 2 s rather than 5: the 10 calls still waiting at
/// the end are counted with their 2 s, so `p99 < 100ms` fails (exit 2),
/// and the kept schedule reads 20/s.
#[test]
fn slow_calls_at_the_end_count_and_fail_a_threshold() {
    let (addr, requests) = waiting_server(slow_from_the_20th);
    let out = temp_dir("grace-threshold");
    let url = format!("http://{addr}");
    let args = [
        "run", "--target", &url, "--method", "m", "--rate", "20", "-d", "2s",
    ];
    let more = ["--connections", "40", "--threshold", "p99 < 100ms", "--no-tui"];
    let output = run_guarded(&[&args[..], &more[..]].concat(), &out);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}{}", text(&output.stderr));
    assert_eq!(requests.load(Ordering::Relaxed), 40);
    let json = summary_json(&out);
    let (summary, total) = (&json["summary"], &json["summary"]["total"]);
    assert_eq!((&total["calls"], &total["ok"]), (&40.into(), &40.into()));
    assert_eq!(summary["in_flight_at_end"], 0);
    assert_eq!(summary["measured_seconds"], 2.0);
    assert_eq!(total["calls_per_s"], 20.0);
    assert!(total["latency"]["p99_ms"].as_f64().unwrap() >= 2000.0, "{total}");
    assert_eq!(json["thresholds"][0]["passed"], false);
    let row = stdout
        .lines()
        .find(|l| l.starts_with("TOTAL"))
        .expect("a TOTAL row");
    assert!(row.split_whitespace().nth(4) == Some("20.0"), "{row}");
}

/// The built-in server answering each call in 1.5 s, on every listener.
fn slow_server() -> ServerHandle {
    let unix = std::env::temp_dir().join(format!("volley-test-{}-grace.sock", std::process::id()));
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        latency: "1500ms".parse().unwrap(),
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        unix: Some(unix),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap()
}

/// 4 calls due in the first second, each answered 1.5 s later: all in
/// flight when the schedule ends, all answered in the grace.
fn four_in_flight_at_the_end(target: &str) {
    let scenario = common::scenario(&format!(
        "{target}\ntimeout = \"10s\"\n[load]\nrate = 4\nduration = \"1s\"\n[[calls]]\nmethod = \"eth_chainId\"\n"
    ));
    let report = common::run(&scenario);
    let summary = &report.summary;
    assert_eq!((summary.total.calls, summary.total.ok), (4, 4), "{target}");
    assert_eq!(summary.in_flight_at_end, 0, "{target}");
    assert_eq!(summary.measured_seconds, 1.0, "{target}");
    assert_eq!(summary.total.rps, 4.0, "{target}");
    assert!(
        summary.total.latency.p50_ms >= 1500.0,
        "{target}: {:?}",
        summary.total.latency
    );
}

#[test]
fn calls_in_flight_at_the_end_are_counted_on_every_transport() {
    let server = slow_server();
    let unix = server.unix_path.as_ref().unwrap().display().to_string();
    let targets = [
        format!("target = \"{}\"", server.url()),
        format!("target = \"{}\"\nhttp2 = true", server.url()),
        format!("target = \"{}\"", server.ws_url().unwrap()),
        format!("target = \"tcp://{}\"", server.tcp_addr.unwrap()),
        format!("target = \"unix://{unix}\""),
        format!(
            "command = [\"{}\", \"serve\", \"--stdio\", \"--latency\", \"1500ms\", \"--threads\", \"1\"]",
            env!("CARGO_BIN_EXE_volley")
        ),
    ];
    std::thread::scope(|scope| {
        for target in &targets {
            scope.spawn(move || four_in_flight_at_the_end(target));
        }
    });
}

/// An HTTP/1.1 server that cuts its first `cut` answers off half way
/// through the body (closing their connection), then answers at once.
fn cutting_server(cut: u64) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answered = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answered = answered.clone();
            std::thread::spawn(move || serve_cutting(stream, &answered, cut));
        }
    });
    addr
}

fn serve_cutting(mut stream: std::net::TcpStream, answered: &AtomicU64, cut: u64) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let call: Value = serde_json::from_slice(&body).unwrap();
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": call["id"], "result": "0x1"}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        let _ = stream.write_all(head.as_bytes());
        if answered.fetch_add(1, Ordering::Relaxed) < cut {
            let _ = stream.write_all(&answer.as_bytes()[..answer.len() / 2]);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
        let _ = stream.write_all(answer.as_bytes());
    }
}

/// `-c 1 -n 7` against a server that cuts its first 6 answers: the 7th
/// call waited 160 ms of volley's backoff before it was claimed, and was
/// answered at once; its latency holds none of that wait, which the
/// connections' figures count (10 + 20 + 40 + 80 + 160 ms).
#[test]
fn the_closed_models_backoff_is_in_no_latency() {
    let addr = cutting_server(6);
    let scenario = common::scenario(&format!(
        "target = \"http://{addr}\"\n[load]\nconcurrency = 1\nrequests = 7\n[[calls]]\nmethod = \"m\"\n"
    ));
    let summary = common::run(&scenario).summary;
    assert_eq!((summary.total.calls, summary.total.ok), (7, 1));
    assert_eq!(summary.total.outcomes.get("io"), Some(&6));
    assert!(
        summary.total.latency.max_ms < 160.0,
        "{:?}",
        summary.total.latency
    );
    assert_eq!(summary.connections.backoff_waits, 5);
    assert!(summary.connections.backoff_s >= 0.31, "{:?}", summary.connections);
}
