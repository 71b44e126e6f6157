//! What a new user met first: a target that never answers, a closed pipe,
//! a mistyped port, two runs at once, a replay that stops, a server that
//! stalls, `--http2` against a server of HTTP/1.1 alone (flags against a
//! file: flag_rules.rs; refusals: refusals.rs).

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::bin::{summary_json, temp_dir, text, volley, wait_or_kill};
use serde_json::Value;
use volley::scenario::Scenario;

/// A listener that accepts and never says a word; each accept is reported.
/// With `handshakes`, the first connections get a WebSocket handshake and
/// then silence.
fn silent_server(handshakes: usize) -> (SocketAddr, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted, accepts) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            if n < handshakes {
                if let Ok(socket) = volley_tungstenite_accept(stream.try_clone().unwrap()) {
                    std::mem::forget(socket);
                }
            }
            held.push(stream);
            let _ = accepted.send(());
        }
    });
    (addr, accepts)
}

fn volley_tungstenite_accept(
    stream: TcpStream,
) -> Result<tokio_tungstenite::tungstenite::WebSocket<TcpStream>, String> {
    tokio_tungstenite::tungstenite::accept(stream).map_err(|e| e.to_string())
}

#[test]
fn a_websocket_target_that_never_completes_its_handshake_fails_within_the_timeout() {
    let (addr, _accepts) = silent_server(0);
    let out = temp_dir("silent-ws");
    for scheme in ["ws", "wss"] {
        let child = volley()
            .args([
                "run",
                "--target",
                &format!("{scheme}://{addr}"),
                "--method",
                "eth_chainId",
            ])
            .args(["-d", "2s", "--timeout", "300ms", "--no-tui", "--out"])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let output = wait_or_kill(child, Duration::from_secs(30));
        assert_eq!(
            output.status.code(),
            Some(1),
            "{scheme}: {}",
            text(&output.stderr)
        );
        let stderr = text(&output.stderr);
        assert!(stderr.contains("not ready within 300ms"), "{scheme}: {stderr}");
        assert!(!out.exists(), "a run that never began leaves no directory");
    }
}

