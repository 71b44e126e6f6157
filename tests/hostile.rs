//! Servers and files that misbehave on purpose: sizes near 2^64, framing
//! that breaks RFC 9112, counts past what a small integer holds. Each is
//! counted call by call (or refused before the run, for a file), the run
//! goes on to its end, and nothing panics.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use volley::report::RunReport;

/// Reads one HTTP/1.1 request (head, then a `Content-Length` body) off
/// `stream` into `input`, removing it; returns its body, or `None` when the
/// client closed.
async fn read_request(stream: &mut tokio::net::TcpStream, input: &mut Vec<u8>) -> Option<Vec<u8>> {
    loop {
        if let Some(head_end) = input.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&input[..head_end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map_or(0, |value| value.trim().parse().unwrap());
            if input.len() >= head_end + 4 + length {
                let request: Vec<u8> = input.drain(..head_end + 4 + length).collect();
                return Some(request[head_end + 4..].to_vec());
            }
        }
        let mut chunk = [0u8; 64 * 1024];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => input.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A raw HTTP/1.1 server on 127.0.0.1:0 that answers every request with
/// the bytes `answer` makes of its body; after one answer per connection it
/// closes the connection when `close_after_one`.
fn raw_http_server(answer: fn(&[u8]) -> Vec<u8>, close_after_one: bool) -> SocketAddr {
    common::serve_on_a_thread(move |listener| async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut input = Vec::new();
                while let Some(body) = read_request(&mut stream, &mut input).await {
                    if close_after_one {
                        // The answer and the close leave as one segment, so
                        // whenever the answer has arrived the close has too:
                        // what volley can see at no cost, it must see.
                        cork(&stream);
                        let _ = stream.write_all(&answer(&body)).await;
                        let _ = stream.shutdown().await;
                        break;
                    }
                    if stream.write_all(&answer(&body)).await.is_err() {
                        break;
                    }
                }
            });
        }
    })
}

