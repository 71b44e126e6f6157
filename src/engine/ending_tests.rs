//! The end of a run over an in-memory peer, under tokio's paused clock:
//! calls in flight when the schedule ends are answered in the grace and
//! counted, or timeouts when it runs out; a stop cuts them, counted apart;
//! flows send no step after the end; measured time is the schedule's span.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::tests::{one_method, plan, started};
use super::{run_placed, Control, Placement, RunSpec};
use crate::plan::{LoadPlan, Mix, Pacing};
use crate::stats::RunSummary;
use crate::transport::{Peer, Target};

/// Runs `plan` against `peer`, stopped (as Ctrl-C does) `stop_after` the
/// start when given; the summary, and when the run ended from its start.
async fn run_stopped(
    plan: LoadPlan,
    mix: Mix,
    peer: &Peer,
    stop_after: Option<Duration>,
) -> (RunSummary, Duration) {
    let control = Arc::new(Control::new());
    let spec = RunSpec {
        plan,
        mix,
        target: Target::Memory(peer.clone()),
        setup: Vec::new(),
        polls: Vec::new(),
        capture: None,
        race: None,
        observe: Vec::new(),
        facts: Default::default(),
        spool: Box::new(crate::stats::Series::default()),
    };
    let cancel = CancellationToken::new();
    let local = tokio::task::LocalSet::new();
    let (stopper, watching) = (cancel.clone(), control.clone());
    let began = Instant::now();
    let stopping = local.spawn_local(async move {
        let start = started(&watching).await;
        if let Some(after) = stop_after {
            sleep_until(start + after).await;
            stopper.cancel();
        }
    });
    let running = run_placed(spec, cancel, control, |_| {}, Placement::Here);
    let summary = tokio::time::timeout(Duration::from_secs(60), local.run_until(running))
        .await
        .expect("the run ended");
    stopping.abort();
    (summary, began.elapsed())
}

/// From the 60th request on, every other one is answered in 5 s; the
/// others in 1 ms.
fn slow_from_the_60th(n: u64) -> Duration {
    match n >= 60 && n.is_multiple_of(2) {
        true => Duration::from_secs(5),
        false => Duration::from_millis(1),
    }
}

/// The run: `--rate 20 -d 5s --connections 40`, a call timeout
/// of 10 s and so a grace of 10 s.
fn twenty_a_second_for_5_s() -> LoadPlan {
    let mut plan = plan(Pacing::Open { rate: 20.0 }, 40, 1);
    plan.duration = Some(Duration::from_secs(5));
    plan.timeout = Duration::from_secs(10);
    plan.grace = plan.timeout;
    plan
}

/// Every call sent is counted with its real latency: the 20 slow ones
/// still in flight at the end are answered in the grace, in every latency
/// figure and the last second; the rate is the schedule's, kept.
#[tokio::test(start_paused = true)]
async fn calls_in_flight_at_the_end_are_answered_in_the_grace_and_counted() {
    let peer = Peer::scripted(slow_from_the_60th);
    let (summary, took) = run_stopped(twenty_a_second_for_5_s(), one_method(), &peer, None).await;
    assert_eq!(peer.counts().requests.load(Ordering::Relaxed), 100);
    assert_eq!((summary.total.calls, summary.total.ok), (100, 100));
    assert_eq!(summary.in_flight_at_end, 0);
    assert_eq!(
        summary.measured_seconds, 5.0,
        "the schedule's span, not the grace's"
    );
    assert_eq!(summary.total.rps, 20.0);
    // Each slow call left on time and was answered 5 s later.
    assert!(
        (5000.0..5010.0).contains(&summary.total.latency.p99_ms),
        "{:?}",
        summary.total.latency
    );
    assert!((5000.0..5010.0).contains(&summary.total.latency.max_ms));
    let seconds: Vec<u64> = summary.timeseries.iter().map(|row| row.calls).collect();
    // The slow ones, due from 3 s on, answered in the grace: in the last second.
    assert_eq!(seconds, [20, 20, 20, 10, 30]);
    assert!(summary.timeseries[4].max_ms >= 5000.0);
    assert!(summary.verdict.valid, "{:?}", summary.verdict);
    // The last slow call, due at 4.9 s (sent a timer tick early, and timed
    // from then), was answered 5 s later.
    assert_eq!(took, Duration::from_millis(9899));
}

