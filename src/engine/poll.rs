//! Background polls: a call made every few seconds whose result feeds
//! generated parameters (e.g. the chain head for "head minus 0..100").

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::call::call_once;
use super::state::RunState;
use super::RaceLog;
use crate::plan::Poll;
use crate::rpc::wire::Message;
use crate::transport::{Connection, Target};

/// Makes the poll's call once on `connection`, judged as any call is, and
/// stores its result; a race's poll keeps its value with when it came.
async fn refresh(
    poll: &Poll,
    connection: &mut Connection,
    timeout: Duration,
    race: Option<&RaceLog>,
) -> Result<(), String> {
    let reply = call_once(connection, &poll.template, Some(1), timeout, true).await?;
    let came = std::time::Instant::now();
    // The judge found a version-2 answer with a result to this call.
    let result = Message::parse(&reply.body)
        .and_then(|message| message.result)
        .ok_or("no result")?;
    if let Some(race) = race {
        race.note(Some(result), came);
    }
    let value: Value = serde_json::from_str(result).map_err(|e| e.to_string())?;
    let stored = poll.polled.set(poll.index, &value);
    // A race's value may be no number (a block's hash): the connection
    // answered, and is kept.
    match poll.race {
        true => Ok(()),
        false => stored,
    }
}

/// Polls once before the run, so generated values start right.
pub async fn first(poll: &Poll, target: &Target, timeout: Duration) -> Result<(), String> {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let mut connection = Connection::open(target, timeout)
                .await
                .map_err(|e| e.to_string())?;
            refresh(poll, &mut connection, timeout, None).await
        })
        .await
        .map_err(|e| format!("poll `{}`: {e}", poll.name))
}

/// Waits for a poll's next turn: its interval's next tick; a race's poll, a
/// wait drawn between half an interval and one (never longer: a head is
/// seen within an interval of its coming, the race's resolution). Two targets'
/// polls (and a chain's heads, often a multiple of the interval) then keep
/// no phase to each other: at a fixed phase, the one polled just after each
/// head would look first on every head, whoever delivered it first.
async fn next_tick(ticks: &mut tokio::time::Interval, poll: &Poll) {
    match poll.race {
        true => tokio::time::sleep(poll.every.mul_f64(0.5 + 0.5 * rand::random::<f64>())).await,
        false => {
            ticks.tick().await;
        }
    }
}

/// Refreshes poll `index` every `every` until the task is dropped. A failed
/// refresh keeps the last value and tries again at the next tick.
pub(super) async fn keep_polling(shared: Arc<RunState>, index: usize) {
    let poll = &shared.polls[index];
    let mut connection: Option<Connection> = None;
    let mut ticks = tokio::time::interval(poll.every);
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = next_tick(&mut ticks, poll) => {}
            _ = shared.cancel.cancelled() => return,
        }
        if connection.as_ref().is_none_or(Connection::is_closed) {
            connection = Connection::open(&shared.target, shared.plan.timeout).await.ok();
        }
        if let Some(conn) = connection.as_mut() {
            let race = shared.race.as_deref().filter(|_| poll.race);
            if refresh(poll, conn, shared.plan.timeout, race).await.is_err() {
                connection = None;
            }
        }
    }
}
