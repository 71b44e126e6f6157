//! HTTP/1.1 pipelining (`--pipeline N`, `pipeline = N`): N requests in
//! flight on a connection, answered in order; exact counts against a real
//! server, and refusals (a transport that is not HTTP/1.1, a depth out of
//! bounds, a server that closes after each answer) before anything is
//! measured.

mod common;

use common::bin::{run_guarded, serve, summary_json, temp_dir, text};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn a_pipelined_run_sends_its_requests_exactly_on_connections_n_deep() {
    let (mut server, url) = serve(&[]);
    let out = temp_dir("pipelined");
    let args = [
        "run",
        "--target",
        &url,
        "--method",
        "eth_chainId",
        "-n",
        "3000",
        "-c",
        "64",
    ];
    let output = run_guarded(&[&args[..], &["--pipeline", "16", "--no-tui"]].concat(), &out);
    server.kill().unwrap();
    let table = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{table}{}", text(&output.stderr));
    assert!(
        table.contains(" over http/1.1, pipelined 16 deep · closed model, 4 connections"),
        "{table}"
    );
    let summary = summary_json(&out);
    assert_eq!(summary["meta"]["transport"], "http/1.1, pipelined 16 deep");
    assert_eq!(summary["meta"]["load"]["pipeline"], 16);
    let total = &summary["summary"]["total"];
    assert_eq!(
        (total["calls"].as_u64(), total["ok"].as_u64()),
        (Some(3000), Some(3000)),
        "{total}"
    );
    let connections = &summary["summary"]["connections"];
    assert_eq!(connections["planned"], 4, "64 calls in flight, 16 on each");
    assert_eq!(connections["opened_in_all"], 4, "{connections}");
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn pipelining_what_is_not_http_1_1_or_out_of_bounds_is_refused() {
    let out = temp_dir("pipeline-refused");
    let cases: [(&[&str], &str); 4] = [
        (
            &["--target", "ws://127.0.0.1:1", "--pipeline", "4"],
            "is not an http:// or https:// target",
        ),
        (
            &["--target", "http://127.0.0.1:1", "--http2", "--pipeline", "4"],
            "HTTP/2 carries many calls",
        ),
        (&["--target", "http://127.0.0.1:1", "--pipeline", "0"], "not 0"),
        (
            &["--target", "http://127.0.0.1:1", "--pipeline", "1025"],
            "not 1025",
        ),
    ];
    for (flags, says) in cases {
        let args = [&["run", "--method", "eth_chainId", "-n", "1", "--no-tui"], flags].concat();
        let output = run_guarded(&args, &out);
        let error = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{flags:?}: {error}");
        assert!(
            error.contains("--pipeline") && error.contains(says),
            "{flags:?}: {error}"
        );
        assert!(!out.exists(), "nothing is written");
    }
    let file = temp_dir("pipeline-key").with_extension("toml");
    std::fs::write(
        &file,
        "target = \"http://127.0.0.1:1\"\npipeline = 0\n[[calls]]\nmethod = \"eth_chainId\"\n",
    )
    .unwrap();
    let output = run_guarded(&["run", file.to_str().unwrap(), "-n", "1", "--no-tui"], &out);
    let error = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{error}");
    assert!(
        error.contains(":2:") && error.contains("pipeline") && error.contains("not 0"),
        "{error}"
    );
    let _ = std::fs::remove_file(file);
}

/// A server that answers each request and closes (`Connection: close`)
/// keeps no pipeline: refused before the run, saying so.
#[test]
fn a_server_that_closes_after_each_answer_is_refused_before_the_run() {
    let addr = common::serve_on_a_thread(|listener| async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut request = vec![0u8; 8192];
                if stream.read(&mut request).await.unwrap_or(0) > 0 {
                    let body = r#"{"jsonrpc":"2.0","id":"volley-pipeline-1","result":"0x1"}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            });
        }
    });
    let out = temp_dir("pipeline-closing");
    let url = format!("http://{addr}");
    let args = [
        "run",
        "--target",
        &url,
        "--method",
        "eth_chainId",
        "-n",
        "100",
        "--pipeline",
        "8",
        "--no-tui",
    ];
    let output = run_guarded(&args, &out);
    let error = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{error}");
    assert!(
        error.contains("closed the connection after one answer"),
        "{error}"
    );
    assert!(error.contains("run without --pipeline"), "{error}");
    assert!(!out.join("summary.json").exists(), "nothing was measured");
}
