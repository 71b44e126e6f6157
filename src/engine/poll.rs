//! Background polls: a call made every few seconds whose result feeds
//! generated parameters (e.g. the chain head for "head minus 0..100").

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::Value;

use super::worker::Shared;
use crate::rpc::wire::{self, Message};
use crate::rpc::{CallTemplate, Entry, RequestBuilder};
use crate::scenario::Polled;
use crate::transport::{Connection, Target};

/// One polled value.
#[derive(Clone, Debug)]
pub struct Poll {
    pub name: String,
    pub template: CallTemplate,
    pub every: Duration,
    pub polled: Arc<Polled>,
    pub index: usize,
}

impl Poll {
    /// Makes the call once on `connection` and stores its result.
    async fn refresh(&self, connection: &mut Connection, timeout: Duration) -> Result<(), String> {
        let mut builder = RequestBuilder::default();
        builder.begin(false);
        builder.push(
            &self.template,
            Entry {
                method: 0,
                call: 0,
                id: Some(1),
            },
            &mut SmallRng::seed_from_u64(0),
        );
        let reply = tokio::time::timeout(timeout, connection.exchange(builder.finish(), 1, 1))
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
            .map_err(|e| e.to_string())?;
        let message: Message = serde_json::from_slice(&reply.body)
            .map_err(|_| format!("not a JSON-RPC answer: {}", String::from_utf8_lossy(&reply.body)))?;
        if let Some(error) = message.error {
            return Err(format!("answered with an error: {error}"));
        }
        let result = message
            .result
            .filter(|_| wire::is_version_2(message.jsonrpc))
            .ok_or("no result")?;
        let value: Value = serde_json::from_str(result.get()).map_err(|e| e.to_string())?;
        self.polled.set(self.index, &value)
    }

    /// Polls once before the run, so generated values start right.
    pub async fn first(&self, target: &Target, timeout: Duration) -> Result<(), String> {
        let name = &self.name;
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let mut connection = Connection::open(target, timeout)
                    .await
                    .map_err(|e| e.to_string())?;
                self.refresh(&mut connection, timeout).await
            })
            .await
            .map_err(|e| format!("poll `{name}`: {e}"))
    }
}

/// Refreshes poll `index` every `every` until the task is dropped. A failed
/// refresh keeps the last value and tries again at the next tick.
pub(super) async fn keep_polling(shared: Arc<Shared>, index: usize) {
    let poll = &shared.polls[index];
    let mut connection: Option<Connection> = None;
    let mut ticks = tokio::time::interval(poll.every);
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shared.cancel.cancelled() => return,
        }
        if connection.as_ref().is_none_or(Connection::is_closed) {
            connection = Connection::open(&shared.target, shared.plan.timeout).await.ok();
        }
        if let Some(conn) = connection.as_mut() {
            if poll.refresh(conn, shared.plan.timeout).await.is_err() {
                connection = None;
            }
        }
    }
}
