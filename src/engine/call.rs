//! How a request leaves and what becomes of it: one path for the load's
//! calls, the setup calls and the polls, so each is sent under the same
//! timeout and judged by the same rules (a wrong id, a missing version or an
//! error object fails a poll as it fails a measured call).

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::plan::{CallTemplate, RequestBuilder};
use crate::rpc::{Entry, Judge};
use crate::stats::{Cause, Outcome};
use crate::transport::{Connection, Reply, TransportError};

/// Why no answer came in time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum NoAnswer {
    /// The call's own timeout passed.
    Timeout(Duration),
    /// The run's grace (this long after the schedule's end) ran out first.
    GraceOver(Duration),
}

/// A request's reply, or why none came: the transport failed, or the
/// wait ended first.
pub(super) type Exchanged = Result<Result<Reply, TransportError>, NoAnswer>;

/// How long a call waits for its answer: until `until`, then it ends as
/// `then` says; or when `cut` is cancelled (the grace ran out), as `cut_as`.
pub(super) struct Wait<'a> {
    pub until: Instant,
    pub then: NoAnswer,
    /// Heard only where the grace's end was not known as the call left.
    pub cut: Option<&'a CancellationToken>,
    pub cut_as: NoAnswer,
}

/// Sends one request (`calls` calls from `first_id`) and waits for its
/// answer at most `within`.
pub(super) async fn exchange(
    connection: &mut Connection,
    body: bytes::Bytes,
    first_id: u64,
    calls: u64,
    within: Duration,
) -> Exchanged {
    let wait = Wait {
        until: Instant::now() + within,
        then: NoAnswer::Timeout(within),
        cut: None,
        cut_as: NoAnswer::Timeout(within),
    };
    exchange_until(connection, body, first_id, calls, wait).await
}

/// Sends one request and waits for its answer as `wait` says.
pub(super) async fn exchange_until(
    connection: &mut Connection,
    body: bytes::Bytes,
    first_id: u64,
    calls: u64,
    wait: Wait<'_>,
) -> Exchanged {
    let answer = tokio::time::timeout_at(wait.until, connection.exchange(body, first_id, calls));
    let answered = match wait.cut {
        None => answer.await,
        Some(cut) => tokio::select! {
            answered = answer => answered,
            _ = cut.cancelled() => return Err(wait.cut_as),
        },
    };
    answered.map_err(|_| wait.then)
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
pub(super) fn cause(exchanged: &Exchanged) -> Cause<'_> {
    match exchanged {
        Ok(Ok(_)) => Cause::Answer,
        Ok(Err(error)) => Cause::Transport(error),
        Err(NoAnswer::Timeout(within)) => Cause::Timeout(*within),
        Err(NoAnswer::GraceOver(grace)) => Cause::GraceOver(*grace),
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
                _ if show_answer => Err(format!("{outcome}: {}", crate::stats::excerpt(&reply.body))),
                _ => Err(outcome.to_string()),
            }
        }
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {within:?}")),
    }
}
