//! Engine threads: what each thread does (open its connections, start its
//! callers, hand its figures over), over the shared state of `state.rs`.
//!
//! Each engine thread runs a single-threaded runtime with its share of the
//! connections. Connection tasks on a thread share that thread's recorder
//! without locks (it is only ever touched from that thread), and the thread
//! hands the recorder over a few times a second.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::caller::run_caller;
use super::slot::{connect_all, shut_down, ConnectionSlot};
use super::state::{Channels, Chunk, RunState, ThreadState, TICKS_PER_SECOND};
use crate::stats::Recorder;

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
    let local = Rc::new(ThreadState::new(&shared));
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
        shut_down(&shared, &local, &slots).await;
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
    shut_down(&shared, &local, &slots).await;
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