#[test]
fn ctrl_c_before_the_run_begins_stops_volley() {
    let (addr, accepts) = silent_server(0);
    let child = volley()
        .args([
            "run",
            "--target",
            &format!("ws://{addr}"),
            "--method",
            "eth_chainId",
        ])
        .args(["-d", "2s", "--no-tui"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Accepted: volley is waiting for a handshake that will never come.
    accepts
        .recv_timeout(Duration::from_secs(30))
        .expect("volley connects");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = wait_or_kill(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("stopped before the run began"));
}

#[test]
fn ctrl_c_in_the_warmup_says_nothing_was_measured_and_blames_no_server() {
    use std::io::BufRead;
    let out = temp_dir("warmup-stop");
    let mut child = volley()
        .args([
            "run",
            "scenarios/demo.toml",
            "-d",
            "5s",
            "--warmup",
            "30s",
            "--no-tui",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The warmup's line: it is under way.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.starts_with("[warmup] 30s") {
        line.clear();
    }
    assert!(line.starts_with("[warmup] 30s"), "the warmup says so");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = wait_or_kill(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(130));
    let json = summary_json(&out);
    let warnings = json["summary"]["warnings"].to_string();
    assert!(
        warnings.contains(r#""code":"stopped_in_warmup""#)
            && warnings.contains("stopped before the measured part began"),
        "{warnings}"
    );
    assert!(!warnings.contains("the server answered no call"), "{warnings}");
    assert_eq!(json["summary"]["verdict"]["valid"], false);
    // The calls the stop cut were the warmup's: no figure, no failure.
    let table = text(&output.stdout);
    assert!(!table.contains("no call succeeded"), "{table}");
}

#[test]
fn a_websocket_server_that_stalls_after_the_first_handshake_is_counted_not_silent() {
    let (addr, _accepts) = silent_server(1);
    let out = temp_dir("stall-ws");
    let child = volley()
        .args([
            "run",
            "--target",
            &format!("ws://{addr}"),
            "--method",
            "eth_chainId",
        ])
        .args([
            "-d",
            "1s",
            "--timeout",
            "200ms",
            "-c",
            "1",
            "--no-tui",
            "-q",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(30));
    // Every call failed to connect: the run says so and fails.
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("FAILED: no call succeeded"));
    let total = &summary_json(&out)["summary"]["total"];
    let connect = total["outcomes"]["connect"].as_u64().unwrap_or(0);
    assert!(connect >= 1, "the stalled openings are counted: {total}");
    assert_eq!(total["calls"].as_u64(), Some(connect), "{total}");
}

/// A stdout whose reader has gone, as after `| head -c 100` or `| true`.
fn closed_stdout() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

#[test]
fn a_closed_stdout_loses_nothing() {
    let out = temp_dir("closed-stdout");
    let output = volley()
        .args(["run", "scenarios/demo.toml", "-n", "50", "--no-tui", "--out"])
        .arg(&out)
        .stdout(closed_stdout())
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(summary_json(&out)["summary"]["requests"], 50);
    let output = volley()
        .args([
            "validate",
            "scenarios/demo.toml",
            "scenarios/replay.toml",
            "scenarios/ethereum-read.toml",
        ])
        .stdout(closed_stdout())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(!text(&output.stderr).contains("panicked"));
}

#[test]
fn a_closed_stderr_loses_nothing() {
    // `2>&1 | head -c 100`: the progress lines (one a second without a
    // terminal), the warnings and the errors all meet a closed pipe.
    let out = temp_dir("closed-stderr");
    let output = volley()
        .args(["run", "scenarios/demo.toml", "-d", "1500ms", "--no-tui", "--out"])
        .arg(&out)
        .stdout(closed_stdout())
        .stderr(closed_stdout())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "a panic exits 101");
    let total = &summary_json(&out)["summary"]["total"];
    assert!(total["calls"].as_u64().unwrap() > 0, "{total}");
    let output = volley()
        .args(["run", "--target", "http://127.0.0.1:99999", "--method", "m"])
        .stderr(closed_stdout())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "an error is still exit 1");
}

#[test]
fn a_port_that_is_no_port_is_refused_not_replaced() {
    for url in [
        "http://127.0.0.1:99999",
        "http://127.0.0.1:21545x",
        "https://127.0.0.1:99999",
        "ws://127.0.0.1:70000",
        "tcp://127.0.0.1:8x",
        "http://127.0.0.1:+35121",
    ] {
        let output = volley()
            .args(["run", "--target", url, "--method", "m", "-n", "1", "--no-tui"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{url}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains("is not a number from 1 to 65535"),
            "{url}: {stderr}"
        );
    }
}

#[test]
fn a_replay_that_stops_ends_the_run_at_the_end_of_its_file() {
    let dir = temp_dir("replay-stop");
    std::fs::create_dir_all(&dir).unwrap();
    let lines: String = (1..=6)
        .map(|i| format!("{{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[{i}],\"id\":{i}}}\n"))
        .collect();
    std::fs::write(dir.join("six.jsonl"), lines).unwrap();
    for load in ["concurrency = 2", "rate = 100"] {
        let text = format!(
            "target = \"builtin\"\n[replay]\nfile = \"six.jsonl\"\non_end = \"stop\"\n[load]\n{load}\nduration = \"10s\"\n"
        );
        let path = dir.join("stop.toml");
        std::fs::write(&path, text).unwrap();
        let scenario = Scenario::load(&path).unwrap();
        assert_eq!(scenario.compile().plan.requests, Some(6), "{load}");
        let report = common::run(&scenario);
        assert_eq!(report.summary.requests, 6, "{load}");
        assert_eq!(report.summary.total.calls, 6, "{load}");
        // Before, the open model owed 494 requests after the file ended; a
        // call or two late on a busy machine is no part of this.
        if let Some(schedule) = &report.summary.schedule {
            assert_eq!(schedule.unsent, 0, "{load}: nothing is owed after the file ends");
        }
    }
    // Used up in the warmup: a report of zeros says why.
    let out = temp_dir("replay-stop-warmup");
    let file = dir.join("stop.toml");
    let output = common::bin::run_guarded(
        &["run", file.to_str().unwrap(), "--warmup", "1s", "--no-tui"],
        &out,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json = summary_json(&out);
    assert_eq!(json["summary"]["total"]["calls"], 0);
    let warnings = json["summary"]["warnings"].to_string();
    assert!(warnings.contains(r#""code":"nothing_measured""#), "{warnings}");
    assert!(warnings.contains("nothing was measured"), "{warnings}");
    assert_eq!(json["summary"]["verdict"]["valid"], false);
}

#[test]
fn a_server_that_stops_answering_is_reported_as_such() {
    let (addr, _accepts) = silent_server(0);
    for (model, expect) in [
        ("-c", "the server answered no call"),
        ("--rate", "the server did not keep up with the offered rate"),
    ] {
        let out = temp_dir(&format!("stalled{model}"));
        let amount = if model == "-c" { "4" } else { "200" };
        let child = volley()
            .args([
                "run",
                "--target",
                &format!("http://{addr}"),
                "--method",
                "eth_chainId",
            ])
            .args([
                "-d",
                "1s",
                "--grace",
                "500ms",
                model,
                amount,
                "--connections",
                "4",
                "--no-tui",
                "-q",
                "--out",
            ])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let output = wait_or_kill(child, Duration::from_secs(30));
        // No call answered is no call succeeded: the run fails (exit 2).
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
        let table = text(&output.stdout);
        // The calls waiting at the end had the grace, then counted as
        // timeouts: none is left out of the figures.
        assert!(
            table.contains("FAILED: no call succeeded: 4 of 4 calls ended in timeout"),
            "{table}"
        );
        assert!(!table.contains("not counted"), "{table}");
        let json = summary_json(&out);
        assert_eq!(json["summary"]["in_flight_at_end"], 0, "{model}");
        assert_eq!(json["summary"]["total"]["outcomes"]["timeout"], 4, "{model}");
        let warnings = json["summary"]["warnings"].to_string();
        assert!(warnings.contains(expect), "{model}: {warnings}");
        assert!(!warnings.contains("volley sent late"), "{model}: {warnings}");
        let verdict = &json["summary"]["verdict"];
        assert_eq!(
            verdict["valid"], false,
            "{model}: no answer is no valid run: {verdict}"
        );
    }
}

/// An HTTP/1.1 server that answers the first `answers` calls on each
/// connection, then reads on and never answers again.
fn server_that_stops_after(answers: usize) -> SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                for n in 0.. {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if n >= answers {
                        continue;
                    }
                    let call: Value = serde_json::from_slice(&body).unwrap();
                    let answer = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"0x1"}}"#, call["id"]);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        answer.len()
                    );
                    let _ = writer.write_all(format!("{head}{answer}").as_bytes());
                }
            });
        }
    });
    addr
}

