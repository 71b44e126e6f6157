use super::{count, method_line, server_usage_line, verdict_line};
use crate::stats::{MethodSummary, RunSummary, ServerUsage};

#[test]
fn many_server_processes_are_summed_up_in_one_line() {
    let usage = |cpu: f64, mb: u64| ServerUsage {
        pid: 1,
        label: "stdio child 1".into(),
        cpu_seconds: 0.1,
        cpu_seconds_per_1000_calls: cpu,
        calls: 10,
        peak_rss_bytes: mb * 1_000_000,
        final_rss_bytes: 0,
        samples: 1,
        exited: false,
    };
    let all: Vec<ServerUsage> = (1..=5)
        .map(|i| usage(f64::from(i as u8) / 10.0, 80 + i))
        .collect();
    assert_eq!(
        super::servers_line(&all),
        "server: 5 processes watched (each in summary.json's `server`): CPU s per 1,000 calls p50 0.300, resident at peak p50 83.0 MB"
    );
}

#[test]
fn a_valid_verdict_says_the_requests_never_sent() {
    let mut total = MethodSummary {
        method: "TOTAL".into(),
        calls: 290,
        ok: 200,
        errors: 90,
        ..Default::default()
    };
    total.outcomes.insert("ok", 200);
    total.outcomes.insert("connect", 90);
    let mut summary = RunSummary::of_methods(Vec::new(), total, 4.0);
    summary.schedule = Some(crate::stats::ScheduleSummary {
        unsent: 110,
        ..Default::default()
    });
    let line = verdict_line(&summary);
    assert!(
        line.ends_with("(connect 31%) · 110 requests due never sent"),
        "{line}"
    );
    summary.verdict.valid = false;
    assert!(
        !verdict_line(&summary).contains("never sent"),
        "among the reasons instead"
    );
}

#[test]
fn a_row_without_calls_shows_no_latency() {
    let empty = MethodSummary {
        method: "eth_call".into(),
        ..Default::default()
    };
    let line = method_line(&empty, 8);
    assert!(!line.contains("0.000"), "{line}");
    assert_eq!(line.matches(" -").count(), 5, "{line}");
    // Notifications only: calls, but none with a latency.
    let mut notified = empty;
    notified.calls = 3;
    assert_eq!(method_line(&notified, 8).matches(" -").count(), 5);
    let mut one = notified;
    one.latency.timed = 1;
    one.latency.p50_ms = 1.5;
    assert!(method_line(&one, 8).contains("1.500"));
}

#[test]
fn a_server_process_line_gives_its_cpu_per_thousand_calls_and_memory() {
    let mut usage = ServerUsage {
        pid: 42,
        label: "pid 42".into(),
        cpu_seconds: 3.1,
        cpu_seconds_per_1000_calls: 0.5125,
        calls: 6049,
        peak_rss_bytes: 45_200_000,
        final_rss_bytes: 44_000_000,
        samples: 4,
        exited: false,
    };
    assert_eq!(
        server_usage_line(&usage),
        "server pid 42: 0.512 CPU s per 1,000 calls (3.10 s in all), resident 45.2 MB at peak, 44.0 MB at the end"
    );
    usage.exited = true;
    assert!(server_usage_line(&usage).ends_with("44.0 MB at the last reading: it ended during the run"));
}

#[test]
fn processes_read_once_are_said_to_have_no_figures() {
    let mut summary = RunSummary::of_methods(Vec::new(), MethodSummary::default(), 1.0);
    let mut out = String::new();
    super::extras(&mut out, &summary);
    assert!(!out.contains("read only once"), "{out}");
    summary.servers_read_once = 3;
    super::extras(&mut out, &summary);
    assert!(
        out.contains(
            "server: 3 processes read only once in the run (under a second alive): no CPU figures for them"
        ),
        "{out}"
    );
}

/// Flows on sessions of their own open nothing before the run: the
/// line says so, not "0 of 0" and "30 reopened".
#[test]
fn a_run_of_flows_with_their_own_sessions_tells_its_connections_plainly() {
    let mut c = crate::stats::ConnectSummary {
        planned: 0,
        opened: 0,
        reopened: 30,
        opened_in_all: 30,
        recycled: 30,
        failed: 0,
        error: None,
        time: Default::default(),
        backoff_waits: 0,
        backoff_s: 0.0,
    };
    let line = super::connections_line(&c);
    assert!(
        line.starts_with(
            "connections: none before the schedule began · 30 opened during the run (connect time"
        ),
        "{line}"
    );
    assert!(!line.contains("reopened"), "{line}");
    assert!(
        line.ends_with("30 closed on purpose (reconnect_every or a flow's own session)"),
        "{line}"
    );
    (c.planned, c.opened, c.reopened, c.opened_in_all) = (2, 2, 18, 20);
    let line = super::connections_line(&c);
    assert!(
        line.starts_with("connections: 2 of 2 opened before the schedule began"),
        "{line}"
    );
    assert!(
        line.contains(" · 18 reopened during the run, 20 opened in all · "),
        "{line}"
    );
    (c.backoff_waits, c.backoff_s) = (5, 0.31);
    let line = super::connections_line(&c);
    assert!(
        line.contains(" · 5 waits before opening again (0.310 s in all; volley's backoff)"),
        "{line}"
    );
}

#[test]
fn one_is_singular_and_the_rest_plural() {
    assert_eq!(count(1, "connection"), "1 connection");
    assert_eq!(count(0, "connection"), "0 connections");
    assert_eq!(count(2, "call"), "2 calls");
    assert_eq!(count(3, "batch"), "3 batches");
    assert_eq!(count(1, "batch"), "1 batch");
}
