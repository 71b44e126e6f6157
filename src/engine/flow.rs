//! A flow as a caller runs it: one arrival, its steps in order on one
//! connection, each sent when the previous answer came (a notification:
//! when it was written), what a step captures read by the later ones.
//! Every step is a call of its row, judged as any call is; the flow's own
//! row counts it whole, from its intended start to its last answer.

use std::time::Duration;

use rand::rngs::SmallRng;
use tokio::time::{sleep_until, Instant};

use super::call;
use super::caller::{Caller, InHand};
use super::ending;
use super::schedule::Claim;
use crate::plan::{Flow, Step, Vars};
use crate::rpc::{Entry, Expectation, Judge};
use crate::stats::{micros, Cause, Outcome};

/// What became of one call of a step.
struct Sent {
    outcome: Outcome,
    /// The transport failed or the timeout passed: the connection is in an
    /// unknown state and goes no further.
    broken: bool,
}

/// A step's `until` as one flow waits for it.
struct Waiting {
    /// The check, as the one-entry table the judge reads (entry `call` 0).
    check: [Option<Expectation>; 1],
    every: Duration,
    within: Duration,
    /// No try starts that would end past this.
    ends: Instant,
    /// Tries so far.
    tries: std::cell::Cell<u32>,
}

/// A flow in progress: its values and where it stands.
struct Run<'f> {
    flow: &'f Flow,
    vars: Vars,
    intended: Instant,
    measured: bool,
    /// When its first call left (the flow's service time starts there).
    first_sent: Option<Instant>,
    /// The first call waited for the connection's setup calls.
    waited_for_setup: bool,
    /// The run's end came before a step could go: the flow sends nothing
    /// more and never ends (counted in flight at the end).
    cut: bool,
    /// The connection in hand, if any: a flow that roams holds one only
    /// while a step goes.
    held: Option<InHand>,
    /// It gives its connection and room back after each step.
    roams: bool,
    /// When the step going now could go (its latency runs from there: a
    /// wait for a room is the server's connections being busy).
    ready: Instant,
}

impl Caller {
    /// Runs flow `index` of the mix, due at `claim.intended`.
    pub(super) async fn run_flow(&mut self, claim: Claim, index: u32, rng: &mut SmallRng) {
        let shared = self.shared.clone();
        let local = self.local.clone();
        local.sent.set(local.sent.get() + 1);
        let measured = claim.intended >= shared.clock().measure_start;
        // A measured flow still going when the run stops is counted so.
        let in_flight = |change: i64| {
            if measured {
                let mut each = local.flows_in_flight.borrow_mut();
                each[index as usize] = each[index as usize].saturating_add_signed(change);
            }
        };
        in_flight(1);
        let began = Instant::now();
        if self.flow_in_flight(claim, index, rng).await {
            in_flight(-1);
        }
        super::ending::note_if_across_the_end(&shared, &local, began, Instant::now());
    }

    /// The flow itself: its connection, its steps, its row; whether it
    /// ended (not cut by the run's end).
    async fn flow_in_flight(&mut self, claim: Claim, index: u32, rng: &mut SmallRng) -> bool {
        let shared = self.shared.clone();
        let flow = &shared.mix.flows[index as usize];
        let mut run = Run {
            flow,
            vars: flow.start(rng),
            intended: claim.intended,
            measured: claim.intended >= shared.clock().measure_start,
            first_sent: None,
            waited_for_setup: false,
            cut: false,
            held: None,
            roams: false,
            ready: Instant::now(),
        };
        let opened = match flow.own_connection {
            true => self.own_connection().await,
            false => self.connection().await,
        };
        let in_hand = match opened {
            Ok(in_hand) => in_hand,
            Err(failure) => {
                if run.measured {
                    let cause = Cause::Transport(&failure.reason);
                    self.record_with(&run, &flow.steps[0], failure.outcome, cause, &[], None, None);
                    self.end_flow(&run, Some((0, failure.outcome, flow.steps.len() as u64 - 1)));
                }
                self.back_off().await;
                return true;
            }
        };
        run.waited_for_setup = in_hand.waited_for_setup;
        run.held = Some(in_hand);
        run.roams = self.roams(flow, run.measured);
        let failed = self.run_steps(&mut run, rng).await;
        if let Some(in_hand) = run.held.take() {
            self.put_back(in_hand);
        }
        if let (true, Some(rooms)) = (run.roams, &self.rooms) {
            rooms.end_roaming();
        }
        if run.measured && !run.cut {
            self.end_flow(
                &run,
                failed.map(|(step, outcome, skipped, _)| (step, outcome, skipped)),
            );
        }
        !run.cut
    }

