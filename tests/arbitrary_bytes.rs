//! Whatever bytes a server sends, over HTTP/1.1, TCP or a child's stdio, a
//! real run ends, counts every call in exactly one outcome, and no
//! connection task panics.

mod common;

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use volley::report::RunReport;

/// Calls in each run: two at a time, so one is often in flight when the
/// server's bytes end.
const REQUESTS: u64 = 6;

/// What the server sends: `{ID}` becomes the id of the request it answers,
/// so some answers are well formed and reach the judge's deeper rules.
type Script = Arc<Mutex<Vec<u8>>>;

fn with_id(script: &Script, id: &str) -> Vec<u8> {
    let bytes = script.lock().unwrap().clone();
    let text = String::from_utf8_lossy(&bytes);
    if text.contains("{ID}") {
        text.replace("{ID}", id).into_bytes()
    } else {
        bytes
    }
}

/// The request's id as written (`7`), or `null`.
fn id_of(request: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(request)
        .ok()
        .map_or("null".into(), |v| v["id"].to_string())
}

/// An HTTP/1.1 server that reads one request per connection, sends the
/// script and hangs up.
fn http_server(script: Script) -> String {
    let addr = common::serve_on_a_thread(move |listener| async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let script = script.clone();
            tokio::spawn(async move {
                let mut input = Vec::new();
                let mut chunk = [0u8; 16 * 1024];
                let body = loop {
                    if let Some(end) = input.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&input[..end]).to_ascii_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap_or(0));
                        if input.len() >= end + 4 + length {
                            break input[end + 4..end + 4 + length].to_vec();
                        }
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => input.extend_from_slice(&chunk[..n]),
                    }
                };
                let _ = stream.write_all(&with_id(&script, &id_of(&body))).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("target = \"http://{addr}\"")
}

/// A newline-delimited JSON-RPC server on TCP: one line read per
/// connection, the script sent, then the connection closed.
fn tcp_server(script: Script) -> String {
    let addr = common::serve_on_a_thread(move |listener| async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let script = script.clone();
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                let mut line = Vec::new();
                if stream.read_until(b'\n', &mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                let _ = stream.get_mut().write_all(&with_id(&script, &id_of(&line))).await;
                let _ = stream.get_mut().shutdown().await;
            });
        }
    });
    format!("target = \"tcp://{addr}\"")
}

/// A child that reads one line, writes the script's bytes and exits.
fn stdio_child(script: &Script, file: &std::path::Path) -> String {
    std::fs::write(file, with_id(script, "1")).unwrap();
    format!(
        "command = [\"sh\", \"-c\", \"read -r line; cat '{}'\"]",
        file.display()
    )
}

/// Runs the scenario on a thread; a run that does not end within a minute
/// is a hang (a guard, not a timing assertion: each call's timeout is 3 s).
fn run_guarded(text: String) -> RunReport {
    let (done, report) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(common::run(&common::scenario(&text)));
    });
    report
        .recv_timeout(Duration::from_secs(60))
        .expect("the run ends")
}

fn assert_accounted(report: &RunReport, bytes: &[u8]) {
    let total = &report.summary.total;
    let outcomes: BTreeMap<_, _> = common::outcomes(report);
    let sum: u64 = outcomes.values().sum();
    let shown = String::from_utf8_lossy(bytes);
    assert_eq!(total.calls, REQUESTS, "{outcomes:?} for {shown:?}");
    assert_eq!(
        sum, total.calls,
        "one outcome per call: {outcomes:?} for {shown:?}"
    );
    assert_eq!(total.ok + total.errors, total.calls);
    assert_eq!(report.summary.panicked_connections, 0, "{shown:?}");
}

fn scenario(target: &str) -> String {
    format!(
        "{target}\ntimeout = \"3s\"\n[load]\nconcurrency = 2\nrequests = {REQUESTS}\n[[calls]]\nmethod = \"m\"\n"
    )
}

/// Bytes near a real answer, cut and mutated, with HTTP heads that bend
/// the rules; or plain noise.
fn server_bytes() -> impl Strategy<Value = Vec<u8>> {
    let answer = prop::sample::select(vec![
        r#"{"jsonrpc":"2.0","result":"0x1","id":{ID}}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"m"},"id":{ID}}"#,
        r#"[{"jsonrpc":"2.0","result":1,"id":{ID}}]"#,
        r#"{"jsonrpc":"2.0","result":1,"id":"{ID}"}"#,
        r#"{"jsonrpc":"2.0","method":"x","params":{"subscription":"0x1"}}"#,
        "",
    ]);
    let head = prop::sample::select(vec![
        "",
        "HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 503 Busy\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "HTTP/1.1 200\r\n\r\n",
        "HTTP/1.0 200 OK\r\n\r\n",
    ]);
    let shaped =
        (head, answer, 0usize..120, any::<u8>(), 0usize..4).prop_map(|(head, answer, cut, noise, lines)| {
            let head = head.replace("{LEN}", &answer.len().to_string());
            let mut bytes = format!("{head}{}\n", answer.repeat(lines.max(1))).into_bytes();
            if cut < bytes.len() && noise % 3 == 0 {
                bytes[cut] = noise;
            }
            if noise % 5 == 0 {
                bytes.truncate(cut);
            }
            bytes
        });
    prop_oneof![3 => shaped, 1 => prop::collection::vec(any::<u8>(), 0..400)]
}

fn script() -> Script {
    Arc::new(Mutex::new(Vec::new()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_over_http_end_with_every_call_counted(bytes in server_bytes()) {
        static SERVER: std::sync::OnceLock<(Script, String)> = std::sync::OnceLock::new();
        let (script, target) = SERVER.get_or_init(|| {
            let s = script();
            (s.clone(), http_server(s))
        });
        *script.lock().unwrap() = bytes.clone();
        assert_accounted(&run_guarded(scenario(target)), &bytes);
    }

    #[test]
    fn any_bytes_over_tcp_end_with_every_call_counted(bytes in server_bytes()) {
        static SERVER: std::sync::OnceLock<(Script, String)> = std::sync::OnceLock::new();
        let (script, target) = SERVER.get_or_init(|| {
            let s = script();
            (s.clone(), tcp_server(s))
        });
        *script.lock().unwrap() = bytes.clone();
        assert_accounted(&run_guarded(scenario(target)), &bytes);
    }

    #[test]
    fn any_bytes_over_stdio_end_with_every_call_counted(bytes in server_bytes()) {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let file = dir.join(format!("volley-arbitrary-{}.bytes", std::process::id()));
        let script = script();
        *script.lock().unwrap() = bytes.clone();
        let target = stdio_child(&script, &file);
        assert_accounted(&run_guarded(scenario(&target)), &bytes);
        let _ = std::fs::remove_file(&file);
    }
}
