//! The open model's pacer: one task per engine thread claims the
//! schedule's requests, waits for each to be due, and hands it to a free
//! caller on one of the thread's connections.
//!
//! Why not a task per caller, each claiming and sleeping on its own: at
//! 10,000 connections with two calls in flight each, 20,000 tasks claimed
//! their first request at once when the clock started, and polling them
//! all took longer than the first requests had (p99 of the first second
//! 280 ms late), and each held a caller's whole future (about 8 KB) for the
//! run. Here one timer waits for the next request, a call is a future of
//! the pacer's only while it goes (no task spawned: a spawn a call cost 13%
//! more CPU a call at 64 connections), and an idle caller is its buffers.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::time::{sleep_until, Instant};

use super::caller::{Caller, BACKOFF_MIN, TIMER_TICK};
use super::rooms::Rooms;
use super::schedule::Claim;
use super::slot::ConnectionSlot;
use super::state::{RunState, ThreadState};

/// Callers not in a call, their buffers kept, and what each connection's
/// last caller left of its backoff: callers are made only as many as
/// there are calls at once (a caller per room filled every room of 1,000
/// connections by 20, 100 KB a connection), while a connection that
/// fails keeps backing off whichever caller comes to it next.
struct Callers {
    idle: Vec<Caller>,
    backoff: Vec<(Duration, bool)>,
}

impl Callers {
    fn new(connections: usize) -> Self {
        Callers {
            idle: Vec::new(),
            backoff: vec![(BACKOFF_MIN, false); connections],
        }
    }

    /// A caller in room `room`, as its connection's last caller left it.
    fn take(
        &mut self,
        shared: &Arc<RunState>,
        local: &Rc<ThreadState>,
        rooms: &Rc<Rooms>,
        room: usize,
    ) -> Caller {
        let mut caller = match self.idle.pop() {
            Some(mut caller) => {
                caller.slot = rooms.slot(room);
                caller
            }
            None => {
                let mut caller = Caller::new(shared.clone(), local.clone(), rooms.slot(room));
                caller.rooms = Some(rooms.clone());
                caller
            }
        };
        caller.room = Some(room);
        (caller.backoff, caller.reopen_after_failure) = self.backoff[room];
        caller
    }

    /// A caller done: its room (if it still holds one: a flow may have
    /// given it back) free again.
    fn give_back(&mut self, rooms: &Rooms, mut caller: Caller) {
        if let Some(room) = caller.room.take() {
            self.backoff[room] = (caller.backoff, caller.reopen_after_failure);
            rooms.give_back(room);
        }
        self.idle.push(caller);
    }
}

/// Whose a backlog of late requests is: the server's when they waited for
/// a connection, every one busy with calls it had not answered; volley's
/// when its own timer woke late (its threads busy, or the process stopped:
/// the requests then due burst out at once and fill every connection, but
/// the server did not make them late).
#[derive(Default)]
struct Backlog {
    /// A request would have been claimed, but every connection was busy.
    wanted_room: bool,
    /// The timer woke late: the backlog is volley's until it catches up.
    volleys: bool,
    /// Where the timer of the request claimed ahead of its time should
    /// wake (`None`: claimed already due).
    wake: Option<Instant>,
}

impl Backlog {
    /// A request claimed, to wake at `wake`: already due after waiting for
    /// a connection, it waited for the server, unless the backlog is
    /// volley's; one claimed ahead of its time ends the backlog.
    fn claimed(&mut self, claim: &mut Claim, wake: Instant) {
        let now = Instant::now();
        let behind = claim.intended < now;
        if !behind {
            (self.wanted_room, self.volleys) = (false, false);
        }
        claim.waited_for_room = self.wanted_room && behind && !self.volleys;
        self.wake = (wake > now).then_some(wake);
    }

    /// The timer fired for `claim`: one set ahead that fires late says
    /// volley itself fell behind.
    fn woke(&mut self, claim: &mut Claim) {
        if self
            .wake
            .take()
            .is_some_and(|wake| Instant::now() > wake + crate::stats::LATE_THRESHOLD)
        {
            self.volleys = true;
            claim.waited_for_room = false;
        }
    }
}

