//! Engine threads: the run's shared state and clock, and what each thread
//! does (open its connections, start its callers, hand its figures over).
//!
//! Each engine thread runs a single-threaded runtime with its share of the
//! connections. Connection tasks on a thread share that thread's recorder
//! without locks (it is only ever touched from that thread), and the thread
//! hands the recorder over a few times a second.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::caller::run_caller;
use super::control::{Control, RunInfo};
use super::schedule::Schedule;
use super::slot::{connect_all, shut_down, ConnectionSlot};
use super::RunSpec;
use crate::plan::{LoadPlan, Mix, Pacing, Poll, Profile, SetupCall};
use crate::stats::{ChildShutdown, Recorder};
use crate::transport::Target;

/// The run's times, from the moment the connections are all open: the
/// schedule counts from there.
pub(super) struct Clock {
    pub start: Instant,
    /// Calls whose intended time is before this are warmup, not recorded.
    pub measure_start: Instant,
    /// Where each stage ends: a call is recorded in the stage of its
    /// intended send time, whenever its answer comes.
    pub stage_ends: Vec<Instant>,
    pub schedule: Schedule,
}

/// How a thread talks to the engine: its figures, and its word that its
/// connections are open.
pub(super) struct Channels {
    pub chunks: UnboundedSender<Chunk>,
    pub ready: UnboundedSender<()>,
}

/// What every thread and connection shares for the whole run.
pub(super) struct RunState {
    pub plan: LoadPlan,
    pub mix: Mix,
    pub target: Target,
    pub setup: Vec<SetupCall>,
    pub polls: Vec<Poll>,
    pub capture: Option<Arc<super::Capture>>,
    pub race: Option<Arc<super::RaceLog>>,
    /// Server processes watched (`--observe-pid`).
    pub observe: Vec<u32>,
    /// Calls in flight over time (closed model with stages).
    pub concurrency: Option<Profile>,
    pub control: Arc<Control>,
    pub cancel: CancellationToken,
    /// The run's clock, set once every connection has opened.
    clock: OnceLock<Clock>,
    /// Wakes the threads when the clock is set.
    begun: tokio::sync::Notify,
    next_id_block: AtomicU64,
    /// Calls a stop cut unanswered (in no figure).
    pub in_flight_at_end: AtomicU64,
    /// Flows started and not ended (cut by the end or a stop), per flow.
    pub flows_in_flight_at_end: Vec<AtomicU64>,
    /// Callers inside a call or a flow when the schedule ended (or a stop
    /// came first).
    pub callers_busy_at_end: AtomicU64,
    /// Connection tasks that panicked.
    pub panicked: AtomicU64,
    /// CPU time the engine threads used, in µs, added as each ends its run.
    pub cpu_micros: AtomicU64,
    /// How stdio children ended after the run.
    pub child_ends: std::sync::Mutex<ChildShutdown>,
}

impl RunState {
    pub fn new(spec: RunSpec, cancel: CancellationToken, control: Arc<Control>) -> Self {
        let RunSpec {
            plan,
            mix,
            target,
            setup,
            polls,
            capture,
            race,
            observe,
            facts: _,
            spool: _,
        } = spec;
        let callers = plan.callers();
        let flows_in_flight_at_end = mix.flows.iter().map(|_| AtomicU64::new(0)).collect();
        // A shard's ids are a block of their own: no two shards send one.
        let first_id = plan.shard.first_id();
        let concurrency = match plan.pacing {
            Pacing::Closed
                if !plan.stages.is_empty()
                    || callers as u64 > plan.shard.share(plan.initial_concurrency as u64) =>
            {
                Some(plan.profile(plan.initial_concurrency as f64))
            }
            _ => None,
        };
        RunState {
            control,
            observe,
            clock: OnceLock::new(),
            begun: tokio::sync::Notify::new(),
            concurrency,
            plan,
            mix,
            target,
            setup,
            polls,
            capture,
            race,
            cancel,
            next_id_block: AtomicU64::new(first_id),
            in_flight_at_end: AtomicU64::new(0),
            flows_in_flight_at_end,
            callers_busy_at_end: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            cpu_micros: AtomicU64::new(0),
            child_ends: Default::default(),
        }
    }

