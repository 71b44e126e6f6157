//! A run bounded by requests ends when its last request is answered,
//! whatever its callers do: callers kept idle (more callers than calls in
//! flight, a lowered target) learn that the schedule ran out too. And a
//! closed run steered with `+` and `-` moves over every caller it has, on
//! every connection, not only as many as there are connections.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use volley::engine::Control;
use volley::report::RunReport;
use volley::serve::{self, ServeConfig, ServerHandle};

fn server() -> ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap()
}

/// Runs `text`, steered by `steer`, on a thread of its own; a hang guard,
/// not a timing assertion: the broken build never ends at all.
fn run_guarded(text: String, steer: impl FnOnce(&Control) + Send + 'static) -> RunReport {
    let (done, report) = mpsc::channel();
    std::thread::spawn(move || {
        let (report, _) = common::run_steered(&text, steer);
        let _ = done.send(report);
    });
    report
        .recv_timeout(Duration::from_secs(60))
        .expect("the run ended once its requests were answered")
}

fn scenario(target: &str, extra: &str, load: &str) -> String {
    format!("target = \"{target}\"\n{extra}[load]\n{load}\n[[calls]]\nmethod = \"eth_chainId\"\n")
}

/// 10 calls in flight over 4 connections make 12 callers, 2 of them idle.
fn ten_over_four(target: &str, extra: &str) {
    let text = scenario(target, extra, "concurrency = 10\nconnections = 4\nrequests = 100");
    let report = run_guarded(text, |_| {});
    assert_eq!(report.summary.requests, 100, "{target}");
    assert_eq!(report.summary.total.ok, 100, "{target}");
}

#[test]
fn a_request_limited_run_with_idle_callers_ends_over_tcp() {
    let server = server();
    ten_over_four(&format!("tcp://{}", server.tcp_addr.unwrap()), "");
}

#[test]
fn a_request_limited_run_with_idle_callers_ends_over_http2() {
    let server = server();
    ten_over_four(&server.url(), "http2 = true\n");
}

#[test]
fn a_request_limited_run_with_idle_callers_ends_over_websocket() {
    let server = server();
    ten_over_four(&format!("ws://{}", server.ws_addr.unwrap()), "");
}

#[test]
fn a_request_limited_run_ends_after_its_concurrency_is_lowered_over_http1() {
    let server = server();
    let text = scenario(&server.url(), "", "concurrency = 5\nrequests = 3000");
    let report = run_guarded(text, |control| {
        common::wait_for_the_start(control);
        control.step(false);
    });
    assert_eq!(report.summary.requests, 3000);
    let events: Vec<&str> = report.summary.events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(events, ["target set to 4 calls in flight"]);
}

#[test]
fn steering_a_multiplexed_closed_run_moves_over_its_callers_not_its_connections() {
    let server = server();
    let text = scenario(
        &format!("tcp://{}", server.tcp_addr.unwrap()),
        "",
        "concurrency = 256\nconnections = 4\nrequests = 20000",
    );
    let (targets, seen) = mpsc::channel();
    let report = run_guarded(text, move |control| {
        common::wait_for_the_start(control);
        let mut now = vec![control.target_now()];
        control.step(false);
        now.push(control.target_now());
        control.step(true);
        now.push(control.target_now());
        control.step(true);
        now.push(control.target_now());
        let _ = targets.send(now);
    });
    // 256 - 25.6 rounds to 230; 230 + 23 = 253; 253 + 25.3 rounds to 278,
    // past the 256 callers the run has: 256.
    assert_eq!(seen.recv().unwrap(), [256.0, 230.0, 253.0, 256.0]);
    let events: Vec<&str> = report.summary.events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(
        events,
        [
            "target set to 230 calls in flight",
            "target set to 253 calls in flight",
            "target set to 256 calls in flight",
        ]
    );
    assert_eq!(report.summary.requests, 20000);
}