    /// Whether the flow gives its connection back between steps: on a
    /// stateless transport, in the open model (whose rooms it takes for
    /// each step), within the bound of flows in flight. One past the bound
    /// keeps its connection throughout, and is counted so.
    fn roams(&self, flow: &Flow, measured: bool) -> bool {
        let Some(rooms) = &self.rooms else {
            return false;
        };
        if flow.own_connection || !self.shared.target.is_stateless() {
            return false;
        }
        let roams = rooms.begin_roaming();
        if !roams && measured {
            let mut recorder = self.local.recorder.borrow_mut();
            let first_flow = recorder.call_rows().len();
            if let Some(counts) = recorder.flows.get_mut(flow.row as usize - first_flow) {
                counts.held += 1;
            }
        }
        roams
    }

    /// Puts a connection back in its slot after the flow's last use of it.
    fn put_back(&self, in_hand: InHand) {
        if in_hand.last {
            super::slot::retire(&self.shared, &self.local, in_hand.connection);
        } else {
            self.slot.checkin(in_hand.connection);
        }
    }

    /// A roaming flow's step is done: its connection and room go back.
    fn let_go(&mut self, run: &mut Run<'_>) {
        if let Some(in_hand) = run.held.take() {
            self.put_back(in_hand);
        }
        if let (Some(room), Some(rooms)) = (self.room.take(), &self.rooms) {
            rooms.give_back(room);
        }
    }

    /// A connection for a roaming flow's next step: a room first, waiting
    /// in turn, then that room's connection.
    async fn hold_again(&mut self, run: &mut Run<'_>) -> Result<(), super::slot::OpenFailure> {
        if let (None, Some(rooms)) = (self.room, self.rooms.clone()) {
            let room = rooms.take().await;
            self.room = Some(room);
            self.slot = rooms.slot(room);
        }
        run.held = Some(self.connection().await?);
        Ok(())
    }

    /// A connection of the flow's own (`session = "per_flow"`), opened
    /// with the setup calls and retired at the flow's end.
    async fn own_connection(&mut self) -> Result<InHand, super::slot::OpenFailure> {
        let connection = super::slot::open_and_set_up(&self.shared, &self.local).await?;
        Ok(InHand {
            connection,
            waited_for_setup: !self.shared.setup.is_empty(),
            opened_now: true,
            last: true,
        })
    }

    /// Sends each step in turn; the step a flow stopped at, why, how many
    /// calls it left unsent, and whether the connection broke. After a
    /// failure only the `always` steps (a document's close) are sent.
    async fn run_steps(
        &mut self,
        run: &mut Run<'_>,
        rng: &mut SmallRng,
    ) -> Option<(usize, Outcome, u64, bool)> {
        let mut failed: Option<(usize, Outcome, u64, bool)> = None;
        for (i, step) in run.flow.steps.iter().enumerate() {
            if run.cut {
                break;
            }
            match &mut failed {
                Some((_, _, skipped, broken)) if !step.always || *broken => *skipped += 1,
                Some((_, _, _, broken)) => {
                    let cleanup = self.send_each(run, step, rng).await;
                    *broken |= cleanup.is_some_and(|(_, _, broke)| broke);
                }
                None => {
                    if let Some((outcome, left, broken)) = self.send_each(run, step, rng).await {
                        failed = Some((i, outcome, left, broken));
                    }
                }
            }
        }
        failed
    }

    /// Sends a step, once per value of its `for_each`; when one fails, its
    /// outcome, the passes left unsent and whether the connection broke.
    async fn send_each(
        &mut self,
        run: &mut Run<'_>,
        step: &Step,
        rng: &mut SmallRng,
    ) -> Option<(Outcome, u64, bool)> {
        let Some(each) = step.for_each else {
            let sent = self.send_step(run, step, rng).await;
            return (sent.outcome != Outcome::Ok).then_some((sent.outcome, 0, sent.broken));
        };
        // The list goes out of the flow's values while each pass sets the
        // slot to one item; what a pass captures elsewhere stays.
        let list = run.vars.take(each.slot);
        let items = &list.items()[..list.items().len().min(each.limit as usize)];
        let mut failed = None;
        for (n, item) in items.iter().enumerate() {
            run.vars.set(each.slot, item);
            let sent = self.send_step(run, step, rng).await;
            if run.cut {
                break;
            }
            if sent.outcome != Outcome::Ok {
                failed = Some((sent.outcome, (items.len() - n - 1) as u64, sent.broken));
                break;
            }
        }
        run.vars.put_back(each.slot, list);
        failed
    }

