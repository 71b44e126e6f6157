//! A caller: the one loop every call of the load goes through. It waits
//! for its request to be due, takes its slot's connection (opening it when
//! needed), sends, and records what the judge found.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::time::{sleep, sleep_until};

use super::call;
use super::schedule::Claim;
use super::slot::{ConnectionSlot, OpenFailure};
use super::worker::{RunState, ThreadState};
use crate::plan::{Next, Planned, RequestBuilder};
use crate::rpc::Judge;
use crate::stats::{micros, Outcome, Recorder};
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
    planned: Vec<Planned>,
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
struct Timing {
    intended: Instant,
    sent: Instant,
    answered: Instant,
    /// Due while every connection was busy (see `Claim`).
    waited_for_room: bool,
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
        let local = &self.local;
        let sent = Instant::now();
        local.sent.set(local.sent.get() + 1);
        let calls_sent = self.builder.entries().len() as u64;
        local.in_flight.set(local.in_flight.get() + calls_sent);
        // The sample kept to compare targets: a copy of the request (shared
        // bytes) only for the requests it holds, warmup ones too (a warmup
        // by time ends at another request on each target).
        let keep = (self.shared.capture.as_ref())
            .filter(|c| c.wants(claim.seq))
            .map(|_| body.clone());
        let wait = super::ending::wait_for(&self.shared, local, sent);
        let result = call::exchange_until(&mut in_hand.connection, body, first_id, calls, wait).await;
        if let Some(request) = keep {
            self.keep_captured(claim.seq, batch, request, &result);
        }
        local.in_flight.set(local.in_flight.get() - calls_sent);
        let answered = Instant::now();
        super::ending::note_if_across_the_end(&self.shared, local, sent, answered);
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
        if in_hand.last {
            super::slot::retire(&self.shared, &self.local, in_hand.connection);
        } else if failure.is_none() {
            self.slot.checkin(in_hand.connection);
        }
        if measured {
            let timing = Timing {
                intended,
                sent,
                answered,
                waited_for_room: claim.waited_for_room,
            };
            self.record(batch, &result, failure, &timing, in_hand.waited_for_setup);
        }
        true
    }

    /// Keeps request `seq` and its answer in the sample that compares
    /// targets.
    fn keep_captured(&self, seq: u64, batch: bool, request: bytes::Bytes, result: &call::Exchanged) {
        let Some(capture) = &self.shared.capture else {
            return;
        };
        capture.keep(super::Captured {
            seq,
            batch,
            entries: self.builder.entries().to_vec(),
            request,
            answer: match result {
                Ok(Ok(reply)) => Some(reply.body.clone()),
                _ => None,
            },
        });
    }

    /// The slot's connection for one request (or flow), counted against
    /// `reconnect_every`.
    pub(super) async fn connection(&mut self) -> Result<InHand, OpenFailure> {
        let mut in_hand = self.slot_connection().await?;
        in_hand.last = self.slot.count_request(self.shared.plan.reconnect_every);
        Ok(in_hand)
    }

    /// The slot's connection, waiting for a caller that is opening it, or
    /// opening it (after the backoff when the last one failed at once).
    async fn slot_connection(&mut self) -> Result<InHand, OpenFailure> {
        let mut waited_for_setup = false;
        loop {
            let (shared, local, slot) = (&self.shared, &self.local, &self.slot);
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
                    last: false,
                });
            }
            if slot.opening.get() {
                // Another caller is opening the shared connection: wait for it.
                waited_for_setup = !shared.setup.is_empty();
                slot.opened.notified().await;
                continue;
            }
            // The open model's schedule stands through the wait, which
            // shows in the call's latency; the closed model waited before
            // claiming (`back_off_before_claiming`).
            if self.reopen_after_failure && self.open_model {
                self.back_off().await;
            }
            let connection = self.slot.open(&self.shared, &self.local).await?;
            return Ok(InHand {
                connection,
                waited_for_setup: !self.shared.setup.is_empty(),
                opened_now: true,
                last: false,
            });
        }
    }

    /// Waits the backoff, longer each time, counted with the connections'
    /// figures.
    pub(super) async fn back_off(&mut self) {
        let began = Instant::now();
        sleep(self.backoff).await;
        let mut recorder = self.local.recorder.borrow_mut();
        recorder.connects.backed_off(began.elapsed());
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }

    /// In the closed model, a caller whose last opening never worked waits
    /// its backoff before it claims the next request, when that request
    /// would open the connection again: a call's latency starts at its
    /// claim, and volley's own wait is no part of the server's answer.
    async fn back_off_before_claiming(&mut self) {
        let slot = &self.slot;
        if self.open_model || !self.reopen_after_failure || slot.opening.get() || slot.holds_live() {
            return;
        }
        // The schedule's end ends the wait: nothing more will be claimed.
        let schedule = &self.shared.clock().schedule;
        let deadline = schedule.end_known();
        tokio::select! {
            _ = self.back_off() => {}
            _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {}
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
            let delay = timing.sent.saturating_duration_since(timing.intended);
            recorder.start_delay.record(micros(delay)).ok();
            if timing.waited_for_room && delay > crate::stats::LATE_THRESHOLD {
                recorder.late_for_connections += 1;
            }
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
        let cause = call::cause(result);
        let mut record = |i: usize, outcome: Outcome, answer: &[u8]| {
            let entry = entries[i];
            let stats = &mut methods[entry.method as usize];
            match entry.id {
                Some(_) => stats.record(outcome, latency, service, answer.len()),
                None => stats.record_notification(outcome, latency),
            }
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
                let extras = self.judge.judge(
                    reply.status,
                    &reply.body,
                    entries,
                    batch,
                    &mix.expectations,
                    &mut record,
                );
                Some((reply.status, extras, &reply.body))
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
        if let Some((status, extras, _)) = answered {
            recorder.extra_entries += extras.extra_entries as u64;
            if self.http {
                recorder.record_status(status);
            }
        }
    }
}