/// Calls still unanswered when the grace runs out are timeouts, timed to
/// its end, and the run ends then.
#[tokio::test(start_paused = true)]
async fn calls_unanswered_when_the_grace_runs_out_are_timeouts() {
    let peer = Peer::scripted(slow_from_the_60th);
    let mut plan = twenty_a_second_for_5_s();
    plan.grace = Duration::from_secs(1);
    let (summary, took) = run_stopped(plan, one_method(), &peer, None).await;
    assert_eq!(summary.total.calls, 100);
    assert_eq!(summary.total.ok, 80);
    assert_eq!(summary.total.outcomes.get("timeout"), Some(&20));
    assert_eq!(summary.in_flight_at_end, 0);
    assert_eq!(took, Duration::from_secs(6), "the deadline and its grace");
    // The first slow call, due at 3 s, was cut at 6 s.
    assert!((3000.0..3010.0).contains(&summary.total.latency.max_ms));
    let why = &summary.total.error_examples["timeout"][0].reason;
    assert_eq!(
        why,
        "no answer by the end of the run's grace (1s after the schedule ended)"
    );
}

/// A stop skips the grace: the calls in flight are cut, counted apart
/// (in no figure), and the run is partial; the schedule having run its
/// course, its span is the measured time.
#[tokio::test(start_paused = true)]
async fn a_stop_in_the_grace_cuts_the_calls_in_flight_and_counts_them() {
    let peer = Peer::scripted(slow_from_the_60th);
    let stop = Some(Duration::from_millis(5500));
    let (summary, took) = run_stopped(twenty_a_second_for_5_s(), one_method(), &peer, stop).await;
    assert_eq!(summary.in_flight_at_end, 20);
    assert_eq!((summary.total.calls, summary.total.ok), (80, 80));
    assert!(summary.partial);
    assert_eq!(summary.measured_seconds, 5.0);
    assert!(took < Duration::from_millis(5510), "the grace skipped: {took:?}");
}

/// A stop before the schedule's end measures up to the stop.
#[tokio::test(start_paused = true)]
async fn a_stop_before_the_end_measures_up_to_it() {
    let peer = Peer::scripted(slow_from_the_60th);
    let stop = Some(Duration::from_secs(4));
    let (summary, _) = run_stopped(twenty_a_second_for_5_s(), one_method(), &peer, stop).await;
    // Sent by 4 s: 81 (the one due at 4 s leaves a timer tick early); the
    // slow ones among them (60, 62 ... 80) cut.
    assert_eq!(summary.in_flight_at_end, 11);
    assert_eq!(summary.total.calls, 70);
    assert!(
        (4.0..4.01).contains(&summary.measured_seconds),
        "{}",
        summary.measured_seconds
    );
}

/// The closed model too: each caller's call in flight at the deadline is
/// answered in the grace and counted.
#[tokio::test(start_paused = true)]
async fn a_closed_run_counts_the_calls_its_callers_had_in_flight_at_the_end() {
    let peer = Peer::new(Duration::from_secs(3));
    let mut plan = plan(Pacing::Closed, 4, 1);
    plan.duration = Some(Duration::from_secs(5));
    plan.timeout = Duration::from_secs(10);
    plan.grace = plan.timeout;
    let (summary, took) = run_stopped(plan, one_method(), &peer, None).await;
    // Each of 4 callers: one call at 0 s, one at 3 s answered at 6 s.
    assert_eq!((summary.total.calls, summary.total.ok), (8, 8));
    assert_eq!(summary.in_flight_at_end, 0);
    assert_eq!(summary.callers_busy_at_end, 4);
    assert_eq!(summary.measured_seconds, 5.0);
    assert_eq!(took, Duration::from_secs(6));
}

