//! Engine threads and the one loop every connection runs.
//!
//! Each engine thread runs a single-threaded runtime with its share of the
//! connections. Connection tasks on a thread share that thread's recorder
//! without locks (it is only ever touched from that thread), and the thread
//! hands the recorder over once a second.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::{sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::mix::Mix;
use super::plan::{LoadPlan, Pacing, Schedule};
use crate::rpc::{Judge, Outcome, RequestBuilder};
use crate::stats::{micros, Recorder};
use crate::transport::{Connection, Target, TransportError};

/// What every thread and connection shares for the whole run.
pub(super) struct Shared {
    pub plan: LoadPlan,
    pub mix: Mix,
    pub target: Target,
    pub schedule: Schedule,
    pub cancel: CancellationToken,
    /// Calls whose intended time is before this are warmup, not recorded.
    pub measure_start: Instant,
    next_id_block: AtomicU64,
    pub in_flight_at_end: AtomicU64,
}

impl Shared {
    pub fn new(plan: LoadPlan, mix: Mix, target: Target, start: Instant, cancel: CancellationToken) -> Self {
        Shared {
            schedule: Schedule::new(&plan, start),
            measure_start: start + plan.warmup,
            plan,
            mix,
            target,
            cancel,
            next_id_block: AtomicU64::new(1),
            in_flight_at_end: AtomicU64::new(0),
        }
    }
}

/// One thread's figures for one second of the run.
pub(super) struct Chunk {
    pub thread: usize,
    pub second: u32,
    pub recorder: Recorder,
    /// The thread's last chunk; `sent` is its total of requests sent.
    pub last: Option<u64>,
}

/// What the connection tasks of one thread share.
struct Local {
    recorder: RefCell<Recorder>,
    /// Unused ids of the block this thread holds: `next..end`.
    ids: Cell<(u64, u64)>,
    sent: Cell<u64>,
}

const ID_BLOCK: u64 = 4096;

