//! Flows over the in-memory peer, under tokio's paused clock: steps in
//! order on one connection, captured values really sent, `until`'s tries
//! and `for_each`'s passes counted exactly, a failed capture skipping the
//! rest. The peer answers each call with its params, so a step can
//! capture what an earlier one sent.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::tests::{no_steering, plan, run_mix};
use crate::plan::{
    CallTemplate, Capture, Check, Flow, ForEach, Mix, MixCall, Pacing, Pick, Pointer, Scope, Step, Template,
    Until,
};
use crate::rpc::{Expectation, ResultCheck, Version};
use crate::stats::RunSummary;
use crate::transport::Peer;

/// A step of `method` whose params are `params` (`${...}` read `slots`).
fn step(row: u32, method: &str, params: serde_json::Value, slots: &[&str]) -> Step {
    let polled = Arc::new(crate::plan::Polled::new(Vec::new()));
    let vars: Vec<String> = slots.iter().map(|s| s.to_string()).collect();
    let scope = Scope {
        base_dir: std::path::Path::new("."),
        polled: &polled,
        vars: &vars,
    };
    let template = Template::compile(&params, &scope).expect("params compile");
    Step {
        row,
        template: CallTemplate::generated(Version::V2, method, Some(Arc::new(template))),
        notification: false,
        expect: None,
        captures: Vec::new(),
        until: None,
        for_each: None,
        always: false,
    }
}

fn capture(name: &str, slot: usize, pointer: &str, pick: Pick) -> Capture {
    Capture {
        name: name.into(),
        slot,
        pointer: Pointer::parse(pointer).unwrap(),
        pick,
        optional: false,
    }
}

/// A mix of one flow (weight 1) whose rows are `rows`, the flow's last.
fn flow_mix(rows: &[&str], steps: Vec<Step>, slots: usize) -> Mix {
    let flow = Flow {
        row: (rows.len() - 1) as u32,
        vars: Vec::new(),
        steps,
        slots,
        own_connection: false,
    };
    let rows = rows.iter().map(|r| r.to_string()).collect();
    Mix::with_flows(rows, Vec::new(), vec![(flow, 1)], None)
}

fn closed(flows: u64) -> crate::plan::LoadPlan {
    let mut plan = plan(Pacing::Closed, 1, 1);
    plan.requests = Some(flows);
    plan
}

fn row<'a>(summary: &'a RunSummary, name: &str) -> &'a crate::stats::MethodSummary {
    summary
        .methods
        .iter()
        .find(|m| m.method == name)
        .expect("the row is there")
}

/// A latency as the histogram keeps it: within its 0.1% of `ms`.
fn assert_ms(got: f64, ms: f64) {
    assert!((ms..=ms * 1.001).contains(&got), "{got} ms, not {ms} ms");
}

