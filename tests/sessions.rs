//! Sessions and auth as real endpoints ask for them, against `volley serve`
//! checking and counting on its side: a fresh JWT on every request (HS256,
//! `iat` within 60 s, as an Engine API checks it) over HTTP/1.1, HTTP/2
//! and the WebSocket handshake, the secret and its tokens in no output;
//! connections let go after `reconnect_every` requests and sessions of a
//! flow's own, each set up anew; header values made per request. Exact
//! counts from the server.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use common::bin::{run_guarded, summary_json, temp_dir, text, volley};
use common::MCP_SETUP as INITIALIZE;
use volley::jwt::{unix_now, JwtSecret};
use volley::serve::{self, ServeConfig, ServerHandle, ServerStats};

const SECRET: &str = "0x7365637265742d6b65792d666f722d766f6c6c65792d74657374732d31323334";

/// A secret file in `dir`, and the secret.
fn secret_file(dir: &Path) -> (PathBuf, JwtSecret) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("jwt.hex");
    std::fs::write(&path, format!("{SECRET}\n")).unwrap();
    (path, JwtSecret::parse(SECRET.as_bytes()).unwrap())
}

fn server(config: ServeConfig) -> ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 2,
        ..config
    })
    .unwrap()
}

fn checking(secret: &JwtSecret) -> ServerHandle {
    server(ServeConfig {
        ws: Some("127.0.0.1:0".parse().unwrap()),
        jwt_secret: Some(Arc::new(secret.clone())),
        ..ServeConfig::default()
    })
}

/// Every file under `dir`, read.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    found
}

/// Neither the secret (in any spelling) nor any token volley could have
/// made between `from` and `to` is in the run's output or its files.
fn assert_nothing_secret_in(output: &Output, out: &Path, secret: &JwtSecret, (from, to): (u64, u64)) {
    let hex = SECRET.trim_start_matches("0x");
    let mut needles = vec![hex.to_string(), hex.to_uppercase()];
    needles.extend((from.saturating_sub(2)..=to + 2).map(|iat| secret.token(iat)));
    let mut outputs = files_under(out);
    outputs.push(("stdout".into(), output.stdout.clone()));
    outputs.push(("stderr".into(), output.stderr.clone()));
    assert!(outputs.len() > 5, "the run's files: {outputs:?}");
    for (name, bytes) in &outputs {
        let text = String::from_utf8_lossy(bytes);
        for needle in &needles {
            assert!(
                !text.contains(needle.as_str()),
                "{} holds a secret",
                name.display()
            );
        }
    }
}

/// A 3 s run at 100 calls/s with `--jwt-secret` against a server that
/// checks every token: none refused, several seconds' `iat`s seen, and the
/// secret and tokens nowhere in what the run wrote or said.
fn run_with_jwt(target: &str, extra: &[&str], name: &str) {
    let dir = temp_dir(name);
    let (file, secret) = secret_file(&dir);
    let server = checking(&secret);
    let target = target
        .replace("HTTP", &server.url())
        .replace("WS", &server.ws_url().unwrap());
    let out = dir.join("out");
    let from = unix_now();
    let mut args = vec![
        "run",
        "--target",
        target.as_str(),
        "--method",
        "eth_chainId",
        "--rate",
        "100",
    ];
    args.extend(["-d", "3s", "--no-tui", "--jwt-secret", file.to_str().unwrap()]);
    args.extend(extra);
    let output = run_guarded(&args, &out);
    let to = unix_now();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary = &summary_json(&out)["summary"]["total"];
    let calls = summary["calls"].as_u64().unwrap();
    assert!(calls >= 100, "{summary}");
    assert_eq!(summary["ok"].as_u64(), Some(calls), "{summary}");
    let stats = &server.stats;
    assert_eq!(ServerStats::get(&stats.jwt_refused), 0);
    assert!(ServerStats::get(&stats.jwt_accepted) >= 1);
    let (iats, _) = stats.jwt_iats.count();
    assert!(iats >= 2, "{iats} distinct iat over a 3 s run");
    assert_nothing_secret_in(&output, &out, &secret, (from, to));
}

#[test]
fn a_fresh_jwt_on_every_http1_request_is_taken_and_shown_nowhere() {
    run_with_jwt("HTTP", &[], "jwt-http1");
}

