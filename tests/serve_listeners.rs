//! `volley serve`'s listeners: a failure names the flag, address and
//! reason; the Unix socket's path is replaced only when it holds a stale
//! socket and is removed when the server stops; a hold on a stream listener
//! is counted as an HTTP one is; and the shipped MCP and LSP scenarios run
//! without an error against the built-in stand-ins.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use volley::report::RunReport;
use volley::serve::{self, ServeConfig, ServerHandle, ServerStats};

/// A fresh directory of this test's own, so parallel tests never meet.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-listeners-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config() -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    }
}

fn on_unix(path: &Path) -> std::io::Result<ServerHandle> {
    serve::spawn(ServeConfig {
        unix: Some(path.to_path_buf()),
        ..config()
    })
}

/// The error `spawn` gave, as text; panics if it started.
fn refusal(started: std::io::Result<ServerHandle>) -> String {
    match started {
        Ok(_) => panic!("the server started where it must not"),
        Err(error) => error.to_string(),
    }
}

/// Sends one call over the Unix socket and reads its answer line.
fn call_over(path: &Path) -> String {
    let mut stream = std::os::unix::net::UnixStream::connect(path).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"eth_chainId\",\"id\":1}\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

#[test]
fn whatever_is_at_the_unix_path_but_a_stale_socket_is_left_alone() {
    let dir = temp_dir("not-a-socket");
    let file = dir.join("data.txt");
    std::fs::write(&file, "precious data\n").unwrap();
    let error = refusal(on_unix(&file));
    let named = format!("--unix {}", file.display());
    assert!(
        error.contains(&named) && error.contains("regular file"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious data\n");

    let error = refusal(on_unix(&dir));
    assert!(error.contains(&format!("--unix {}", dir.display())), "{error}");
    assert!(error.contains("directory") && dir.is_dir(), "{error}");

    let nowhere = dir.join("no-such-dir").join("sock");
    let error = refusal(on_unix(&nowhere));
    assert!(
        error.contains(&format!("--unix {}", nowhere.display())),
        "{error}"
    );
    assert!(error.contains("does not exist"), "{error}");
}

#[test]
fn a_live_socket_is_refused_a_stale_one_replaced_and_each_removed_at_stop() {
    let dir = temp_dir("sockets");
    let path = dir.join("volley.ipc");
    let first = on_unix(&path).unwrap();
    let error = refusal(on_unix(&path));
    assert!(error.contains(&format!("--unix {}", path.display())), "{error}");
    assert!(error.contains("already listening"), "{error}");
    // The first server kept its socket.
    assert!(call_over(&path).contains("\"result\":\"0x539\""));
    first.stop();
    assert!(!path.exists(), "the socket file outlived its server");

    // A socket file nobody listens on, as a killed server leaves it.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let second = on_unix(&path).unwrap();
    assert!(call_over(&path).contains("\"result\":\"0x539\""));
    drop(second);
    assert!(!path.exists(), "dropping the handle removes the socket file too");
}

fn volley() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_volley"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// Waits for the child to exit (killing it past `limit`, a guard against a
/// hang, not a measurement); returns its exit code and stdout's rest.
fn wait_for(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("the server did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut rest = String::new();
    child.stdout.take().unwrap().read_to_string(&mut rest).unwrap();
    (child.wait().unwrap().code(), rest)
}

/// Waits until process `pid` catches SIGINT and SIGTERM: `volley serve`
/// prints its listeners before it sets its handlers, and a signal sent in
/// between would end it the default way, with nothing cleaned up. Linux
/// says which signals a process catches in /proc; elsewhere this returns.
fn wait_until_signals_are_caught(pid: u32) {
    let status = format!("/proc/{pid}/status");
    if !Path::new("/proc/self/status").exists() {
        return;
    }
    let caught = || -> Option<bool> {
        let text = std::fs::read_to_string(&status).ok()?;
        let mask = text.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
        let mask = u64::from_str_radix(mask.trim(), 16).ok()?;
        // Bit n-1 stands for signal n: SIGINT is 2, SIGTERM 15.
        Some(mask & (1 << 1) != 0 && mask & (1 << 14) != 0)
    };
    let start = Instant::now();
    while caught() != Some(true) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no signal handlers in {pid}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_socket_file_goes_when_the_binary_is_stopped_by_a_signal() {
    let dir = temp_dir("signals");
    for signal in ["-TERM", "-INT"] {
        let path = dir.join(format!("volley{signal}.ipc"));
        let mut child = volley()
            .args(["serve", "--listen", "127.0.0.1:0", "--threads", "1", "--unix"])
            .arg(&path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        // The Unix line is printed once every listener is bound.
        let mut line = String::new();
        while !line.contains("unix://") {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "no unix:// line");
        }
        assert!(call_over(&path).contains("0x539"));
        wait_until_signals_are_caught(child.id());
        let killed = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        child.stdout = Some(stdout.into_inner());
        let (code, rest) = wait_for(child, Duration::from_secs(30));
        assert_eq!(code, Some(0), "{signal}: {rest}");
        assert!(rest.contains("served 1 requests"), "{signal}: {rest}");
        assert!(!path.exists(), "{signal}: the socket file outlived the server");
    }
}

#[test]
fn a_listener_that_cannot_listen_is_named_by_its_flag_and_address() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let free: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let cases = [
        (
            "--listen",
            ServeConfig {
                listen: addr,
                ..config()
            },
        ),
        (
            "--tcp",
            ServeConfig {
                tcp: Some(addr),
                ..config()
            },
        ),
        (
            "--ws",
            ServeConfig {
                tcp: Some(free),
                ws: Some(addr),
                ..config()
            },
        ),
    ];
    for (flag, config) in cases {
        let error = refusal(serve::spawn(config));
        assert!(
            error.contains(&format!("{flag} {addr}: cannot listen:")),
            "{flag}: {error}"
        );
    }
    // The binary says the same, with the main listener free.
    let output = volley()
        .args(["serve", "--listen", "127.0.0.1:0", "--tcp", &addr.to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--tcp {addr}: cannot listen:")),
        "{stderr}"
    );
}

/// A shipped scenario's text, its duration turned into `requests` so a run
/// has an exact size, without warmup, and `lines` replaced by their
/// stand-ins.
fn shipped(file: &str, requests: u64, lines: &[(&str, String)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(file);
    let mut text = std::fs::read_to_string(path).unwrap();
    let mut replace = |prefix: &str, with: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{file} has no line starting {prefix:?}"))
            .to_string();
        text = text.replace(&line, with);
    };
    replace("duration = ", &format!("requests = {requests}"));
    if file == "lsp-stdio.toml" {
        replace("warmup = ", "");
    }
    for (prefix, with) in lines {
        replace(prefix, with);
    }
    text
}

/// Every call of the run answered well: none lost, none an error.
fn assert_clean(report: &RunReport, requests: u64, connections: u64, methods: &[&str]) {
    let summary = &report.summary;
    assert_eq!(summary.requests, requests);
    assert_eq!(summary.total.calls, requests);
    assert_eq!(
        (summary.total.ok, summary.total.errors),
        (requests, 0),
        "{:?} {:?}",
        summary.total.outcomes,
        summary.total.rpc_error_codes
    );
    let setup = summary.setup.as_ref().unwrap();
    assert_eq!((setup.connections_ok, setup.connections_failed), (connections, 0));
    let mut seen: Vec<&str> = summary.methods.iter().map(|m| m.method.as_str()).collect();
    seen.sort_unstable();
    let mut expected = methods.to_vec();
    expected.sort_unstable();
    assert_eq!(seen, expected);
    assert_eq!(summary.methods.iter().map(|m| m.calls).sum::<u64>(), requests);
}

fn stdio_command(framing: &[&str]) -> String {
    let mut words = vec![env!("CARGO_BIN_EXE_volley"), "serve", "--stdio", "--threads", "1"];
    words.extend(framing);
    format!("command = {words:?}")
}

#[test]
fn the_mcp_stdio_scenario_runs_clean_against_serve_stdio() {
    let text = shipped("mcp-stdio.toml", 400, &[("command = ", stdio_command(&[]))]);
    let report = common::run(&common::scenario(&text));
    assert_clean(&report, 400, 4, &["ping", "tools/call", "tools/list"]);
    let ends = report.summary.child_shutdown.as_ref().unwrap();
    assert_eq!((ends.clean, ends.failed, ends.killed), (4, 0, 0));
}

#[test]
fn the_lsp_stdio_scenario_runs_clean_against_serve_stdio() {
    let command = stdio_command(&["--framing", "content-length"]);
    let text = shipped("lsp-stdio.toml", 300, &[("command = ", command)]);
    let report = common::run(&common::scenario(&text));
    let methods = [
        "textDocument/completion",
        "textDocument/documentSymbol",
        "textDocument/hover",
    ];
    assert_clean(&report, 300, 2, &methods);
    // `shutdown` answered and `exit` sent: each child exits 0.
    let ends = report.summary.child_shutdown.as_ref().unwrap();
    assert_eq!((ends.clean, ends.failed, ends.killed), (2, 0, 0));
}

#[test]
fn the_mcp_http_scenario_runs_clean_against_serve_mcp() {
    let server = serve::spawn(ServeConfig {
        mcp: true,
        ..config()
    })
    .unwrap();
    let target = format!("target = \"{}/mcp\"", server.url());
    let text = shipped("mcp-http.toml", 400, &[("target = ", target)]);
    let report = common::run(&common::scenario(&text));
    assert_clean(&report, 400, 8, &["ping", "tools/call", "tools/list"]);
    // The server saw the same: the load plus one initialize and one
    // initialized notification per connection, and answered no error.
    let stats = &server.stats;
    assert_eq!(ServerStats::get(&stats.calls), 400 + 8);
    assert_eq!(ServerStats::get(&stats.notifications), 8);
    assert_eq!(ServerStats::get(&stats.error_answers), 0);
    assert_eq!(ServerStats::get(&stats.mcp_sessions), 8);
    assert_eq!(ServerStats::get(&stats.mcp_refused), 0);
}

#[test]
fn serve_mcp_says_it_speaks_mcp_when_it_starts() {
    let (mut child, first) = common::bin::serve_saying(&["--mcp"]);
    child.kill().unwrap();
    let _ = child.wait();
    assert!(
        first.starts_with("volley serve: MCP (streamable HTTP, sessions) on JSON-RPC 2.0 over HTTP/1.1"),
        "{first}"
    );
}

#[test]
fn a_line_past_the_request_limit_closes_its_tcp_connection() {
    let server = serve::spawn(ServeConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..config()
    })
    .unwrap();
    let addr = server.tcp_addr.unwrap();
    // 16 MiB and more without an end of line: the server hangs up rather
    // than hold it (it reads on only as far as its limit).
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut closed = false;
    for _ in 0..64 {
        if stream.write_all(&chunk).is_err() {
            closed = true;
            break;
        }
    }
    if !closed {
        // Before, the server took all of it and answered the garbage at the end.
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    let mut rest = Vec::new();
    let read = stream.read_to_end(&mut rest);
    let timed_out = read.as_ref().is_err_and(|e| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    });
    assert!(!timed_out, "the server hung up rather than wait");
    assert!(
        rest.is_empty(),
        "no answer to an overlong line: {}",
        String::from_utf8_lossy(&rest)
    );
    // A well-formed line on a new connection is answered as ever.
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"eth_chainId\",\"id\":1}\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
}

#[test]
fn a_hold_on_a_stream_listener_is_counted_with_the_others() {
    let dir = temp_dir("hold");
    let path = dir.join("held.sock");
    let server = serve::spawn(ServeConfig {
        unix: Some(path.clone()),
        latency: serve::Latency::Fixed(Duration::from_millis(5)),
        ..config()
    })
    .unwrap();
    assert!(call_over(&path).contains("\"result\""));
    let held = server.stats.median_hold().expect("the hold was counted");
    assert!(held >= Duration::from_millis(5), "{held:?}");
    server.stop();
}
