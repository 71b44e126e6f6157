//! Engine threads and the one loop every connection runs.
//!
//! Each engine thread runs a single-threaded runtime with its share of the
//! connections. Connection tasks on a thread share that thread's recorder
//! without locks (it is only ever touched from that thread), and the thread
//! hands the recorder over a few times a second.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::{sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::call::{self, call_once};
use super::control::{Control, RunInfo};
use super::schedule::{Claim, Schedule};
use super::RunSpec;
use crate::plan::{LoadPlan, Mix, Pacing, Planned, Poll, Profile, RequestBuilder, SetupCall};
use crate::rpc::Judge;
use crate::stats::Outcome;
use crate::stats::{micros, ChildShutdown, Recorder};
use crate::transport::{ChildEnd, Connection, Target};

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
    pub in_flight_at_end: AtomicU64,
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
            observe,
        } = spec;
        let callers = plan.callers();
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
            cancel,
            next_id_block: AtomicU64::new(first_id),
            in_flight_at_end: AtomicU64::new(0),
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
    fn idle_for(&self, index: usize) -> Option<Duration> {
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
struct ThreadState {
    recorder: RefCell<Recorder>,
    /// A staged run's calls, per stage (empty without stages).
    stages: RefCell<Vec<Recorder>>,
    /// Unused ids of the block this thread holds: `next..end`.
    ids: Cell<(u64, u64)>,
    sent: Cell<u64>,
    in_flight: Cell<u64>,
    /// The run's token, seen through a child of this thread's own.
    cancel: CancellationToken,
}

const ID_BLOCK: u64 = 4096;

impl ThreadState {
    /// Where a call due at `intended` is recorded: its stage's recorder in a
    /// staged run, else the thread's.
    fn recorder_for(&self, shared: &RunState, intended: Instant) -> std::cell::RefMut<'_, Recorder> {
        if shared.clock().stage_ends.is_empty() {
            return self.recorder.borrow_mut();
        }
        let stage = shared.clock().stage_ends.partition_point(|end| *end <= intended);
        let last = shared.clock().stage_ends.len() - 1;
        std::cell::RefMut::map(self.stages.borrow_mut(), |stages| &mut stages[stage.min(last)])
    }

    /// The stages' calls since the last hand-over, leaving fresh recorders.
    fn take_stages(&self, methods: usize) -> Vec<(usize, Recorder)> {
        let mut stages = self.stages.borrow_mut();
        (stages.iter_mut().enumerate())
            .filter(|(_, recorder)| !recorder.is_empty())
            .map(|(i, recorder)| (i, std::mem::replace(recorder, Recorder::new(methods))))
            .collect()
    }

    /// `n` consecutive ids, unique in the run: threads take blocks from a
    /// shared counter, so ids cost no atomic operation per call.
    fn take_ids(&self, shared: &RunState, n: u64) -> u64 {
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

pub(super) fn thread_main(shared: Arc<RunState>, channels: Channels, thread: usize, connections: Vec<usize>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a single-threaded runtime can always be built");
    let local_set = tokio::task::LocalSet::new();
    local_set.block_on(&runtime, async move {
        let local = Rc::new(ThreadState {
            recorder: RefCell::new(Recorder::new(shared.mix.methods.len())),
            stages: RefCell::new(vec![
                Recorder::new(shared.mix.methods.len());
                shared.plan.stages.len()
            ]),
            ids: Cell::new((0, 0)),
            sent: Cell::new(0),
            in_flight: Cell::new(0),
            cancel: shared.cancel.child_token(),
        });
        let slots: Vec<Rc<ConnectionSlot>> = connections
            .iter()
            .map(|_| Rc::new(ConnectionSlot::default()))
            .collect();
        let Channels { chunks, ready } = channels;
        // Connections first, then the clock, which the engine sets once
        // every thread has said its connections are open.
        connect_all(&shared, &local, &slots).await;
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
        wait_for_callers(&shared, &local, tasks).await;
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
            stages: local.take_stages(0),
        });
        // After the last figures: the children's shutdown is no part of the run.
        shut_down(&shared, &slots).await;
    });
}

/// Openings a thread makes at once before the run: enough that 10,000
/// connections open in seconds, few enough that a server's accept queue
/// and the handshakes' CPU are not flooded.
const OPENING_AT_ONCE: usize = 64;