#[test]
fn a_fresh_jwt_on_every_http2_request_is_taken_and_shown_nowhere() {
    run_with_jwt("HTTP", &["--http2"], "jwt-http2");
}

/// Over a WebSocket the token goes with the handshake: a run opening a
/// connection a second (`--reconnect-every`) shows it made anew.
#[test]
fn a_fresh_jwt_on_every_websocket_handshake_is_taken_and_shown_nowhere() {
    run_with_jwt("WS", &["--reconnect-every", "100"], "jwt-ws");
}

/// Without the secret the server refuses every call, and each is counted
/// as the 401 it got.
#[test]
fn without_the_secret_every_call_is_refused_and_counted_so() {
    let dir = temp_dir("jwt-none");
    let (_, secret) = secret_file(&dir);
    let server = checking(&secret);
    let out = dir.join("out");
    let url = server.url();
    let args = [
        "run",
        "--target",
        &url,
        "--method",
        "eth_chainId",
        "-n",
        "300",
        "-c",
        "2",
        "--no-tui",
    ];
    let output = run_guarded(&args, &out);
    assert_eq!(output.status.code(), Some(2), "no call succeeded");
    let total = &summary_json(&out)["summary"]["total"];
    assert_eq!(total["calls"].as_u64(), Some(300));
    assert_eq!(total["ok"].as_u64(), Some(0));
    assert_eq!(total["outcomes"]["http_status"].as_u64(), Some(300), "{total}");
    assert_eq!(total["http_statuses"]["401"].as_u64(), Some(300), "{total}");
    assert_eq!(ServerStats::get(&server.stats.jwt_refused), 300);
    assert_eq!(ServerStats::get(&server.stats.calls), 0);
    // A WebSocket refused at its handshake is refused before anything is sent.
    let ws = server.ws_url().unwrap();
    let output = run_guarded(
        &["run", "--target", &ws, "--method", "eth_chainId"],
        &dir.join("ws"),
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("401"), "{}", text(&output.stderr));
}

fn mcp_server() -> ServerHandle {
    server(ServeConfig {
        mcp: true,
        ..ServeConfig::default()
    })
}

/// 200 calls on one connection, a new one every 10 with its setup (one
/// call, one notification, which has no answer to time): the server sees
/// 20 connections and 20 MCP sessions opened, over
/// HTTP/1.1 and over HTTP/2 (4 calls at once on each connection).
#[test]
fn reconnect_every_opens_a_new_connection_and_session_every_n_calls() {
    for (extra, concurrency) in [("", 1), ("http2 = true", 4)] {
        let server = mcp_server();
        let text = format!(
            "target = \"{}/mcp\"\n{extra}\n[load]\nconcurrency = {concurrency}\nconnections = 1\nrequests = 200\nreconnect_every = 10\n{INITIALIZE}\n[[calls]]\nmethod = \"ping\"\n",
            server.url()
        );
        let report = common::run(&common::scenario(&text));
        let summary = &report.summary;
        assert_eq!(summary.total.ok, 200, "{extra}: {:?}", summary.total.outcomes);
        let stats = &server.stats;
        assert_eq!(ServerStats::get(&stats.connections_served), 20, "{extra}");
        assert_eq!(ServerStats::get(&stats.mcp_sessions), 20, "{extra}");
        assert_eq!(ServerStats::get(&stats.mcp_refused), 0, "{extra}");
        let c = &summary.connections;
        assert_eq!((c.opened_in_all, c.recycled), (20, 20), "{extra}");
        let setup = summary.setup.as_ref().unwrap();
        assert_eq!(setup.calls.as_ref().map(|c| c.answered), Some(20), "{extra}");
    }
}

/// `session = "per_flow"`: 30 flows, 30 connections and 30 sessions.
#[test]
fn a_flow_with_a_session_of_its_own_opens_one_per_flow() {
    let server = mcp_server();
    let text = format!(
        "target = \"{}/mcp\"\n[load]\nconcurrency = 3\nrequests = 30\n{INITIALIZE}
[[flows]]
name = \"churn\"
session = \"per_flow\"
[[flows.steps]]
method = \"tools/list\"
[[flows.steps]]
method = \"ping\"
",
        server.url()
    );
    let report = common::run(&common::scenario(&text));
    let flow = report
        .summary
        .methods
        .iter()
        .find(|m| m.method == "flow:churn")
        .unwrap();
    assert_eq!((flow.calls, flow.ok), (30, 30), "{:?}", flow.outcomes);
    let stats = &server.stats;
    assert_eq!(ServerStats::get(&stats.mcp_sessions), 30);
    assert_eq!(ServerStats::get(&stats.connections_served), 30);
    assert_eq!(report.summary.connections.recycled, 30);
}

