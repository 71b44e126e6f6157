use std::time::Duration;

use super::super::{each, parse};
use super::*;
use crate::stats::{Outcome, ProtocolKind};
use crate::stats::{Recorder, StageSummary};

const METHODS: [&str; 5] = ["eth_call", "tools/call", "rpc.discover", "eth_getLogs", "flow:f"];
const SECONDS: f64 = 10.0;

/// A two-stage run of 10 s, made as the engine makes one: recorders
/// per stage, merged into the run's, summed up by `MethodSummary::new`.
/// Stage 1 (5 s): `eth_call`, 1000 calls: 990 ok at 1..=100 ms, 5
/// rpc_error -32005, 3 http_status 429, 1 id_mismatch, 1 timeout at 2 s.
/// Stage 2 (5 s): `tools/call`, 100 ok at exactly 1.5 ms (exact in the
/// histograms below 2048 µs); `rpc.discover`, 10 connect failures.
/// `eth_getLogs` is in the mix and never called.
fn summary() -> RunSummary {
    let ms = Duration::from_millis;
    let mut first = Recorder::new(METHODS.len());
    let eth_call = &mut first.methods[0];
    for i in 0..990 {
        eth_call.record(Outcome::Ok, ms(1 + i % 100), ms(1), 100);
    }
    for _ in 0..5 {
        eth_call.record(Outcome::RpcError(-32005), ms(3), ms(3), 80);
    }
    for _ in 0..3 {
        eth_call.record(Outcome::HttpStatus(429), ms(1), ms(1), 20);
    }
    let id_mismatch = Outcome::Protocol(ProtocolKind::IdMismatch);
    eth_call.record(id_mismatch, ms(4), ms(4), 50);
    eth_call.record(Outcome::Timeout, ms(2000), ms(2000), 0);
    let mut second = Recorder::new(METHODS.len());
    for _ in 0..100 {
        let exact = Duration::from_micros(1500);
        second.methods[1].record(Outcome::Ok, exact, exact, 60);
    }
    for _ in 0..10 {
        second.methods[2].record(Outcome::Connect, ms(5), ms(5), 0);
    }
    let stages = [(&first, 0.0, 5.0), (&second, 5.0, 10.0)]
        .iter()
        .enumerate()
        .map(|(stage, (recorder, start_s, end_s))| StageSummary {
            stage,
            start_s: *start_s,
            end_s: *end_s,
            total: MethodSummary::new("TOTAL", &recorder.total(), end_s - start_s),
        })
        .collect();
    let mut run = first.clone();
    run.merge(&second);
    RunSummary {
        requests: run.calls(),
        stages,
        ..RunSummary::of_methods(
            (METHODS.iter().zip(&run.methods))
                .map(|(name, stats)| MethodSummary::new(name, stats, SECONDS))
                .collect(),
            MethodSummary::new("TOTAL", &run.total(), SECONDS),
            SECONDS,
        )
    }
}

fn judge(text: &str, summary: &RunSummary) -> ThresholdResult {
    parse(text)
        .unwrap_or_else(|e| panic!("{text} should parse: {e}"))
        .evaluate(summary)
}

/// Asserts that each of `passing` passes and each of `failing` fails,
/// measured (a failure for want of a figure is tested apart).
fn passes_and_fails(summary: &RunSummary, passing: &str, failing: &str) {
    for text in each(passing) {
        let result = judge(text, summary);
        assert!(result.passed, "{text} should pass: {result}");
    }
    for text in each(failing) {
        let result = judge(text, summary);
        assert!(!result.passed, "{text} should fail: {result}");
        assert!(result.measured.is_some(), "{text}: {result}");
    }
}

#[test]
fn each_comparison_passes_on_one_side_and_fails_on_the_other() {
    let s = summary();
    // eth_call made 1000 calls with 10 errors.
    passes_and_fails(
        &s,
        "eth_call.errors < 11; eth_call.errors <= 10; eth_call.errors > 9;
         eth_call.errors >= 10; eth_call.errors == 10; eth_call.errors != 9",
        "eth_call.errors < 10; eth_call.errors <= 9; eth_call.errors > 10;
         eth_call.errors >= 11; eth_call.errors == 9; eth_call.errors != 10",
    );
}