/// Opens every connection of the thread, with its setup calls, before the
/// schedule begins; a connection that does not open is left for its first
/// call, which tries again and counts the failure.
async fn connect_all(shared: &Arc<RunState>, local: &Rc<ThreadState>, slots: &[Rc<ConnectionSlot>]) {
    let bound = tokio::sync::Semaphore::new(OPENING_AT_ONCE);
    let openings = slots.iter().map(|slot| async {
        let Ok(_permit) = bound.acquire().await else {
            return;
        };
        if let Ok(connection) = slot.open(shared, local).await {
            slot.checkin(connection);
        }
    });
    tokio::select! {
        _ = futures_util::future::join_all(openings) => {}
        _ = local.cancel.cancelled() => {}
    }
}

/// The thread's callers: `per_connection` on each of its connections.
fn start_callers(
    shared: &Arc<RunState>,
    local: &Rc<ThreadState>,
    connections: &[usize],
    slots: &[Rc<ConnectionSlot>],
) -> Vec<tokio::task::JoinHandle<()>> {
    let per_connection = shared.plan.callers_per_connection();
    connections
        .iter()
        .zip(slots)
        .flat_map(|(connection, slot)| {
            (0..per_connection).map(move |j| (connection * per_connection + j, slot.clone()))
        })
        .map(|(caller, slot)| {
            tokio::task::spawn_local(connection_loop(shared.clone(), local.clone(), caller, slot))
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
    let methods = shared.mix.methods.len();
    let every = Duration::from_secs(1) / TICKS_PER_SECOND;
    tokio::task::spawn_local(async move {
        let mut ticks = tokio::time::interval_at((shared.clock().measure_start + every).into(), every);
        loop {
            ticks.tick().await;
            let recorder = local.recorder.replace(Recorder::new(methods));
            let in_flight = local.in_flight.get();
            let _ = chunks.send(Chunk {
                thread,
                tick: tick.get(),
                recorder,
                in_flight,
                last: None,
                stages: local.take_stages(methods),
            });
            tick.set(tick.get() + 1);
        }
    })
}

/// Until every caller has ended or the run is stopped (then they are
/// aborted, and the calls they had in flight are counted).
async fn wait_for_callers(shared: &RunState, local: &ThreadState, tasks: Vec<tokio::task::JoinHandle<()>>) {
    // Stopping aborts the connection tasks where they wait, so no call
    // registers for cancellation: the hot path takes no lock for it.
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    let all_done = async {
        for task in tasks {
            if task.await.is_err_and(|e| e.is_panic()) {
                shared.panicked.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    tokio::select! {
        _ = all_done => {}
        _ = local.cancel.cancelled() => {
            aborts.iter().for_each(|a| a.abort());
            shared.in_flight_at_end.fetch_add(local.in_flight.get(), Ordering::Relaxed);
        }
    }
    if shared.clock().schedule.ends_at_deadline() {
        // Callers with nothing left to claim keep their connections open
        // (subscriptions still count) until the run's end.
        local.cancel.cancelled().await;
    }
}

/// Closes the thread's connections, shutting stdio children down as their
/// protocol says, and tallies how each ended.
async fn shut_down(shared: &RunState, slots: &[Rc<ConnectionSlot>]) {
    let connections = slots
        .iter()
        .filter_map(|slot| slot.connection.borrow_mut().take());
    let ends = futures_util::future::join_all(connections.map(Connection::shut_down)).await;
    let mut tally = shared.child_ends.lock().unwrap_or_else(|p| p.into_inner());
    for end in ends.into_iter().flatten() {
        match end {
            ChildEnd::Clean => tally.clean += 1,
            ChildEnd::Failed => tally.failed += 1,
            ChildEnd::Killed => tally.killed += 1,
        }
    }
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

/// Reconnection waits grow from 10 ms to 1 s so a dead server is not hammered.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// The resolution of tokio's timer.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// A connection and the callers planned on it: one caller for HTTP/1.1,
/// several for a multiplexed transport, which share it.
#[derive(Default)]
struct ConnectionSlot {
    connection: RefCell<Option<Connection>>,
    /// A caller is opening the connection; the others wait for it, so the
    /// slot never holds more than one.
    opening: Cell<bool>,
    /// Wakes the callers waiting for it when the opening ends, either way.
    opened: tokio::sync::Notify,
}

impl ConnectionSlot {
    /// Takes out the slot's connection if it has closed, so it can be
    /// accounted for (a panicked reader, a child's exit).
    fn take_closed(&self) -> Option<Connection> {
        let mut held = self.connection.borrow_mut();
        if held.as_ref().is_some_and(Connection::is_closed) {
            held.take()
        } else {
            None
        }
    }

    /// A live connection to use now, if the slot holds one: a shared handle
    /// on a multiplexed one, or the connection itself (taken out) otherwise.
    fn checkout(&self) -> Option<Connection> {
        let mut held = self.connection.borrow_mut();
        if held.as_ref().is_some_and(Connection::is_closed) {
            *held = None;
        }
        match held.as_ref()?.share() {
            Some(shared) => Some(shared),
            None => held.take(),
        }
    }

    /// Puts back a connection taken out whole; a shared one never left.
    fn checkin(&self, connection: Connection) {
        if connection.share().is_none() && !connection.is_closed() {
            *self.connection.borrow_mut() = Some(connection);
        }
    }

    /// Opens the slot's connection and sends its setup calls, while the
    /// slot's other callers wait; returns the caller's handle on it.
    async fn open(&self, shared: &Arc<RunState>, local: &Rc<ThreadState>) -> Result<Connection, OpenFailure> {
        self.opening.set(true);
        let opened = open_and_set_up(shared, local).await;
        self.opening.set(false);
        self.opened.notify_waiters();
        opened.map(|connection| self.install(connection))
    }

    /// Keeps a newly opened connection, returning the caller's handle on it.
    fn install(&self, connection: Connection) -> Connection {
        match connection.share() {
            Some(shared) => {
                *self.connection.borrow_mut() = Some(connection);
                shared
            }
            None => connection,
        }
    }

    /// Messages on the slot's connection that answered nothing.
    fn unsolicited(&self) -> u64 {
        match self.connection.borrow().as_ref() {
            Some(Connection::Stream(mux)) => mux.unsolicited(),
            _ => 0,
        }
    }
}

/// One caller: a task that claims the run's requests one at a time and
/// sends each over its slot's connection, opening it when needed.
struct Caller {
    shared: Arc<RunState>,
    local: Rc<ThreadState>,
    slot: Rc<ConnectionSlot>,
    builder: RequestBuilder,
    judge: Judge,
    planned: Vec<Planned>,
    backoff: Duration,
    /// The last connection opened failed its first call: it opened but never
    /// worked (an HTTP/1.1 server met with --http2 closes each one), so the
    /// next opening waits the backoff too rather than spin.
    reopen_after_failure: bool,
    open_model: bool,
    /// Only HTTP answers have a status worth counting.
    http: bool,
}

/// A connection in the caller's hand, and what it took to get it.
struct InHand {
    connection: Connection,
    /// The call waited for setup calls (its own or another caller's).
    waited_for_setup: bool,
    /// This caller opened it for this call.
    opened_now: bool,
}

/// When a request left and was answered, against when it was due.
struct Timing {
    intended: Instant,
    sent: Instant,
    answered: Instant,
}

async fn connection_loop(
    shared: Arc<RunState>,
    local: Rc<ThreadState>,
    index: usize,
    slot: Rc<ConnectionSlot>,
) {
    let mut caller = Caller {
        open_model: shared.plan.is_open(),
        http: matches!(shared.target, Target::Http(_)),
        judge: Judge::new(shared.mix.version()),
        shared,
        local,
        slot,
        builder: RequestBuilder::default(),
        planned: Vec::new(),
        backoff: BACKOFF_MIN,
        reopen_after_failure: false,
    };
    while let Some(claim) = caller.next_due(index).await {
        if !caller.call(claim).await {
            caller.shared.clock().schedule.finish();
            break;
        }
    }
}

impl Caller {
    /// Waits for the caller's next request to be due (through pauses, idle
    /// stages and the open model's schedule); `None` once the run has none.
    async fn next_due(&self, index: usize) -> Option<Claim> {
        let shared = &self.shared;
        loop {
            if shared.control.is_paused() {
                shared.control.wait_resumed().await;
            }
            // An idle caller never claims, so it must learn here that the
            // others took the last request.
            if shared.clock().schedule.is_finished() {
                return None;
            }
            if let Some(wait) = shared.idle_for(index) {
                sleep(wait).await;
                continue;
            }
            let connection = shared.plan.connection_of(index);
            let claim = shared.clock().schedule.claim_for(connection)?;
            if !self.open_model {
                return Some(claim);
            }
            // tokio's timer rounds a deadline up to its next millisecond tick,
            // so waiting for the intended time itself leaves about a
            // millisecond late on average: more than a fast server's whole
            // answer. Waiting for one tick less, the call leaves within a
            // fraction of a millisecond either side of its time; one that
            // leaves early is timed from when it left.
            let wake = claim.intended.checked_sub(TIMER_TICK).unwrap_or(claim.intended);
            sleep_until(wake.into()).await;
            if !shared.control.is_paused() {
                return Some(claim);
            }
            // Paused before it was due: the schedule restarts on resume.
            shared.clock().schedule.withdraw();
        }
    }

    /// Sends the next request of the mix, due at `intended`, and records
    /// what became of it; `false` when the mix has nothing left to send.
    async fn call(&mut self, claim: Claim) -> bool {
        let shared = &self.shared;
        let intended = claim.intended;
        // Reseeded per request: request N is the same on every run with
        // the seed, whichever connection sends it (SplitMix64's constant
        // spreads consecutive numbers over the seed space).
        let mut rng =
            SmallRng::seed_from_u64(shared.plan.seed ^ claim.seq.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let Some(batch) = shared.mix.next_request(claim.seq, &mut rng, &mut self.planned) else {
            return false;
        };
        let calls = self.planned.iter().filter(|p| !p.notification).count() as u64;
        let first_id = self.local.take_ids(shared, calls);
        let body = shared
            .mix
            .write(&mut self.builder, &self.planned, batch, first_id, &mut rng);
        let measured = intended >= shared.clock().measure_start;
        let mut in_hand = match self.connection().await {
            Ok(in_hand) => in_hand,
            Err(failure) => {
                self.count_unopened(measured.then_some(intended), &failure);
                sleep(self.backoff).await;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                return true;
            }
        };
        let local = &self.local;
        let sent = Instant::now();
        local.sent.set(local.sent.get() + 1);
        let calls_sent = self.builder.entries().len() as u64;
        local.in_flight.set(local.in_flight.get() + calls_sent);
        let within = self.shared.plan.timeout;
        // The sample kept to compare targets: a copy of the request (shared
        // bytes) only for the requests it holds, warmup ones too (a warmup
        // by time ends at another request on each target).
        let keep = (self.shared.capture.as_ref())
            .filter(|c| c.wants(claim.seq))
            .map(|_| body.clone());
        let result = call::exchange(&mut in_hand.connection, body, first_id, calls, within).await;
        if let (Some(request), Some(capture)) = (keep, &self.shared.capture) {
            capture.keep(super::Captured {
                seq: claim.seq,
                batch,
                entries: self.builder.entries().to_vec(),
                request,
                answer: match &result {
                    Ok(Ok(reply)) => Some(reply.body.clone()),
                    _ => None,
                },
            });
        }
        local.in_flight.set(local.in_flight.get() - calls_sent);
        let answered = Instant::now();
        let failure = call::failure(&result);
        match failure {
            None => {
                self.backoff = BACKOFF_MIN;
                self.reopen_after_failure = false;
            }
            Some(Outcome::Io | Outcome::Connect) if in_hand.opened_now => self.reopen_after_failure = true,
            Some(_) => {}
        }
        // After a failure or a timeout, a connection carrying one call at a
        // time is in an unknown state: it is dropped, not put back. A
        // multiplexed one stays for its other calls unless it closed.
        if failure.is_none() {
            self.slot.checkin(in_hand.connection);
        }
        if measured {
            let timing = Timing {
                intended,
                sent,
                answered,
            };
            self.record(batch, &result, failure, &timing, in_hand.waited_for_setup);
        }
        true
    }

    /// The slot's connection, waiting for a caller that is opening it, or
    /// opening it (after the backoff when the last one failed at once).
    async fn connection(&mut self) -> Result<InHand, OpenFailure> {
        let (shared, local, slot) = (&self.shared, &self.local, &self.slot);
        let mut waited_for_setup = false;
        loop {
            if let Some(closed) = slot.take_closed() {
                // A reader that panicked closed its connection (its calls
                // failed as `io`); the panic is still a bug to report.
                if closed.multiplexed().is_some_and(|mux| mux.reader_panicked()) {
                    shared.panicked.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(exit) = closed.child_exit().await {
                    local.recorder.borrow_mut().note_child_exit(exit);
                }
            }
            if let Some(connection) = slot.checkout() {
                return Ok(InHand {
                    connection,
                    waited_for_setup,
                    opened_now: false,
                });
            }
            if slot.opening.get() {
                // Another caller is opening the shared connection: wait for it.
                waited_for_setup = !shared.setup.is_empty();
                slot.opened.notified().await;
                continue;
            }
            if self.reopen_after_failure {
                sleep(self.backoff).await;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
            let connection = slot.open(shared, local).await?;
            return Ok(InHand {
                connection,
                waited_for_setup: !shared.setup.is_empty(),
                opened_now: true,
            });
        }
    }

    /// A request that found no connection: each of its calls fails with the
    /// opening's outcome, and its reason is kept as an example.
    fn count_unopened(&self, measured: Option<Instant>, failure: &OpenFailure) {
        let local = &self.local;
        local.sent.set(local.sent.get() + 1);
        let Some(intended) = measured else {
            return;
        };
        let mut recorder = local.recorder_for(&self.shared, intended);
        let entries = self.builder.entries();
        let cause = crate::stats::Cause::Transport(&failure.reason);
        let methods = &self.shared.mix.methods;
        Judge::fail_all(entries, failure.outcome, |i, outcome, _| {
            let method = entries[i].method as usize;
            let stats = &mut recorder.methods[method];
            stats.record(outcome, Duration::ZERO, Duration::ZERO, 0);
            stats.keep_example::<&str>(&methods[method], outcome, cause, None, &[]);
        });
    }

    /// Records what a measured request as a whole tells (its start delay,
    /// batch, unsolicited messages) and returns its latency and service time.
    fn record_request(
        &self,
        recorder: &mut Recorder,
        batch: bool,
        result: &call::Exchanged,
        timing: &Timing,
        waited_for_setup: bool,
    ) -> (Duration, Duration) {
        // Setup calls (a protocol's handshake) are outside the figures: in
        // the closed model, a call that waited for them is timed from its
        // send. In the open model its schedule stands, and the wait shows.
        let latency = if waited_for_setup && !self.open_model {
            timing.answered - timing.sent
        } else {
            timing.answered - timing.intended.min(timing.sent)
        };
        recorder.requests += 1;
        if self.open_model {
            recorder
                .start_delay
                .record(micros(timing.sent - timing.intended))
                .ok();
        }
        if batch {
            recorder.record_batch(self.planned.len(), latency);
        }
        if let Ok(Ok(reply)) = result {
            recorder.unsolicited += reply.others;
        }
        (latency, timing.answered - timing.sent)
    }

    /// Records a measured request: its latency, and each call's outcome as
    /// the judge finds it in the answer (or the failure's, for all).
    fn record(
        &mut self,
        batch: bool,
        result: &call::Exchanged,
        failure: Option<Outcome>,
        timing: &Timing,
        waited_for_setup: bool,
    ) {
        let (shared, mix) = (&*self.shared, &self.shared.mix);
        let mut recorder = self.local.recorder_for(shared, timing.intended);
        let (latency, service) = self.record_request(&mut recorder, batch, result, timing, waited_for_setup);
        let entries = self.builder.entries();
        let mut failed: Option<(usize, Outcome)> = None;
        let methods = &mut recorder.methods;
        let cause = call::cause(result, shared.plan.timeout);
        let mut record = |i: usize, outcome: Outcome, answer: &[u8]| {
            let entry = entries[i];
            let stats = &mut methods[entry.method as usize];
            stats.record(outcome, latency, service, answer.len());
            if outcome == Outcome::Ok {
                return;
            }
            if failed.is_none() {
                failed = Some((i, outcome));
            }
            let expected = mix.expectations[entry.call as usize].as_ref();
            stats.keep_example(
                &mix.methods[entry.method as usize],
                outcome,
                cause,
                expected,
                answer,
            );
            if let (Outcome::Assertion, Some(expected)) = (outcome, expected) {
                stats.add_example(expected, answer);
            }
        };
        let answered = match (result, failure) {
            (Ok(Ok(reply)), _) => {
                let verdict = self.judge.judge(
                    reply.status,
                    &reply.body,
                    entries,
                    batch,
                    &mix.expectations,
                    &mut record,
                );
                Some((reply.status, verdict, &reply.body))
            }
            (_, Some(outcome)) => {
                Judge::fail_all(entries, outcome, &mut record);
                None
            }
            (_, None) => unreachable!("a failed result always has an outcome"),
        };
        if let Some((i, outcome)) = failed {
            let answer = answered.as_ref().map_or(&[][..], |(_, _, body)| &body[..]);
            recorder.note_error(&mix.methods[entries[i].method as usize], outcome, answer);
        }
        if let Some((status, verdict, _)) = answered {
            recorder.extra_entries += verdict.extra_entries as u64;
            if self.http {
                recorder.record_status(status);
            }
        }
    }
}

/// Keeps the subscription a setup call opened: its notifications are
/// counted, with the gaps between them, while the run is measured.
fn subscribe(
    shared: &Arc<RunState>,
    local: &Rc<ThreadState>,
    connection: &Connection,
    answer: &[u8],
) -> Result<(), String> {
    let result = crate::rpc::wire::Message::parse(answer)
        .and_then(|m| m.result.map(|r| r.trim_matches('"').to_string()))
        .ok_or("its answer has no subscription id")?;
    let mux = connection
        .multiplexed()
        .ok_or("subscriptions need a connection the server can write to at will")?;
    // Subscriptions open before the clock is set: the measured part's start
    // is read when a notification comes.
    let (weak, run) = (Rc::downgrade(local), shared.clone());
    mux.watch(&result, move || {
        let mut last: Vec<Option<Instant>> = Vec::new();
        Box::new(move |index| {
            let now = Instant::now();
            let measured = (run.clock.get()).is_some_and(|clock| now >= clock.measure_start);
            let Some(local) = weak.upgrade().filter(|_| measured) else {
                return;
            };
            if last.len() <= index {
                last.resize(index + 1, None);
            }
            let mut recorder = local.recorder.borrow_mut();
            recorder.notifications += 1;
            if let Some(previous) = last[index].replace(now) {
                recorder.notification_gaps.record(micros(now - previous)).ok();
            }
        })
    });
    local.recorder.borrow_mut().subscriptions += 1;
    Ok(())
}

/// Why a connection could not be opened (or set up), in the transport's
/// own words, for the examples a report keeps.
struct OpenFailure {
    outcome: Outcome,
    reason: String,
}

/// Opens a connection and sends the scenario's setup calls on it. Setup
/// calls stay out of the load's figures; a failure is counted and kept.
async fn open_and_set_up(shared: &Arc<RunState>, local: &Rc<ThreadState>) -> Result<Connection, OpenFailure> {
    let began = Instant::now();
    let opened = Connection::open(&shared.target, shared.plan.timeout).await;
    // Before the clock is set, the connect phase; after, a reopening.
    let before = shared.clock.get().is_none();
    let mut connection = match opened {
        Ok(connection) => {
            local
                .recorder
                .borrow_mut()
                .connects
                .opened(began.elapsed(), before);
            connection
        }
        Err(error) => {
            let reason = error.to_string();
            local.recorder.borrow_mut().connects.failed(&reason);
            return Err(OpenFailure {
                outcome: Outcome::Connect,
                reason,
            });
        }
    };
    for setup in &shared.setup {
        let id = (!setup.notification).then(|| local.take_ids(shared, 1));
        let within = shared.plan.timeout;
        let failure = match call_once(
            &mut connection,
            &setup.template(shared.mix.version()),
            id,
            within,
            false,
        )
        .await
        {
            Ok(reply) if setup.subscribe => subscribe(shared, local, &connection, &reply.body).err(),
            Ok(_) => None,
            Err(failure) => Some(failure),
        };
        if let Some(failure) = failure {
            let reason = format!("setup call `{}` failed: {failure}", setup.method);
            let mut recorder = local.recorder.borrow_mut();
            recorder.setup_failed += 1;
            if recorder.setup_error.is_none() {
                recorder.setup_error = Some(reason.clone());
            }
            return Err(OpenFailure {
                outcome: Outcome::Connect,
                reason,
            });
        }
    }
    if !shared.setup.is_empty() {
        local.recorder.borrow_mut().setup_ok += 1;
    }
    Ok(connection)
}
