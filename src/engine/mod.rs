//! The engine: runs a load plan against a target and gathers the figures.
//! It knows nothing of screens or files; it publishes snapshots to a
//! callback, takes steering through a `Control`, and returns the summary.

mod call;
mod caller;
mod capture;
mod checkout;
mod control;
mod ending;
mod flow;
mod gather;
mod observe;
mod pacer;
mod poll;
mod race;
mod recording;
mod rooms;
mod schedule;
mod single;
mod slot;
mod state;
mod timetable;
mod worker;

pub use crate::proc::readable as observable;
pub use capture::{Capture, Captured};
pub use control::Control;
pub use poll::first as first_poll;
pub use race::RaceLog;
pub use single::{call_by_hand, Answered, Session};

use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::time::Instant;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::plan::{LoadPlan, Mix, Poll, SetupCall};
use crate::stats::{ClientCpu, Due, Ending, Recorded, Recorder, RunSummary, Series, Snapshot};
use crate::transport::Target;
use gather::Gatherer;
use state::RunState;

/// Everything a run needs.
pub struct RunSpec {
    pub plan: LoadPlan,
    pub mix: Mix,
    pub target: Target,
    /// Sent on each new connection before it joins the load.
    pub setup: Vec<SetupCall>,
    pub polls: Vec<Poll>,
    /// Keeps a sample of requests and their answers (to compare targets).
    pub capture: Option<Arc<Capture>>,
    /// Keeps the head race's arrivals (`race = "POINTER"`), closed at the end.
    pub race: Option<Arc<RaceLog>>,
    /// Server processes whose CPU and memory are watched (`--observe-pid`);
    /// a stdio target's children are watched always.
    pub observe: Vec<u32>,
    /// What the summary's warnings weigh that only the caller knows.
    pub facts: crate::stats::Facts,
    /// Where each closed second goes as the run goes (`Series`: kept in
    /// memory); the summary gets them back whole at the end.
    pub spool: Box<dyn crate::stats::Spool>,
}

/// Runs the load until the plan's end or until `cancel` fires (then the
/// summary is marked partial). `control` steers it while it goes;
/// `publish` is handed a snapshot a few times a second, and a last one at the end.
pub async fn run(
    spec: RunSpec,
    cancel: CancellationToken,
    control: Arc<Control>,
    publish: impl FnMut(&Snapshot),
) -> RunSummary {
    run_placed(spec, cancel, control, publish, Placement::Threads).await
}

/// Where the engine's shares of the run go.
#[derive(Clone, Copy, PartialEq)]
enum Placement {
    /// Each on an engine thread of its own, with its own runtime.
    Threads,
    /// Each a task on the caller's `LocalSet`: one runtime, one clock,
    /// which a test may pause.
    #[cfg_attr(not(test), allow(dead_code))]
    Here,
}

