//! Steering a run while it goes, and the live metrics endpoint.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use volley::engine::Control;
use volley::feed::{Feed, TargetInfo};
use volley::metrics;
use volley::serve::{self, ServeConfig};
use volley::tui::Action;

fn server() -> serve::ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap()
}

// Which request is due when, under a raised rate or a pause, is asserted
// exactly by the unit tests of `engine::control`. Here the whole engine runs
// on a wall clock, beside other tests, on machines as small as two busy
// cores: only what scheduler noise cannot move is asserted (the events, the
// target, upper bounds a burst would break: a busy machine sends later,
// never more).

#[test]
fn raising_the_rate_takes_effect_without_a_burst() {
    let server = server();
    let text = format!(
        "target = \"{}\"\n[load]\nrate = 200\nconnections = 32\nduration = \"3s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let (report, snapshots) = common::run_steered(&text, |control| {
        common::wait_for_the_start(control);
        std::thread::sleep(Duration::from_millis(1000));
        for _ in 0..5 {
            control.step(true);
        }
    });
    let events = &report.summary.events;
    let steps: Vec<&str> = events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(steps.len(), 5, "{steps:?}");
    assert_eq!(steps.last(), Some(&"target set to 322 requests/s"));
    assert_eq!(snapshots.last().unwrap().target, 322.0);
    // The end figures name the target in force at the end.
    assert_eq!(report.summary.steered_to, Some(322.0));
    let table = volley::report::render_table(&report);
    // The whole run's rate beside it: the end's target overstates it.
    let measured = report.summary.requests as f64 / report.summary.measured_seconds;
    assert!(measured < 322.0, "{measured}");
    let headline =
        format!("open model, 322 requests/s at the end (steered from 200; {measured:.1}/s over the run)");
    assert!(table.contains(&headline), "{table}");
    assert!(
        snapshots.len() >= 10,
        "about four snapshots a second, got {}",
        snapshots.len()
    );
    // When the rate went up, in seconds from the start: never before the
    // steering asked (the five steps take microseconds).
    let raised = events[0].at_s;
    assert!(raised >= 1.0, "raised at {raised} s");

    // Which request is due when is asserted exactly by `engine::control`'s
    // unit tests. Here only what a busy machine cannot move is: it can
    // delay calls, never add them. A burst of the requests the new rate
    // "owes" since the start adds over 300 calls to the run; the run may
    // hold at most what was due (200/s, then 322/s) and the calls already
    // claimed when the rate went up.
    let calls = report.summary.total.calls as f64;
    let none_ahead = 200.0 * raised + 322.0 * (3.0 - raised);
    assert!(
        calls <= none_ahead + 20.0,
        "{calls} calls, raised at {raised} s: at most {none_ahead:.0} were due: {:?}",
        report.summary.timeseries
    );
    common::assert_timed_from_the_intended_send(&report);
}

#[test]
fn a_pause_sends_nothing_and_owes_nothing() {
    let server = server();
    let text = format!(
        "target = \"{}\"\n[load]\nrate = 100\nduration = \"3s\"\n[[calls]]\nmethod = \"eth_chainId\"\n",
        server.url()
    );
    let (report, snapshots) = common::run_steered(&text, |control| {
        common::wait_for_the_start(control);
        std::thread::sleep(Duration::from_millis(900));
        control.toggle_pause();
        std::thread::sleep(Duration::from_millis(1300));
        control.toggle_pause();
    });
    let events = &report.summary.events;
    let what: Vec<&str> = events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(what, ["paused", "resumed"]);
    assert!(snapshots.iter().any(|s| s.paused));
    let (paused, resumed) = (events[0].at_s, events[1].at_s);
    assert!(
        paused >= 0.9 && resumed - paused >= 1.3,
        "paused {paused}..{resumed} s"
    );
    // Second 1 lies in the pause (0.9..2.2 s, later on a busy machine):
    // nothing is sent in it but what ran before the pause or after the
    // resume. Not pausing sends 100.
    let running_in_second_1 = (paused - 1.0).max(0.0) + (2.0 - resumed).max(0.0);
    let rows = &report.summary.timeseries;
    assert!(
        rows[1].calls as f64 <= 100.0 * running_in_second_1 + 15.0,
        "paused through second 1 ({paused}..{resumed} s): {rows:?}"
    );
    // 100/s for the 3 s less the pause, and nothing owed for the pause:
    // owing it sends 130 more in a burst on resume. A busy machine can only
    // send fewer.
    let calls = report.summary.total.calls as f64;
    let due = 100.0 * (3.0 - (resumed - paused));
    assert!(
        calls <= due + 3.0,
        "{calls} calls for {due} due (paused {paused}..{resumed} s): {rows:?}"
    );
    common::assert_timed_from_the_intended_send(&report);
    // The pause is no measured time: the rate is over the 3 s less it.
    let summary = &report.summary;
    assert!(
        (summary.paused_seconds - (resumed - paused)).abs() < 1e-9,
        "{}",
        summary.paused_seconds
    );
    assert!((summary.measured_seconds + summary.paused_seconds - 3.0).abs() < 1e-9);
    assert!((summary.total.rps - calls / summary.measured_seconds).abs() < 1e-6);
    let table = volley::report::render_table(&report);
    let shown = format!(
        "{:.2} s measured ({:.2} s paused, left out)",
        summary.measured_seconds, summary.paused_seconds
    );
    assert!(table.contains(&shown), "{table}");
}

