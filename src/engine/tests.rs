//! The engine over an in-memory peer, under tokio's paused clock: the
//! schedule, the callers and the gathering tested without sockets or
//! threads, with exact counts. A run that would never end meets a guard
//! of virtual time, which costs no real time to reach.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::{run_placed, Control, Placement, RunSpec};
use crate::plan::{CallTemplate, LoadPlan, Mix, MixCall, Pacing, Shard, Stage};
use crate::rpc::Version;
use crate::stats::RunSummary;
use crate::transport::{Peer, Target};

/// A load of one method over `connections`, each carrying `per_connection`
/// callers (several: a multiplexed transport's, as over `tcp://`).
pub(super) fn plan(pacing: Pacing, connections: usize, per_connection: usize) -> LoadPlan {
    LoadPlan {
        pacing,
        connections,
        per_connection,
        duration: None,
        requests: None,
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(1),
        grace: Duration::from_secs(1),
        threads: 1,
        seed: 7,
        stages: Vec::new(),
        initial_concurrency: connections * per_connection,
        shard: Shard::WHOLE,
        recorded: None,
        groups: None,
        reconnect_every: None,
        max_flows: crate::plan::DEFAULT_MAX_FLOWS,
    }
}

pub(super) fn one_method() -> Mix {
    let call = MixCall {
        method: 0,
        template: CallTemplate::new(Version::V2, "eth_chainId", None),
        batch: None,
        notification: false,
    };
    Mix::weighted(vec!["eth_chainId".into()], vec![(call, 1, None)], None)
}

/// Far past the end of any run here: a run still going then never ends.
const NEVER: Duration = Duration::from_secs(60);

/// Runs `plan` against `peer` on this thread while `steer` acts on its
/// control; `None` when the run did not end before `NEVER`.
async fn run<F: std::future::Future<Output = ()> + 'static>(
    plan: LoadPlan,
    peer: &Peer,
    steer: impl FnOnce(Arc<Control>) -> F,
) -> Option<RunSummary> {
    run_mix(plan, one_method(), peer, steer).await
}

/// As `run`, over `mix`.
pub(super) async fn run_mix<F: std::future::Future<Output = ()> + 'static>(
    plan: LoadPlan,
    mix: Mix,
    peer: &Peer,
    steer: impl FnOnce(Arc<Control>) -> F,
) -> Option<RunSummary> {
    run_set_up(plan, mix, Vec::new(), peer, steer).await
}

/// As `run_mix`, each connection first sending `setup`.
pub(super) async fn run_set_up<F: std::future::Future<Output = ()> + 'static>(
    plan: LoadPlan,
    mix: Mix,
    setup: Vec<crate::plan::SetupCall>,
    peer: &Peer,
    steer: impl FnOnce(Arc<Control>) -> F,
) -> Option<RunSummary> {
    let control = Arc::new(Control::new());
    let spec = RunSpec {
        plan,
        mix,
        target: Target::Memory(peer.clone()),
        setup,
        polls: Vec::new(),
        capture: None,
        race: None,
        observe: Vec::new(),
        facts: Default::default(),
        spool: Box::new(crate::stats::Series::default()),
    };
    let local = tokio::task::LocalSet::new();
    let steering = local.spawn_local(steer(control.clone()));
    let running = run_placed(spec, CancellationToken::new(), control, |_| {}, Placement::Here);
    let summary = tokio::time::timeout(NEVER, local.run_until(running)).await.ok();
    steering.abort();
    summary
}