/// list → pick all → get each (capped at 2) → the last captured value sent
/// on: every step on one connection, in order, with the captured values.
#[tokio::test(start_paused = true)]
async fn a_flow_sends_its_steps_in_order_with_what_it_captured() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut list = step(0, "list", json!({"items": ["a", "b", "c"]}), &[]);
    list.captures = vec![capture("item", 0, "/items/*", Pick::All)];
    let mut get = step(1, "get", json!(["${item}"]), &["item"]);
    get.for_each = Some(ForEach { slot: 0, limit: 2 });
    get.captures = vec![capture("got", 1, "/0", Pick::First)];
    let last = step(
        2,
        "last",
        json!({"got": "${got}", "all": "${item}"}),
        &["item", "got"],
    );
    let mix = flow_mix(&["list", "get", "last", "flow:f"], vec![list, get, last], 2);
    let summary = run_mix(closed(3), mix, &peer, no_steering)
        .await
        .expect("the run ended");
    let seen = peer.counts().seen();
    let sent: Vec<(usize, &str, &str)> = (seen.iter())
        .take(4)
        .map(|s| (s.connection, s.method.as_str(), s.params.as_str()))
        .collect();
    assert_eq!(
        sent,
        [
            (0, "list", r#"{"items":["a","b","c"]}"#),
            (0, "get", r#"["a"]"#),
            (0, "get", r#"["b"]"#),
            (0, "last", r#"{"all":["a","b","c"],"got":"b"}"#),
        ]
    );
    assert_eq!(seen.len(), 12, "3 flows of 4 calls");
    assert_eq!(summary.requests, 12);
    assert_eq!(summary.total.calls, 12);
    assert_eq!(summary.total.ok, 12);
    let flows = row(&summary, "flow:f");
    assert_eq!((flows.calls, flows.ok), (3, 3));
    // Four answers of 10 ms each, one after the other.
    assert_ms(flows.latency.max_ms, 40.0);
    assert_eq!(row(&summary, "get").calls, 6);
    assert_eq!(summary.flows[0].started, 3);
    assert!(summary.flows[0].failed_at.is_empty());
}

/// A pointer that finds nothing fails its step as `capture` and leaves the
/// rest of the flow unsent, counted as skipped.
#[tokio::test(start_paused = true)]
async fn a_capture_that_finds_nothing_skips_the_rest_of_its_flow() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut first = step(0, "first", json!({"items": []}), &[]);
    first.captures = vec![capture("item", 0, "/items/*", Pick::Random)];
    let second = step(1, "second", json!(["${item}"]), &["item"]);
    let third = step(1, "second", json!([]), &[]);
    let mix = flow_mix(&["first", "second", "flow:f"], vec![first, second, third], 1);
    let summary = run_mix(closed(5), mix, &peer, no_steering)
        .await
        .expect("the run ended");
    assert_eq!(peer.counts().seen().len(), 5, "only the first step of each flow");
    let first = row(&summary, "first");
    assert_eq!(
        (first.calls, first.outcome(crate::stats::OutcomeKind::Capture)),
        (5, 5)
    );
    assert_eq!(row(&summary, "second").calls, 0);
    let flows = &summary.flows[0];
    assert_eq!(
        (flows.started, flows.completed, flows.failed, flows.skipped_steps),
        (5, 0, 5, 10)
    );
    assert_eq!(flows.failed_at[0].step, 1);
    assert_eq!(flows.failed_at[0].outcomes["capture"], 5);
    let example = &first.error_examples["capture"][0];
    assert!(
        example.reason.contains("/items/*") && example.reason.contains("`/items` is an empty array"),
        "{example:?}"
    );
    assert!(example.answer.contains("items"), "{example:?}");
}

/// An `until` waiting for `["mined"]`, tried every 100 ms for `within`:
/// against the peer, which answers `["pending"]`, it never holds.
fn never_mined(within: Duration) -> Until {
    Until {
        check: Check {
            expect: Expectation::Result(ResultCheck {
                equals: Some(json!(["mined"])),
                ..Default::default()
            }),
            equals: None,
        },
        every: Duration::from_millis(100),
        within,
    }
}

/// An `until` that never holds: tried every 100 ms within 1 s, each try a
/// call, the last one the step's failure.
#[tokio::test(start_paused = true)]
async fn an_until_that_never_holds_is_tried_until_its_time_is_up() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut wait = step(0, "wait", json!(["pending"]), &[]);
    wait.until = Some(never_mined(Duration::from_secs(1)));
    let mix = flow_mix(&["wait", "flow:f"], vec![wait], 0);
    let summary = run_mix(closed(1), mix, &peer, no_steering)
        .await
        .expect("the run ended");
    // Answers at 10 ms, then 110 ms apart: at 1,000 ms no try fits.
    let wait = row(&summary, "wait");
    assert_eq!((wait.calls, wait.ok), (10, 9));
    assert_eq!(wait.outcome(crate::stats::OutcomeKind::Until), 1);
    let example = &wait.error_examples["until"][0];
    assert!(
        example.reason.contains("within 1s (tried 10 times, every 100ms)"),
        "{example:?}"
    );
    let flows = row(&summary, "flow:f");
    assert_eq!((flows.calls, flows.errors), (1, 1));
    assert_ms(flows.latency.max_ms, 1000.0);
    assert_eq!(summary.flows[0].failed_at[0].outcomes["until"], 1);
}

/// An `until` that holds from a captured value on: tries stop there.
#[tokio::test(start_paused = true)]
async fn an_until_stops_once_it_holds() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut ask = step(0, "ask", json!(["0xab"]), &[]);
    ask.captures = vec![capture("tx", 0, "/0", Pick::First)];
    let mut wait = step(1, "wait", json!(["${tx}"]), &["tx"]);
    let equals = Template::compile(
        &json!(["${tx}"]),
        &Scope {
            base_dir: std::path::Path::new("."),
            polled: &Arc::new(crate::plan::Polled::new(Vec::new())),
            vars: &["tx".to_string()],
        },
    )
    .unwrap();
    wait.until = Some(Until {
        check: Check {
            expect: Expectation::Result(ResultCheck::default()),
            equals: Some(Arc::new(equals)),
        },
        every: Duration::from_millis(100),
        within: Duration::from_secs(1),
    });
    let mix = flow_mix(&["ask", "wait", "flow:f"], vec![ask, wait], 1);
    let summary = run_mix(closed(2), mix, &peer, no_steering)
        .await
        .expect("the run ended");
    assert_eq!(
        row(&summary, "wait").calls,
        2,
        "held at the first try of each flow"
    );
    assert_eq!(row(&summary, "flow:f").ok, 2);
}

