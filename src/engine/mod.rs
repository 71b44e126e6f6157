//! The engine: runs a load plan against a target and gathers the figures.
//! It knows nothing of screens or files; it publishes snapshots to a
//! callback, takes steering through a `Control`, and returns the summary.

mod call;
mod control;
mod gather;
mod poll;
mod schedule;
mod worker;

pub use control::Control;
pub use poll::first as first_poll;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::plan::{LoadPlan, Mix, Pacing, Poll, SetupCall};
use crate::stats::{
    micros, over_one_percent, BatchSummary, ClientCpu, Evidence, LatencySummary, MethodSummary, RunSummary,
    ScheduleSummary, SetupSummary, Snapshot, StageSummary, SubscriptionSummary, Verdict, LATE_THRESHOLD,
};
use crate::transport::Target;
use gather::Gatherer;
use worker::Shared;

/// Everything a run needs.
pub struct RunSpec {
    pub plan: LoadPlan,
    pub mix: Mix,
    pub target: Target,
    /// Sent on each new connection before it joins the load.
    pub setup: Vec<SetupCall>,
    pub polls: Vec<Poll>,
}

/// Runs the load until the plan's end or until `cancel` fires (then the
/// summary is marked partial). `control` steers it while it goes;
/// `observe` sees a snapshot a few times a second, and a last one at the end.
pub async fn run(
    spec: RunSpec,
    cancel: CancellationToken,
    control: Arc<Control>,
    mut observe: impl FnMut(&Snapshot),
) -> RunSummary {
    let stop = cancel.child_token();
    let start = Instant::now();
    let plan = &spec.plan;
    let deadline = plan.duration.map(|d| start + plan.warmup + d);
    let threads = plan.threads_used();
    let connections = plan.connections;
    let has_setup = !spec.setup.is_empty();
    let has_subscriptions = spec.setup.iter().any(|s| s.subscribe);
    let mut gatherer = Gatherer::new(
        spec.mix.methods.clone(),
        threads,
        plan.duration,
        plan.stage_bounds(),
    );
    let base = Snapshot {
        warmup: plan.warmup,
        planned: plan.duration.map(|d| d + plan.warmup),
        stages: plan.stages.len(),
        open: matches!(plan.pacing, Pacing::Open { .. }),
        ..Snapshot::default()
    };
    let stage_bounds = plan.stage_bounds();
    let shared = Arc::new(Shared::new(spec, start, stop.clone(), control.clone()));

    if let Some(deadline) = deadline {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.into()) => stop.cancel(),
                _ = stop.cancelled() => {}
            }
        });
    }

    let (chunks_tx, mut chunks) = mpsc::unbounded_channel();
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let mine: Vec<usize> = (thread..connections).step_by(threads).collect();
            let (shared, chunks_tx) = (shared.clone(), chunks_tx.clone());
            std::thread::Builder::new()
                .name(format!("volley-engine-{thread}"))
                .spawn(move || worker::thread_main(shared, thread, mine, chunks_tx))
                .expect("spawning an engine thread")
        })
        .collect();
    drop(chunks_tx);

    let snapshot_now = |gatherer: &mut Gatherer, finished: bool| {
        let elapsed = start.elapsed();
        let measured = elapsed.saturating_sub(shared.plan.warmup);
        let seconds = measured.as_secs_f64();
        let snapshot = Snapshot {
            elapsed,
            stage: stage_bounds
                .iter()
                .position(|(from, to)| seconds >= *from && seconds < *to),
            target: control.target_now(),
            paused: control.is_paused(),
            finished,
            ..base.clone()
        };
        gatherer.snapshot(measured, snapshot)
    };
    // The first, as the run begins: a warmup has no figures for a while.
    observe(&snapshot_now(&mut gatherer, false));
    // The run ends at each thread's last figures, not when the threads
    // end: after them they may still be shutting stdio children down.
    let mut threads_done = 0;
    while let Some(chunk) = chunks.recv().await {
        let last = chunk.last.is_some();
        if gatherer.add(chunk) {
            observe(&snapshot_now(&mut gatherer, false));
        }
        threads_done += usize::from(last);
        if threads_done == threads {
            break;
        }
    }
    let end = Instant::now();
    stop.cancel();
    for handle in handles {
        let _ = handle.join();
    }

    let stopped_at = deadline.map_or(end, |d| end.min(d));
    let measured = stopped_at.saturating_duration_since(shared.measure_start);
    gatherer.finish(measured);
    observe(&snapshot_now(&mut gatherer, true));

    let seconds = measured.as_secs_f64();
    let total = &gatherer.total;
    let schedule = matches!(shared.plan.pacing, Pacing::Open { .. }).then(|| {
        let delays = &total.start_delay;
        let on_time = delays.count_between(0, micros(LATE_THRESHOLD));
        let late_requests = delays.len() - on_time;
        let due = shared.schedule.due_before(stopped_at);
        let unsent = due.saturating_sub(gatherer.sent);
        ScheduleSummary {
            start_delay: LatencySummary::from_micros(delays),
            late_requests,
            unsent,
            behind: over_one_percent(late_requests, delays.len()) || over_one_percent(unsent, due),
        }
    });
    let cpu = client_cpu(&shared, end - start, threads);
    let verdict = Verdict::of(&Evidence {
        schedule: schedule.as_ref(),
        requests: total.start_delay.len(),
        rate: match shared.plan.pacing {
            Pacing::Open { rate } if shared.plan.stages.is_empty() => Some(rate),
            _ => None,
        },
        measured_seconds: seconds,
        cpu: &cpu,
        partial: cancel.is_cancelled(),
        panicked: shared.panicked.load(Ordering::Relaxed),
    });
    let methods = &shared.mix.methods;
    RunSummary {
        methods: methods
            .iter()
            .zip(&total.methods)
            .map(|(name, stats)| MethodSummary::new(name, stats, seconds))
            .collect(),
        total: MethodSummary::new("TOTAL", &total.total(), seconds),
        timeseries: std::mem::take(&mut gatherer.timeseries),
        latency_log: std::mem::take(&mut gatherer.latency_log),
        requests: total.requests,
        http_statuses: total.statuses.iter().copied().collect(),
        extra_batch_entries: total.extra_entries,
        unsolicited_messages: total.unsolicited,
        children_exited: total.children_exited,
        child_exit: total.child_exit.clone(),
        child_shutdown: matches!(&shared.target, Target::Stream(t) if t.is_command()).then(|| {
            let ends = shared.child_ends.lock().unwrap_or_else(|p| p.into_inner());
            ends.clone()
        }),
        subscriptions: has_subscriptions.then(|| SubscriptionSummary {
            opened: total.subscriptions,
            notifications: total.notifications,
            per_second: total.notifications as f64 / seconds.max(1e-9),
            per_subscription_per_second: total.notifications as f64
                / seconds.max(1e-9)
                / total.subscriptions.max(1) as f64,
            gap: LatencySummary::from_micros(&total.notification_gaps),
        }),
        schedule,
        batches: BatchSummary::new(total),
        setup: has_setup.then(|| SetupSummary {
            connections_ok: total.setup_ok,
            connections_failed: total.setup_failed,
            first_error: total.setup_error.clone(),
        }),
        stages: gatherer
            .stage_totals
            .iter()
            .zip(&stage_bounds)
            .enumerate()
            .map(|(stage, (recorder, (start_s, end_s)))| StageSummary {
                stage,
                start_s: *start_s,
                end_s: *end_s,
                total: MethodSummary::new("TOTAL", &recorder.total(), end_s.min(seconds) - start_s),
            })
            .collect(),
        events: control.events(),
        in_flight_at_end: shared.in_flight_at_end.load(Ordering::Relaxed),
        panicked_connections: shared.panicked.load(Ordering::Relaxed),
        measured_seconds: seconds,
        client_cpu: cpu,
        verdict,
        partial: cancel.is_cancelled(),
    }
}

/// The engine threads' CPU time against their wall time over the run.
fn client_cpu(shared: &Shared, wall: std::time::Duration, threads: usize) -> ClientCpu {
    let seconds = shared.cpu_micros.load(Ordering::Relaxed) as f64 / 1e6;
    let available = wall.as_secs_f64() * threads.max(1) as f64;
    ClientCpu {
        seconds,
        threads,
        busy_share: if available > 0.0 {
            (seconds / available).min(1.0)
        } else {
            0.0
        },
    }
}