#[test]
fn latency_is_judged_in_ms_from_the_intended_send_time() {
    let s = summary();
    let total = &s.total.latency;
    // 1.5 ms is exact in the histograms: every unit lands on it.
    passes_and_fails(
        &s,
        "tools/call.p50 == 1.5ms; tools/call.p99 == 1500us; tools/call.max == 0.0015s;
         tools/call.mean <= 1.5ms; tools/call.p90 >= 1500µs; tools/call.p999 < 2ms;
         p99 < 200ms; p50 > 20ms; max >= 1.9s; p999 < 3s",
        "tools/call.p50 < 1.5ms; tools/call.max > 1500us; p99 < 50ms; max < 1s",
    );
    let p99 = judge("p99 < 200ms", &s);
    assert_eq!((p99.measured, p99.unit), (Some(total.p99_ms), "ms"));
    // A figure written back at its own value holds `==` exactly.
    for (figure, value) in [
        ("max", total.max_ms),
        ("mean", total.mean_ms),
        ("p90", total.p90_ms),
    ] {
        let result = judge(&format!("{figure} == {value}ms"), &s);
        assert!(result.passed, "{result}");
    }
    assert_eq!(judge("tools/call.p99 < 2ms", &s).shown, "1.5 ms");
}

#[test]
fn rate_is_calls_a_second_of_the_scope() {
    let s = summary();
    // 1110 calls in 10 s; 1000 of them eth_call; stage 2 had 110 in 5 s.
    passes_and_fails(
        &s,
        "rps == 111; calls_per_s > 100; eth_call.rps >= 100; stage[2].rps == 22;
         stage[1].rps > 199.9/s",
        "rps > 1000; eth_call.calls_per_s < 100; stage[2].rps != 22",
    );
    assert_eq!(judge("rps > 1000", &s).shown, "111 calls/s");
}

#[test]
fn counts_and_their_shares_of_the_calls() {
    let s = summary();
    passes_and_fails(
        &s,
        "calls == 1110; eth_call.calls == 1000; ok == 1090; eth_call.ok >= 99%; errors == 20;
         protocol == 1; protocol <= 0.1%; eth_call.timeout == 1; rpc_error == 5;
         http_status == 3; invalid_json == 0; io == 0; assertion == 0; connect == 10;
         rpc.discover.connect == 100%; eth_call.rpc_error == 0.5%",
        "calls < 1000; ok == 100%; protocol == 0; eth_call.protocol < 0.1%; connect == 0;
         eth_call.rpc_error > 0.5%",
    );
    let protocol = judge("protocol == 0", &s);
    assert_eq!(
        (protocol.measured, protocol.shown.as_str()),
        (Some(1.0), "1 call")
    );
    assert_eq!(judge("errors < 5", &s).shown, "20 calls");
}

#[test]
fn a_run_still_going_stops_only_on_a_count_that_can_no_longer_pass() {
    let s = summary();
    let so_far = |text: &str| parse(text).unwrap().evaluate_so_far(&s.methods, &s.total);
    // 1,110 calls and 20 errors so far.
    for may_yet_pass in ["calls > 5000", "calls >= 5000", "errors == 30", "protocol != 1"] {
        assert_eq!(so_far(may_yet_pass), None, "{may_yet_pass}");
    }
    for past_saving in ["errors < 5", "errors <= 19", "errors == 10"] {
        assert_eq!(
            so_far(past_saving).map(|r| r.passed),
            Some(false),
            "{past_saving}"
        );
    }
    // Shares and latencies are judged as they stand; stages at the end.
    assert_eq!(so_far("error_rate < 0.1%").map(|r| r.passed), Some(false));
    assert_eq!(so_far("calls > 10").map(|r| r.passed), Some(true));
    assert_eq!(so_far("stage[1].p99 < 1ms"), None);
}

#[test]
fn the_live_views_see_every_threshold_passing_failing_or_pending() {
    let s = summary();
    let live = |text: &str| {
        let so_far = parse(text).unwrap().so_far(&s.methods, &s.total);
        (so_far.standing, so_far.shown)
    };
    assert_eq!(live("calls > 10"), (Standing::Pass, "1110 calls".into()));
    assert_eq!(live("errors < 5"), (Standing::Fail, "20 calls".into()));
    let pending = |shown: &str| (Standing::Pending, shown.to_string());
    assert_eq!(live("calls > 5000"), pending("1110 calls so far, may yet pass"));
    assert_eq!(live("stage[1].p99 < 1ms"), pending("judged at the end"));
    assert_eq!(
        live("eth_getLogs.p99 < 1s"),
        pending("`eth_getLogs` made no calls")
    );
    assert_eq!(live("nope.p99 < 1s"), pending("`nope` made no calls yet"));
}