async fn run_placed(
    mut spec: RunSpec,
    cancel: CancellationToken,
    control: Arc<Control>,
    mut publish: impl FnMut(&Snapshot),
    placement: Placement,
) -> RunSummary {
    let stop = cancel.child_token();
    let launched = Instant::now();
    let facts = std::mem::take(&mut spec.facts);
    let spool = std::mem::replace(&mut spec.spool, Box::new(Series::default()));
    let plan = &spec.plan;
    let threads = plan.threads_used();
    let mut gatherer = Gatherer::new(
        spec.mix.methods.clone(),
        spec.mix.recorder(),
        threads,
        (plan.duration, plan.stages.len()),
        spool,
    );
    // The children there before the run (the reachability check's) are not
    // the run's: noted before the connections open theirs.
    let children = match &spec.target {
        Target::Stream(target) if target.is_command() => Some(observe::Children::from_now(target.clone())),
        _ => None,
    };
    let children_before = children.as_ref().map(|_| match &spec.target {
        Target::Stream(target) => target.children().len(),
        _ => 0,
    });
    let shared = Arc::new(RunState::new(spec, stop.clone(), control.clone()));
    let (shares, mut chunks, ready) = start_shares(&shared, threads, placement);
    // Connections first, then the clock: every connection opens, with its
    // setup, before the schedule's first request is due.
    all_connected(ready, threads, &stop).await;
    let start = Instant::now();
    shared.begin(start);
    // The schedule's end is no stop: each thread ends its callers through
    // the grace (ending.rs); `stop` is for a stop that skips it.
    let deadline = shared.plan.duration.map(|d| start + shared.plan.warmup + d);
    let watching = watch_servers(&shared.observe, children, start + shared.plan.warmup);
    let snapshots = Snapshots::new(&shared, start, &control, &watching);
    // The first, as the run begins: a warmup has no figures for a while.
    publish(&snapshots.now(&mut gatherer, false));
    gather_all(&shared, &mut gatherer, &mut chunks, threads, |g| {
        publish(&snapshots.now(g, false))
    })
    .await;
    let end = Instant::now();
    // Read the servers now, before stdio children are shut down.
    let watched = watching.finish().await;
    stop.cancel();
    shares.join().await;
    // The shares are done: no notification or poll is still coming.
    if let Some(race) = &shared.race {
        race.close(shared.clock().measure_start.into_std());
    }

    // Measured time is the schedule's span when it ran its course (a kept
    // schedule reads its rate, whatever the grace took), else up to the
    // stop, or to the last answer of a closed model's request limit.
    let stopped_at =
        (shared.clock().schedule.span_end()).unwrap_or_else(|| deadline.map_or(end, |d| end.min(d)));
    let measured = stopped_at.saturating_duration_since(shared.clock().measure_start);
    gatherer.finish(measured);
    publish(&snapshots.now(&mut gatherer, true));
    // Paused time is no measured time: rates are over the time the load ran.
    let warmup_s = shared.plan.warmup.as_secs_f64();
    let ended = Ended {
        stopped_at,
        measured,
        paused: control.paused_within(warmup_s, warmup_s + measured.as_secs_f64()),
        cpu: client_cpu(&shared, end - launched, threads),
        partial: cancel.is_cancelled(),
    };
    let mut summary = summarize(&shared, &mut gatherer, &snapshots.stage_bounds, ended, facts);
    let sent_to = match &shared.target {
        Target::Stream(t) => t.calls_by_child(),
        _ => Vec::new(),
    };
    add_server_usage(&mut summary, &watched, &sent_to);
    if let (Target::Stream(target), Some(before)) = (&shared.target, children_before) {
        let ready = ready_of(target, before);
        // The same processes read at other moments: a child that lived
        // less than a second between two readings had its peak there.
        for usage in &mut summary.server {
            let child = ready.children.iter().find(|c| c.pid == usage.pid);
            let read = child.map_or(0, |c| c.rss_at_ready_bytes.max(c.rss_at_end_bytes).unwrap_or(0));
            usage.peak_rss_bytes = usage.peak_rss_bytes.max(read);
        }
        summary.ready = Some(ready);
    }
    summary
}

/// The run's children's readiness (those started from `before` on: not
/// the reachability check's).
fn ready_of(target: &crate::transport::StreamTarget, before: usize) -> crate::stats::ReadySummary {
    let children = target.lives().into_iter().skip(before).collect();
    crate::stats::ReadySummary::of(target.ready_signal(), children)
}

/// Takes the threads' figures until each has handed its last over (the
/// run ends there, not when the threads end: after them they may still be
/// shutting stdio children down), `publish`ing as rounds come in.
async fn gather_all(
    shared: &RunState,
    gatherer: &mut Gatherer,
    chunks: &mut mpsc::UnboundedReceiver<state::Chunk>,
    threads: usize,
    mut publish: impl FnMut(&mut Gatherer),
) {
    let mut threads_done = 0;
    let measure_start = shared.clock().measure_start;
    while let Some(chunk) = chunks.recv().await {
        // Calls answered after the schedule's span (in the grace) count in
        // its last second, as a timed run's do.
        if let Some(span) = shared.clock().schedule.span_end() {
            gatherer.close_at(span.saturating_duration_since(measure_start));
        }
        let last = chunk.last.is_some();
        if gatherer.add(chunk) {
            publish(gatherer);
        }
        threads_done += usize::from(last);
        if threads_done == threads {
            break;
        }
    }
}

/// Until every share says its connections are open (or the run is stopped).
async fn all_connected(mut ready: mpsc::UnboundedReceiver<()>, shares: usize, stop: &CancellationToken) {
    let mut connected = 0;
    while connected < shares {
        tokio::select! {
            one = ready.recv() => match one {
                Some(()) => connected += 1,
                None => break,
            },
            _ = stop.cancelled() => break,
        }
    }
}

/// What a snapshot says beside the figures: where the run stands.
struct Snapshots {
    base: Snapshot,
    stage_bounds: Vec<(f64, f64)>,
    start: Instant,
    warmup: std::time::Duration,
    control: Arc<Control>,
    /// The servers' latest reading.
    server_now: Arc<std::sync::Mutex<Option<(f64, u64)>>>,
    race: Option<Arc<RaceLog>>,
}

impl Snapshots {
    fn new(shared: &RunState, start: Instant, control: &Arc<Control>, watching: &Watching) -> Self {
        let plan = &shared.plan;
        Snapshots {
            base: Snapshot {
                warmup: plan.warmup,
                planned: plan.duration.map(|d| d + plan.warmup),
                stages: plan.stages.len(),
                open: plan.is_open(),
                ..Snapshot::default()
            },
            stage_bounds: plan.stage_bounds(),
            start,
            warmup: plan.warmup,
            control: control.clone(),
            server_now: Arc::clone(&watching.now),
            race: shared.race.clone(),
        }
    }