/// Paces the thread's share of an open-model run over its connections
/// until the schedule has nothing left, then waits for its calls to end.
/// Dropping it drops the calls it carries.
pub(super) async fn pace(shared: Arc<RunState>, local: Rc<ThreadState>, slots: Vec<Rc<ConnectionSlot>>) {
    let most_roaming = shared.plan.max_flows.div_ceil(shared.plan.threads.max(1));
    let rooms = Rc::new(Rooms::new(
        slots,
        shared.plan.callers_per_connection(),
        most_roaming,
    ));
    let mut callers = Callers::new(rooms.connections());
    let mut calls = FuturesUnordered::new();
    let schedule = &shared.clock().schedule;
    let timer = sleep_until(Instant::now());
    tokio::pin!(timer);
    // The claimed request the timer waits for, and whether it is due: it
    // takes a room only then, so that flows between their steps have every
    // room until a request needs one.
    let mut due: Option<Claim> = None;
    let mut fired = false;
    let mut claiming = true;
    let mut backlog = Backlog::default();
    loop {
        let paused = shared.control.is_paused();
        if let (true, Some(claim)) = (fired, due.as_mut()) {
            match rooms.try_take() {
                Some(room) => {
                    let claim = due.take().expect("due");
                    fired = false;
                    let caller = callers.take(&shared, &local, &rooms, room);
                    calls.push(AssertUnwindSafe(one_call(&local, caller, claim)).catch_unwind());
                }
                // A flow took the room there was: the request waits for
                // the server's connections.
                None => {
                    claim.waited_for_room |= !backlog.volleys;
                    rooms.wanted();
                }
            }
        }
        if due.is_none() && claiming && schedule.is_finished() {
            // Its end ends a pause too.
            claiming = false;
        } else if due.is_none() && claiming && !paused {
            // A request due while every connection is full waits for a
            // room, and shows it: it is claimed only once one is free.
            if rooms.has_free() {
                match schedule.claim_for(0) {
                    Some(mut claim) => {
                        // As a caller waits (caller.rs): one timer tick
                        // early, since tokio rounds a deadline up to its tick.
                        let wake = claim.intended.checked_sub(TIMER_TICK).unwrap_or(claim.intended);
                        backlog.claimed(&mut claim, wake);
                        timer.as_mut().reset(wake);
                        (due, fired) = (Some(claim), false);
                    }
                    None => claiming = false,
                }
            } else {
                backlog.wanted_room = true;
                rooms.wanted();
            }
        }
        if !claiming && calls.is_empty() && due.is_none() {
            break;
        }
        tokio::select! {
            biased;
            Some(ended) = calls.next(), if !calls.is_empty() => call_ended(&shared, &rooms, &mut callers, ended),
            _ = &mut timer, if due.is_some() && !fired => {
                let Some(claim) = due.as_mut() else { continue };
                backlog.woke(claim);
                if shared.control.is_paused() {
                    // Paused before it was due: the schedule restarts on resume.
                    schedule.withdraw();
                    due = None;
                    continue;
                }
                fired = true;
            },
            // A room came free (a flow gave it back between its steps).
            _ = rooms.freed(), if (!paused && due.is_none() && claiming) || fired => {},
            _ = shared.control.wait_resumed(), if paused && due.is_none() && claiming => {},
            _ = schedule.ending(), if paused && due.is_none() && claiming => {},
            else => break,
        }
    }
}

/// A call has ended: its room and caller are free again (unless it
/// panicked: then both go with it), and the schedule ends if the mix has.
fn call_ended(
    shared: &RunState,
    rooms: &Rooms,
    callers: &mut Callers,
    ended: std::thread::Result<(Caller, bool)>,
) {
    match ended {
        Ok((caller, more)) => {
            if !more {
                shared.clock().schedule.finish();
            }
            callers.give_back(rooms, caller);
        }
        Err(_) => {
            shared.panicked.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One call in the caller's room, giving back the caller when it ends,
/// with whether the mix has more to send.
fn one_call(
    local: &Rc<ThreadState>,
    mut caller: Caller,
    claim: Claim,
) -> impl Future<Output = (Caller, bool)> + use<> {
    // Counted while the call or flow goes: a run stopped mid-way finds it
    // busy (why an open model fell behind).
    let busy = local.clone();
    busy.busy.set(busy.busy.get() + 1);
    async move {
        let more = caller.call(claim).await;
        busy.busy.set(busy.busy.get() - 1);
        (caller, more)
    }
}