    /// Starts the run's clock at `start`: the schedule, the stages and the
    /// steering count from here. Once; the threads wait for it.
    pub fn begin(&self, start: Instant) {
        let plan = &self.plan;
        let measure_start = start + plan.warmup;
        let schedule = Schedule::new(plan, start, self.control.clone());
        self.control.started(RunInfo {
            start,
            claimed: schedule.claimed.clone(),
            profile: match plan.pacing {
                Pacing::Open { rate } => plan.profile(rate),
                Pacing::Closed => (self.concurrency.clone())
                    .unwrap_or_else(|| plan.profile(plan.initial_concurrency as f64)),
            },
            open: plan.is_open(),
            // The target is the whole run's; each shard has its own callers.
            callers: plan.callers().saturating_mul(plan.shard.count as usize),
        });
        let stage_ends = (plan.stage_bounds().iter())
            .map(|(_, end)| measure_start + Duration::from_secs_f64(*end))
            .collect();
        let _ = self.clock.set(Clock {
            start,
            measure_start,
            stage_ends,
            schedule,
        });
        self.begun.notify_waiters();
    }

    /// The run's clock, once `begin` has set it.
    pub fn clock_if_begun(&self) -> Option<&Clock> {
        self.clock.get()
    }

    /// The run's clock: set before any call of the load is made.
    pub fn clock(&self) -> &Clock {
        self.clock
            .get()
            .expect("the clock is set before any call is made")
    }

    /// Waits until `begin` has set the clock.
    async fn begun(&self) {
        loop {
            let woken = self.begun.notified();
            if self.clock.get().is_some() {
                return;
            }
            woken.await;
        }
    }

    /// In a staged closed model, whether connection `index` should be
    /// calling now, and if not, how long to wait before looking again.
    pub(super) fn idle_for(&self, index: usize) -> Option<Duration> {
        let active = match (self.control.manual_target(), &self.concurrency) {
            (Some(_), _) if self.plan.is_open() => return None,
            (Some(manual), _) => manual,
            (None, Some(profile)) => profile.value_at(self.clock().start.elapsed().as_secs_f64()),
            (None, None) => return None,
        };
        // The run-wide callers are striped over the shards, as requests are,
        // and the active ones over the connections.
        let mine = self.plan.shard.share(active.round().max(0.0) as u64);
        (self.plan.activation_rank(index) as u64 >= mine).then_some(Duration::from_millis(10))
    }
}

/// Hand-overs a second: often enough for a live view, rare enough to cost
/// nothing.
pub(super) const TICKS_PER_SECOND: u32 = crate::stats::SAMPLES_PER_SECOND;

/// One thread's figures for one tick of the run.
pub(super) struct Chunk {
    pub thread: usize,
    /// Ticks since the measured part began.
    pub tick: u32,
    pub recorder: Recorder,
    /// Calls in flight on the thread at the hand-over.
    pub in_flight: u64,
    /// The thread's last chunk; `sent` is its total of requests sent.
    pub last: Option<u64>,
    /// Calls of a staged run, by the stage of their intended send time
    /// (`recorder` has the rest); only the stages with calls.
    pub stages: Vec<(usize, Recorder)>,
}

/// What the connection tasks of one thread share.
pub(super) struct ThreadState {
    pub recorder: RefCell<Recorder>,
    /// A staged run's calls, per stage (empty without stages).
    stages: RefCell<Vec<Recorder>>,
    /// Unused ids of the block this thread holds: `next..end`.
    ids: Cell<(u64, u64)>,
    pub sent: Cell<u64>,
    pub in_flight: Cell<u64>,
    /// Callers inside a call or a flow now.
    pub busy: Cell<u64>,
    /// Calls and flows that went on across the schedule's end.
    pub across_the_end: Cell<u64>,
    /// Measured flows started and not yet ended, per flow of the mix.
    pub flows_in_flight: RefCell<Vec<u64>>,
    /// The run's token, seen through a child of this thread's own.
    pub cancel: CancellationToken,
    /// Cancelled when the grace runs out: heard by the calls whose wait
    /// could not know the grace's end as they left (`ending::wait_for`).
    pub cut: CancellationToken,
}