/// A generator in a header makes a value per request: the server sees as
/// many distinct values as requests (over a WebSocket, as handshakes).
#[test]
fn a_header_generator_makes_a_distinct_value_per_request() {
    for extra in ["", "http2 = true", "ws"] {
        let server = server(ServeConfig {
            ws: Some("127.0.0.1:0".parse().unwrap()),
            count_header: Some("x-request-id".into()),
            ..ServeConfig::default()
        });
        let (target, extra) = match extra {
            "ws" => (server.ws_url().unwrap(), ""),
            other => (server.url(), other),
        };
        let text = format!(
            "target = \"{target}\"\n{extra}\n[headers]\nX-Request-Id = \"req-${{seq()}}-${{hex(4)}}\"\n[load]\nconcurrency = 4\nconnections = 3\nrequests = 500\n[[calls]]\nmethod = \"eth_chainId\"\n"
        );
        let report = common::run(&common::scenario(&text));
        assert_eq!(report.summary.total.ok, 500, "{extra}");
        let stats = &server.stats;
        let (distinct, floor) = stats.header_values.count();
        assert!(!floor);
        // Over a WebSocket: the reachability check's handshake, then one per connection.
        let expected = if target.starts_with("ws") { 4 } else { 500 };
        assert_eq!(ServerStats::get(&stats.header_seen), expected, "{target} {extra}");
        assert_eq!(distinct as u64, expected, "{target} {extra}");
    }
}

/// A URL's user information is sent as HTTP Basic credentials, on every
/// request (over a WebSocket, with each handshake): a provider that puts a
/// user and password in its URL is reached as given.
#[test]
fn a_urls_user_information_is_sent_as_basic_credentials() {
    for extra in ["", "http2 = true", "ws"] {
        let server = server(ServeConfig {
            ws: Some("127.0.0.1:0".parse().unwrap()),
            count_header: Some("authorization".into()),
            ..ServeConfig::default()
        });
        let (target, extra) = match extra {
            "ws" => (server.ws_url().unwrap(), ""),
            other => (server.url(), other),
        };
        let target = target.replacen("://", "://alice:hunter%32pass@", 1);
        let text = format!(
            "target = \"{target}\"\n{extra}\n[load]\nconcurrency = 2\nconnections = 2\nrequests = 100\n[[calls]]\nmethod = \"eth_chainId\"\n"
        );
        let report = common::run(&common::scenario(&text));
        assert_eq!(report.summary.total.ok, 100, "{extra}");
        let stats = &server.stats;
        // Over a WebSocket: the reachability check's handshake, then one per connection.
        let expected = if target.starts_with("ws") { 3 } else { 100 };
        assert_eq!(ServerStats::get(&stats.header_seen), expected, "{target} {extra}");
        assert_eq!(stats.header_values.count(), (1, false), "one value, always");
    }
    // Beside an Authorization header, it is refused: two sets of credentials.
    let server = server(ServeConfig::default());
    let target = server.url().replacen("://", "://alice:pw@", 1);
    let text = format!(
        "target = \"{target}\"\n[headers]\nAuthorization = \"Bearer x\"\n[load]\nrequests = 1\n[[calls]]\nmethod = \"eth_chainId\"\n"
    );
    let scenario = common::scenario(&text);
    let refused = tokio::runtime::Runtime::new().unwrap().block_on(volley::execute(
        &scenario,
        None,
        tokio_util::sync::CancellationToken::new(),
        std::sync::Arc::new(volley::engine::Control::new()),
        |_| {},
    ));
    let Err(error) = refused else {
        panic!("two sets of credentials were taken")
    };
    let error = error.to_string();
    assert!(
        error.contains("an Authorization header both give credentials"),
        "{error}"
    );
    assert!(!error.contains(":pw@"), "{error}");
}