    /// Sends one step, again every `until.every` until its `until` holds;
    /// each send a call of the step's row.
    async fn send_step(&mut self, run: &mut Run<'_>, step: &Step, rng: &mut SmallRng) -> Sent {
        // Made once per step, not per try: the judge reads them in place.
        let expect = [step.expect.as_ref().map(|c| c.resolve(&run.vars, rng))];
        let until = step.until.as_ref().map(|u| Waiting {
            check: [Some(u.check.resolve(&run.vars, rng))],
            every: u.every,
            within: u.within,
            ends: Instant::now() + u.within,
            tries: std::cell::Cell::new(0),
        });
        loop {
            // A flow's first call is its request, claimed before the end;
            // after the end it sends nothing more.
            if run.first_sent.is_some() && !ending::steps_may_go(&self.shared, Instant::now()) {
                run.cut = true;
                let outcome = Outcome::Ok;
                return Sent {
                    outcome,
                    broken: false,
                };
            }
            let (sent, holds) = self.send_once(run, step, &expect, until.as_ref(), rng).await;
            if run.roams {
                self.let_go(run);
            }
            match &until {
                Some(until) if !holds && sent.outcome == Outcome::Ok => {
                    sleep_until(ending::or_steps_end(&self.shared, Instant::now() + until.every)).await;
                }
                _ => return sent,
            }
        }
    }

    /// One call of a step, and whether its `until` (if any) held. A right
    /// answer that `until` turns down is recorded `ok`, unless no time is
    /// left for another try: then it is the step's failure, `until`.
    async fn send_once(
        &mut self,
        run: &mut Run<'_>,
        step: &Step,
        expect: &[Option<Expectation>; 1],
        until: Option<&Waiting>,
        rng: &mut SmallRng,
    ) -> (Sent, bool) {
        run.ready = Instant::now();
        if run.held.is_none() {
            if let Err(failure) = self.hold_again(run).await {
                let cause = Cause::Transport(&failure.reason);
                self.record_with(run, step, failure.outcome, cause, &[], None, None);
                let broken = true;
                return (
                    Sent {
                        outcome: failure.outcome,
                        broken,
                    },
                    false,
                );
            }
        }
        let (shared, local) = (self.shared.clone(), self.local.clone());
        let calls = u64::from(!step.notification);
        let first_id = local.take_ids(&shared, calls);
        self.builder.begin(false);
        let entry = Entry {
            method: step.row,
            call: 0,
            id: (!step.notification).then_some(first_id),
        };
        self.builder.push_with(&step.template, entry, rng, &run.vars);
        let body = self.builder.finish();
        let Some(in_hand) = run.held.as_mut() else {
            unreachable!("a step goes with a connection in hand")
        };
        let (result, sent_at, answered) = self.exchange(in_hand, body, first_id, calls, calls).await;
        run.first_sent.get_or_insert(sent_at);
        let timing = Some((sent_at, answered));
        if let Some(failure) = call::failure(&result) {
            // The connection is in an unknown state: it goes no further.
            if let Some(in_hand) = run.held.take().filter(|h| h.last) {
                super::slot::retire(&shared, &local, in_hand.connection);
            }
            let cause = call::cause(&result);
            self.record_with(run, step, failure, cause, &[], timing, None);
            return (
                Sent {
                    outcome: failure,
                    broken: true,
                },
                false,
            );
        }
        let Ok(Ok(reply)) = &result else {
            unreachable!("a result without a failure is a reply")
        };
        if self.http && run.measured {
            let mut recorder = local.recorder_for(&shared, run.intended);
            recorder.record_status(reply.status);
        }
        let (outcome, expected, holds) = self.settle(run, step, reply, expect, until, rng);
        let body = &reply.body;
        self.record_with(
            run,
            step,
            outcome,
            Cause::Answer,
            body,
            timing,
            expected.as_deref(),
        );
        let broken = false;
        (Sent { outcome, broken }, holds)
    }

    /// Judges a step's answer: by its `until` first (a right answer it
    /// turns down is `ok`, or `until` once no time is left), then by its
    /// `expect` and captures. The outcome, what was expected when it
    /// failed, and whether the `until` held.
    fn settle(
        &mut self,
        run: &mut Run<'_>,
        step: &Step,
        reply: &crate::transport::Reply,
        expect: &[Option<Expectation>; 1],
        until: Option<&Waiting>,
        rng: &mut SmallRng,
    ) -> (Outcome, Option<String>, bool) {
        let entries = self.builder.entries();
        let judge = |judge: &mut Judge, expectations: &[Option<Expectation>]| {
            let mut outcome = Outcome::Ok;
            judge.judge(
                reply.status,
                &reply.body,
                entries,
                false,
                expectations,
                |_, o, _| outcome = o,
            );
            outcome
        };
        let waiting = until.filter(|until| {
            until.tries.set(until.tries.get().saturating_add(1));
            judge(&mut self.judge, &until.check) != Outcome::Ok
        });
        match waiting {
            // A right answer, only not yet what `until` waits for: `ok`,
            // unless no time is left for another try.
            Some(until) => {
                let outcome = judge(&mut self.judge, &[]);
                if outcome == Outcome::Ok && Instant::now() + until.every > until.ends {
                    let expected = format!(
                        "{} within {} (tried {} times, every {})",
                        until.check[0]
                            .as_ref()
                            .map_or_else(String::new, ToString::to_string),
                        humantime::format_duration(until.within),
                        until.tries.get(),
                        humantime::format_duration(until.every)
                    );
                    (Outcome::Until, Some(expected), false)
                } else {
                    (outcome, None, false)
                }
            }
            None => {
                let mut outcome = judge(&mut self.judge, expect);
                let mut expected = (outcome == Outcome::Assertion)
                    .then(|| expect[0].as_ref().map(ToString::to_string))
                    .flatten();
                if !step.captures.is_empty() && matches!(outcome, Outcome::Ok | Outcome::RpcError(_)) {
                    if let Some(missing) = capture(run, step, &reply.body, rng) {
                        outcome = Outcome::Capture;
                        expected = Some(missing);
                    }
                }
                (outcome, expected, true)
            }
        }
    }