/// The open model schedules flows: each arrival a flow, its latency from
/// its intended start; the steps' calls counted beside it.
#[tokio::test(start_paused = true)]
async fn the_open_model_schedules_flow_starts() {
    let peer = Peer::logging(Duration::from_millis(5));
    let one = step(0, "one", json!([1]), &[]);
    let two = step(1, "two", json!([2]), &[]);
    let mix = flow_mix(&["one", "two", "flow:f"], vec![one, two], 0);
    let mut plan = plan(Pacing::Open { rate: 100.0 }, 1, 8);
    plan.duration = Some(Duration::from_secs(1));
    let summary = run_mix(plan, mix, &peer, no_steering)
        .await
        .expect("the run ended");
    assert_eq!(peer.counts().seen().len(), 200, "100 flows of 2 steps");
    let flows = row(&summary, "flow:f");
    assert_eq!((flows.calls, flows.ok), (100, 100));
    assert_ms(flows.latency.p50_ms, 10.0);
    assert_eq!(summary.total.calls, 200);
    let schedule = summary.schedule.expect("an open run's schedule");
    assert_eq!((schedule.unsent, schedule.late_requests), (0, 0));
}

/// A flow among calls: arrivals drawn by weight, the total the calls'.
#[tokio::test(start_paused = true)]
async fn flows_and_calls_share_the_arrivals() {
    let peer = Peer::new(Duration::from_millis(1));
    let call = MixCall {
        method: 0,
        template: CallTemplate::new(Version::V2, "alone", None),
        batch: None,
        notification: false,
    };
    let flow = Flow {
        row: 3,
        vars: Vec::new(),
        steps: vec![step(1, "a", json!([]), &[]), step(2, "b", json!([]), &[])],
        slots: 0,
        own_connection: false,
    };
    let rows = ["alone", "a", "b", "flow:f"].map(String::from).to_vec();
    let mix = Mix::with_flows(rows, vec![(call, 1, None)], vec![(flow, 1)], None);
    let summary = run_mix(closed(1000), mix, &peer, no_steering)
        .await
        .expect("the run ended");
    let (alone, flows) = (row(&summary, "alone").calls, row(&summary, "flow:f").calls);
    assert_eq!(alone + flows, 1000, "each arrival one or the other");
    assert!(
        (400..600).contains(&flows),
        "{flows} flows of 1000 at even weights"
    );
    assert_eq!(summary.total.calls, alone + 2 * flows);
    assert_eq!(row(&summary, "a").calls, flows);
}

/// An optional capture of all that finds nothing: an empty list, a
/// `for_each` over it sends nothing, and the flow completes.
#[tokio::test(start_paused = true)]
async fn an_optional_capture_of_nothing_sends_its_for_each_no_call() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut list = step(0, "list", json!({"items": []}), &[]);
    list.captures = vec![Capture {
        optional: true,
        ..capture("item", 0, "/items/*", Pick::All)
    }];
    let mut get = step(1, "get", json!(["${item}"]), &["item"]);
    get.for_each = Some(ForEach { slot: 0, limit: 5 });
    let mix = flow_mix(&["list", "get", "flow:f"], vec![list, get], 1);
    let summary = run_mix(closed(3), mix, &peer, no_steering)
        .await
        .expect("the run ended");
    assert_eq!(peer.counts().seen().len(), 3, "the lists alone");
    assert_eq!(row(&summary, "flow:f").ok, 3);
    assert_eq!(row(&summary, "get").calls, 0);
}