const ID_BLOCK: u64 = 4096;

impl ThreadState {
    /// Where a call due at `intended` is recorded: its stage's recorder in a
    /// staged run, else the thread's.
    pub(super) fn recorder_for(
        &self,
        shared: &RunState,
        intended: Instant,
    ) -> std::cell::RefMut<'_, Recorder> {
        let ends = &shared.clock().stage_ends;
        let Some(last) = ends.len().checked_sub(1) else {
            return self.recorder.borrow_mut();
        };
        let stage = ends.partition_point(|end| *end <= intended).min(last);
        std::cell::RefMut::map(self.stages.borrow_mut(), |stages| &mut stages[stage])
    }

    /// The stages' calls since the last hand-over, leaving fresh recorders.
    fn take_stages(&self, blank: &Recorder) -> Vec<(usize, Recorder)> {
        let mut stages = self.stages.borrow_mut();
        (stages.iter_mut().enumerate())
            .filter(|(_, recorder)| !recorder.is_empty())
            .map(|(i, recorder)| (i, std::mem::replace(recorder, blank.clone())))
            .collect()
    }

    /// `n` consecutive ids, unique in the run: threads take blocks from a
    /// shared counter, so ids cost no atomic operation per call.
    pub(super) fn take_ids(&self, shared: &RunState, n: u64) -> u64 {
        let (mut next, mut end) = self.ids.get();
        if end - next < n {
            let block = ID_BLOCK.max(n);
            next = shared.next_id_block.fetch_add(block, Ordering::Relaxed);
            end = next + block;
        }
        self.ids.set((next + n, end));
        next
    }
}

/// An engine thread: its own single-threaded runtime, running its share.
pub(super) fn thread_main(shared: Arc<RunState>, channels: Channels, thread: usize, connections: Vec<usize>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a single-threaded runtime can always be built");
    let local_set = tokio::task::LocalSet::new();
    local_set.block_on(&runtime, run_share(shared, channels, thread, connections));
}

/// One thread's share of the run: its connections opened, its callers
/// run, its figures handed over. Must run inside a `LocalSet`: on an
/// engine thread's runtime, or on a test's, under a paused clock.
pub(super) async fn run_share(
    shared: Arc<RunState>,
    channels: Channels,
    thread: usize,
    connections: Vec<usize>,
) {
    let local = Rc::new(ThreadState {
        recorder: RefCell::new(shared.mix.recorder()),
        stages: RefCell::new(vec![shared.mix.recorder(); shared.plan.stages.len()]),
        ids: Cell::new((0, 0)),
        sent: Cell::new(0),
        in_flight: Cell::new(0),
        busy: Cell::new(0),
        across_the_end: Cell::new(0),
        flows_in_flight: RefCell::new(vec![0; shared.mix.flows.len()]),
        cancel: shared.cancel.child_token(),
        cut: CancellationToken::new(),
    });
    let slots: Vec<Rc<ConnectionSlot>> = connections
        .iter()
        .map(|_| Rc::new(ConnectionSlot::default()))
        .collect();
    let Channels { chunks, ready } = channels;
    // Connections first, then the clock, which the engine sets once
    // every thread has said its connections are open. A mix of flows that
    // each open their own uses none of the slots'.
    if shared.mix.shares_connections() {
        connect_all(&shared, &local, &slots).await;
    }
    let _ = ready.send(());
    tokio::select! {
        _ = shared.begun() => {}
        _ = local.cancel.cancelled() => {}
    }
    if shared.clock.get().is_none() {
        // Stopped before the run began: nothing was measured.
        shut_down(&shared, &slots).await;
        return;
    }
    let tasks = start_callers(&shared, &local, &connections, &slots);
    let polls: Vec<_> = if thread == 0 {
        (0..shared.polls.len())
            .map(|i| tokio::task::spawn_local(super::poll::keep_polling(shared.clone(), i)))
            .collect()
    } else {
        Vec::new()
    };
    let tick = Rc::new(Cell::new(0u32));
    let hand_over = start_hand_over(&shared, &local, thread, &tick, chunks.clone());
    super::ending::wait_for_callers(&shared, &local, tasks).await;
    hand_over.abort();
    polls.iter().for_each(|p| p.abort());
    let mut recorder = local.recorder.replace(Recorder::new(0));
    recorder.unsolicited += slots.iter().map(|slot| slot.unsolicited()).sum::<u64>();
    // Before the last chunk, so the total is whole when the run ends.
    shared
        .cpu_micros
        .fetch_add(thread_cpu_micros(), Ordering::Relaxed);
    let _ = chunks.send(Chunk {
        thread,
        tick: tick.get(),
        recorder,
        in_flight: 0,
        last: Some(local.sent.get()),
        stages: local.take_stages(&Recorder::new(0)),
    });
    // After the last figures: the children's shutdown is no part of the run.
    shut_down(&shared, &slots).await;
}

