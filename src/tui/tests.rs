use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ratatui::backend::TestBackend;
use ratatui::Terminal;

use super::*;
use crate::engine::Control;
use crate::feed::{Feed, TargetInfo};
use crate::stats::{LatencySummary, MethodSummary, SecondRow, Snapshot};

fn method(name: &str, calls: u64, errors: u64, p50: f64, p99: f64) -> MethodSummary {
    let mut outcomes = BTreeMap::new();
    outcomes.insert("ok", calls - errors);
    outcomes.insert("rpc_error", errors);
    MethodSummary {
        method: name.to_string(),
        calls,
        ok: calls - errors,
        errors,
        error_rate: errors as f64 / calls as f64,
        rps: calls as f64 / 10.0,
        latency: LatencySummary {
            p50_ms: p50,
            p90_ms: p50 * 2.0,
            p99_ms: p99,
            p999_ms: p99,
            max_ms: p99 * 2.0,
            mean_ms: p50,
            timed: calls,
        },
        outcomes,
        rpc_error_codes: if errors > 0 {
            BTreeMap::from([(-32000, errors)])
        } else {
            BTreeMap::new()
        },
        ..MethodSummary::default()
    }
}

fn snapshot() -> Snapshot {
    let methods = vec![
        method("eth_chainId", 4000, 0, 0.412, 1.875),
        method("eth_getBalance", 1000, 37, 0.533, 2.25),
    ];
    let total = method("TOTAL", 5000, 37, 0.431, 2.125);
    Snapshot {
        elapsed: Duration::from_secs(12),
        planned: Some(Duration::from_secs(30)),
        open: true,
        target: 500.0,
        in_flight: 17,
        interval: Some(method("last second", 498, 3, 0.397, 1.5)),
        total,
        methods,
        new_rows: (0..10)
            .map(|s| SecondRow {
                second: s,
                calls: 498,
                ok: 495,
                errors: 3,
                rps: 498.0,
                p50_ms: 0.4,
                p99_ms: 1.5,
                max_ms: 3.0,
                error_outcomes: [("rpc_error", 3)].into(),
                flows: 0,
                flow_errors: 0,
                server_cpu_cores: None,
                server_rss_bytes: None,
            })
            .collect(),
        histogram: vec![(0.5, 3000), (1.0, 1500), (2.5, 500)],
        interval_histogram: vec![(0.5, 300), (1.0, 150), (2.5, 48)],
        behind: true,
        last_error: Some("eth_getBalance: rpc_error(-32000): {\"message\":\"Injected error\"}".to_string()),
        ..Snapshot::default()
    }
}

/// A dashboard over a feed of `targets` (name, URL, thresholds), each
/// given its snapshot.
fn dashboard_of(parallel: bool, targets: &[(&str, &str, &[&str])], snapshots: &[Snapshot]) -> Dashboard {
    let infos = targets
        .iter()
        .map(|(name, url, thresholds)| TargetInfo {
            name: name.to_string(),
            url: url.to_string(),
            transport: "http/1.1".into(),
            thresholds: thresholds
                .iter()
                .map(|t| crate::thresholds::parse(t).unwrap())
                .collect(),
            control: Arc::new(Control::new()),
        })
        .collect();
    let feed = Arc::new(Feed::new("demo", None, parallel, infos));
    for (i, snapshot) in snapshots.iter().enumerate() {
        feed.publish(i, snapshot);
    }
    Dashboard::new(feed)
}

fn one(url: &str, snapshot: Snapshot) -> Dashboard {
    dashboard_of(false, &[("a", url, &[])], &[snapshot])
}