/// Holds what is written until the socket is shut down (Linux's
/// `TCP_CORK`), which then sends it with the FIN.
fn cork(stream: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket descriptor and a c_int option of its size.
    let done = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(done, 0, "TCP_CORK: {}", std::io::Error::last_os_error());
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the real binary on `scenario`, killed after a minute (a hang guard,
/// not a timing assertion); returns its output and `summary.json`.
fn run_binary(scenario: &Path, out: &Path) -> (Output, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .arg("run")
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .arg("--quiet")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let summary = std::fs::read(out.join("summary.json"))
        .map(|bytes| serde_json::from_slice(&bytes).unwrap())
        .unwrap_or(Value::Null);
    (output, summary)
}

/// Writes `scenario` into a fresh directory named `name` and runs the
/// binary on it; returns that directory (for the test to remove), the
/// output and `summary.json`.
fn run_scenario(name: &str, scenario: &str) -> (PathBuf, Output, Value) {
    let dir = temp_dir(name);
    let file = dir.join("scenario.toml");
    std::fs::write(&file, scenario).unwrap();
    let (output, summary) = run_binary(&file, &dir.join("out"));
    (dir, output, summary)
}

/// The reason of the first kept example of `outcome`.
fn first_reason(report: &RunReport, outcome: &str) -> String {
    report
        .summary
        .total
        .error_examples
        .get(outcome)
        .and_then(|e| e.first())
        .map_or_else(
            || {
                format!(
                    "no `{outcome}` example in {:?}",
                    report.summary.total.error_examples
                )
            },
            |e| e.reason.clone(),
        )
}

#[test]
fn a_chunk_size_near_2_to_the_64_is_counted_as_io_and_the_run_goes_on() {
    let addr = raw_http_server(
        |_| {
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\nffffffffffffffff\r\nabcd\r\n"
                .to_vec()
        },
        false,
    );
    let (dir, output, summary) = run_scenario(
        "chunk",
        &format!(
            "target = \"http://{addr}\"\ntimeout = \"5s\"\n[load]\nconcurrency = 2\nrequests = 20\n[[calls]]\nmethod = \"eth_chainId\"\n"
        ),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The run goes on to its end; no call succeeded, so it fails (exit 2).
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    let summary = &summary["summary"];
    assert_eq!(summary["panicked_connections"], 0, "{stderr}");
    assert_eq!(summary["total"]["calls"], 20);
    assert_eq!(
        summary["total"]["outcomes"]["io"], 20,
        "{}",
        summary["total"]["outcomes"]
    );
    let reason = &summary["total"]["error_examples"]["io"][0]["reason"];
    assert!(
        reason.as_str().is_some_and(|r| r.contains("larger than")),
        "{reason}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_content_length_near_2_to_the_64_from_a_child_fails_its_calls_as_io_and_the_child_is_replaced() {
    // An LSP server that announces a message of 2^64 - 1 bytes as soon as
    // it starts, then reads its input until volley closes it.
    let child = r"printf 'Content-Length: 18446744073709551615\r\n\r\n'; exec cat >/dev/null";
    let text = format!(
        "command = [\"sh\", \"-c\", {child:?}]\nframing = \"content-length\"\ntimeout = \"2s\"\n[load]\nconcurrency = 2\nrequests = 6\n[[calls]]\nmethod = \"textDocument/hover\"\n"
    );
    let report = common::run(&common::scenario(&text));
    assert_eq!(report.summary.panicked_connections, 0);
    assert_eq!(report.summary.total.calls, 6);
    assert_eq!(
        common::outcomes(&report),
        BTreeMap::from([("io", 6)]),
        "{:?}",
        report.summary.total.error_examples
    );
    assert!(
        first_reason(&report, "io").contains("Content-Length"),
        "{}",
        first_reason(&report, "io")
    );
}

#[test]
fn a_replay_of_more_than_65536_calls_sends_every_call_as_recorded() {
    // Line 1: one batch of 65,536 `echo` calls; line 2: call 65,537, the
    // only `eth_chainId`. A 16-bit call index sent it as call 0, an `echo`.
    let dir = temp_dir("replay");
    let entry = r#"{"jsonrpc":"2.0","method":"echo","params":[1],"id":1}"#;
    let batch = format!("[{}]", vec![entry; 65_536].join(","));
    let last = r#"{"jsonrpc":"2.0","method":"eth_chainId","id":2}"#;
    std::fs::write(dir.join("calls.jsonl"), format!("{batch}\n{last}\n")).unwrap();
    let file = dir.join("replay.toml");
    std::fs::write(
        &file,
        "target = \"builtin\"\ntimeout = \"30s\"\nreplay = { file = \"calls.jsonl\", on_end = \"stop\" }\n[load]\nconcurrency = 1\n",
    )
    .unwrap();
    let scenario = volley::scenario::Scenario::load(&file).unwrap();
    let report = common::run(&scenario);
    let calls: BTreeMap<&str, u64> = report
        .summary
        .methods
        .iter()
        .map(|m| (m.method.as_str(), m.calls))
        .collect();
    assert_eq!(calls, BTreeMap::from([("echo", 65_536), ("eth_chainId", 1)]));
    assert_eq!(common::outcomes(&report), BTreeMap::from([("ok", 65_537)]));
    assert_eq!(report.summary.panicked_connections, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn weights_whose_sum_passes_u32_max_are_refused_naming_the_key() {
    let text = "target = \"builtin\"\n[[calls]]\nmethod = \"a\"\nweight = 4000000000\n[[calls]]\nmethod = \"b\"\nweight = 300000000\n";
    let error = volley::scenario::Scenario::parse(text, "test.toml", "test", &|_| None)
        .expect_err("a weight sum over u32::MAX");
    let message = error.to_string();
    assert!(message.contains("test.toml:7:"), "{message}");
    assert!(message.contains("calls[1].weight"), "{message}");
    // Just under the bound is fine.
    let fits = text.replace("300000000", "294967295");
    assert!(volley::scenario::Scenario::parse(&fits, "test.toml", "test", &|_| None).is_ok());
}

#[test]
fn batch_size_weights_whose_sum_passes_u32_max_are_refused_not_a_panic() {
    for table in [
        "[[calls]]\nmethod = \"a\"\nbatch = { sizes = SIZES }\n",
        "[batch]\nsize = { sizes = SIZES }\n[[calls]]\nmethod = \"a\"\n",
    ] {
        let text = format!(
            "target = \"builtin\"\n{}",
            table.replace("SIZES", "{ 1 = 4294967295, 10 = 2 }")
        );
        let error = volley::scenario::Scenario::parse(&text, "test.toml", "test", &|_| None)
            .expect_err("a sizes' weight sum over u32::MAX");
        let message = error.to_string();
        assert!(
            message.contains("test.toml:") && message.contains("add up to more than 4294967295"),
            "{message}"
        );
        let fits = text
            .replace("10 = 2", "10 = 0")
            .replace("4294967295", "4294967294")
            .replace("10 = 0", "10 = 1");
        assert!(
            volley::scenario::Scenario::parse(&fits, "test.toml", "test", &|_| None).is_ok(),
            "{fits}"
        );
        let too_big = text.replace("4294967295", "4294967296");
        let message = volley::scenario::Scenario::parse(&too_big, "test.toml", "test", &|_| None)
            .expect_err("a weight past u32::MAX")
            .to_string();
        assert!(
            message.contains("weights must be between 1 and 4294967295"),
            "{message}"
        );
    }
}

#[test]
fn a_keep_alive_connection_the_server_closed_is_reopened_before_the_next_call() {
    // A complete answer, no `Connection: close`, then the server hangs up.
    let addr = raw_http_server(
        |request| {
            let request: Value = serde_json::from_slice(request).unwrap();
            let body = format!(r#"{{"jsonrpc":"2.0","result":1,"id":{}}}"#, request["id"]);
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
        },
        true,
    );
    // Back to back, in the closed model: the next call is written the
    // moment the answer is read, and the close that came with it is seen.
    let text = format!(
        "target = \"http://{addr}\"\ntimeout = \"5s\"\n[load]\nconcurrency = 1\nrequests = 50\n[[calls]]\nmethod = \"m\"\n"
    );
    let report = common::run(&common::scenario(&text));
    assert_eq!(report.summary.total.calls, 50);
    assert_eq!(
        common::outcomes(&report),
        BTreeMap::from([("ok", 50)]),
        "{:?}",
        report.summary.total.error_examples
    );
}

#[test]
fn an_overlong_line_on_tcp_fails_its_calls_as_io_and_the_connection_is_reopened() {
    // A server that answers every connection with more than the limit and
    // no newline.
    let addr = common::serve_on_a_thread(|listener| async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let _ = stream.write_all(&[b'x'; 4096]).await;
                let mut sink = [0u8; 4096];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            });
        }
    });
    let text = format!(
        "target = \"tcp://{addr}\"\ntimeout = \"5s\"\n[load]\nconcurrency = 1\nrequests = 5\n[[calls]]\nmethod = \"m\"\n"
    );
    let mut scenario = common::scenario(&text);
    scenario.max_response_bytes = 1024;
    let report = common::run(&scenario);
    assert_eq!(report.summary.panicked_connections, 0);
    assert_eq!(common::outcomes(&report), BTreeMap::from([("io", 5)]));
    assert!(
        first_reason(&report, "io").contains("1024"),
        "{}",
        first_reason(&report, "io")
    );
}

#[test]
fn a_websocket_frame_claiming_2_to_the_63_bytes_fails_its_call_as_io_and_the_socket_is_reopened() {
    // After the handshake, every request gets the head of a text frame
    // whose 64-bit length is 2^63 - 1, and nothing more.
    let addr = common::serve_on_a_thread(|listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                use futures_util::StreamExt;
                let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(message)) = socket.next().await {
                    if message.is_text() {
                        let head = [0x81, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
                        let _ = socket.get_mut().write_all(&head).await;
                    }
                }
            });
        }
    });
    let text = format!(
        "target = \"ws://{addr}\"\ntimeout = \"5s\"\n[load]\nconcurrency = 1\nrequests = 5\n[[calls]]\nmethod = \"m\"\n"
    );
    let report = common::run(&common::scenario(&text));
    assert_eq!(report.summary.panicked_connections, 0);
    assert_eq!(common::outcomes(&report), BTreeMap::from([("io", 5)]));
    let reason = first_reason(&report, "io");
    assert!(reason.contains("WebSocket failed"), "{reason}");
}