/// Runs `text` with `/metrics` served from the live feed, and scrapes it
/// once the run has ended (before the endpoint stops): the report and the
/// whole response.
fn run_and_scrape(text: &str) -> (volley::report::RunReport, String) {
    let scenario = common::scenario(text);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let feed = Arc::new(Feed::new("test", Some(3), false, vec![target_info("one")]));
    runtime.block_on(async {
        let listener = volley::endpoint::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        tokio::spawn(metrics::serve(listener, feed.clone(), false, stop.clone()));
        let report = volley::execute(
            &scenario,
            None,
            CancellationToken::new(),
            feed.info(0).control.clone(),
            |s| feed.publish(0, s),
        )
        .await
        .unwrap();
        let body = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            response
        })
        .await
        .unwrap();
        stop.cancel();
        (report, body)
    })
}

fn target_info(name: &str) -> TargetInfo {
    TargetInfo {
        name: name.into(),
        url: "http://127.0.0.1".into(),
        transport: "http/1.1".into(),
        thresholds: Vec::new(),
        control: Arc::new(Control::new()),
    }
}

const TWO_METHODS: &str = "[load]\nconcurrency = 4\nrequests = 2000\n[[calls]]\nmethod = \"eth_chainId\"\n[[calls]]\nmethod = \"nope\"\n";

#[test]
fn the_metrics_endpoint_serves_counters_and_histograms_that_match_the_summary() {
    let server = server();
    let (report, body) = run_and_scrape(&format!("target = \"{}\"\n{TWO_METHODS}", server.url()));
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("content-type: text/plain; version=0.0.4"), "{body}");
    // Every value as Prometheus reads it, rounded to 9 significant digits
    // at most: `0.000774`, never `0.0007740000000000001`.
    let samples = body.lines().skip_while(|l| !l.is_empty()).skip(1);
    for line in samples.filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let value = line.rsplit_once(' ').expect("a sample is `name value`").1;
        assert!(value.parse::<f64>().is_ok(), "{line}");
        let mantissa = value.split(['e', 'E']).next().unwrap();
        let digits = mantissa.trim_start_matches(['-', '0', '.']).replace('.', "");
        assert!(digits.len() <= 9, "over 9 significant digits: {line}");
        // Every series names its target and shard.
        assert!(line.contains("{target=\"one\",shard=\"3\""), "{line}");
    }
    let mut calls = 0;
    let mut counted = 0;
    for line in body.lines().filter(|l| !l.starts_with('#') && l.contains('{')) {
        let (series, value) = line.rsplit_once(' ').expect("a sample is `name{labels} value`");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number in {line:?}"));
        assert!(series.ends_with('}'), "{line}");
        if series.starts_with("volley_calls_total{") {
            calls += value as u64;
        }
        if series.starts_with("volley_latency_seconds_count{") {
            counted += value as u64;
        }
    }
    assert_eq!(calls, report.summary.total.calls);
    assert_eq!(calls, 2000);
    // The histograms count every call: none failed to connect.
    assert_eq!(counted, 2000);
    for m in &report.summary.methods {
        let labels = format!("target=\"one\",shard=\"3\",method=\"{}\"", m.method);
        assert!(
            body.contains(&format!("volley_latency_seconds_count{{{labels}}} {}\n", m.calls)),
            "{body}"
        );
        assert!(
            body.contains(&format!(
                "volley_latency_seconds_bucket{{{labels},le=\"+Inf\"}} {}\n",
                m.calls
            )),
            "{body}"
        );
        assert!(body.contains(&format!("volley_latency_seconds_bucket{{{labels},le=\"60\"}} ")));
        assert!(body.contains(&format!(
            "volley_latency_quantile_seconds{{{labels},quantile=\"0.99\"}} "
        )));
    }
    let errors = report.summary.total.rpc_error_codes[&-32601];
    assert!(
        body.contains(&format!(
            "volley_rpc_errors_total{{target=\"one\",shard=\"3\",method=\"nope\",code=\"-32601\"}} {errors}"
        )),
        "{body}"
    );
    assert!(body.contains("volley_finished{target=\"one\",shard=\"3\"} 1"));
}

