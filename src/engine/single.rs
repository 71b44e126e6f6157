//! One call made by hand (`volley call`): a connection opened, its setup
//! calls sent as a run sends them, then the call, judged by the same rules
//! as every call of a run; its answer is handed back whatever it holds.

use std::time::Duration;

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::time::Instant;

use super::call::{call_once, exchange};
use crate::plan::{CallTemplate, RequestBuilder, SetupCall};
use crate::rpc::{Entry, Judge};
use crate::stats::Outcome;
use crate::transport::{Connection, Target};

/// What came of the call.
#[derive(Debug)]
pub struct Answered {
    /// What the judge found; `ok` for a right answer.
    pub outcome: Outcome,
    /// The HTTP status (200 for transports without one).
    pub status: u16,
    /// The answer as it came.
    pub body: Bytes,
    /// From the request's send to its answer.
    pub took: Duration,
}

/// Opens a connection to `target`, sends `setup` on it, then `call` (with
/// id 1, or none for a notification), each waited for at most `within`.
/// An error says what could not be done: the connection, a setup call, or
/// the call's exchange (no answer within the time, the transport's own
/// failure).
pub async fn call_by_hand(
    target: &Target,
    setup: &[SetupCall],
    call: &CallTemplate,
    notification: bool,
    within: Duration,
) -> Result<Answered, String> {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let mut connection = Connection::open(target, within)
                .await
                .map_err(|e| e.to_string())?;
            for (i, step) in setup.iter().enumerate() {
                // Ids after the call's own, so the call's is always 1.
                let id = (!step.notification).then_some(i as u64 + 2);
                call_once(&mut connection, &step.template(call.version()), id, within, true)
                    .await
                    .map_err(|why| format!("setup call `{}` failed: {why}", step.method))?;
            }
            let answered = send(&mut connection, call, notification, within).await;
            // A stdio child is ended as its protocol says.
            let _ = connection.shut_down().await;
            answered
        })
        .await
}

/// A connection kept for calls made one after another, each judged and
/// its result handed back (`volley init --from-node` reads a chain so).
/// Must be used inside a `LocalSet`.
pub struct Session {
    connection: Connection,
    within: Duration,
    version: crate::rpc::Version,
}

impl Session {
    pub async fn open(
        target: &Target,
        within: Duration,
        version: crate::rpc::Version,
    ) -> Result<Session, String> {
        let connection = Connection::open(target, within)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Session {
            connection,
            within,
            version,
        })
    }

    /// The result of `method(params)`; an error answer, a wrong one or no
    /// answer says what it was, with the answer's first bytes.
    pub async fn call(
        &mut self,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let template = CallTemplate::new(self.version, method, Some(params));
        let answered = send(&mut self.connection, &template, false, self.within).await?;
        if answered.outcome != Outcome::Ok {
            return Err(format!(
                "{}: {}",
                answered.outcome,
                crate::stats::excerpt(&answered.body)
            ));
        }
        let message: serde_json::Value =
            serde_json::from_slice(&answered.body).map_err(|e| format!("the answer is not JSON: {e}"))?;
        Ok(message.get("result").cloned().unwrap_or_default())
    }

    /// Ends the connection as its protocol says.
    pub async fn close(self) {
        let _ = self.connection.shut_down().await;
    }
}

/// Sends the call and judges its answer.
async fn send(
    connection: &mut Connection,
    call: &CallTemplate,
    notification: bool,
    within: Duration,
) -> Result<Answered, String> {
    let mut builder = RequestBuilder::default();
    builder.begin(false);
    let id = (!notification).then_some(1);
    // Params are fixed JSON: the generator is never drawn from.
    builder.push(
        call,
        Entry {
            method: 0,
            call: 0,
            id,
        },
        &mut SmallRng::seed_from_u64(0),
    );
    let sent = Instant::now();
    let exchanged = exchange(connection, builder.finish(), 1, u64::from(!notification), within).await;
    let took = sent.elapsed();
    let reply = match exchanged {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => return Err(error.to_string()),
        Err(_) => {
            return Err(format!(
                "no answer within {} (--timeout)",
                humantime::format_duration(within)
            ))
        }
    };
    let mut outcome = Outcome::Ok;
    Judge::new(call.version()).judge(
        reply.status,
        &reply.body,
        builder.entries(),
        false,
        &[],
        |_, o, _| {
            outcome = o;
        },
    );
    Ok(Answered {
        outcome,
        status: reply.status,
        body: reply.body,
        took,
    })
}
