//! How a request leaves and what becomes of it: one path for the load's
//! calls, the setup calls and the polls, so each is sent under the same
//! timeout and judged by the same rules (a wrong id, a missing version or an
//! error object fails a poll as it fails a measured call).

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::plan::{CallTemplate, RequestBuilder};
use crate::rpc::{Entry, Judge};
use crate::stats::{Cause, Outcome};
use crate::transport::{Connection, Reply, TransportError};

/// A request's reply, or why none came: the transport failed, or the
/// timeout passed first.
pub(super) type Exchanged = Result<Result<Reply, TransportError>, TimedOut>;

/// No answer within the timeout.
#[derive(Debug)]
pub(super) struct TimedOut;

/// Sends one request (`calls` calls from `first_id`) and waits for its
/// answer at most `within`.
pub(super) async fn exchange(
    connection: &mut Connection,
    body: bytes::Bytes,
    first_id: u64,
    calls: u64,
    within: Duration,
) -> Exchanged {
    tokio::time::timeout(within, connection.exchange(body, first_id, calls))
        .await
        .map_err(|_| TimedOut)
}

/// The load's timeout: one timer per caller, moved only when a call's
/// deadline passes the one it is set to. A timer per call (set, then
/// cancelled by the answer) was the largest cost of a call's own work
/// after the system calls; this one is set again about once in
/// `DEADLINE_SLACK` per connection. It fires at most that much after a
/// call's own deadline, and an answer that came after the deadline is a
/// timeout all the same, so what counts as one is exactly what passed
/// `within`.
pub(super) struct Deadline {
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    set_to: Instant,
}

/// How much later than a call's deadline its timer may fire.
const DEADLINE_SLACK: Duration = Duration::from_millis(10);

/// The clock: tokio's reading of it, so a test's paused clock is the one
/// read (without tokio's test-util, `std::time::Instant::now()` itself).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Deadline {
    pub(super) fn new() -> Self {
        let now = now();
        Deadline {
            timer: Box::pin(tokio::time::sleep_until(now.into())),
            set_to: now,
        }
    }

    /// Waits for `answer`, of a request sent at `sent`, at most `within`
    /// from then; returns it (`None`: the timeout passed first) and when
    /// the wait ended.
    pub(super) async fn race<T>(
        &mut self,
        answer: impl std::future::Future<Output = T>,
        sent: Instant,
        within: Duration,
    ) -> (Option<T>, Instant) {
        let deadline = sent + within;
        if self.set_to < deadline {
            self.set_to = deadline + DEADLINE_SLACK;
            self.timer.as_mut().reset(self.set_to.into());
        }
        let answer = tokio::select! {
            biased;
            answer = answer => Some(answer),
            () = self.timer.as_mut() => None,
        };
        let ended = now();
        (answer.filter(|_| ended <= deadline), ended)
    }
}

/// The outcome of every call of a request that got no reply; `None` when
/// one came (its body is then judged call by call).
pub(super) fn failure(exchanged: &Exchanged) -> Option<Outcome> {
    match exchanged {
        Ok(Ok(_)) => None,
        Ok(Err(TransportError::Connect { .. })) => Some(Outcome::Connect),
        Ok(Err(_)) => Some(Outcome::Io),
        Err(_) => Some(Outcome::Timeout),
    }
}

/// Why a call failed beyond its outcome (the transport's own words), for
/// the examples kept: borrowed, so it costs nothing until one is.
pub(super) fn cause(exchanged: &Exchanged, within: Duration) -> Cause<'_> {
    match exchanged {
        Ok(Ok(_)) => Cause::Answer,
        Ok(Err(error)) => Cause::Transport(error),
        Err(_) => Cause::Timeout(within),
    }
}

/// Makes one call outside the figures and returns its answer when the
/// judge finds it right; otherwise says what was wrong with it, as the
/// outcome's name (and, with `show_answer`, the start of the answer).
pub(super) async fn call_once(
    connection: &mut Connection,
    template: &CallTemplate,
    id: Option<u64>,
    within: Duration,
    show_answer: bool,
) -> Result<Reply, String> {
    let mut builder = RequestBuilder::default();
    builder.begin(false);
    // Setup and poll params are fixed: the generator is never drawn from.
    let entry = Entry {
        method: 0,
        call: 0,
        id,
    };
    builder.push(template, entry, &mut SmallRng::seed_from_u64(0));
    let calls = u64::from(id.is_some());
    match exchange(connection, builder.finish(), id.unwrap_or(0), calls, within).await {
        Ok(Ok(reply)) => {
            let mut outcome = Outcome::Ok;
            Judge::new(template.version()).judge(
                reply.status,
                &reply.body,
                builder.entries(),
                false,
                &[],
                |_, o, _| outcome = o,
            );
            match outcome {
                Outcome::Ok => Ok(reply),
                _ if show_answer => Err(format!("{outcome}: {}", excerpt(&reply.body))),
                _ => Err(outcome.to_string()),
            }
        }
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {within:?}")),
    }
}

/// The start of an answer, for a message.
fn excerpt(body: &[u8]) -> String {
    const SHOWN: usize = 200;
    let text = String::from_utf8_lossy(&body[..body.len().min(SHOWN)]);
    if body.len() > SHOWN {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::{advance, sleep};

    #[tokio::test(start_paused = true)]
    async fn an_answer_after_its_deadline_is_a_timeout_and_the_timer_moves_seldom() {
        let ms = Duration::from_millis;
        let mut deadline = Deadline::new();
        let t0 = now();
        // Within the timeout: the answer, when it came.
        let (answer, ended) = deadline.race(sleep(ms(5)), t0, ms(20)).await;
        assert_eq!((answer, ended - t0), (Some(()), ms(5)));
        assert_eq!(deadline.set_to, t0 + ms(30));
        // Never answered: the timer, still as the first call set it, fires
        // at most the slack after this call's deadline (5 ms here).
        let sent = now();
        let (answer, ended) = deadline.race(std::future::pending::<()>(), sent, ms(20)).await;
        assert_eq!((answer, ended - sent), (None, ms(25)));
        assert_eq!(deadline.set_to, t0 + ms(30));
        // A deadline before the one set: the timer stays; an answer that
        // beats the timer but not its own deadline is a timeout.
        let t1 = now();
        let (answer, _) = deadline.race(sleep(ms(1)), t1, ms(20)).await;
        assert_eq!((answer, deadline.set_to), (Some(()), t1 + ms(30)));
        advance(ms(5)).await;
        let sent = now();
        let (answer, ended) = deadline.race(sleep(ms(22)), sent, ms(20)).await;
        assert_eq!(
            (answer, ended - sent, deadline.set_to),
            (None, ms(22), t1 + ms(30))
        );
        // Exactly at the deadline is still in time.
        let sent = now();
        let (answer, _) = deadline.race(sleep(ms(20)), sent, ms(20)).await;
        assert_eq!(answer, Some(()));
        assert_eq!(deadline.set_to, sent + ms(30));
    }
}