/// When the run's clock started: steering waits for it.
pub(super) async fn started(control: &Control) -> Instant {
    while control.target_now() == 0.0 {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    Instant::now()
}

pub(super) async fn no_steering(_: Arc<Control>) {}

/// 10 calls in flight over 4 connections make 12 callers, 2 kept idle:
/// the idle ones learn that the others took the last request.
#[tokio::test(start_paused = true)]
async fn a_request_limited_run_with_idle_callers_ends() {
    let peer = Peer::new(Duration::from_millis(10));
    let mut plan = plan(Pacing::Closed, 4, 3);
    plan.initial_concurrency = 10;
    plan.requests = Some(100);
    let summary = run(plan, &peer, no_steering).await.expect("the run ended");
    assert_eq!(summary.requests, 100);
    assert_eq!(summary.total.ok, 100);
    let counts = peer.counts();
    assert_eq!(counts.requests.load(Ordering::Relaxed), 100);
    assert_eq!(counts.most_in_flight.load(Ordering::Relaxed), 10);
    assert_eq!(counts.connections.load(Ordering::Relaxed), 4);
}

/// A target lowered by `-` leaves a caller idle on a connection of its
/// own (HTTP/1.1's shape): the run still ends at its last request.
#[tokio::test(start_paused = true)]
async fn a_request_limited_run_ends_after_its_concurrency_is_lowered() {
    let peer = Peer::new(Duration::from_millis(10));
    let mut plan = plan(Pacing::Closed, 5, 1);
    plan.requests = Some(3000);
    let lower = |control: Arc<Control>| async move {
        started(&control).await;
        control.step(false);
    };
    let summary = run(plan, &peer, lower).await.expect("the run ended");
    assert_eq!(summary.requests, 3000);
    assert_eq!(summary.total.ok, 3000);
    assert_eq!(peer.counts().requests.load(Ordering::Relaxed), 3000);
    let events: Vec<&str> = summary.events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(events, ["target set to 4 calls in flight"]);
}

/// `+` and `-` move the calls in flight over all 256 callers of 4
/// multiplexed connections, not over the 4 connections: the peer holds
/// exactly the target, read between two answers, spread over every
/// connection rather than filling the first ones.
#[tokio::test(start_paused = true)]
async fn steering_a_multiplexed_closed_run_moves_its_callers_not_its_connections() {
    let peer = Peer::new(Duration::from_millis(10));
    let mut plan = plan(Pacing::Closed, 4, 64);
    plan.duration = Some(Duration::from_secs(5));
    let (seen_tx, seen) = std::sync::mpsc::channel();
    let counts = peer.clone();
    let steer = |control: Arc<Control>| async move {
        let start = started(&control).await;
        let mut held = Vec::new();
        for (second, up) in [(1, false), (2, true), (3, true), (4, true)] {
            // Half way between two answers, every active caller waits on one.
            sleep_until(start + Duration::from_millis(second * 1000 + 5)).await;
            held.push(counts.counts().in_flight_on_each());
            control.step(up);
        }
        let _ = seen_tx.send(held);
    };
    let summary = run(plan, &peer, steer).await.expect("the run ended");
    // 256 - 25.6 rounds to 230; 230 + 23 = 253; 253 + 25.3 rounds to 278,
    // past the 256 callers the run has: 256.
    let held = seen.recv().unwrap();
    let totals: Vec<u64> = held.iter().map(|each| each.iter().sum()).collect();
    assert_eq!(totals, [256, 230, 253, 256]);
    assert_eq!(held[1], [58, 58, 57, 57], "230 spread over the 4 connections");
    assert_eq!(held[2], [64, 63, 63, 63], "253 spread over the 4 connections");
    let events: Vec<&str> = summary.events.iter().map(|e| e.what.as_str()).collect();
    assert_eq!(
        events,
        [
            "target set to 230 calls in flight",
            "target set to 253 calls in flight",
            "target set to 256 calls in flight",
        ]
    );
}

/// An open model at 200/s through stages of `lengths`: each stage's calls.
async fn stage_calls(lengths: &[u64]) -> Vec<u64> {
    let peer = Peer::new(Duration::from_millis(1));
    let mut plan = plan(Pacing::Open { rate: 200.0 }, 4, 16);
    plan.stages = (lengths.iter())
        .map(|ms| Stage {
            duration: Duration::from_millis(*ms),
            target: 200.0,
        })
        .collect();
    plan.duration = Some(Duration::from_millis(lengths.iter().sum()));
    let summary = run(plan, &peer, no_steering).await.expect("the run ended");
    assert_eq!(summary.in_flight_at_end, 0);
    summary.stages.iter().map(|s| s.total.calls).collect()
}

/// Each call counts in the stage of its intended send time, whatever
/// second it falls in.
#[tokio::test(start_paused = true)]
async fn stages_of_a_second_and_a_half_count_their_own_calls() {
    assert_eq!(stage_calls(&[1500, 1500]).await, [300, 300]);
}

#[tokio::test(start_paused = true)]
async fn stages_shorter_than_a_second_count_their_own_calls() {
    assert_eq!(stage_calls(&[500, 500, 500]).await, [100, 100, 100]);
}

/// The open model sends exactly what its rate makes due, over time the
/// paused clock keeps exact.
#[tokio::test(start_paused = true)]
async fn an_open_run_sends_what_its_rate_makes_due() {
    let peer = Peer::new(Duration::from_micros(2500));
    let mut plan = plan(Pacing::Open { rate: 1000.0 }, 2, 8);
    plan.duration = Some(Duration::from_secs(2));
    let summary = run(plan, &peer, no_steering).await.expect("the run ended");
    assert_eq!(peer.counts().requests.load(Ordering::Relaxed), 2000);
    // The last, due at 1.999 s, is answered after the deadline, in the
    // grace: counted, as every one sent is.
    assert_eq!(summary.requests, 2000);
    assert_eq!(summary.in_flight_at_end, 0);
    assert_eq!(summary.total.ok, 2000);
    assert_eq!(summary.measured_seconds, 2.0, "the schedule's span");
    let schedule = summary.schedule.expect("an open run's schedule");
    assert_eq!((schedule.unsent, schedule.late_requests), (0, 0));
    assert!(!schedule.behind);
}

/// The open model hands each request to the next free place on the
/// thread's connections, one on each connection in turn: 100 connections
/// of 16 callers each at 100 calls/s, each answered in 10 ms, carry the
/// first 100 calls one on each (callers that each claimed as they started
/// put the first 16 on the first connection).
#[tokio::test(start_paused = true)]
async fn an_open_run_spreads_its_calls_over_every_connection() {
    let peer = Peer::logging(Duration::from_millis(10));
    let mut plan = plan(Pacing::Open { rate: 100.0 }, 100, 16);
    plan.duration = Some(Duration::from_secs(2));
    let summary = run(plan, &peer, no_steering).await.expect("the run ended");
    assert_eq!(summary.requests, 200);
    let schedule = summary.schedule.expect("an open run's schedule");
    assert_eq!((schedule.unsent, schedule.late_requests), (0, 0));
    let seen = peer.counts().seen();
    let first: std::collections::BTreeSet<usize> = seen[..100].iter().map(|s| s.connection).collect();
    assert_eq!(first.len(), 100, "the first 100 calls, one on each connection");
    let second: std::collections::BTreeSet<usize> = seen[100..].iter().map(|s| s.connection).collect();
    assert_eq!(second.len(), 100, "then again, one on each");
}

/// Connections first, then the clock: every connection of an open run is
/// open and set up before the schedule's first call leaves, however many
/// there are (here 200, each with a setup call answered in 50 ms).
#[tokio::test(start_paused = true)]
async fn every_connection_is_set_up_before_the_first_call_of_the_schedule() {
    let peer = Peer::logging(Duration::from_millis(50));
    let mut plan = plan(Pacing::Open { rate: 1000.0 }, 200, 1);
    plan.duration = Some(Duration::from_millis(500));
    let setup = vec![crate::plan::SetupCall {
        method: "initialize".into(),
        params: None,
        notification: false,
        subscribe: false,
        race: false,
    }];
    let summary = run_set_up(plan, one_method(), setup, &peer, no_steering)
        .await
        .expect("the run ended");
    let seen = peer.counts().seen();
    let first_call = seen
        .iter()
        .position(|s| s.method != "initialize")
        .expect("calls were sent");
    assert_eq!(first_call, 200, "200 setups, then the load");
    let connections: std::collections::BTreeSet<usize> = seen[..200].iter().map(|s| s.connection).collect();
    assert_eq!(connections.len(), 200, "one setup on each connection");
    assert_eq!(seen.len(), 200 + 500);
    let schedule = summary.schedule.expect("an open run's schedule");
    assert_eq!((schedule.unsent, schedule.late_requests), (0, 0));
    assert_eq!(summary.connections.opened, 200);
}

/// A notification is counted in its row but kept out of every latency
/// figure: nothing answers it, and its write time beside answered calls
/// pulled the TOTAL's percentiles down to the write's (an LSP run's TOTAL
/// p50 read 0.015 ms).
#[tokio::test(start_paused = true)]
async fn notifications_are_counted_but_not_timed() {
    let peer = Peer::new(Duration::from_millis(10));
    let call = |method: u32, name: &str, notification: bool| MixCall {
        method,
        template: CallTemplate::new(Version::V2, name, None),
        batch: None,
        notification,
    };
    let calls = vec![
        (call(0, "eth_chainId", false), 1, None),
        (call(1, "log", true), 3, None),
    ];
    let mix = Mix::weighted(vec!["eth_chainId".into(), "log".into()], calls, None);
    let mut plan = plan(Pacing::Closed, 1, 1);
    plan.requests = Some(200);
    let summary = run_mix(plan, mix, &peer, no_steering)
        .await
        .expect("the run ended");
    let (answered, notified) = (&summary.methods[0], &summary.methods[1]);
    assert_eq!(answered.calls + notified.calls, 200);
    assert_eq!(summary.total.calls, 200);
    assert!(
        answered.calls > 20 && notified.calls > 100,
        "{} and {}",
        answered.calls,
        notified.calls
    );
    assert_eq!(summary.total.ok, 200);
    assert_eq!(
        notified.latency.max_ms, 0.0,
        "nothing timed: {:?}",
        notified.latency
    );
    assert!(answered.latency.p50_ms >= 10.0, "{:?}", answered.latency);
    assert_eq!(
        summary.total.latency.p50_ms, answered.latency.p50_ms,
        "the answered calls' alone"
    );
    assert_eq!(summary.total.latency.max_ms, answered.latency.max_ms);
}
