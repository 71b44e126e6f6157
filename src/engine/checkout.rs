//! A caller's connection: taken from its slot (or opened, after the
//! backoff when the last opening never worked), counted against
//! `reconnect_every`, and handed back after the call (or retired, or
//! dropped after a failure). Backoff waits are counted with the connect
//! figures, never in a call's latency.

use std::sync::atomic::Ordering;

use tokio::time::{sleep, sleep_until, Instant};

use super::caller::{Caller, InHand, BACKOFF_MAX, BACKOFF_MIN};
use super::slot::OpenFailure;
use crate::stats::Outcome;

impl Caller {
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
    pub(super) async fn back_off_before_claiming(&mut self) {
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

    /// Hands the connection back after a request whose failure, if any,
    /// was `failure`: the backoff starts again after a success, and a
    /// connection opened for a call that failed at once makes the next
    /// opening wait. After a failure or a timeout, a connection carrying
    /// one call at a time is in an unknown state: it is dropped, not put
    /// back; a multiplexed one stays for its other calls unless it closed.
    pub(super) fn hand_back(&mut self, in_hand: InHand, failure: Option<Outcome>) {
        match failure {
            None => {
                self.backoff = BACKOFF_MIN;
                self.reopen_after_failure = false;
            }
            Some(Outcome::Io | Outcome::Connect) if in_hand.opened_now => self.reopen_after_failure = true,
            Some(_) => {}
        }
        if in_hand.last {
            super::slot::retire(&self.shared, &self.local, in_hand.connection);
        } else if failure.is_none() {
            self.slot.checkin(in_hand.connection);
        }
    }
}
