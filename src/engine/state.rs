//! The run's shared state and clock (`RunState`), and what the connection
//! tasks of one engine thread share (`ThreadState`): what every part of
//! the engine reads, beneath the threads' life (`worker.rs`) that starts
//! them.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::control::{Control, RunInfo};
use super::schedule::Schedule;
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
    pub(super) clock: OnceLock<Clock>,
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
            timetable: schedule.timetable(),
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
    pub(super) async fn begun(&self) {
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
    /// Stdio children let go during the run (`slot::retire`), being shut
    /// down: waited for with the others at the thread's end.
    pub retiring: RefCell<Vec<tokio::task::JoinHandle<()>>>,
}

const ID_BLOCK: u64 = 4096;

impl ThreadState {
    /// A thread's state at its start: nothing counted, no ids held.
    pub(super) fn new(shared: &RunState) -> Self {
        ThreadState {
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
            retiring: RefCell::new(Vec::new()),
        }
    }

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
    pub(super) fn take_stages(&self, blank: &Recorder) -> Vec<(usize, Recorder)> {
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
