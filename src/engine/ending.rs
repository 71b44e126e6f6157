//! The end of a run: when the schedule ends (its deadline, its last
//! request, its mix used up) nothing new is sent, and the calls in flight
//! have the grace to be answered, each counted with its real latency; those
//! unanswered when it runs out are timeouts. A stop (Ctrl-C, a threshold's
//! abort) skips the grace: the calls it cuts are counted apart, in no
//! figure.
//!
//! Each engine thread ends its own callers; no call registers anywhere to
//! be ended (the hot path takes no lock for it): a call's wait is bounded
//! by its timeout and by the grace's end as far as known when it leaves.
//! Only where the end may still come earlier than known and the grace is
//! shorter than the timeout (`-n` with `--grace` under `--timeout`) does a
//! call also listen for the thread's word that the grace ran out.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::{sleep_until, Instant};

use super::call::{NoAnswer, Wait};
use super::state::{RunState, ThreadState};

/// How long callers woken by the grace's end get to record their timeouts
/// before the ones still busy (opening a connection, backing off) are cut:
/// recording takes microseconds, even for thousands of calls.
const CUT_MARGIN: Duration = Duration::from_millis(250);

/// How long a call sent at `sent` waits for its answer: its timeout, or
/// less when the grace's end (as far as known now) comes first.
pub(super) fn wait_for<'a>(shared: &RunState, local: &'a ThreadState, sent: Instant) -> Wait<'a> {
    let (timeout, grace) = (shared.plan.timeout, shared.plan.grace);
    let schedule = &shared.clock().schedule;
    let own = Wait {
        until: sent + timeout,
        then: NoAnswer::Timeout(timeout),
        cut: None,
        cut_as: NoAnswer::GraceOver(grace),
    };
    let wait = match schedule.end_known().map(|end| end + grace) {
        Some(grace_ends) if grace_ends < own.until => Wait {
            until: grace_ends,
            then: NoAnswer::GraceOver(grace),
            ..own
        },
        _ => own,
    };
    // The end may still come before the one known (a request limit, a mix
    // used up), and then its grace before this call's own timeout.
    let listen = grace < timeout && schedule.ended_at().is_none();
    Wait {
        cut: listen.then_some(&local.cut),
        ..wait
    }
}

/// Whether a flow may send another step at `now`: a run that ends by its
/// deadline sends none after it; one that ends by its request limit (or
/// its mix) lets the flows it started go on through the grace, since each
/// is one of the requests asked for.
pub(super) fn steps_may_go(shared: &RunState, now: Instant) -> bool {
    let schedule = &shared.clock().schedule;
    match (schedule.ended_at(), schedule.deadline()) {
        (Some(ended), Some(deadline)) if ended >= deadline => now < deadline,
        (Some(ended), _) => now < ended + shared.plan.grace,
        (None, Some(deadline)) => now < deadline,
        (None, None) => true,
    }
}

/// `at`, or sooner when the run's steps end first (a flow waiting on its
/// `until` wakes then, to send nothing more).
pub(super) fn or_steps_end(shared: &RunState, at: Instant) -> Instant {
    let schedule = &shared.clock().schedule;
    let end = match (schedule.ended_at(), schedule.deadline()) {
        (Some(ended), Some(deadline)) if ended >= deadline => Some(deadline),
        (Some(ended), _) => Some(ended + shared.plan.grace),
        (None, deadline) => deadline,
    };
    end.map_or(at, |end| at.min(end))
}

/// Until the thread's callers have all ended: through the schedule's end
/// and its grace, or until a stop cuts them. Counts what each way left.
pub(super) async fn wait_for_callers(
    shared: &RunState,
    local: &ThreadState,
    tasks: Vec<tokio::task::JoinHandle<()>>,
) {
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    let mut all_done = pin!(async {
        for task in tasks {
            if task.await.is_err_and(|e| e.is_panic()) {
                shared.panicked.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let stop = &local.cancel;
    let ended = tokio::select! {
        _ = &mut all_done => {
            stay_till_the_end(shared, local).await;
            None
        }
        ended = schedule_end(shared) => Some(ended),
        _ = stop.cancelled() => {
            cut(shared, local, &aborts);
            None
        }
    };
    if let Some(ended) = ended {
        tokio::select! {
            _ = &mut all_done => {}
            _ = sleep_until(ended + shared.plan.grace) => {
                local.cut.cancel();
                tokio::select! {
                    _ = tokio::time::timeout(CUT_MARGIN, &mut all_done) => {}
                    _ = stop.cancelled() => {}
                }
                cut(shared, local, &aborts);
            }
            _ = stop.cancelled() => cut(shared, local, &aborts),
        }
    }
    // Who was busy as the schedule ended (why an open model fell behind):
    // the calls and flows that went on across it, each counted as it
    // ended, exactly, however late this thread learnt of the end.
    (shared.callers_busy_at_end).fetch_add(local.across_the_end.get(), Ordering::Relaxed);
    // Flows started and not ended: cut by the end, or by a stop.
    let flows = local.flows_in_flight.borrow();
    for (all, mine) in shared.flows_in_flight_at_end.iter().zip(flows.iter()) {
        all.fetch_add(*mine, Ordering::Relaxed);
    }
}

/// Callers all ended before the schedule did (the open model claims its
/// last request ahead of its time): the connections, and subscriptions on
/// them, stay until the schedule's end.
async fn stay_till_the_end(shared: &RunState, local: &ThreadState) {
    let Some(end) = shared.clock().schedule.end_known() else {
        return;
    };
    tokio::select! {
        _ = sleep_until(end) => {}
        _ = local.cancel.cancelled() => {}
    }
}

/// The moment the schedule ends: at its deadline (which this thread ends
/// it at, if no caller did first), or at the end a caller found.
fn schedule_end(shared: &RunState) -> impl Future<Output = Instant> + '_ {
    let schedule = &shared.clock().schedule;
    async move {
        match schedule.deadline() {
            Some(deadline) => tokio::select! {
                _ = sleep_until(deadline) => schedule.end_at(deadline, true),
                _ = schedule.ending() => {}
            },
            None => schedule.ending().await,
        }
        let ended = schedule.ended_at().expect("the schedule has ended");
        sleep_until(ended).await;
        ended
    }
}

/// Cuts the callers still going and counts what they carried: calls in
/// flight (in no figure), and the callers busy (never counted as going on
/// across the end, since they never ended).
fn cut(shared: &RunState, local: &ThreadState, aborts: &[tokio::task::AbortHandle]) {
    aborts.iter().for_each(|a| a.abort());
    (shared.in_flight_at_end).fetch_add(local.in_flight.get(), Ordering::Relaxed);
    (shared.callers_busy_at_end).fetch_add(local.busy.get(), Ordering::Relaxed);
}

/// Counts a call (from its send) or a flow (from its start) that went on
/// across the schedule's end, as it ends at `to`.
pub(super) fn note_if_across_the_end(shared: &RunState, local: &ThreadState, from: Instant, to: Instant) {
    let end = shared.clock().schedule.end_known();
    if end.is_some_and(|end| from < end && to >= end) {
        local.across_the_end.set(local.across_the_end.get() + 1);
    }
}
