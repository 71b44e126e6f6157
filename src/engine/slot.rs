//! A connection slot: the one connection its callers share (or take in
//! turn), how it opens with its setup calls and subscriptions, how it is
//! let go after `reconnect_every` requests, and the connect phase that
//! opens every slot before the run's clock starts.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use tokio::time::Instant;

use super::call::call_once;
use super::state::{RunState, ThreadState};
use crate::stats::{micros, Outcome};
use crate::transport::{ChildEnd, Connection};

/// A connection and the callers planned on it: one caller for HTTP/1.1,
/// several for a multiplexed transport, which share it.
#[derive(Default)]
pub(super) struct ConnectionSlot {
    connection: RefCell<Option<Connection>>,
    /// A caller is opening the connection; the others wait for it, so the
    /// slot never holds more than one.
    pub(super) opening: Cell<bool>,
    /// Wakes the callers waiting for it when the opening ends, either way.
    pub(super) opened: tokio::sync::Notify,
    /// Requests handed out on the connection the slot holds now.
    served: Cell<u64>,
}

impl ConnectionSlot {
    /// Takes out the slot's connection if it has closed, so it can be
    /// accounted for (a panicked reader, a child's exit).
    pub(super) fn take_closed(&self) -> Option<Connection> {
        let mut held = self.connection.borrow_mut();
        if held.as_ref().is_some_and(Connection::is_closed) {
            held.take()
        } else {
            None
        }
    }

    /// A live connection to use now, if the slot holds one: a shared handle
    /// on a multiplexed one, or the connection itself (taken out) otherwise.
    pub(super) fn checkout(&self) -> Option<Connection> {
        let mut held = self.connection.borrow_mut();
        if held.as_ref().is_some_and(Connection::is_closed) {
            *held = None;
        }
        match held.as_ref()?.another_handle() {
            Some(shared) => Some(shared),
            None => held.take(),
        }
    }

    /// Whether the slot holds a connection still open.
    pub(super) fn holds_live(&self) -> bool {
        (self.connection.borrow().as_ref()).is_some_and(|c| !c.is_closed())
    }

    /// Puts back a connection taken out whole; a shared one never left.
    pub(super) fn checkin(&self, connection: Connection) {
        if connection.another_handle().is_none() && !connection.is_closed() {
            *self.connection.borrow_mut() = Some(connection);
        }
    }

    /// Opens the slot's connection and sends its setup calls, while the
    /// slot's other callers wait; returns the caller's handle on it.
    pub(super) async fn open(
        &self,
        shared: &Arc<RunState>,
        local: &Rc<ThreadState>,
    ) -> Result<Connection, OpenFailure> {
        self.opening.set(true);
        let opened = open_and_set_up(shared, local).await;
        self.opening.set(false);
        self.opened.notify_waiters();
        opened.map(|connection| self.install(connection))
    }

    /// Keeps a newly opened connection, returning the caller's handle on it.
    pub(super) fn install(&self, connection: Connection) -> Connection {
        self.served.set(0);
        match connection.another_handle() {
            Some(shared) => {
                *self.connection.borrow_mut() = Some(connection);
                shared
            }
            None => connection,
        }
    }

    /// Counts a request going on the slot's connection (the caller's
    /// handle on it); true when it is the last `every` allows: the slot
    /// then lets the connection go (the callers in flight on it keep their
    /// handles), and the caller retires its handle after its call.
    pub(super) fn count_request(&self, every: Option<u64>) -> bool {
        let served = self.served.get().saturating_add(1);
        self.served.set(served);
        let last = every.is_some_and(|every| served >= every);
        if last {
            self.connection.borrow_mut().take();
            self.served.set(0);
        }
        last
    }

    /// Messages on the slot's connection that answered nothing.
    pub(super) fn unsolicited(&self) -> u64 {
        match self.connection.borrow().as_ref() {
            Some(Connection::Stream(mux)) => mux.unsolicited(),
            _ => 0,
        }
    }
}

/// Openings a thread makes at once before the run: enough that 10,000
/// connections open in seconds, few enough that a server's accept queue
/// and the handshakes' CPU are not flooded.
const OPENING_AT_ONCE: usize = 64;

