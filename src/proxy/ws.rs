//! The WebSocket side of the recording proxy: each client gets its own
//! upstream socket, every message is passed on unchanged both ways, and
//! each client message is recorded when it arrives (with `--answers`, when
//! its answer comes back, matched by id: answers on a socket come in any
//! order, and subscriptions' notifications answer nothing).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use serde_json::value::RawValue;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;

use super::Recorder;

/// Requests awaiting their answer, by their ids.
type Pending = HashMap<String, (Instant, Vec<u8>)>;

pub(super) async fn proxy(stream: tokio::net::TcpStream, conn: u64, recorder: &Arc<Recorder>) {
    let _ = stream.set_nodelay(true);
    let mut names = Vec::new();
    // The callback's error type is tungstenite's, large or not.
    #[allow(clippy::result_large_err)]
    let keep_names = |request: &Request, response: Response| {
        names = request.headers().keys().map(|n| n.as_str().to_string()).collect();
        Ok(response)
    };
    let Ok(client) = tokio_tungstenite::accept_hdr_async(stream, keep_names).await else {
        return;
    };
    let upstream = &recorder.upstream;
    let Ok(socket) = tokio::net::TcpStream::connect(&upstream.authority).await else {
        return;
    };
    let url = format!("ws://{}{}", upstream.authority, upstream.path);
    let Ok((server, _)) = tokio_tungstenite::client_async(url, socket).await else {
        return;
    };
    let (mut to_client, mut from_client) = client.split();
    let (mut to_server, mut from_server) = server.split();
    let mut pending = Pending::new();
    loop {
        tokio::select! {
            message = from_client.next() => {
                let Some(Ok(message)) = message else { break };
                if let Message::Text(text) = &message {
                    arrived(recorder, conn, &names, text.as_bytes(), &mut pending);
                }
                if to_server.send(message).await.is_err() {
                    break;
                }
            }
            message = from_server.next() => {
                let Some(Ok(message)) = message else { break };
                if let Message::Text(text) = &message {
                    answered(recorder, conn, &names, text.as_bytes(), &mut pending);
                }
                if to_client.send(message).await.is_err() {
                    break;
                }
            }
        }
    }
    // Calls never answered are recorded without an answer.
    for (arrived, request) in pending.into_values() {
        recorder.write(conn, &names, arrived, &request, None);
    }
}

fn arrived(recorder: &Recorder, conn: u64, names: &[String], text: &[u8], pending: &mut Pending) {
    let now = Instant::now();
    match ids_of(text).filter(|_| recorder.answers) {
        Some(key) => {
            pending.insert(key, (now, text.to_vec()));
        }
        None => recorder.write(conn, names, now, text, None),
    }
}

fn answered(recorder: &Recorder, conn: u64, names: &[String], text: &[u8], pending: &mut Pending) {
    let Some(key) = ids_of(text) else { return };
    if let Some((arrived, request)) = pending.remove(&key) {
        recorder.write(conn, names, arrived, &request, Some((text, arrived.elapsed())));
    }
}

/// The ids a message carries, as one key (a batch's sorted, so that its
/// answer, in any order, has the same); none for a notification.
fn ids_of(text: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Id<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let text = std::str::from_utf8(text).ok()?.trim_start();
    let mut ids: Vec<String> = if text.starts_with('[') {
        let entries: Vec<Id> = serde_json::from_str(text).ok()?;
        entries
            .iter()
            .filter_map(|e| e.id.map(|id| id.get().to_string()))
            .collect()
    } else {
        let one: Id = serde_json::from_str(text).ok()?;
        vec![one.id?.get().to_string()]
    };
    if ids.is_empty() {
        return None;
    }
    ids.sort_unstable();
    Some(ids.join(","))
}

#[cfg(test)]
mod tests {
    use super::ids_of;

    #[test]
    fn a_batch_and_its_answer_in_any_order_have_one_key() {
        let request = br#"[{"jsonrpc":"2.0","method":"a","id":2},{"jsonrpc":"2.0","method":"b","id":"x"},{"jsonrpc":"2.0","method":"n"}]"#;
        let answer = br#"[{"jsonrpc":"2.0","result":1,"id":"x"},{"jsonrpc":"2.0","result":2,"id":2}]"#;
        assert_eq!(ids_of(request), ids_of(answer));
        assert_eq!(ids_of(request).as_deref(), Some("\"x\",2"));
        assert_eq!(
            ids_of(br#"{"jsonrpc":"2.0","method":"n"}"#),
            None,
            "a notification"
        );
        assert_eq!(ids_of(b"not json"), None);
    }
}
