//! What a caller records of a request: its timing against when it was
//! due, each call's outcome as the judge finds it, and the sample kept to
//! compare targets. Only measured requests are recorded.

use std::time::Duration;

use tokio::time::Instant;

use super::call;
use super::caller::{Caller, Timing};
use super::slot::OpenFailure;
use crate::rpc::Judge;
use crate::stats::{micros, Outcome, Recorder};

impl Caller {
    /// Keeps request `seq` and its answer in the sample that compares
    /// targets.
    pub(super) fn keep_captured(
        &self,
        seq: u64,
        batch: bool,
        request: bytes::Bytes,
        result: &call::Exchanged,
    ) {
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

    /// A request that found no connection: each of its calls fails with the
    /// opening's outcome, and its reason is kept as an example.
    pub(super) fn count_unopened(&self, measured: Option<Instant>, failure: &OpenFailure) {
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
    pub(super) fn record(
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
