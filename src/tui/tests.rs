use std::collections::BTreeMap;
use std::time::Duration;

use ratatui::backend::TestBackend;
use ratatui::Terminal;

use super::*;
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

fn screen(dashboard: &Dashboard) -> String {
    let mut terminal = Terminal::new(TestBackend::new(140, 44)).unwrap();
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
    let mut dashboard = Dashboard::new("demo", "http://127.0.0.1:8545", "http/1.1");
    dashboard.update(&snapshot());
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
    assert_eq!(dashboard.rate.len(), 10);
}

#[test]
fn subscriptions_and_stray_messages_are_shown() {
    let mut dashboard = Dashboard::new("ws", "ws://127.0.0.1:8546", "websocket");
    dashboard.update(&Snapshot {
        subscriptions: 4,
        notifications: 38,
        unsolicited: 2,
        behind: false,
        ..snapshot()
    });
    let text = screen(&dashboard);
    assert!(text.contains("4 subscriptions · 38 notifications"), "{text}");
    assert!(text.contains("2 messages answered no call"), "{text}");
}

#[test]
fn the_latency_view_switches_to_the_whole_run() {
    let mut dashboard = Dashboard::new("demo", "x", "http/1.1");
    dashboard.update(&snapshot());
    dashboard.cumulative = true;
    let text = screen(&dashboard);
    assert!(text.contains("latency · whole run"), "{text}");
    assert!(text.contains("p50 0.431 ms"), "{text}");
}

#[test]
fn a_paused_run_says_so() {
    let mut dashboard = Dashboard::new("demo", "x", "http/1.1");
    dashboard.update(&Snapshot {
        paused: true,
        ..snapshot()
    });
    assert!(screen(&dashboard).contains("PAUSED"));
}
