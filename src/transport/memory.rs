//! An in-memory peer behind the transport interface: a scripted JSON-RPC
//! server at the far end of a pipe, reached as a multiplexed connection
//! (NDJSON, answers routed by id, as over `tcp://`). It exists so the
//! engine's schedule, callers and gathering can be tested without sockets,
//! under tokio's paused clock, where every answer's time is exact.
//!
//! No URL names it: only code builds a `Target::Memory`.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use super::stream::MuxConnection;

/// What the peer has seen, counted as it goes: what a test asserts.
#[derive(Debug, Default)]
pub struct PeerCounts {
    /// Connections opened to the peer.
    pub connections: AtomicU64,
    /// Messages received (a batch is one).
    pub requests: AtomicU64,
    /// Calls received (each entry of a batch, notifications included).
    pub calls: AtomicU64,
    /// Requests received and not yet answered.
    pub in_flight: AtomicU64,
    /// The most requests it ever held unanswered at once.
    pub most_in_flight: AtomicU64,
    /// Requests unanswered now on each connection, in the order opened.
    on_each: std::sync::Mutex<Vec<u64>>,
}

impl PeerCounts {
    /// Requests unanswered now on each connection, in the order opened.
    pub fn in_flight_on_each(&self) -> Vec<u64> {
        self.on_each.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Adds `delta` to connection `index`'s requests unanswered.
    fn change_on(&self, index: usize, delta: i64) {
        let mut on_each = self.on_each.lock().unwrap_or_else(|p| p.into_inner());
        if on_each.len() <= index {
            on_each.resize(index + 1, 0);
        }
        on_each[index] = on_each[index].saturating_add_signed(delta);
    }
}

/// A scripted server: it answers every call with `"0x1"` after `latency`
/// (on tokio's clock, so a paused test clock sets it exactly), and each
/// request independently, so many are in flight on one connection.
#[derive(Clone, Debug)]
pub struct Peer {
    latency: Duration,
    counts: Arc<PeerCounts>,
}

impl Peer {
    pub fn new(latency: Duration) -> Self {
        Peer {
            latency,
            counts: Arc::default(),
        }
    }

    pub fn counts(&self) -> &PeerCounts {
        &self.counts
    }

    /// A new connection to the peer, which starts serving its far end.
    /// Must run inside a `LocalSet`.
    pub(super) fn open(&self, limit: usize) -> Rc<MuxConnection> {
        let index = self.counts.connections.fetch_add(1, Ordering::Relaxed) as usize;
        self.counts.change_on(index, 0);
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (reader, writer) = tokio::io::split(ours);
        tokio::task::spawn_local(self.clone().serve(theirs, index));
        MuxConnection::over(reader, writer, false, limit)
    }

    /// Reads one request a line and answers each after the latency, in a
    /// task of its own; ends when the connection's side is dropped.
    async fn serve(self, end: DuplexStream, index: usize) {
        let (reader, writer) = tokio::io::split(end);
        // Answers finish in any order; the lock keeps each one whole.
        let writer = Rc::new(tokio::sync::Mutex::new(writer));
        let mut lines = BufReader::new(reader);
        let mut line = Vec::new();
        loop {
            line.clear();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let Some(answer) = self.answer(&line) else {
                continue;
            };
            self.counts.change_on(index, 1);
            let (peer, writer) = (self.clone(), writer.clone());
            tokio::task::spawn_local(async move {
                tokio::time::sleep(peer.latency).await;
                peer.counts.in_flight.fetch_sub(1, Ordering::Relaxed);
                peer.counts.change_on(index, -1);
                // A connection whose side is gone takes no answer.
                let _ = writer.lock().await.write_all(&answer).await;
            });
        }
    }

    /// Counts a request and makes its answer; `None` for one that needs
    /// none (notifications only).
    fn answer(&self, line: &[u8]) -> Option<Vec<u8>> {
        let counts = &self.counts;
        counts.requests.fetch_add(1, Ordering::Relaxed);
        let request: Value = serde_json::from_slice(line).ok()?;
        let calls = match &request {
            Value::Array(calls) => calls.iter().collect(),
            one => vec![one],
        };
        counts.calls.fetch_add(calls.len() as u64, Ordering::Relaxed);
        let answers: Vec<Value> = (calls.iter())
            .filter_map(|call| call.get("id"))
            .map(|id| serde_json::json!({"jsonrpc": "2.0", "id": id, "result": "0x1"}))
            .collect();
        let answer = match request {
            _ if answers.is_empty() => return None,
            Value::Array(_) => Value::Array(answers),
            _ => answers.into_iter().next()?,
        };
        let now = counts.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        counts.most_in_flight.fetch_max(now, Ordering::Relaxed);
        let mut text = serde_json::to_vec(&answer).ok()?;
        text.push(b'\n');
        Some(text)
    }
}