/// Flows still going when the run stops are counted apart from their row
/// (as calls in flight are), and so are the callers they hold.
#[tokio::test(start_paused = true)]
async fn flows_still_going_at_the_end_are_counted_apart() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut wait = step(0, "wait", json!(["pending"]), &[]);
    wait.until = Some(never_mined(Duration::from_secs(10)));
    let mix = flow_mix(&["wait", "flow:f"], vec![wait], 0);
    // 10 flows due over 1 s, 2 callers, each flow taking 10 s.
    let mut plan = plan(Pacing::Open { rate: 10.0 }, 1, 2);
    plan.duration = Some(Duration::from_secs(1));
    let summary = run_mix(plan, mix, &peer, no_steering)
        .await
        .expect("the run ended");
    let flows = &summary.flows[0];
    assert_eq!(
        (
            flows.started,
            flows.in_flight_at_end,
            flows.completed,
            flows.failed
        ),
        (2, 2, 0, 0)
    );
    assert_eq!(row(&summary, "flow:f").calls, 0);
    assert_eq!(summary.callers_busy_at_end, 2);
    assert_eq!(summary.schedule.expect("open").unsent, 8);
}

/// A step marked `always` is sent after an earlier one failed (a
/// document's close), and only it: the others are skipped.
#[tokio::test(start_paused = true)]
async fn an_always_step_is_sent_after_a_failure() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut open = step(0, "open", json!([]), &[]);
    open.captures = vec![capture("x", 0, "/nope", Pick::First)];
    let middle = step(1, "middle", json!([]), &[]);
    let mut close = step(2, "close", json!([]), &[]);
    close.always = true;
    let mix = flow_mix(
        &["open", "middle", "close", "flow:f"],
        vec![open, middle, close],
        1,
    );
    let summary = run_mix(closed(2), mix, &peer, no_steering)
        .await
        .expect("the run ended");
    let methods: Vec<String> = peer.counts().seen().iter().map(|s| s.method.clone()).collect();
    assert_eq!(methods, ["open", "close", "open", "close"]);
    let flows = &summary.flows[0];
    assert_eq!((flows.failed, flows.skipped_steps), (2, 2));
    assert_eq!(flows.failed_at[0].step, 1);
}

/// Three steps of 800 ms each, on a connection carrying two flows at once.
fn three_slow_steps() -> (Peer, Mix) {
    let steps = vec![
        step(0, "a", json!([]), &[]),
        step(1, "b", json!([]), &[]),
        step(2, "c", json!([]), &[]),
    ];
    let mix = flow_mix(&["a", "b", "c", "flow:f"], steps, 0);
    (Peer::logging(Duration::from_millis(800)), mix)
}

/// A run that ends by its deadline sends no step after it: a flow in
/// flight finishes the step it is on, in the grace, and goes no further.
#[tokio::test(start_paused = true)]
async fn a_flow_in_flight_at_the_deadline_finishes_its_step_and_sends_no_other() {
    let (peer, mix) = three_slow_steps();
    // Flows due at 0 s and 1 s: the first's `c` leaves at 1.6 s, before
    // the end; the second's `b` at 1.8 s, and its `c` would at 2.6 s.
    let mut plan = plan(Pacing::Open { rate: 1.0 }, 1, 2);
    plan.duration = Some(Duration::from_secs(2));
    let summary = run_mix(plan, mix, &peer, no_steering)
        .await
        .expect("the run ended");
    let mut methods: Vec<String> = peer.counts().seen().iter().map(|s| s.method.clone()).collect();
    methods.sort();
    assert_eq!(methods, ["a", "a", "b", "b", "c"]);
    let answered = |name| (row(&summary, name).calls, row(&summary, name).ok);
    assert_eq!(
        [answered("a"), answered("b"), answered("c")],
        [(2, 2), (2, 2), (1, 1)]
    );
    let flows = &summary.flows[0];
    let counts = (flows.started, flows.completed, flows.in_flight_at_end);
    assert_eq!(counts, (2, 1, 1));
    assert_eq!(summary.in_flight_at_end, 0, "no call was cut");
}