#[test]
fn error_rate_holds_exactly_at_its_limit_as_a_percent_or_a_fraction() {
    let s = summary();
    // eth_call: 10 errors in 1000 calls, exactly 1%.
    passes_and_fails(
        &s,
        "eth_call.error_rate <= 1%; eth_call.error_rate == 1%; eth_call.error_rate >= 0.01;
         eth_call.error_rate == 0.01; tools/call.error_rate == 0; stage[2].error_rate < 10%",
        "eth_call.error_rate < 1%; eth_call.error_rate > 0.01; error_rate < 0.1%",
    );
    let rate = judge("eth_call.error_rate < 0.5%", &s);
    assert_eq!(
        (rate.measured, rate.unit, rate.shown.as_str()),
        (Some(1.0), "%", "1%")
    );
    let fraction = judge("eth_call.error_rate < 0.005", &s);
    assert_eq!(fraction.measured, Some(s.methods[0].error_rate));
    assert_eq!((fraction.unit, fraction.shown.as_str()), ("fraction", "1%"));
}

#[test]
fn error_codes_statuses_and_rules_are_counted_apart() {
    let s = summary();
    passes_and_fails(
        &s,
        "rpc_error[-32005] == 5; eth_call.rpc_error[-32005] == 0.5%; rpc_error[-32000] == 0;
         http_status[429] == 3; eth_call.http_status[429] <= 0.3%; http_status[503] == 0;
         protocol[id_mismatch] == 1; protocol[wrong_version] == 0;
         stage[1].rpc_error[-32005] == 5; stage[2].http_status[429] == 0",
        "rpc_error[-32005] < 1; eth_call.rpc_error[-32005] < 0.5%; http_status[429] == 0;
         protocol[id_mismatch] == 0",
    );
    let share = judge("tools/call.http_status[429] < 1%", &s);
    assert_eq!((share.measured, share.shown.as_str()), (Some(0.0), "0%"));
    assert_eq!(judge("eth_call.http_status[429] < 1%", &s).shown, "0.3%");
}

#[test]
fn method_names_keep_their_dots_and_slashes() {
    passes_and_fails(
        &summary(),
        "tools/call.calls == 100; rpc.discover.calls == 10; rpc.discover.errors == 100%",
        "tools/call.ok < 100; rpc.discover.ok > 0",
    );
}

/// Calls a stop cut unanswered are in no figure: a limit that holds on
/// the rest fails, saying so; one that fails on them still fails.
#[test]
fn a_limit_is_not_passed_on_calls_a_stop_cut() {
    let mut s = summary();
    assert!(judge("p99 < 5s", &s).passed);
    s.in_flight_at_end = 21;
    let result = judge("p99 < 5s", &s);
    assert!(!result.passed, "{result}");
    assert!(result.measured.is_some(), "the calls seen are still shown");
    let note = result.note.clone().unwrap_or_default();
    assert!(note.contains("a stop cut 21 calls unanswered"), "{result}");
    let failed = judge("p99 < 1ms", &s);
    assert_eq!((failed.passed, failed.note), (false, None));
}

/// A row of notifications has calls but no latency: a limit on it
/// fails, never passing on a zero.
#[test]
fn a_latency_of_notifications_only_fails_and_says_why() {
    let mut stats = crate::stats::MethodStats::default();
    for _ in 0..7 {
        stats.record_notification(Outcome::Ok, Duration::from_micros(15));
    }
    let row = MethodSummary::new("log", &stats, SECONDS);
    let s = RunSummary::of_methods(vec![row.clone()], row, SECONDS);
    let result = judge("log.p99 < 1s", &s);
    assert_eq!((result.passed, result.measured), (false, None), "{result}");
    let note = result.note.clone().unwrap_or_default();
    assert!(note.contains("`log`'s 7 calls have no latency"), "{result}");
    passes_and_fails(&s, "log.calls == 7; log.ok == 7", "log.errors > 0");
}

#[test]
fn a_figure_the_run_does_not_have_fails_and_says_why() {
    let s = summary();
    let cases = [
        ("eth_getLogs.p99 < 1s", "`eth_getLogs` made no calls"),
        ("eth_getLogs.errors == 0", "`eth_getLogs` made no calls"),
        ("eth_getLogs.error_rate < 1%", "`eth_getLogs` made no calls"),
        ("flow:f.p99 < 1s", "`flow:f` had no flow that ended"),
        (
            "net_version.p99 < 1s",
            "`net_version` is not among the run's methods",
        ),
        ("stage[3].p99 < 1s", "the run had 2 stages, not 3"),
        (
            "rpc.discover.p50 < 1s",
            "none of `rpc.discover`'s 10 calls reached the server",
        ),
    ];
    for (text, note) in cases {
        let result = judge(text, &s);
        assert_eq!((result.passed, result.measured), (false, None), "{result}");
        assert_eq!(result.shown, "not measured");
        let written = result.note.clone().unwrap_or_default();
        assert!(written.contains(note), "{text}: {written}");
        assert!(result
            .to_string()
            .starts_with(&format!("FAIL  {text}  (not measured: ")));
    }
    // Calls and rate are honestly zero without calls.
    passes_and_fails(
        &s,
        "eth_getLogs.calls == 0; eth_getLogs.rps == 0",
        "eth_getLogs.calls > 0",
    );
    let mut unstaged = s.clone();
    unstaged.stages.clear();
    let note = judge("stage[1].rps > 1", &unstaged).note;
    assert_eq!(note.as_deref(), Some("the run had no stages"));
}