/// The thread's callers: `per_connection` on each of its connections; in
/// the open model, one pacer that starts them as requests fall due.
fn start_callers(
    shared: &Arc<RunState>,
    local: &Rc<ThreadState>,
    connections: &[usize],
    slots: &[Rc<ConnectionSlot>],
) -> Vec<tokio::task::JoinHandle<()>> {
    if shared.plan.is_open() && shared.plan.groups.is_none() {
        let pacer = super::pacer::pace(shared.clone(), local.clone(), slots.to_vec());
        // One task: aborting it on a stop drops the calls it carries.
        return vec![tokio::task::spawn_local(pacer)];
    }
    let per_connection = shared.plan.callers_per_connection();
    connections
        .iter()
        .zip(slots)
        .flat_map(|(connection, slot)| {
            (0..per_connection).map(move |j| (connection * per_connection + j, slot.clone()))
        })
        .map(|(caller, slot)| {
            tokio::task::spawn_local(run_caller(shared.clone(), local.clone(), caller, slot))
        })
        .collect()
}

/// Hands the thread's figures over `TICKS_PER_SECOND` times a second, from
/// the start of the measured part, each in a fresh recorder.
fn start_hand_over(
    shared: &Arc<RunState>,
    local: &Rc<ThreadState>,
    thread: usize,
    tick: &Rc<Cell<u32>>,
    chunks: UnboundedSender<Chunk>,
) -> tokio::task::JoinHandle<()> {
    let (local, tick, shared) = (local.clone(), tick.clone(), shared.clone());
    let blank = shared.mix.recorder();
    let every = Duration::from_secs(1) / TICKS_PER_SECOND;
    tokio::task::spawn_local(async move {
        let mut ticks = tokio::time::interval_at(shared.clock().measure_start + every, every);
        loop {
            ticks.tick().await;
            let recorder = local.recorder.replace(blank.clone());
            let in_flight = local.in_flight.get();
            let _ = chunks.send(Chunk {
                thread,
                tick: tick.get(),
                recorder,
                in_flight,
                last: None,
                stages: local.take_stages(&blank),
            });
            tick.set(tick.get() + 1);
        }
    })
}

/// The CPU time this thread has used, in µs: what tells a busy generator
/// from a waiting one, whatever else shares the process (the built-in
/// server does).
fn thread_cpu_micros() -> u64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the struct it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) } != 0 {
        return 0;
    }
    (time.tv_sec as u64).saturating_mul(1_000_000) + time.tv_nsec as u64 / 1000
}