impl Local {
    /// `n` consecutive ids, unique in the run: threads take blocks from a
    /// shared counter, so ids cost no atomic operation per call.
    fn take_ids(&self, shared: &Shared, n: u64) -> u64 {
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

pub(super) fn thread_main(
    shared: Arc<Shared>,
    thread: usize,
    connections: Vec<usize>,
    chunks: UnboundedSender<Chunk>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a single-threaded runtime can always be built");
    let local_set = tokio::task::LocalSet::new();
    local_set.block_on(&runtime, async move {
        let local = Rc::new(Local {
            recorder: RefCell::new(Recorder::new(shared.mix.methods.len())),
            ids: Cell::new((0, 0)),
            sent: Cell::new(0),
        });
        let tasks: Vec<_> = connections
            .into_iter()
            .map(|index| tokio::task::spawn_local(connection_loop(shared.clone(), local.clone(), index)))
            .collect();
        let second = Rc::new(Cell::new(0u32));
        let hand_over = {
            let (local, second, chunks) = (local.clone(), second.clone(), chunks.clone());
            let methods = shared.mix.methods.len();
            let first = shared.measure_start + Duration::from_secs(1);
            tokio::task::spawn_local(async move {
                let mut ticks = tokio::time::interval_at(first.into(), Duration::from_secs(1));
                loop {
                    ticks.tick().await;
                    let recorder = local.recorder.replace(Recorder::new(methods));
                    let _ = chunks.send(Chunk {
                        thread,
                        second: second.get(),
                        recorder,
                        last: None,
                    });
                    second.set(second.get() + 1);
                }
            })
        };
        for task in tasks {
            let _ = task.await;
        }
        hand_over.abort();
        let recorder = local.recorder.replace(Recorder::new(0));
        let _ = chunks.send(Chunk {
            thread,
            second: second.get(),
            recorder,
            last: Some(local.sent.get()),
        });
    });
}

/// Reconnection waits grow from 10 ms to 1 s so a dead server is not hammered.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

async fn connection_loop(shared: Arc<Shared>, local: Rc<Local>, index: usize) {
    let mut rng =
        SmallRng::seed_from_u64(shared.plan.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut builder = RequestBuilder::default();
    let mut judge = Judge::default();
    let mut connection: Option<Connection> = None;
    let mut backoff = BACKOFF_MIN;
    let open_model = matches!(shared.plan.pacing, Pacing::Open { .. });
    let cancel = &shared.cancel;

    while !cancel.is_cancelled() {
        let Some(claim) = shared.schedule.claim() else {
            break;
        };
        if open_model {
            tokio::select! {
                _ = sleep_until(claim.intended.into()) => {}
                _ = cancel.cancelled() => break,
            }
        }
        let call = shared.mix.pick(&mut rng);
        builder.begin(call.batch.is_some());
        let ids = if call.notification {
            0
        } else {
            local.take_ids(&shared, call.size() as u64)
        };
        for i in 0..call.size() {
            let id = (!call.notification).then_some(ids + i as u64);
            builder.push(&call.template, call.method, id);
        }
        let body = builder.finish();
        let measured = claim.intended >= shared.measure_start;

        if connection.as_ref().is_none_or(Connection::is_closed) {
            let opened = tokio::select! {
                opened = Connection::open(&shared.target) => opened,
                _ = cancel.cancelled() => break,
            };
            match opened {
                Ok(opened) => {
                    connection = Some(opened);
                    backoff = BACKOFF_MIN;
                }
                Err(_) => {
                    local.sent.set(local.sent.get() + 1);
                    if measured {
                        let mut recorder = local.recorder.borrow_mut();
                        let entries = builder.entries();
                        Judge::fail_all(entries, Outcome::Connect, |i, outcome, _| {
                            recorder.methods[entries[i].method as usize].record(
                                outcome,
                                Duration::ZERO,
                                Duration::ZERO,
                                0,
                            )
                        });
                    }
                    tokio::select! {
                        _ = sleep(backoff) => {}
                        _ = cancel.cancelled() => break,
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            }
        }
        let conn = connection.as_mut().expect("opened above");
        let sent_at = Instant::now();
        local.sent.set(local.sent.get() + 1);
        let result = tokio::select! {
            result = timeout(shared.plan.timeout, conn.exchange(body)) => result,
            _ = cancel.cancelled() => {
                shared.in_flight_at_end.fetch_add(builder.entries().len() as u64, Ordering::Relaxed);
                break;
            }
        };
        let answered_at = Instant::now();
        let failure = match &result {
            Ok(Ok(_)) => None,
            Ok(Err(TransportError::Connect { .. })) => Some(Outcome::Connect),
            Ok(Err(_)) => Some(Outcome::Io),
            Err(_) => Some(Outcome::Timeout),
        };
        if failure.is_some() {
            // The connection's state is unknown after a failure or a
            // timeout: start afresh rather than read a stale answer later.
            connection = None;
        }
        if !measured {
            continue;
        }
        let latency = answered_at - claim.intended;
        let service = answered_at - sent_at;
        let mut recorder = local.recorder.borrow_mut();
        recorder.requests += 1;
        if open_model {
            recorder.start_delay.record(micros(sent_at - claim.intended)).ok();
        }
        let entries = builder.entries();
        let methods = &mut recorder.methods;
        let mut record = |i: usize, outcome: Outcome, bytes: usize| {
            methods[entries[i].method as usize].record(outcome, latency, service, bytes)
        };
        let answered = match (result, failure) {
            (Ok(Ok(reply)), _) => {
                let verdict = judge.judge(
                    reply.status,
                    &reply.body,
                    entries,
                    builder.is_batch(),
                    &mut record,
                );
                Some((reply.status, verdict))
            }
            (_, Some(outcome)) => {
                Judge::fail_all(entries, outcome, &mut record);
                None
            }
            (_, None) => unreachable!("a failed result always has an outcome"),
        };
        if let Some((status, verdict)) = answered {
            recorder.extra_entries += verdict.extra_entries as u64;
            recorder.record_status(status);
        }
    }
}