#[test]
fn unknown_methods_and_stages_are_refused_before_the_run() {
    let all = |texts: &str| -> Vec<Threshold> { each(texts).map(|t| parse(t).unwrap()).collect() };
    let known = all("p99 < 1s; eth_call.p50 < 20ms; rpc.discover.ok > 0; stage[2].rps > 1");
    assert_eq!(check_methods(&known, &METHODS, (2, true)), Ok(()));
    let error = check_methods(&all("eth_cal.p99 < 1s"), &METHODS, (0, true)).unwrap_err();
    assert!(
        error.contains("threshold `eth_cal.p99 < 1s`: no method `eth_cal`"),
        "{error}"
    );
    assert!(
        error.contains("`eth_call`, `tools/call`, `rpc.discover`, `eth_getLogs`"),
        "{error}"
    );
    let error = check_methods(&all("stage[3].p99 < 1s"), &METHODS, (2, true)).unwrap_err();
    assert!(
        error.contains("the load has 2 stages, `stage[1]` to `stage[2]`"),
        "{error}"
    );
    let error = check_methods(&all("stage[1].p99 < 1s"), &METHODS, (0, true)).unwrap_err();
    assert!(error.contains("the load has no stages"), "{error}");
    // Every problem at once, so one fix-and-retry is enough.
    let error = check_methods(&all("a.p99 < 1s; p99 < 1s; b.ok > 0"), &METHODS, (0, true)).unwrap_err();
    assert_eq!(error.lines().count(), 2, "{error}");
}

#[test]
fn results_serialize_for_summary_json() {
    let s = summary();
    let thresholds = [
        parse("p99 < 200ms").unwrap(),
        parse("eth_getLogs.p99 < 1s").unwrap(),
    ];
    let json = serde_json::to_value(evaluate_all(&thresholds, &s)).unwrap();
    assert_eq!(json[0]["expression"], "p99 < 200ms");
    assert_eq!(json[0]["measured"], s.total.latency.p99_ms);
    assert_eq!(
        (&json[0]["unit"], &json[0]["passed"]),
        (&"ms".into(), &true.into())
    );
    assert!(json[0].get("note").is_none());
    assert_eq!(json[1]["measured"], serde_json::Value::Null);
    assert_eq!(json[1]["passed"], false);
    assert_eq!(json[1]["note"], "`eth_getLogs` made no calls");
}

#[test]
fn measured_values_are_shown_with_four_significant_digits() {
    let cases = [
        (212.4, "212.4"),
        (0.37, "0.37"),
        (1043.21, "1043"),
        (99.0071, "99.01"),
        (0.0, "0"),
    ];
    for (value, shown) in cases {
        assert_eq!(significant(value), shown);
    }
}

/// Requests due and never sent: a count, or a share of those due, of
/// the run only; a closed model has none to judge, and says so before
/// the run.
#[test]
fn unsent_requests_are_judged_on_the_schedule() {
    let mut delays = crate::stats::new_histogram();
    for _ in 0..495 {
        delays.record(100).unwrap();
    }
    let mut open = summary();
    open.schedule = Some(crate::stats::ScheduleSummary::of(&delays, 5, 500));
    let held = judge("unsent < 2%", &open);
    assert!(held.passed, "{held}");
    assert_eq!(held.shown, "1%", "5 of the 500 due");
    let failed = judge("unsent == 0", &open);
    assert!(!failed.passed, "{failed}");
    assert_eq!(failed.shown, "5 requests never sent");
    assert!(judge("unsent <= 5", &open).passed);
    let closed = judge("unsent == 0", &summary());
    assert!(!closed.passed, "not measured is not passed");
    assert!(closed.note.unwrap().contains("the closed model has no schedule"));
    let scoped = parse("eth_call.unsent == 0").unwrap_err();
    assert!(scoped.contains("`unsent` is the run's"), "{scoped}");
    let unsent = [parse("unsent == 0").unwrap()];
    let refused = check_methods(&unsent, &METHODS, (0, false));
    assert!(refused.unwrap_err().contains("`unsent` needs a rate"));
    assert_eq!(check_methods(&unsent, &METHODS, (0, true)), Ok(()));
}