/// `--rate 100 -n 200` against a server answering in 500 ms reads 100/s:
/// its span is its 200 requests' at 100/s, whatever the last answers took.
#[tokio::test(start_paused = true)]
async fn an_open_run_of_n_requests_reads_its_rate() {
    let peer = Peer::new(Duration::from_millis(500));
    let mut plan = plan(Pacing::Open { rate: 100.0 }, 64, 1);
    plan.requests = Some(200);
    let (summary, _) = run_stopped(plan, one_method(), &peer, None).await;
    assert_eq!((summary.total.calls, summary.total.ok), (200, 200));
    assert_eq!(summary.measured_seconds, 2.0);
    assert_eq!(summary.total.rps, 100.0);
    let seconds: Vec<u64> = summary.timeseries.iter().map(|row| row.calls).collect();
    assert_eq!(seconds.len(), 2, "the last answers in the span's last second");
    assert_eq!(seconds.iter().sum::<u64>(), 200);
}

/// A request limit's end is known only when it comes: a call sent before
/// it, with a timeout past the grace's end, is cut as a timeout then.
#[tokio::test(start_paused = true)]
async fn a_grace_shorter_than_the_timeout_cuts_a_call_sent_before_a_limits_end() {
    let peer = Peer::scripted(|n| match n {
        3 => Duration::from_secs(10),
        _ => Duration::from_millis(10),
    });
    let mut plan = plan(Pacing::Closed, 2, 1);
    plan.requests = Some(4);
    plan.timeout = Duration::from_secs(5);
    plan.grace = Duration::from_secs(1);
    let (summary, took) = run_stopped(plan, one_method(), &peer, None).await;
    assert_eq!(summary.total.calls, 4);
    assert_eq!(summary.total.outcomes.get("timeout"), Some(&1));
    // The limit's end at 20 ms, when a caller found nothing left.
    assert_eq!(took, Duration::from_millis(1020));
}

/// Closed model, one caller, a server that cuts its first 6 answers off
/// half way (each closing its connection): the reopenings' backoff (10,
/// 20, 40, 80 and 160 ms) is volley's wait, in no call's latency, and
/// counted with the connections' figures.
#[tokio::test(start_paused = true)]
async fn a_closed_callers_backoff_is_in_no_calls_latency() {
    let peer = Peer::cutting(6, Duration::from_millis(1));
    let mut plan = plan(Pacing::Closed, 1, 1);
    plan.requests = Some(7);
    let (summary, _) = run_stopped(plan, one_method(), &peer, None).await;
    assert_eq!((summary.total.calls, summary.total.ok), (7, 1));
    assert_eq!(summary.total.outcomes.get("io"), Some(&6));
    // Each call, cut or answered, took the server's 1 ms.
    assert!(
        (1.0..1.01).contains(&summary.total.latency.max_ms),
        "{:?}",
        summary.total.latency
    );
    let connections = &summary.connections;
    assert_eq!((connections.opened, connections.reopened), (1, 6));
    assert_eq!(connections.backoff_waits, 5);
    assert!(
        (0.31..0.312).contains(&connections.backoff_s),
        "{}",
        connections.backoff_s
    );
}

/// A server holding every connection: the callers busy as the schedule
/// ended are counted, each as its call ended in the grace (exactly, however
/// late a thread learnt of the end), on every thread.
#[tokio::test(start_paused = true)]
async fn every_caller_held_at_the_end_is_counted_busy() {
    let peer = Peer::new(Duration::from_millis(1500));
    let mut plan = plan(Pacing::Open { rate: 100.0 }, 4, 1);
    plan.threads = 2;
    plan.duration = Some(Duration::from_secs(2));
    let (summary, _) = run_stopped(plan, one_method(), &peer, None).await;
    assert_eq!(summary.callers_busy_at_end, 4);
    assert_eq!((summary.total.calls, summary.in_flight_at_end), (8, 0));
    assert!(summary.schedule.expect("open").behind);
}