/// Every `volley_...` name in a query of `docs/grafana-dashboard.json`, and
/// every label it sums or filters by.
fn dashboard_queries() -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/grafana-dashboard.json");
    let board: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    fn walk(value: &serde_json::Value, into: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value.as_str()) {
                        ("expr" | "query", Some(text)) => into.push(text.to_string()),
                        _ => walk(value, into),
                    }
                }
            }
            serde_json::Value::Array(list) => list.iter().for_each(|v| walk(v, into)),
            _ => {}
        }
    }
    walk(&board, &mut exprs);
    exprs
}

#[test]
fn the_grafana_dashboard_asks_only_for_series_and_labels_volley_serves() {
    let server = server();
    let (_, body) = run_and_scrape(&format!("target = \"{}\"\n{TWO_METHODS}", server.url()));
    let served: std::collections::BTreeSet<&str> = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty() && l.starts_with("volley_"))
        .map(|l| l.split(['{', ' ']).next().unwrap())
        .collect();
    let labels: std::collections::BTreeSet<&str> = body
        .lines()
        .filter_map(|l| l.split_once('{')?.1.split_once('}'))
        .flat_map(|(inside, _)| {
            inside
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .map(|p| p.0)
        })
        .collect();
    let queries = dashboard_queries();
    assert!(queries.len() >= 8, "{queries:?}");
    let name = regex::Regex::new(r"volley_[a-z_]+").unwrap();
    let grouped = regex::Regex::new(r"(?:by|without) \(([^)]*)\)").unwrap();
    let matched = regex::Regex::new(r"([a-z_]+)\s*(?:=~|!~|!=|=)\s*\x22").unwrap();
    let mut asked = 0;
    for query in &queries {
        for found in name.find_iter(query) {
            asked += 1;
            assert!(
                served.contains(found.as_str()),
                "`{}` in `{query}` is not served: {served:?}",
                found.as_str()
            );
        }
        let by = grouped
            .captures_iter(query)
            .flat_map(|c| c[1].split(',').map(|l| l.trim().to_string()).collect::<Vec<_>>());
        let filtered = matched.captures_iter(query).map(|c| c[1].to_string());
        for label in by.chain(filtered).filter(|l| !l.is_empty()) {
            assert!(
                labels.contains(label.as_str()),
                "label `{label}` in `{query}` is on no series: {labels:?}"
            );
        }
    }
    assert!(asked >= 8, "{queries:?}");
    assert!(queries
        .iter()
        .any(|q| q.contains("histogram_quantile") && q.contains("volley_latency_seconds_bucket")));
    assert!(queries.iter().any(|q| q.contains("$target")), "a target variable");
}

#[test]
fn the_keys_steer_every_target_running_together() {
    let (a, b) = (server(), server());
    let text = |url: String| {
        format!(
        "target = \"{url}\"\n[load]\nrate = 100\nduration = \"2s\"\n[[calls]]\nmethod = \"eth_chainId\"\n"
    )
    };
    let scenarios = [common::scenario(&text(a.url())), common::scenario(&text(b.url()))];
    let feed = Arc::new(Feed::new(
        "test",
        None,
        true,
        vec![target_info("a"), target_info("b")],
    ));
    let steering = {
        let feed = feed.clone();
        std::thread::spawn(move || {
            let both_running = || (0..2).all(|i| feed.now(i).phase() == volley::feed::Phase::Running);
            while !both_running() {
                std::thread::sleep(Duration::from_millis(1));
            }
            for action in [
                Action::TogglePause,
                Action::TogglePause,
                Action::Raise,
                Action::Lower,
            ] {
                volley::tui::steer(&feed, action);
            }
        })
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let reports = runtime.block_on(futures_util::future::join_all((0..2).map(|i| {
        let feed = feed.clone();
        let control = feed.info(i).control.clone();
        let scenario = &scenarios[i];
        async move {
            volley::execute(scenario, None, CancellationToken::new(), control, |s| {
                feed.publish(i, s)
            })
            .await
            .unwrap()
        }
    })));
    steering.join().unwrap();
    for report in &reports {
        let events: Vec<&str> = report.summary.events.iter().map(|e| e.what.as_str()).collect();
        assert_eq!(
            events,
            [
                "paused",
                "resumed",
                "target set to 110 requests/s",
                "target set to 99 requests/s"
            ]
        );
    }
}