#[test]
fn calls_that_failed_on_the_wire_get_no_advice_about_calls_left_waiting() {
    // Every answer's framing is invalid: each call fails as `io` at once,
    // none is left waiting, so the timeout has nothing to do with it.
    let addr = raw_http_server(
        |_| b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n".to_vec(),
        false,
    );
    let (dir, output, summary) = run_scenario(
        "wire-failures",
        &format!("target = \"http://{addr}\"\ntimeout = \"60s\"\n[load]\nconcurrency = 1\nrequests = 6\n[[calls]]\nmethod = \"m\"\n"),
    );
    // No call succeeded: the run fails (exit 2), and says why.
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(summary["summary"]["total"]["outcomes"]["io"], 6, "{summary}");
    assert_eq!(summary["summary"]["in_flight_at_end"], 0);
    let warnings = summary["summary"]["warnings"].to_string();
    assert!(warnings.contains(r#""code":"no_answer""#), "{warnings}");
    assert!(warnings.contains("the server answered no call"), "{warnings}");
    assert!(!warnings.contains("still waiting"), "{warnings}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bytes_that_are_not_utf8_make_an_answer_invalid_json_wherever_they_lie() {
    fn answer(request: &[u8]) -> Vec<u8> {
        let id = serde_json::from_slice::<Value>(request).unwrap()["id"].to_string();
        // Every other call: the bad byte inside the result, or in a member
        // the judge skips (which serde_json alone let through as ok).
        let body = if id.ends_with(['0', '2', '4', '6', '8']) {
            [
                br#"{"jsonrpc":"2.0","result":"0x"#.as_slice(),
                b"\xff\"",
                br#","id":"#,
                id.as_bytes(),
                b"}",
            ]
            .concat()
        } else {
            [
                br#"{"jsonrpc":"2.0","result":"0x1","id":"#.as_slice(),
                id.as_bytes(),
                br#","x":""#,
                b"\xfe\"}",
            ]
            .concat()
        };
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        [head.as_bytes(), &body].concat()
    }
    let addr = raw_http_server(answer, false);
    let (dir, output, summary) = run_scenario(
        "utf8",
        &format!("target = \"http://{addr}\"\n[load]\nconcurrency = 1\nrequests = 20\n[[calls]]\nmethod = \"eth_chainId\"\n"),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let outcomes = &summary["summary"]["total"]["outcomes"];
    assert_eq!(outcomes["invalid_json"], 20, "{outcomes} {stderr}");
    assert_eq!(outcomes["ok"], 0, "{outcomes}");
    std::fs::remove_dir_all(&dir).unwrap();
}
