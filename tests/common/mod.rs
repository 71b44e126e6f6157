//! Helpers shared by the integration tests: a server on a loopback port
//! that answers whatever a test crafts, and a way to run a scenario.

#![allow(dead_code)]

pub mod bin;

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use volley::engine::Control;
use volley::report::RunReport;
use volley::scenario::Scenario;
use volley::stats::Snapshot;

/// What the crafted server sends back: status and body.
pub type Craft = fn(&Value) -> (u16, String);

/// Runs `serve` with a listener on 127.0.0.1:0, on a thread and runtime of
/// its own that live as long as the test process; returns the address.
pub fn serve_on_a_thread<F, Fut>(serve: F) -> SocketAddr
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move { serve(tokio::net::TcpListener::from_std(listener).unwrap()).await });
    });
    addr
}

/// Starts a server on 127.0.0.1:0 answering each request (parsed as JSON)
/// with `craft`; it lives as long as the test process.
pub fn crafted_server(craft: Craft) -> SocketAddr {
    serve_on_a_thread(move |listener| async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| async move {
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        let value: Value = serde_json::from_slice(&body).unwrap();
                        let (status, answer) = craft(&value);
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

/// The outcomes of a run that happened at least once, by name.
pub fn outcomes(report: &RunReport) -> std::collections::BTreeMap<&'static str, u64> {
    report
        .summary
        .total
        .outcomes
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (*k, *n))
        .collect()
}

/// Parses scenario text (no environment lookups).
pub fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml", "test", &|_| None).expect("a valid test scenario")
}

/// Runs a scenario to its end on a fresh runtime.
pub fn run(scenario: &Scenario) -> RunReport {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(volley::execute(
            scenario,
            None,
            CancellationToken::new(),
            std::sync::Arc::new(volley::engine::Control::new()),
            |_| {},
        ))
        .expect("the run starts")
}

/// Latency is timed from the intended send, or from the actual one when a
/// call left early (its timer woke a tick early): so no call's latency is
/// shorter than its service time, and neither is any percentile. Exact,
/// whatever the machine's load; how well the schedule was kept is not
/// asserted here (the schedule's arithmetic has exact unit tests in
/// `engine::control`; a wall clock on a busy machine has no exact answer).
pub fn assert_timed_from_the_intended_send(report: &RunReport) {
    assert!(report.summary.schedule.is_some(), "an open-model run");
    // A call that left before its intended time (its timer woke a tick
    // early) is timed from when it left, so no call's latency is shorter
    // than its service time, and neither is any percentile.
    let (latency, service) = (&report.summary.total.latency, &report.summary.total.service);
    let pairs = [
        (latency.p50_ms, service.p50_ms),
        (latency.p90_ms, service.p90_ms),
        (latency.p99_ms, service.p99_ms),
        (latency.max_ms, service.max_ms),
    ];
    assert!(
        pairs.iter().all(|(l, s)| l >= s),
        "latency under service time: {latency:?} vs {service:?}"
    );
}

/// Waits until the run has started (its control knows the target), so that
/// steering counts from the run's start, not from before its connections
/// opened.
pub fn wait_for_the_start(control: &Control) {
    while control.target_now() == 0.0 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Runs `text` while `steer` acts on the run's control from another thread.
pub fn run_steered(text: &str, steer: impl FnOnce(&Control) + Send + 'static) -> (RunReport, Vec<Snapshot>) {
    let scenario = scenario(text);
    let control = Arc::new(Control::new());
    let steering = {
        let control = control.clone();
        std::thread::spawn(move || steer(&control))
    };
    let snapshots = Arc::new(Mutex::new(Vec::new()));
    let seen = snapshots.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime
        .block_on(volley::execute(
            &scenario,
            None,
            CancellationToken::new(),
            control,
            |s| seen.lock().unwrap().push(s.clone()),
        ))
        .unwrap();
    steering.join().unwrap();
    let snapshots = std::mem::take(&mut *snapshots.lock().unwrap());
    (report, snapshots)
}

/// MCP's handshake as a scenario's `[[setup]]`: `initialize`, then the
/// `notifications/initialized` notification.
pub const MCP_SETUP: &str = r#"
[[setup]]
method = "initialize"
params = { protocolVersion = "2025-06-18", capabilities = {}, clientInfo = { name = "volley", version = "0" } }
[[setup]]
method = "notifications/initialized"
notification = true
"#;