/// Each run of spaces as one, so a row reads as its words.
fn squeeze(text: &str) -> String {
    text.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn screen(dashboard: &Dashboard) -> String {
    screen_of(dashboard, 140, 44)
}

fn screen_of(dashboard: &Dashboard, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| draw(frame, dashboard)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

#[test]
fn the_screen_shows_methods_percentiles_errors_and_the_warning() {
    let dashboard = one("http://127.0.0.1:8545", snapshot());
    let text = screen(&dashboard);
    for expected in [
        "volley · demo → http://127.0.0.1:8545 · http/1.1 · open model",
        "12.0s / 30.0s",
        "target 500 requests/s · achieved 49.8 calls/s · in flight 17",
        "BEHIND SCHEDULE",
        "eth_chainId",
        "eth_getBalance",
        "3.70",
        "TOTAL",
        "0.533",
        "latency · last second",
        "p50 0.397 ms",
        "rpc_error 37",
        "-32000: 37",
        "latest: eth_getBalance: rpc_error(-32000)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert_eq!(dashboard.targets[0].history.len(), 10);
}

#[test]
fn subscriptions_and_stray_messages_are_shown() {
    let dashboard = one(
        "ws://127.0.0.1:8546",
        Snapshot {
            subscriptions: 4,
            notifications: 38,
            unsolicited: 2,
            behind: false,
            ..snapshot()
        },
    );
    let text = screen(&dashboard);
    assert!(text.contains("4 subscriptions · 38 notifications"), "{text}");
    assert!(text.contains("2 messages answered no call"), "{text}");
}

#[test]
fn the_latency_view_switches_to_the_whole_run() {
    let mut dashboard = one("x", snapshot());
    dashboard.cumulative = true;
    let text = screen(&dashboard);
    assert!(text.contains("latency · whole run"), "{text}");
    assert!(text.contains("p50 0.431 ms"), "{text}");
}

#[test]
fn a_paused_run_says_so() {
    let dashboard = one(
        "x",
        Snapshot {
            paused: true,
            interval: Some(method("last second", 0, 0, 0.0, 0.0)),
            ..snapshot()
        },
    );
    let text = screen(&dashboard);
    assert!(text.contains("PAUSED"));
    // A second without calls has no latency, not 0 ms.
    assert!(text.contains("no call answered: no latency"), "{text}");
}

#[test]
fn each_threshold_shows_its_value_so_far_and_where_it_stands() {
    let thresholds: &[&str] = &["p99 < 2ms", "errors < 10", "calls > 9000", "stage[1].p99 < 1s"];
    let dashboard = dashboard_of(false, &[("a", "x", thresholds)], &[snapshot()]);
    let text = screen(&dashboard);
    for expected in [
        "thresholds so far",
        "FAIL     p99 < 2ms  (2.125 ms)",
        "FAIL     errors < 10  (37 calls)",
        "pending  calls > 9000  (5000 calls so far, may yet pass)",
        "pending  stage[1].p99 < 1s  (judged at the end)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let passing = dashboard_of(false, &[("a", "x", &["p99 < 3ms"])], &[snapshot()]);
    assert!(screen(&passing).contains("pass     p99 < 3ms  (2.125 ms)"));
}

/// The second target: twice as slow, half the calls.
fn slower() -> Snapshot {
    Snapshot {
        interval: Some(method("last second", 249, 0, 0.794, 3.0)),
        total: method("TOTAL", 2500, 0, 0.862, 4.25),
        methods: vec![method("eth_chainId", 2500, 0, 0.824, 3.75)],
        in_flight: 9,
        behind: false,
        last_error: None,
        ..snapshot()
    }
}

#[test]
fn a_race_shows_the_heads_each_target_has_delivered_and_delivered_first_so_far() {
    let targets: &[(&str, &str, &[&str])] = &[
        ("fast", "ws://127.0.0.1:8546", &[]),
        ("slow", "ws://127.0.0.1:8547", &[]),
    ];
    let raced = |heads, first| Snapshot {
        race: Some((heads, first)),
        ..snapshot()
    };
    let dashboard = dashboard_of(true, targets, &[raced(12, 10), raced(11, 2)]);
    let text = screen(&dashboard);
    assert!(
        text.contains("race, heads first so far: fast 10 of 12 · slow 2 of 11"),
        "{text}"
    );
    let plain = dashboard_of(true, targets, &[snapshot(), snapshot()]);
    assert!(!screen(&plain).contains("race heads"));
}

#[test]
fn targets_at_once_are_shown_side_by_side_with_their_ratios_to_the_first() {
    let targets: &[(&str, &str, &[&str])] = &[
        ("fast", "http://127.0.0.1:8545", &["p99 < 2ms"]),
        ("slow", "http://127.0.0.1:8546", &["p99 < 2ms"]),
    ];
    let mut dashboard = dashboard_of(true, targets, &[snapshot(), slower()]);
    assert!(dashboard.side_by_side());
    // Columns as words, whatever their widths.
    let text = squeeze(&screen(&dashboard));
    for expected in [
        "volley · demo · 2 targets at once · open model",
        "targets · last second · ratios to fast",
        "target state calls/s p50 ms p99 ms errors error % in flight calls calls/s × p50 × p99 × url",
        // calls/s, p50 and p99 of the last second, errors, error %, in
        // flight, calls, then the ratios to the first: half the calls/s,
        // twice the latency.
        "fast running 49.8 0.397 1.500 3 0.60 17 5000 - - - http://127.0.0.1",
        "slow running 24.9 0.794 3.000 0 0.00 9 2500 0.50x 2.00x 2.00x http://127.0.0.1",
        "BEHIND SCHEDULE: fast",
        "fast: rpc_error 37",
        "slow: no errors",
        "fast: FAIL p99 < 2ms (2.125 ms)",
        "slow: FAIL p99 < 2ms (4.25 ms)",
        "p pause/resume all",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("methods · whole run"), "methods on demand only");
    dashboard.per_method = true;
    let text = squeeze(&screen(&dashboard));
    assert!(text.contains("methods · whole run"), "{text}");
    assert!(
        text.contains("eth_chainId slow 2500 0.00 250.0 0.824 3.750 7.500 2.00x"),
        "{text}"
    );
    assert!(text.contains("eth_getBalance fast 1000 3.70"), "{text}");
    dashboard.cumulative = true;
    let text = squeeze(&screen(&dashboard));
    assert!(text.contains("targets · whole run"), "{text}");
    // Whole run: 2,500 calls/s of 5,000, p50 0.862 of 0.431, p99 4.25 of 2.125.
    assert!(
        text.contains("slow running 250.0 0.862 4.250 0 0.00 9 2500 0.50x 2.00x 2.00x"),
        "{text}"
    );
}

#[test]
fn targets_in_turn_show_the_one_running() {
    let waiting = dashboard_of(false, &[("a", "http://a", &[]), ("b", "http://b", &[])], &[]);
    assert!(!waiting.side_by_side());
    assert_eq!(waiting.current(), 0);
    let finished = Snapshot {
        finished: true,
        ..snapshot()
    };
    let second = dashboard_of(
        false,
        &[("a", "http://a", &[]), ("b", "http://b", &[])],
        &[finished, slower()],
    );
    assert_eq!(second.current(), 1);
    let text = screen(&second);
    assert!(
        text.contains("volley · demo · target 2/2: b → http://b"),
        "{text}"
    );
}

#[test]
fn at_80_by_24_the_status_is_whole_and_six_methods_show() {
    let methods = [
        "eth_blockNumber",
        "eth_getBalance",
        "add",
        "echo",
        "eth_chainId",
        "log",
    ];
    let dashboard = one(
        "http://127.0.0.1:8545",
        Snapshot {
            methods: methods.iter().map(|m| method(m, 1000, 0, 0.4, 1.9)).collect(),
            subscriptions: 4,
            notifications: 38,
            stage: Some(1),
            stages: 3,
            ..snapshot()
        },
    );
    let text = screen_of(&dashboard, 80, 24);
    for figure in [
        "stage 2/3",
        "target 500 requests/s",
        "achieved 49.8 calls/s",
        "in flight 17",
        "calls 5000",
        "errors 37",
        "BEHIND SCHEDULE: the generator cannot keep the rate; add connections",
        "4 subscriptions · 38 notifications",
        "q quit · p pause/resume · +/- target",
        // The charts had no room: the percentiles are kept.
        "last second: p50 0.397 ms  p90 0.794  p99 1.500  p99.9 1.500  max 3.000",
    ] {
        assert!(text.contains(figure), "missing {figure:?} in:\n{text}");
    }
    for name in methods.iter().chain(&["TOTAL"]) {
        let row = text.lines().find(|l| l.starts_with(&format!("│{name} ")));
        assert!(row.is_some(), "no row for {name} in:\n{text}");
    }
}

#[test]
fn targets_at_once_at_80_by_24_keep_every_row_and_method_whole() {
    let targets: &[(&str, &str, &[&str])] = &[
        ("fast", "http://127.0.0.1:8545", &["p99 < 2ms"]),
        ("slow", "http://127.0.0.1:8546", &["p99 < 2ms"]),
    ];
    let mut dashboard = dashboard_of(true, targets, &[snapshot(), slower()]);
    dashboard.per_method = true;
    let text = squeeze(&screen_of(&dashboard, 80, 24));
    for expected in [
        "target state calls/s p50 ms p99 ms error % calls/s × p50 × p99 ×",
        "fast running 49.8 0.397 1.500 0.60 - - -",
        "slow running 24.9 0.794 3.000 0.00 0.50x 2.00x 2.00x",
        "eth_chainId fast 4000 0.00 400.0 0.412 1.875 -",
        "eth_getBalance fast 1000 3.70 100.0 0.533 2.250 -",
        "eth_chainId slow 2500 0.00 250.0 0.824 3.750 2.00x",
        "slow: FAIL p99 < 2ms (4.25 ms)",
        "q quit · p pause all",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

/// Targets named by host and port, on one host: narrow, each keeps the end
/// of its name (its port), so two are never shown alike.
#[test]
fn targets_on_one_host_are_told_apart_when_narrow() {
    let targets: &[(&str, &str, &[&str])] = &[
        ("127.0.0.1:18545", "http://127.0.0.1:18545", &[]),
        ("127.0.0.1:18565", "http://127.0.0.1:18565", &[]),
    ];
    let mut dashboard = dashboard_of(true, targets, &[snapshot(), slower()]);
    dashboard.per_method = true;
    let text = squeeze(&screen_of(&dashboard, 80, 24));
    for expected in [
        "…0.1:18545 running",
        "…0.1:18565 running",
        "eth_chainId …0.1:18565 2500",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("127.0.0.1: "), "{text}");
}
