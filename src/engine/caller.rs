//! A caller: the one loop every call of the load goes through. It waits
//! for its request to be due, takes its slot's connection (`checkout.rs`),
//! sends and times it (`exchange`), and records what the judge found
//! (`recording.rs`).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::time::{sleep, sleep_until};

use super::call;
use super::schedule::Claim;
use super::slot::ConnectionSlot;
use super::state::{RunState, ThreadState};
use crate::plan::{Next, Planned, RequestBuilder};
use crate::rpc::Judge;
use crate::transport::{Connection, Target};

/// Reconnection waits grow from 10 ms to 1 s so a dead server is not hammered.
pub(super) const BACKOFF_MIN: Duration = Duration::from_millis(10);
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// The resolution of tokio's timer.
pub(super) const TIMER_TICK: Duration = Duration::from_millis(1);

/// One caller: a task that claims the run's requests one at a time and
/// sends each over its slot's connection, opening it when needed.
pub(super) struct Caller {
    pub(super) shared: Arc<RunState>,
    pub(super) local: Rc<ThreadState>,
    pub(super) slot: Rc<ConnectionSlot>,
    pub(super) builder: RequestBuilder,
    pub(super) judge: Judge,
    pub(super) planned: Vec<Planned>,
    pub(super) backoff: Duration,
    /// The last connection opened failed its first call: it opened but never
    /// worked (an HTTP/1.1 server met with --http2 closes each one), so the
    /// next opening waits the backoff too rather than spin.
    pub(super) reopen_after_failure: bool,
    pub(super) open_model: bool,
    /// Only HTTP answers have a status worth counting.
    pub(super) http: bool,
    /// The open model's rooms, which a flow on a stateless transport
    /// takes for each step and gives back between them.
    pub(super) rooms: Option<Rc<super::rooms::Rooms>>,
    /// The room this caller holds now (the open model's).
    pub(super) room: Option<usize>,
}

/// A connection in the caller's hand, and what it took to get it.
pub(super) struct InHand {
    pub(super) connection: Connection,
    /// The call waited for setup calls (its own or another caller's).
    pub(super) waited_for_setup: bool,
    /// This caller opened it for this call.
    pub(super) opened_now: bool,
    /// The last request the connection carries (`reconnect_every`, a
    /// flow's own session): retired after it, never put back.
    pub(super) last: bool,
}

/// When a request left and was answered, against when it was due.
pub(super) struct Timing {
    pub(super) intended: Instant,
    pub(super) sent: Instant,
    pub(super) answered: Instant,
    /// Due while every connection was busy (see `Claim`).
    pub(super) waited_for_room: bool,
}

pub(super) async fn run_caller(
    shared: Arc<RunState>,
    local: Rc<ThreadState>,
    index: usize,
    slot: Rc<ConnectionSlot>,
) {
    let mut caller = Caller::new(shared, local, slot);
    loop {
        caller.back_off_before_claiming().await;
        let Some(claim) = caller.next_due(index).await else {
            break;
        };
        // Counted while the call or flow goes: a run stopped mid-way finds
        // it busy (why an open model fell behind).
        let busy = &caller.local.busy;
        busy.set(busy.get() + 1);
        let more = caller.call(claim).await;
        let busy = &caller.local.busy;
        busy.set(busy.get() - 1);
        if !more {
            caller.shared.clock().schedule.finish();
            break;
        }
    }
}

impl Caller {
    pub(super) fn new(shared: Arc<RunState>, local: Rc<ThreadState>, slot: Rc<ConnectionSlot>) -> Self {
        Caller {
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
            rooms: None,
            room: None,
        }
    }

    /// Waits for the caller's next request to be due (through pauses, idle
    /// stages and the open model's schedule); `None` once the run has none.
    async fn next_due(&self, index: usize) -> Option<Claim> {
        let shared = &self.shared;
        loop {
            if shared.control.is_paused() {
                // The schedule's end ends a pause too: nothing more is due.
                tokio::select! {
                    _ = shared.control.wait_resumed() => {}
                    _ = shared.clock().schedule.ending() => {}
                }
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
            sleep_until(wake).await;
            if !shared.control.is_paused() {
                return Some(claim);
            }
            // Paused before it was due: the schedule restarts on resume.
            shared.clock().schedule.withdraw();
        }
    }

    /// Sends the next request of the mix, due at `intended`, and records
    /// what became of it; `false` when the mix has nothing left to send.
    pub(super) async fn call(&mut self, claim: Claim) -> bool {
        let shared = &self.shared;
        let intended = claim.intended;
        // Reseeded per request: request N is the same on every run with
        // the seed, whichever connection sends it (SplitMix64's constant
        // spreads consecutive numbers over the seed space).
        let mut rng =
            SmallRng::seed_from_u64(shared.plan.seed ^ claim.seq.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let batch = match shared.mix.next(claim.seq, &mut rng, &mut self.planned) {
            None => return false,
            Some(Next::Flow(flow)) => {
                self.run_flow(claim, flow, &mut rng).await;
                return true;
            }
            Some(Next::Request { batch }) => batch,
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
                self.back_off().await;
                return true;
            }
        };
        self.local.sent.set(self.local.sent.get() + 1);
        // The sample kept to compare targets: a copy of the request (shared
        // bytes) only for the requests it holds, warmup ones too (a warmup
        // by time ends at another request on each target).
        let keep = (self.shared.capture.as_ref())
            .filter(|c| c.wants(claim.seq))
            .map(|_| body.clone());
        let in_flight = self.builder.entries().len() as u64;
        let (result, sent, answered) = self
            .exchange(&mut in_hand, body, first_id, calls, in_flight)
            .await;
        if let Some(request) = keep {
            self.keep_captured(claim.seq, batch, request, &result);
        }
        super::ending::note_if_across_the_end(&self.shared, &self.local, sent, answered);
        let failure = call::failure(&result);
        let waited_for_setup = in_hand.waited_for_setup;
        self.hand_back(in_hand, failure);
        if measured {
            let timing = Timing {
                intended,
                sent,
                answered,
                waited_for_room: claim.waited_for_room,
            };
            self.record(batch, &result, failure, &timing, waited_for_setup);
        }
        true
    }

    /// Sends `body` (`calls` calls with ids from `first_id`; `in_flight`
    /// entries, notifications too) on the connection in hand and waits for
    /// its answer: the one place a request's send and answer are timed,
    /// for a call and a flow's step alike. The wait is bounded by the
    /// timeout and the grace's end.
    pub(super) async fn exchange(
        &self,
        in_hand: &mut InHand,
        body: bytes::Bytes,
        first_id: u64,
        calls: u64,
        in_flight: u64,
    ) -> (call::Exchanged, Instant, Instant) {
        let local = &self.local;
        let sent = Instant::now();
        local.in_flight.set(local.in_flight.get() + in_flight);
        let wait = super::ending::wait_for(&self.shared, local, sent);
        let result = call::exchange_until(&mut in_hand.connection, body, first_id, calls, wait).await;
        local.in_flight.set(local.in_flight.get() - in_flight);
        // Counted as every reopening is, or a server closing idle
        // connections would look like one that kept them.
        let reopened = in_hand.connection.take_reopened();
        if reopened > 0 {
            local.recorder.borrow_mut().connects.reopened += u64::from(reopened);
        }
        (result, sent, Instant::now())
    }
}