#[test]
fn a_server_that_stops_answering_mid_run_is_told_from_a_healthy_end() {
    let stopping = server_that_stops_after(20);
    let out = temp_dir("stops-mid-run");
    let output = common::bin::run_guarded(
        &[
            "run",
            "--target",
            &format!("http://{stopping}"),
            "--method",
            "eth_chainId",
            "-c",
            "1",
            "-d",
            "2s",
            "--grace",
            "1s",
            "--no-tui",
        ],
        &out,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json = summary_json(&out);
    // The 21st call, never answered, timed out when the grace ran out.
    assert_eq!(json["summary"]["total"]["calls"], 21);
    assert_eq!(json["summary"]["total"]["outcomes"]["timeout"], 1);
    let warnings = json["summary"]["warnings"].to_string();
    assert!(warnings.contains(r#""code":"stopped_answering""#), "{warnings}");
    assert!(
        warnings.contains("20 calls answered, then none for the last")
            && warnings.contains("or more: the server stopped answering"),
        "{warnings}"
    );
    // Figures that hide a stalled server are no figures to pass CI on.
    let verdict = &json["summary"]["verdict"];
    assert_eq!(verdict["valid"], false, "{verdict}");
    assert!(
        verdict["reasons"]
            .to_string()
            .contains("the server stopped answering"),
        "{verdict}"
    );
    // A slow but healthy server has calls in flight at the end of every
    // run: answered in the grace, counted, no cause for a warning.
    // Each call waits 1 s and the run lasts 1.5 s: the second call of each
    // caller is half way through when the schedule ends (a latency that
    // divides the duration left that to the scheduler's luck on a busy CI
    // machine).
    let (mut server, addr) = common::bin::serve(&["--latency", "1s"]);
    let out = temp_dir("healthy-end");
    let output = common::bin::run_guarded(
        &[
            "run",
            "--target",
            &addr,
            "--method",
            "eth_chainId",
            "-c",
            "4",
            "-d",
            "1500ms",
            "--no-tui",
        ],
        &out,
    );
    server.kill().unwrap();
    let _ = server.wait();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json = summary_json(&out);
    assert_eq!(json["summary"]["in_flight_at_end"], 0);
    assert_eq!(
        json["summary"]["total"]["calls"], 8,
        "two a caller: the second in the grace"
    );
    assert_eq!(json["summary"]["total"]["ok"], 8);
    let warnings = json["summary"]["warnings"].to_string();
    assert!(!warnings.contains("stopped answering"), "{warnings}");
    assert_eq!(json["summary"]["verdict"]["valid"], true);
}

#[test]
fn two_runs_given_one_directory_never_share_it() {
    let out = temp_dir("two-runs");
    let start = || {
        volley()
            .args([
                "run",
                "scenarios/demo.toml",
                "-n",
                "20",
                "--no-tui",
                "-q",
                "--out",
            ])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (start(), start());
    let codes: Vec<Option<i32>> = [first, second]
        .into_iter()
        .map(|child| wait_or_kill(child, Duration::from_secs(60)).status.code())
        .collect();
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [Some(0), Some(1)],
        "one run has the directory, the other is refused"
    );
    assert_eq!(summary_json(&out)["summary"]["requests"], 20);
}

/// When neither the directory asked for nor the temporary one can be
/// written, stdout holds the results as one JSON document and nothing else.
#[test]
fn the_last_resort_is_json_alone_on_stdout() {
    let dir = temp_dir("last-resort");
    std::fs::create_dir_all(&dir).unwrap();
    let no_tmp = dir.join("not-a-dir");
    std::fs::write(&no_tmp, "a file").unwrap();
    let out = dir.join("results");
    let mut child = volley()
        .env("TMPDIR", &no_tmp)
        .args([
            "run",
            "scenarios/demo.toml",
            "-d",
            "2s",
            "--warmup",
            "0s",
            "--no-tui",
            "-q",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !out.join("summary.json").exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::write(&out, "in the way").unwrap();
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let output = wait_or_kill(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stderr));
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(json["summary"]["requests"].as_u64().unwrap() > 0);
}

#[test]
fn the_closed_model_keeps_exactly_its_concurrency_in_flight() {
    let (addr, _accepts) = silent_server(0);
    let out = temp_dir("exact-concurrency");
    // 10 calls over 4 multiplexed connections: 3, 3, 3 and 1, never 12.
    let child = volley()
        .args([
            "run",
            "--target",
            &format!("tcp://{addr}"),
            "--method",
            "eth_chainId",
        ])
        .args([
            "-d",
            "1s",
            "--grace",
            "200ms",
            "-c",
            "10",
            "--connections",
            "4",
            "--no-tui",
            "-q",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(child, Duration::from_secs(30));
    // The silent server answered no call: the run fails (exit 2).
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let json = summary_json(&out);
    // Each timed out when the grace ran out.
    assert_eq!(json["summary"]["total"]["outcomes"]["timeout"], 10);
    assert_eq!(json["summary"]["in_flight_at_end"], 0);
    assert_eq!(json["meta"]["load"]["concurrency"], 10);
    assert_eq!(json["meta"]["load"]["connections"], 4);
}

/// A server of HTTP/1.1 that meets the h2c preface in silence (ganache
/// does), by closing, or with a `400 Bad Request` (Node's and Python's
/// servers do): named before anything is sent, exit 1, instead of a run
/// of timeouts that asks whether the server answers.
#[test]
fn http2_to_a_server_silent_on_the_preface_is_refused_naming_why() {
    for (close, answer) in [(false, false), (true, false), (true, true)] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                let mut stream = stream;
                let mut preface = [0u8; 24];
                let _ = std::io::Read::read_exact(&mut stream, &mut preface);
                if answer {
                    let bad = b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n";
                    let _ = std::io::Write::write_all(&mut stream, bad);
                }
                if !close {
                    held.push(stream); // read, never answered
                }
            }
        });
        let url = format!("http://{addr}");
        let output = wait_or_kill(
            volley()
                .args(["run", "--target", &url, "--method", "eth_chainId", "-n", "5"])
                .args(["--http2", "--timeout", "1s", "-q", "--no-tui"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            Duration::from_secs(60),
        );
        let said = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{said}");
        let what = match (close, answer) {
            (false, _) => "sent nothing within 1s (the timeout)",
            (true, false) => "closed the connection without a word",
            (true, true) => "answered with HTTP/1.1 (status 400)",
        };
        assert!(
            said.contains(&format!(
                "the server {what} after volley's HTTP/2 preface (h2c, by prior knowledge): it does not speak HTTP/2 in cleartext; without --http2 volley speaks HTTP/1.1"
            )),
            "{said}"
        );
        assert!(text(&output.stdout).is_empty(), "nothing was run");
    }
}