/// A run that ends by its request limit lets the flows it started go on
/// through the grace: each is one of the requests asked for.
#[tokio::test(start_paused = true)]
async fn a_flow_started_before_a_limits_end_goes_on_in_the_grace() {
    let (peer, mix) = three_slow_steps();
    // Two callers: flows 1 and 2 end at 2.4 s; the third, claimed then,
    // runs its steps after the other caller found nothing left.
    let mut plan = plan(Pacing::Closed, 1, 2);
    plan.requests = Some(3);
    plan.timeout = Duration::from_secs(10);
    plan.grace = plan.timeout;
    let summary = run_mix(plan, mix, &peer, no_steering)
        .await
        .expect("the run ended");
    assert_eq!(peer.counts().seen().len(), 9);
    let flows = &summary.flows[0];
    assert_eq!(
        (flows.started, flows.completed, flows.in_flight_at_end),
        (3, 3, 0)
    );
}

/// Sends then waits for `["mined"]` every 100 ms within 550 ms (never, from
/// the peer): a flow that spends over half a second polling.
fn send_then_wait() -> Mix {
    let send = step(0, "send", json!(["0xab"]), &[]);
    let mut wait = step(1, "wait", json!(["pending"]), &[]);
    wait.until = Some(never_mined(Duration::from_millis(550)));
    flow_mix(&["send", "wait", "flow:f"], vec![send, wait], 0)
}

/// Over a stateless transport (HTTP), a flow gives its connection back
/// between steps and while its `until` waits: 10 flows of over half a
/// second, due 100 ms apart, all go on time over one connection, where
/// holding it made them queue for 5 s.
#[tokio::test(start_paused = true)]
async fn flows_over_http_give_their_connection_back_between_steps() {
    let peer = Peer::logging(Duration::from_millis(1)).stateless();
    let mut plan = plan(Pacing::Open { rate: 10.0 }, 1, 1);
    plan.requests = Some(10);
    let summary = run_mix(plan, send_then_wait(), &peer, no_steering)
        .await
        .expect("the run ended");
    let schedule = summary.schedule.as_ref().expect("open");
    assert_eq!((schedule.late_requests, schedule.unsent), (0, 0));
    assert_eq!(
        peer.counts()
            .connections
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let flows = &summary.flows[0];
    assert_eq!((flows.started, flows.failed, flows.held_connection), (10, 10, 0));
    assert_eq!(flows.failed_at[0].step, 2, "each at its until");
    // Tries about 101 ms apart from 1 ms (a try may wait a millisecond for
    // the room): the sixth answered by about 520, the next would end past 551.
    assert_eq!(row(&summary, "wait").calls, 60);
    let flow = row(&summary, "flow:f");
    assert!(flow.latency.max_ms < 560.0, "{:?}", flow.latency);
    assert!(!summary
        .warnings
        .iter()
        .any(|w| w.code == crate::stats::WarningCode::FlowBound));
}

/// Past the bound of flows in flight, a flow keeps its connection
/// throughout, and the run says so.
#[tokio::test(start_paused = true)]
async fn a_flow_past_the_bound_keeps_its_connection_and_is_said() {
    let peer = Peer::new(Duration::from_millis(1)).stateless();
    let mut plan = plan(Pacing::Open { rate: 10.0 }, 1, 1);
    plan.requests = Some(4);
    plan.max_flows = 2;
    let summary = run_mix(plan, send_then_wait(), &peer, no_steering)
        .await
        .expect("the run ended");
    let flows = &summary.flows[0];
    assert_eq!(flows.started, 4);
    // The first two roam; of the two after them, at least the third finds
    // both still going.
    assert!((1..=2).contains(&flows.held_connection), "{flows:?}");
    let said = (summary.warnings.iter())
        .find(|w| w.code == crate::stats::WarningCode::FlowBound)
        .expect("the bound is said");
    assert!(
        said.message.contains("2 flows were in flight at once"),
        "{}",
        said.message
    );
}

/// Over a transport that may hold a session (a socket, a child), a flow
/// keeps its connection: one connection carries one flow at a time.
#[tokio::test(start_paused = true)]
async fn flows_over_a_stateful_transport_keep_their_connection() {
    let peer = Peer::new(Duration::from_millis(1));
    let mut plan = plan(Pacing::Open { rate: 10.0 }, 1, 1);
    plan.requests = Some(4);
    let summary = run_mix(plan, send_then_wait(), &peer, no_steering)
        .await
        .expect("the run ended");
    let schedule = summary.schedule.as_ref().expect("open");
    assert!(schedule.late_requests >= 3, "{schedule:?}");
    assert_eq!(
        summary.flows[0].held_connection, 0,
        "held by the transport, not the bound"
    );
}