    /// The run now, with the figures gathered so far.
    fn now(&self, gatherer: &mut Gatherer, finished: bool) -> Snapshot {
        let elapsed = self.start.elapsed();
        // Through the grace, the figures stay over the planned span.
        let planned = self.base.planned.map(|p| p.saturating_sub(self.warmup));
        let measured = elapsed.saturating_sub(self.warmup);
        let measured = planned.map_or(measured, |p| measured.min(p));
        let seconds = measured.as_secs_f64();
        let snapshot = Snapshot {
            elapsed,
            stage: (self.stage_bounds.iter()).position(|(from, to)| seconds >= *from && seconds < *to),
            target: self.control.target_now(),
            paused: self.control.is_paused(),
            server: *self.server_now.lock().unwrap_or_else(|p| p.into_inner()),
            race: self.race.as_ref().map(|race| race.so_far()),
            finished,
            ..self.base.clone()
        };
        gatherer.snapshot(measured, snapshot)
    }
}

/// The task reading what the server processes spend, and its stop.
struct Watching {
    task: tokio::task::JoinHandle<Vec<crate::stats::Watched>>,
    stop: CancellationToken,
    /// The latest reading, for the snapshots.
    now: Arc<std::sync::Mutex<Option<(f64, u64)>>>,
}

impl Watching {
    async fn finish(self) -> Vec<crate::stats::Watched> {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

fn watch_servers(observe: &[u32], children: Option<observe::Children>, measure_start: Instant) -> Watching {
    let watched = (observe.iter())
        .map(|&pid| crate::stats::Watched {
            pid,
            label: format!("pid {pid}"),
            samples: Vec::new(),
            gone: false,
        })
        .collect();
    let stop = CancellationToken::new();
    let now = Arc::default();
    // Nothing to watch: the task ends at once, reading nothing.
    let task = match (&children, observe.is_empty()) {
        (None, true) => tokio::spawn(async { Vec::new() }),
        _ => tokio::spawn(observe::watch(
            watched,
            children,
            measure_start,
            stop.clone(),
            Arc::clone(&now),
        )),
    };
    Watching { task, stop, now }
}

/// Each watched process's usage over the run, and every second's. A
/// stdio child's CPU is per 1,000 of its own calls: the run's, by its
/// share of the calls `sent_to` each child; another process's, per 1,000
/// of all the run's.
fn add_server_usage(summary: &mut RunSummary, watched: &[crate::stats::Watched], sent_to: &[(u32, u64)]) {
    let own = |pid: u32| sent_to.iter().find(|(child, _)| *child == pid).map(|(_, n)| *n);
    let to_watched: u64 = watched.iter().filter_map(|w| own(w.pid)).sum();
    let calls = summary.total.calls;
    summary.server = watched
        .iter()
        .filter_map(|w| match own(w.pid) {
            Some(sent) if to_watched > 0 => w.summary(share_of(calls, sent, to_watched)),
            _ => w.summary(calls),
        })
        .collect();
    let read = |w: &&crate::stats::Watched| w.samples.iter().any(|s| s.at >= 0.0);
    summary.servers_read_once =
        (watched.iter().filter(read).count()).saturating_sub(summary.server.len()) as u64;
    if summary.server.is_empty() {
        return;
    }
    for row in &mut summary.timeseries {
        let seconds: Vec<(f64, u64)> = watched.iter().filter_map(|w| w.second(row.second)).collect();
        if !seconds.is_empty() {
            row.server_cpu_cores = Some(seconds.iter().map(|s| s.0).sum());
            row.server_rss_bytes = Some(seconds.iter().map(|s| s.1).sum());
        }
    }
}

/// `calls` in the proportion `part` of `whole`, rounded.
fn share_of(calls: u64, part: u64, whole: u64) -> u64 {
    (calls as f64 * part as f64 / whole as f64).round() as u64
}

/// The shares of the run under way, on threads or as tasks.
enum Shares {
    Threads(Vec<std::thread::JoinHandle<()>>),
    Tasks(Vec<tokio::task::JoinHandle<()>>),
}

impl Shares {
    /// Waits for every share to end (stdio children shut down).
    async fn join(self) {
        match self {
            Shares::Threads(handles) => handles.into_iter().for_each(|h| drop(h.join())),
            Shares::Tasks(handles) => drop(futures_util::future::join_all(handles).await),
        }
    }
}

/// What `start_shares` gives back: the shares, the channel their figures
/// come back on, and the one each says it has connected on.
type Started = (
    Shares,
    mpsc::UnboundedReceiver<state::Chunk>,
    mpsc::UnboundedReceiver<()>,
);

/// The run's shares, each with its part of the connections (every
/// `threads`-th one), placed as asked.
fn start_shares(shared: &Arc<RunState>, threads: usize, placement: Placement) -> Started {
    let (chunks_tx, chunks) = mpsc::unbounded_channel();
    let (ready_tx, ready) = mpsc::unbounded_channel();
    let connections = shared.plan.connections;
    let shares = (0..threads).map(|thread| {
        let mine: Vec<usize> = (thread..connections).step_by(threads).collect();
        let channels = state::Channels {
            chunks: chunks_tx.clone(),
            ready: ready_tx.clone(),
        };
        (shared.clone(), channels, thread, mine)
    });
    let shares = match placement {
        Placement::Threads => Shares::Threads(
            shares
                .map(|(shared, channels, thread, mine)| {
                    std::thread::Builder::new()
                        .name(format!("volley-engine-{thread}"))
                        .spawn(move || worker::thread_main(shared, channels, thread, mine))
                        .expect("spawning an engine thread")
                })
                .collect(),
        ),
        Placement::Here => Shares::Tasks(
            shares
                .map(|(shared, channels, thread, mine)| {
                    tokio::task::spawn_local(worker::run_share(shared, channels, thread, mine))
                })
                .collect(),
        ),
    };
    (shares, chunks, ready)
}

/// How the run ended: when, how much of it was measured, what it cost.
struct Ended {
    stopped_at: Instant,
    measured: std::time::Duration,
    /// Seconds of `measured` the run was paused.
    paused: f64,
    cpu: ClientCpu,
    partial: bool,
}

/// The run's figures, from everything gathered, with their verdict and
/// warnings whole.
fn summarize(
    shared: &RunState,
    gatherer: &mut Gatherer,
    stage_bounds: &[(f64, f64)],
    ended: Ended,
    facts: crate::stats::Facts,
) -> RunSummary {
    let wall = ended.measured.as_secs_f64();
    let due = shared.clock().schedule.due_before(ended.stopped_at);
    let recorded = Recorded {
        methods: &shared.mix.methods,
        total: std::mem::replace(&mut gatherer.total, Recorder::new(0)),
        stages: std::mem::take(&mut gatherer.stage_totals),
        stage_bounds,
    };
    let ending = Ending {
        seconds: (wall - ended.paused).max(0.0),
        wall,
        paused: ended.paused,
        schedule: shared.plan.is_open().then(|| Due {
            due,
            unsent: due.saturating_sub(gatherer.sent),
        }),
        rate: rate_at_end(shared),
        planned_connections: match shared.mix.shares_connections() {
            true => shared.plan.connections as u64,
            false => 0,
        },
        subscribed: shared.setup.iter().any(|s| s.subscribe),
        set_up: !shared.setup.is_empty(),
        flows_in_flight: (shared.flows_in_flight_at_end.iter())
            .map(|n| n.load(Ordering::Relaxed))
            .collect(),
        callers: Some(shared.plan.callers()),
        callers_busy_at_end: shared.callers_busy_at_end.load(Ordering::Relaxed),
        in_flight_at_end: shared.in_flight_at_end.load(Ordering::Relaxed),
        panicked: shared.panicked.load(Ordering::Relaxed),
        cpu: ended.cpu,
        partial: ended.partial,
    };
    let mut summary = RunSummary::derive(recorded, ending);
    summary.events = shared.control.events();
    summary.steered_to = shared.control.steered_to();
    summary.child_shutdown = matches!(&shared.target, Target::Stream(t) if t.is_command()).then(|| {
        let ends = shared.child_ends.lock().unwrap_or_else(|p| p.into_inner());
        ends.clone()
    });
    let series = gatherer.spool.take();
    summary.timeseries = series.timeseries;
    summary.latency_log = series.latency_log;
    summary.samples = series.samples;
    summary.finish(&all_facts(shared, facts));
    summary
}

/// The open model's constant rate in force at the end: the one steered
/// to, if it was.
fn rate_at_end(shared: &RunState) -> Option<f64> {
    let steered = shared.control.steered_to().filter(|_| shared.plan.is_open());
    shared.plan.constant_rate().map(|rate| steered.unwrap_or(rate))
}

/// The caller's facts, with what the plan carries, which the engine knows.
fn all_facts(shared: &RunState, facts: crate::stats::Facts) -> crate::stats::Facts {
    crate::stats::Facts {
        stopped_because: shared.control.stopped_because(),
        max_flows: shared.plan.max_flows,
        capacity: crate::stats::Capacity {
            connections: shared.plan.connections,
            callers: shared.plan.callers(),
        },
        ..facts
    }
}

/// The engine threads' CPU time against their wall time over the run.
fn client_cpu(shared: &RunState, wall: std::time::Duration, threads: usize) -> ClientCpu {
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

#[cfg(test)]
mod ending_tests;
#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod tests;