/// Opens every connection of the thread, with its setup calls, before the
/// schedule begins; a connection that does not open is left for its first
/// call, which tries again and counts the failure.
pub(super) async fn connect_all(
    shared: &Arc<RunState>,
    local: &Rc<ThreadState>,
    slots: &[Rc<ConnectionSlot>],
) {
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

/// Closes the thread's connections, shutting stdio children down as their
/// protocol says, and tallies how each ended.
pub(super) async fn shut_down(shared: &RunState, local: &ThreadState, slots: &[Rc<ConnectionSlot>]) {
    let connections = slots
        .iter()
        .filter_map(|slot| slot.connection.borrow_mut().take());
    let ends = futures_util::future::join_all(connections.map(Connection::shut_down)).await;
    tally(shared, ends.into_iter().flatten());
    // Those let go during the run end too (their ends counted as they go).
    let retiring = std::mem::take(&mut *local.retiring.borrow_mut());
    futures_util::future::join_all(retiring).await;
}

/// Counts how stdio children ended.
fn tally(shared: &RunState, ends: impl IntoIterator<Item = ChildEnd>) {
    let mut tally = shared.child_ends.lock().unwrap_or_else(|p| p.into_inner());
    for end in ends {
        match end {
            ChildEnd::Clean => tally.clean += 1,
            ChildEnd::Failed => tally.failed += 1,
            ChildEnd::Killed => tally.killed += 1,
        }
    }
}

/// Lets a connection go on purpose: after `reconnect_every` requests, or
/// at the end of the flow it was opened for. Counted; a stdio child is
/// ended by its protocol once no call is left on it, any other connection
/// closes as its last handle goes (a multiplexed one's calls in flight
/// finish first).
pub(super) fn retire(shared: &Arc<RunState>, local: &Rc<ThreadState>, connection: Connection) {
    local.recorder.borrow_mut().connects.recycled += 1;
    if !connection.has_child() {
        return;
    }
    let shared = shared.clone();
    let ending = tokio::task::spawn_local(async move {
        while !connection.is_last_handle() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        if let Some(end) = connection.shut_down().await {
            tally(&shared, [end]);
        }
    });
    let mut retiring = local.retiring.borrow_mut();
    retiring.retain(|task| !task.is_finished());
    retiring.push(ending);
}

/// Keeps the subscription a setup call opened: its notifications are
/// counted, with the gaps between them, while the run is measured; the
/// race's (`race = "POINTER"`) have their values kept with their arrival
/// from the start, the race's window being chosen across targets after.
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
    // Subscriptions are watched in the order the setup opens them.
    let race_index = (shared.setup.iter().filter(|s| s.subscribe)).position(|s| s.race);
    mux.watch(&result, move || {
        let mut last: Vec<Option<Instant>> = Vec::new();
        Box::new(move |index, result| {
            let now = Instant::now();
            if let Some(race) = run.race.as_ref().filter(|_| race_index == Some(index)) {
                race.note(result, now.into_std());
            }
            // Within the measured span: not in the warmup, nor in the grace
            // after the schedule's end (rates are over the span).
            let measured = (run.clock_if_begun()).is_some_and(|clock| {
                now >= clock.measure_start && clock.schedule.ended_at().is_none_or(|end| now < end)
            });
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
pub(super) struct OpenFailure {
    pub outcome: Outcome,
    pub reason: String,
}

/// Opens a connection and sends the scenario's setup calls on it. Setup
/// calls stay out of the load's figures (each one's time is kept apart); a
/// failure is counted and kept.
pub(super) async fn open_and_set_up(
    shared: &Arc<RunState>,
    local: &Rc<ThreadState>,
) -> Result<Connection, OpenFailure> {
    let began = Instant::now();
    let opened = Connection::open(&shared.target, shared.plan.timeout).await;
    // Before the clock is set, the connect phase; after, a reopening.
    let before = shared.clock_if_begun().is_none();
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
        let sent = Instant::now();
        let failure = match call_once(
            &mut connection,
            &setup.template(shared.mix.version()),
            id,
            within,
            false,
        )
        .await
        {
            Ok(reply) => {
                // A notification has no answer to time (over HTTP, a 202).
                if id.is_some() {
                    local.recorder.borrow_mut().connects.set_up(sent.elapsed());
                }
                match setup.subscribe {
                    true => subscribe(shared, local, &connection, &reply.body).err(),
                    false => None,
                }
            }
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
