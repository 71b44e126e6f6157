//! HTTPS and WSS against the built-in server with a CA made for the test:
//! exact counts over HTTP/1.1, HTTP/2 by ALPN and WebSocket; certificate
//! errors that say what to do; `--insecure` stated; mutual TLS.

mod common;

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;
use volley::report::RunReport;
use volley::serve::tls::{server_config, LocalCa, LOOPBACK_NAMES};
use volley::serve::{self, ServeConfig, ServerHandle, ServerStats};

/// A CA, its certificate in a file, and a server whose certificate it
/// signed for `names`; with `mutual`, the server wants a client
/// certificate from the same CA.
struct Setup {
    ca: LocalCa,
    ca_file: PathBuf,
    server: ServerHandle,
}

fn setup(tag: &str, names: &[&str], mutual: bool) -> Setup {
    let ca = LocalCa::new().unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-tls-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let client_ca = mutual.then(|| volley::serve::tls::read_certificates(&ca_file).unwrap());
    let config = server_config(ca.issue(names).unwrap(), client_ca.as_deref()).unwrap();
    let server = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        tls: Some(config),
        threads: 2,
        latency: "uniform:0ms..2ms".parse().unwrap(),
        shuffle_batches: true,
        error_rate: 0.05,
        seed: 9,
        ..ServeConfig::default()
    })
    .unwrap();
    Setup { ca, ca_file, server }
}

fn scenario_text(target: &str, extra: &str, tls: &str) -> String {
    format!(
        r#"
target = "{target}"
timeout = "5s"
seed = 4
{extra}
[tls]
{tls}
[load]
concurrency = 16
connections = 2
requests = 1500
[[calls]]
method = "eth_getBalance"
params = ["${{hex(20)}}", "latest"]
weight = 3
[[calls]]
method = "eth_blockNumber"
batch = {{ min = 1, max = 5 }}
[[calls]]
method = "echo"
notification = true
"#
    )
}

fn try_run(text: &str) -> Result<RunReport, String> {
    let scenario = common::scenario(text);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(volley::execute(
            &scenario,
            None,
            CancellationToken::new(),
            std::sync::Arc::new(volley::engine::Control::new()),
            |_| {},
        ))
        .map_err(|e| e.to_string())
}

fn cacert(setup: &Setup) -> String {
    format!("cacert = {:?}", setup.ca_file.display().to_string())
}

/// Every call volley sent, the server saw and answered; every injected
/// error was counted as such.
fn assert_exact(report: &RunReport, server: &ServerHandle) {
    let total = &report.summary.total;
    let stats = &server.stats;
    assert_eq!(report.summary.requests, 1500);
    assert_eq!(report.summary.in_flight_at_end, 0);
    assert_eq!(
        total.calls,
        ServerStats::get(&stats.calls) + ServerStats::get(&stats.notifications)
    );
    let injected = ServerStats::get(&stats.injected_errors);
    assert!(injected > 0);
    assert_eq!(total.rpc_error_codes.get(&-32000).copied(), Some(injected));
    assert_eq!(total.ok + injected, total.calls, "{:?}", total.outcomes);
}

#[test]
fn https_over_http1_with_a_private_ca() {
    let setup = setup("h1", LOOPBACK_NAMES, false);
    let report = try_run(&scenario_text(&setup.server.url(), "", &cacert(&setup))).unwrap();
    assert_eq!(report.meta.transport, "http/1.1 (tls)");
    let tls = report.meta.tls.as_deref().unwrap();
    assert!(
        tls.starts_with("TLSv1_3") && tls.ends_with("ALPN http/1.1"),
        "{tls}"
    );
    assert!(report
        .summary
        .warnings
        .iter()
        .all(|w| !w.message.contains("INSECURE")));
    assert_eq!(ServerStats::get(&setup.server.stats.requests), 1500);
    assert_exact(&report, &setup.server);
}

/// Pipelined over TLS: 8 requests in flight on each of the 2 connections,
/// batches and notifications among them, every one answered in order. The
/// server also saw the two requests of volley's check that it keeps
/// pipelining, and no other.
#[test]
fn https_pipelined_counts_every_call() {
    let setup = setup("h1-pipelined", LOOPBACK_NAMES, false);
    let report = try_run(&scenario_text(
        &setup.server.url(),
        "pipeline = 8",
        &cacert(&setup),
    ))
    .unwrap();
    assert_eq!(report.meta.transport, "http/1.1 (tls), pipelined 8 deep");
    let stats = &setup.server.stats;
    assert_eq!(ServerStats::get(&stats.requests), 1500 + 2, "the check's two");
    let total = &report.summary.total;
    assert_eq!(report.summary.requests, 1500);
    assert_eq!(report.summary.in_flight_at_end, 0);
    assert_eq!(
        total.calls + 2,
        ServerStats::get(&stats.calls) + ServerStats::get(&stats.notifications)
    );
    let injected = ServerStats::get(&stats.injected_errors);
    assert!(injected > 0);
    assert_eq!(total.rpc_error_codes.get(&-32000).copied(), Some(injected));
    assert_eq!(total.ok + injected, total.calls, "{:?}", total.outcomes);
    assert_eq!(report.summary.connections.opened_in_all, 2);
}

