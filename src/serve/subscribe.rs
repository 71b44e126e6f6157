//! `eth_subscribe("newHeads")` on the connections a server can write to at
//! will (WebSocket, TCP, Unix sockets): a notification every
//! `heads_every`, as a node sends one per new block, until
//! `eth_unsubscribe` or the connection's end.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::stream::Serving;
use crate::rpc::wire::Message;

/// Sends a message on the connection; false once it has closed.
pub type Send = Arc<dyn Fn(Vec<u8>) -> bool + std::marker::Send + Sync>;

/// One connection's subscriptions, ended with it.
#[derive(Default)]
pub struct Subscriptions {
    live: HashMap<String, CancellationToken>,
    opened: u64,
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.live.values().for_each(CancellationToken::cancel);
    }
}

impl Subscriptions {
    /// Handles `request` if it subscribes or unsubscribes, answering it
    /// through `send`; false for any other request.
    pub fn intercept(&mut self, request: &[u8], serving: &Serving, send: &Send) -> bool {
        let named = |name: &[u8]| request.windows(name.len()).any(|w| w == name);
        if !named(b"subscribe\"") {
            return false;
        }
        let Some(message) = Message::parse(request) else {
            return false;
        };
        let (Some(method), Some(id)) = (message.method, message.id) else {
            return false;
        };
        let first: Option<String> = message
            .params
            .and_then(|p| serde_json::from_str::<Vec<&RawValue>>(p).ok())
            .and_then(|p| p.first().and_then(|f| serde_json::from_str(f.get()).ok()));
        let result = match (method, first.as_deref()) {
            ("\"eth_subscribe\"", Some("newHeads")) => {
                self.opened += 1;
                let subscription = format!("0x{:x}{:04x}", rand::random::<u64>(), self.opened);
                let stop = CancellationToken::new();
                self.live.insert(subscription.clone(), stop.clone());
                serving.stats.subscriptions.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(new_heads(
                    subscription.clone(),
                    serving.clone(),
                    send.clone(),
                    stop,
                ));
                format!("\"{subscription}\"")
            }
            ("\"eth_subscribe\"", _) => {
                let error = r#"{"code":-32602,"message":"only newHeads subscriptions are served"}"#;
                send(format!(r#"{{"jsonrpc":"2.0","error":{error},"id":{}}}"#, id).into_bytes());
                return true;
            }
            ("\"eth_unsubscribe\"", Some(subscription)) => match self.live.remove(subscription) {
                Some(stop) => {
                    stop.cancel();
                    "true".to_string()
                }
                None => "false".to_string(),
            },
            _ => return false,
        };
        send(format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{}}}"#, id).into_bytes());
        true
    }
}

/// A head a tick, numbered as `eth_blockNumber` numbers them.
async fn new_heads(subscription: String, serving: Serving, send: Send, stop: CancellationToken) {
    let every = serving.config.heads_every;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.cancelled() => return,
            _ = serving.stop.cancelled() => return,
        }
        let number = super::methods::head(serving.started);
        let notification = format!(
            r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"{subscription}","result":{{"number":"0x{number:x}","hash":"0x{:064x}"}}}}}}"#,
            u128::from(number) * 0x9E37_79B9_7F4A_7C15
        );
        if !send(notification.into_bytes()) {
            return;
        }
        serving
            .stats
            .subscription_notifications
            .fetch_add(1, Ordering::Relaxed);
    }
}
