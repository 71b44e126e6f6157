//! Steering a run while it goes, and the live metrics endpoint.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use volley::engine::Control;
use volley::metrics::{self, Metrics};
use volley::report::RunReport;
use volley::serve::{self, ServeConfig};
use volley::stats::Snapshot;

fn server() -> serve::ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap()
}

/// Runs `text` while `steer` acts on the run's control from another thread.
fn run_steered(text: &str, steer: impl FnOnce(&Control) + Send + 'static) -> (RunReport, Vec<Snapshot>) {
    let scenario = common::scenario(text);
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

#[test]
fn raising_the_rate_takes_effect_without_a_burst() {
    let server = server();
    let text = format!(
        "target = \"{}\"\n[load]\nrate = 200\nconnections = 32\nduration = \"3s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let (report, snapshots) = run_steered(&text, |control| {
        std::thread::sleep(Duration::from_millis(1000));
        for _ in 0..5 {
            control.step(true);
        }
    });
    let rows = &report.summary.timeseries;
    assert_eq!(rows.len(), 3);
    assert!((rows[0].calls as i64 - 200).abs() <= 4, "{rows:?}");
    assert!(
        (rows[2].calls as i64 - 322).abs() <= 6,
        "the raised rate holds: {rows:?}"
    );
    assert!(
        rows.iter().all(|r| r.calls <= 330),
        "no burst when the rate changes: {rows:?}"
    );
    let events: Vec<&str> = report.summary.events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(events.last(), Some(&"target set to 322 requests/s"));
    assert_eq!(events.len(), 5);
    assert!(
        snapshots.len() >= 10,
        "about four snapshots a second, got {}",
        snapshots.len()
    );
    assert_eq!(snapshots.last().unwrap().target, 322.0);
    common::assert_kept_schedule(&report);
}

#[test]
fn a_pause_sends_nothing_and_owes_nothing() {
    let server = server();
    let text = format!(
        "target = \"{}\"\n[load]\nrate = 100\nduration = \"3s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let (report, snapshots) = run_steered(&text, |control| {
        std::thread::sleep(Duration::from_millis(900));
        control.toggle_pause();
        std::thread::sleep(Duration::from_millis(1300));
        control.toggle_pause();
    });
    let rows = &report.summary.timeseries;
    assert!(rows[1].calls <= 10, "paused through most of second 1: {rows:?}");
    let total = report.summary.total.calls as i64;
    assert!((total - 170).abs() <= 15, "1.7 s of load at 100/s, got {total}");
    common::assert_kept_schedule(&report);
    assert!(snapshots.iter().any(|s| s.paused));
    assert_eq!(report.summary.events.len(), 2);
}

#[test]
fn the_metrics_endpoint_serves_counters_that_match_the_summary() {
    let server = server();
    let text = format!(
        "target = \"{}\"\n[load]\nconcurrency = 4\nrequests = 2000\n[[calls]]\nmethod = \"eth_chainId\"\n[[calls]]\nmethod = \"nope\"\n",
        server.url()
    );
    let scenario = common::scenario(&text);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let (report, body) = runtime.block_on(async {
        let listener = metrics::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        tokio::spawn(metrics::serve(listener, metrics.clone(), stop.clone()));
        let published = metrics.clone();
        let report = volley::execute(
            &scenario,
            None,
            CancellationToken::new(),
            Arc::new(Control::new()),
            |s| published.publish(s),
        )
        .await
        .unwrap();
        let body = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            response
        })
        .await
        .unwrap();
        stop.cancel();
        (report, body)
    });
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("content-type: text/plain; version=0.0.4"), "{body}");
    let mut calls = 0;
    for line in body.lines().filter(|l| !l.starts_with('#') && l.contains('{')) {
        let (series, value) = line.rsplit_once(' ').expect("a sample is `name{labels} value`");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number in {line:?}"));
        assert!(series.ends_with('}'), "{line}");
        if series.starts_with("volley_calls_total{") {
            calls += value as u64;
        }
    }
    assert_eq!(calls, report.summary.total.calls);
    assert_eq!(calls, 2000);
    let errors = report.summary.total.rpc_error_codes[&-32601];
    assert!(
        body.contains(&format!(
            "volley_rpc_errors_total{{method=\"nope\",code=\"-32601\"}} {errors}"
        )),
        "{body}"
    );
    assert!(body.contains("volley_finished 1"));
}