#[test]
fn https_negotiates_http2_by_alpn() {
    let setup = setup("h2", LOOPBACK_NAMES, false);
    let url = format!("https://localhost:{}", setup.server.addr.port());
    let report = try_run(&scenario_text(&url, "http2 = true", &cacert(&setup))).unwrap();
    assert_eq!(report.meta.transport, "http/2 (tls)");
    assert!(
        report.meta.tls.as_deref().unwrap().ends_with("ALPN h2"),
        "{:?}",
        report.meta.tls
    );
    assert_eq!(report.meta.load.connections, 2);
    assert_exact(&report, &setup.server);
}

#[test]
fn wss_multiplexes_calls_answered_in_any_order() {
    let setup = setup("wss", LOOPBACK_NAMES, false);
    let url = setup.server.ws_url().unwrap();
    assert!(url.starts_with("wss://"));
    let report = try_run(&scenario_text(&url, "", &cacert(&setup))).unwrap();
    assert_eq!(report.meta.transport, "websocket (tls)");
    assert_eq!(report.summary.unsolicited_messages, 0);
    assert_exact(&report, &setup.server);
}

#[test]
fn certificate_errors_say_what_to_do() {
    // Built-in web roots do not know the test CA.
    let setup = setup("untrusted", LOOPBACK_NAMES, false);
    let error = try_run(&scenario_text(&setup.server.url(), "", "")).unwrap_err();
    assert!(
        error.contains("certificate was refused (UnknownIssuer)"),
        "{error}"
    );
    assert!(error.contains("--cacert FILE"), "{error}");
    let error = try_run(&scenario_text(&setup.server.ws_url().unwrap(), "", "")).unwrap_err();
    assert!(error.contains("UnknownIssuer"), "{error}");

    // Trusted, but issued for another name.
    let setup = setup_other_name();
    let error = try_run(&scenario_text(&setup.server.url(), "", &cacert(&setup))).unwrap_err();
    assert!(error.contains("NotValidForName"), "{error}");

    // A CA file that is not there is refused as the file is read, naming it.
    let text = scenario_text(&setup.server.url(), "", "cacert = \"/nonexistent/ca.pem\"");
    let error = volley::scenario::Scenario::parse(&text, "tls.toml", "tls", &|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("/nonexistent/ca.pem") && error.contains("key `tls.cacert`"),
        "{error}"
    );
    assert_eq!(ServerStats::get(&setup.server.stats.requests), 0);
}

#[test]
fn tls_to_a_plain_server_asks_whether_it_is_the_plain_scheme() {
    let plain = serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap();
    // It answers the ClientHello in HTTP (`HTTP/1.1 400`): no TLS record.
    let https = plain.url().replacen("http://", "https://", 1);
    let error = try_run(&scenario_text(&https, "", "")).unwrap_err();
    assert!(
        error.contains(
            "the server's answer to the TLS handshake is not TLS (InvalidContentType): is it http://?"
        ),
        "{error}"
    );
    let wss = plain.ws_url().unwrap().replacen("ws://", "wss://", 1);
    let error = try_run(&scenario_text(&wss, "", "")).unwrap_err();
    assert!(error.contains("is it ws://?"), "{error}");
    assert_eq!(ServerStats::get(&plain.stats.requests), 0);
}

fn setup_other_name() -> Setup {
    setup("other-name", &["db.example.test"], false)
}

#[test]
fn insecure_skips_verification_and_says_so() {
    let setup = setup("insecure", &["db.example.test"], false);
    let report = try_run(&scenario_text(&setup.server.url(), "", "insecure = true")).unwrap();
    assert!(
        (report.summary.warnings.iter())
            .any(|w| w.code == volley::stats::WarningCode::Insecure && w.message.starts_with("INSECURE")),
        "{:?}",
        report.summary.warnings
    );
    let table = volley::report::render_table(&report);
    assert!(table.contains("INSECURE"), "{table}");
    assert_exact(&report, &setup.server);
}

#[test]
fn mutual_tls_needs_a_client_certificate_the_server_trusts() {
    let setup = setup("mtls", LOOPBACK_NAMES, true);
    let error = try_run(&scenario_text(&setup.server.url(), "", &cacert(&setup))).unwrap_err();
    assert!(error.contains("client certificate"), "{error}");

    let dir = setup.ca_file.parent().unwrap();
    let (cert, key) = setup.ca.issue_pem(&["volley-client"]).unwrap();
    std::fs::write(dir.join("client.pem"), cert).unwrap();
    std::fs::write(dir.join("client.key"), key).unwrap();
    let tls = format!(
        "{}\ncert = {:?}\nkey = {:?}",
        cacert(&setup),
        dir.join("client.pem").display().to_string(),
        dir.join("client.key").display().to_string()
    );
    let report = try_run(&scenario_text(&setup.server.url(), "", &tls)).unwrap();
    assert_exact(&report, &setup.server);
}
