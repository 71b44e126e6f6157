//! The open model's pacer: one task per engine thread claims the
//! schedule's requests, waits for each to be due, and hands it to a free
//! caller on one of the thread's connections.
//!
//! Why not a task per caller, each claiming and sleeping on its own: at
//! 10,000 connections with two calls in flight each, 20,000 tasks claimed
//! their first request at once when the clock started, and polling them
//! all took longer than the first requests had (p99 of the first second
//! 280 ms late), and each held a caller's whole future (about 8 KB) for the
//! run. Here one timer waits for the next request, a call is a task only
//! while it goes, and an idle caller is a few hundred bytes of buffers.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::sleep_until;

use super::caller::{Caller, TIMER_TICK};
use super::slot::ConnectionSlot;
use super::worker::{RunState, ThreadState};

/// Room for one more call on a connection, with the caller that made the
/// last one there (its buffers kept), once there has been one.
struct Room {
    slot: usize,
    /// Boxed: a room is 16 bytes until it has carried a call.
    caller: Option<Box<Caller>>,
}

/// The rooms of a thread's connections: first one on each connection in
/// turn, so calls spread over every connection before any carries two.
struct Rooms {
    free: RefCell<VecDeque<Room>>,
    returned: Notify,
}

impl Rooms {
    fn new(connections: usize, per_connection: usize) -> Self {
        let free = (0..per_connection)
            .flat_map(|_| (0..connections).map(|slot| Room { slot, caller: None }))
            .collect();
        Rooms {
            free: RefCell::new(free),
            returned: Notify::new(),
        }
    }

    /// The next free room, waiting for a call to end when there is none:
    /// a request due while every connection is full waits, and shows it.
    async fn take(&self) -> Room {
        loop {
            let returned = self.returned.notified();
            if let Some(room) = self.free.borrow_mut().pop_front() {
                return room;
            }
            returned.await;
        }
    }

    fn give_back(&self, room: Room) {
        self.free.borrow_mut().push_back(room);
        self.returned.notify_one();
    }

    /// A room taken for a request that was then withdrawn: first in line.
    fn untake(&self, room: Room) {
        self.free.borrow_mut().push_front(room);
    }
}

/// Paces the thread's share of an open-model run over its connections
/// until the schedule has nothing left, then waits for its calls to end.
/// Aborting it aborts the calls it started.
pub(super) async fn pace(shared: Arc<RunState>, local: Rc<ThreadState>, slots: Vec<Rc<ConnectionSlot>>) {
    let rooms = Rc::new(Rooms::new(slots.len(), shared.plan.callers_per_connection()));
    let mut calls = JoinSet::new();
    let schedule = &shared.clock().schedule;
    loop {
        while let Some(ended) = calls.try_join_next() {
            count_panic(&shared, ended);
        }
        if shared.control.is_paused() {
            shared.control.wait_resumed().await;
        }
        if schedule.is_finished() {
            break;
        }
        let room = rooms.take().await;
        let Some(claim) = schedule.claim_for(0) else {
            break;
        };
        // As a caller waits (caller.rs): one timer tick early, since tokio
        // rounds a deadline up to its next tick.
        let wake = claim.intended.checked_sub(TIMER_TICK).unwrap_or(claim.intended);
        sleep_until(wake).await;
        if shared.control.is_paused() {
            // Paused before it was due: the schedule restarts on resume.
            schedule.withdraw();
            rooms.untake(room);
            continue;
        }
        let Room { slot, caller } = room;
        let mut caller = caller
            .unwrap_or_else(|| Box::new(Caller::new(shared.clone(), local.clone(), slots[slot].clone())));
        let (rooms, local, shared) = (rooms.clone(), local.clone(), shared.clone());
        calls.spawn_local(async move {
            // Counted while the call or flow goes: a run stopped mid-way
            // finds it busy (why an open model fell behind).
            local.busy.set(local.busy.get() + 1);
            let more = caller.call(claim).await;
            local.busy.set(local.busy.get() - 1);
            if !more {
                shared.clock().schedule.finish();
            }
            rooms.give_back(Room {
                slot,
                caller: Some(caller),
            });
        });
    }
    while let Some(ended) = calls.join_next().await {
        count_panic(&shared, ended);
    }
}

fn count_panic(shared: &RunState, ended: Result<(), tokio::task::JoinError>) {
    if ended.is_err_and(|e| e.is_panic()) {
        shared.panicked.fetch_add(1, Ordering::Relaxed);
    }
}
