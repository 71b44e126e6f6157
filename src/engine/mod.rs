//! The engine: runs a load plan against a target and gathers the figures.
//! It knows nothing of screens or files; it reports each finished second to
//! a callback and returns the run's summary.

mod mix;
mod plan;
mod poll;
mod worker;

pub use mix::{BatchSize, Mix, MixBatch, MixCall, Planned, ReplaySource};
pub use plan::{LoadPlan, Pacing, Stage};
pub use poll::Poll;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::rpc::CallTemplate;
use crate::stats::{
    micros, BatchSummary, LatencySummary, MethodSummary, Recorder, RunSummary, ScheduleSummary, SecondRow,
    SetupSummary, StageSummary, LATE_THRESHOLD,
};
use crate::transport::Target;
use worker::{Chunk, Shared};

/// Everything a run needs.
pub struct RunSpec {
    pub plan: LoadPlan,
    pub mix: Mix,
    pub target: Target,
    /// Sent on each new connection before it joins the load.
    pub setup: Vec<SetupCall>,
    pub polls: Vec<Poll>,
}

/// A call sent once per connection, outside the figures.
#[derive(Clone, Debug)]
pub struct SetupCall {
    pub method: String,
    pub template: CallTemplate,
    pub notification: bool,
}

/// Runs the load until the plan's end or until `cancel` fires (then the
/// summary is marked partial). `on_second` sees each second as it closes.
pub async fn run(
    spec: RunSpec,
    cancel: CancellationToken,
    mut on_second: impl FnMut(&SecondRow),
) -> RunSummary {
    let stop = cancel.child_token();
    let start = Instant::now();
    let plan = &spec.plan;
    let deadline = plan.duration.map(|d| start + plan.warmup + d);
    let methods = spec.mix.methods.clone();
    let threads = plan.threads_used();
    let connections = plan.connections;
    let stage_bounds = plan.stage_bounds();
    let has_setup = !spec.setup.is_empty();
    let shared = Arc::new(Shared::new(spec, start, stop.clone()));
    let mut stage_totals = vec![Recorder::new(methods.len()); stage_bounds.len()];
    let stage_of = |second: u32| {
        let middle = second as f64 + 0.5;
        stage_bounds
            .iter()
            .position(|(from, to)| middle >= *from && middle < *to)
    };

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

    // The last second of a timed run closes with the run, however the final
    // hand-overs race the deadline.
    let last_second = shared
        .plan
        .duration
        .map(|d| (d.as_secs_f64().ceil() as u32).max(1) - 1);
    let mut windows = Windows::new(threads, methods.len(), last_second);
    let mut total = Recorder::new(methods.len());
    let mut sent = 0;
    let mut timeseries = Vec::new();
    while let Some(chunk) = chunks.recv().await {
        total.merge(&chunk.recorder);
        if let Some(thread_sent) = chunk.last {
            sent += thread_sent;
        }
        windows.add(chunk);
        while let Some((second, window)) = windows.pop_complete() {
            if let Some(stage) = stage_of(second) {
                stage_totals[stage].merge(&window);
            }
            let row = SecondRow::new(second, &window, Duration::from_secs(1));
            on_second(&row);
            timeseries.push(row);
        }
    }
    let end = Instant::now();
    stop.cancel();
    for handle in handles {
        let _ = handle.join();
    }

    let stopped_at = deadline.map_or(end, |d| end.min(d));
    let measured = stopped_at.saturating_duration_since(shared.measure_start);
    for (second, window) in windows.drain() {
        let covered = measured
            .saturating_sub(Duration::from_secs(second as u64))
            .min(Duration::from_secs(1));
        if window.is_empty() && covered.is_zero() {
            continue;
        }
        if let Some(stage) = stage_of(second) {
            stage_totals[stage].merge(&window);
        }
        let row = SecondRow::new(second, &window, covered);
        on_second(&row);
        timeseries.push(row);
    }

    let seconds = measured.as_secs_f64();
    let schedule = matches!(shared.plan.pacing, Pacing::Open { .. }).then(|| {
        let delays = &total.start_delay;
        let on_time = delays.count_between(0, micros(LATE_THRESHOLD));
        let late_calls = delays.len() - on_time;
        let due = shared.schedule.due_before(stopped_at);
        let unsent = due.saturating_sub(sent);
        ScheduleSummary {
            start_delay: LatencySummary::from_micros(delays),
            late_calls,
            unsent,
            behind: late_calls * 100 > delays.len() || unsent * 100 > due.max(1),
        }
    });
    RunSummary {
        methods: methods
            .iter()
            .zip(&total.methods)
            .map(|(name, stats)| MethodSummary::new(name, stats, seconds))
            .collect(),
        total: MethodSummary::new("TOTAL", &total.total(), seconds),
        timeseries,
        requests: total.requests,
        http_statuses: total.statuses.iter().copied().collect(),
        extra_batch_entries: total.extra_entries,
        schedule,
        batches: BatchSummary::new(&total),
        setup: has_setup.then(|| SetupSummary {
            connections_ok: total.setup_ok,
            connections_failed: total.setup_failed,
            first_error: total.setup_error.clone(),
        }),
        stages: stage_totals
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
        in_flight_at_end: shared.in_flight_at_end.load(Ordering::Relaxed),
        measured_seconds: seconds,
        partial: cancel.is_cancelled(),
    }
}

/// Per-second windows being filled by the threads' hand-overs. A second is
/// complete once every thread still running has handed it over.
struct Windows {
    methods: usize,
    open: BTreeMap<u32, (Recorder, usize)>,
    last_second: Option<u32>,
    /// For each thread, the second of its last hand-over once it finished.
    finished: Vec<Option<u32>>,
}

impl Windows {
    fn new(threads: usize, methods: usize, last_second: Option<u32>) -> Self {
        Windows {
            methods,
            open: BTreeMap::new(),
            last_second,
            finished: vec![None; threads],
        }
    }

    fn add(&mut self, mut chunk: Chunk) {
        if let Some(last) = self.last_second {
            chunk.second = chunk.second.min(last);
        }
        let (window, reports) = self
            .open
            .entry(chunk.second)
            .or_insert_with(|| (Recorder::new(self.methods), 0));
        window.merge(&chunk.recorder);
        *reports += 1;
        if chunk.last.is_some() {
            self.finished[chunk.thread] = Some(chunk.second);
        }
    }

    fn expected_reports(&self, second: u32) -> usize {
        self.finished
            .iter()
            .filter(|f| f.is_none_or(|last| last >= second))
            .count()
    }

    fn pop_complete(&mut self) -> Option<(u32, Recorder)> {
        let (&second, (_, reports)) = self.open.first_key_value()?;
        // The final seconds are closed by `drain` with their true length.
        if *reports < self.expected_reports(second)
            || self.finished.iter().any(|f| f == &Some(second))
            || self.last_second.is_some_and(|last| second >= last)
        {
            return None;
        }
        self.open.remove(&second).map(|(window, _)| (second, window))
    }

    fn drain(&mut self) -> impl Iterator<Item = (u32, Recorder)> + '_ {
        std::mem::take(&mut self.open)
            .into_iter()
            .map(|(second, (window, _))| (second, window))
    }
}