/// `volley run` with `args` in `dir` (a scenario file named there), never
/// reaching a server: the error, on stderr.
fn refused(dir: &Path, scenario: Option<&str>, args: &[&str]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let mut command = volley();
    command.arg("run");
    if let Some(text) = scenario {
        let file = dir.join("s.toml");
        std::fs::write(&file, text).unwrap();
        command.arg(&file);
    }
    let output = command
        .args(args)
        .args(["-o", dir.join("out").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    assert!(!dir.join("out").join("summary.json").exists());
    text(&output.stderr)
}

#[test]
fn bad_secrets_keys_and_flags_are_refused_before_anything_is_sent_by_name() {
    let dir = temp_dir("refusals");
    let target = "target = \"http://127.0.0.1:9\"\n[[calls]]\nmethod = \"m\"\n";
    let missing = refused(&dir, Some(&format!("jwt_secret = \"nope.hex\"\n{target}")), &[]);
    assert!(
        missing.contains("nope.hex") && missing.contains("jwt_secret"),
        "{missing}"
    );
    std::fs::write(dir.join("short.hex"), "0xabcdef\n").unwrap();
    let short = refused(&dir, Some(&format!("jwt_secret = \"short.hex\"\n{target}")), &[]);
    assert!(
        short.contains("short.hex") && short.contains("64 hex digits"),
        "{short}"
    );
    assert!(!short.contains("abcdef"), "{short}");
    let flag = refused(
        &dir,
        None,
        &[
            "--target",
            "http://127.0.0.1:9",
            "--method",
            "m",
            "--jwt-secret",
            "none.hex",
        ],
    );
    assert!(
        flag.contains("--jwt-secret") && flag.contains("none.hex"),
        "{flag}"
    );
    let (secret, _) = secret_file(&dir);
    let secret = secret.to_str().unwrap();
    let tcp = refused(
        &dir,
        None,
        &[
            "--target",
            "tcp://127.0.0.1:9",
            "--method",
            "m",
            "--jwt-secret",
            secret,
        ],
    );
    assert!(tcp.contains("--jwt-secret") && tcp.contains("TCP"), "{tcp}");
    let both = [
        "--target",
        "http://127.0.0.1:9",
        "--method",
        "m",
        "--jwt-secret",
        secret,
    ];
    let both = refused(&dir, None, &[&both[..], &["-H", "Authorization: x"]].concat());
    assert!(
        both.contains("Authorization") && both.contains("drop one"),
        "{both}"
    );
    let zero = refused(&dir, Some(&format!("{target}[load]\nreconnect_every = 0\n")), &[]);
    assert!(
        zero.contains("s.toml:5:19") && zero.contains("load.reconnect_every"),
        "{zero}"
    );
    let flag_zero = refused(&dir, Some(target), &["--reconnect-every", "0"]);
    assert!(flag_zero.contains("--reconnect-every"), "{flag_zero}");
    let flows = "[[flows]]\nname = \"f\"\nsession = \"per_call\"\n[[flows.steps]]\nmethod = \"m\"\n";
    let session = refused(
        &dir,
        Some(&format!("target = \"http://127.0.0.1:9\"\n{flows}")),
        &[],
    );
    assert!(
        session.contains("s.toml:4:11") && session.contains("flows[0].session"),
        "{session}"
    );
    assert!(session.contains("per_flow"), "{session}");
}

/// `validate` names the secret's file, never the secret; the flags are in
/// `volley run --help`.
#[test]
fn validate_shows_the_secrets_file_not_the_secret_and_help_lists_the_flags() {
    let dir = temp_dir("validate");
    secret_file(&dir);
    let file = dir.join("s.toml");
    let text_of = "target = \"http://127.0.0.1:9\"\njwt_secret = \"jwt.hex\"\n[headers]\nX-Id = \"${seq()}\"\n[load]\nreconnect_every = 5\n[[calls]]\nmethod = \"m\"\n";
    std::fs::write(&file, text_of).unwrap();
    let output = volley().arg("validate").arg(&file).output().unwrap();
    let said = text(&output.stdout);
    assert!(output.status.success(), "{said}{}", text(&output.stderr));
    assert!(
        said.contains("jwt.hex") && said.contains("X-Id (made per request)"),
        "{said}"
    );
    assert!(said.contains("closed after 5 requests"), "{said}");
    assert!(
        !said.to_lowercase().contains(SECRET.trim_start_matches("0x")),
        "{said}"
    );
    let help = text(&volley().args(["run", "--help"]).output().unwrap().stdout);
    assert!(
        help.contains("--jwt-secret <FILE>") && help.contains("--reconnect-every <N>"),
        "{help}"
    );
}