    /// Records one call of a step (when the flow is measured).
    #[allow(clippy::too_many_arguments)]
    fn record_with(
        &self,
        run: &Run<'_>,
        step: &Step,
        outcome: Outcome,
        cause: Cause<'_>,
        answer: &[u8],
        timing: Option<(Instant, Instant)>,
        expected: Option<&str>,
    ) {
        if !run.measured {
            return;
        }
        let shared = &*self.shared;
        let mut recorder = self.local.recorder_for(shared, run.intended);
        let (latency, service) = match timing {
            Some((sent, answered)) => {
                recorder.requests += 1;
                (answered - self.call_start(run, sent), answered - sent)
            }
            None => (Duration::ZERO, Duration::ZERO),
        };
        let name = &shared.mix.methods[step.row as usize];
        let stats = &mut recorder.methods[step.row as usize];
        match step.notification {
            false => stats.record(outcome, latency, service, answer.len()),
            true => stats.record_notification(outcome, latency),
        }
        if outcome != Outcome::Ok {
            stats.keep_example(name, outcome, cause, expected.as_ref(), answer);
            if let (Outcome::Assertion, Some(expected)) = (outcome, expected) {
                stats.add_example(&expected, answer);
            }
            recorder.note_error(name, outcome, answer);
        }
    }

    /// Where a step's call is timed from: the first from the flow's
    /// intended start (as any call of the open model), the later ones from
    /// their own send, since each waits for the one before.
    fn call_start(&self, run: &Run<'_>, sent: Instant) -> Instant {
        if run.first_sent != Some(sent) {
            return run.ready.min(sent);
        }
        if run.waited_for_setup && !self.open_model {
            sent
        } else {
            run.intended.min(sent)
        }
    }

    /// Counts the flow on its row: `failed` is the step it stopped at, why,
    /// and the calls it left unsent.
    fn end_flow(&self, run: &Run<'_>, failed: Option<(usize, Outcome, u64)>) {
        let shared = &*self.shared;
        let ended = Instant::now();
        let mut recorder = self.local.recorder_for(shared, run.intended);
        let started = run.first_sent.map_or(ended, |sent| self.call_start(run, sent));
        let service = run.first_sent.map_or(Duration::ZERO, |sent| ended - sent);
        if self.open_model {
            if let Some(sent) = run.first_sent {
                recorder.start_delay.record(micros(sent - run.intended)).ok();
            }
        }
        let row = run.flow.row as usize;
        let outcome = failed.map_or(Outcome::Ok, |(_, outcome, _)| outcome);
        recorder.methods[row].record(outcome, ended - started, service, 0);
        if let Some((step, outcome, skipped)) = failed {
            let first_flow = recorder.call_rows().len();
            if let Some(counts) = recorder.flows.get_mut(row - first_flow) {
                counts.failed(step, outcome, skipped);
            }
        }
    }
}

/// Takes each of the step's captures from the answer's result; what was
/// expected when one found nothing (the pointer), else `None`.
fn capture(run: &mut Run<'_>, step: &Step, answer: &[u8], rng: &mut SmallRng) -> Option<String> {
    let message = crate::rpc::wire::Message::parse(answer);
    let result = message.as_ref().and_then(|m| m.result);
    let mut found = Vec::new();
    for capture in &step.captures {
        let why = match result {
            Some(result) if capture.take(result, &mut run.vars, &mut found, rng) => continue,
            Some(result) => capture.pointer.why_nothing(result),
            None => match message.as_ref().and_then(|m| m.error) {
                Some(error) => format!(
                    "the answer is an error, no result: {}",
                    crate::stats::excerpt(error.as_bytes())
                ),
                None => "the answer holds no result".into(),
            },
        };
        return Some(format!(
            "a value at {} for `{}`; {why}",
            capture.pointer, capture.name
        ));
    }
    None
}
