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
    /// Each call received, in order, when the peer keeps a log.
    log: std::sync::Mutex<Vec<Seen>>,
}

/// A call as the peer received it.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    /// The connection, by the order they opened (from 0).
    pub connection: usize,
    pub method: String,
    /// The params' JSON text (`null` when none).
    pub params: String,
    pub notification: bool,
}

impl PeerCounts {
    /// Requests unanswered now on each connection, in the order opened.
    pub fn in_flight_on_each(&self) -> Vec<u64> {
        self.on_each.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every call received so far, when the peer keeps a log.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
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

/// A scripted server: it answers every call after `latency` (on tokio's
/// clock, so a paused test clock sets it exactly) with its params as the
/// result, or `"0x1"` when it has none, and each request independently,
/// so many are in flight on one connection.
#[derive(Clone, Debug)]
pub struct Peer {
    latency: Duration,
    /// Each request's latency by its number (from 0, in the order
    /// received), in place of `latency`.
    latency_of: Option<fn(u64) -> Duration>,
    /// The first this many answers are cut off half way, their
    /// connection closed with them.
    cut_first: u64,
    counts: Arc<PeerCounts>,
    /// Keep every call in `PeerCounts::seen`.
    log: bool,
    /// Stands for a stateless transport (HTTP): flows give their
    /// connection back between steps.
    stateless: bool,
}

impl Peer {
    pub fn new(latency: Duration) -> Self {
        Peer {
            latency,
            latency_of: None,
            cut_first: 0,
            counts: Arc::default(),
            log: false,
            stateless: false,
        }
    }

    /// A peer that answers request number `n` (from 0, in the order
    /// received) after `latency_of(n)`.
    pub fn scripted(latency_of: fn(u64) -> Duration) -> Self {
        Peer {
            latency_of: Some(latency_of),
            ..Peer::new(Duration::ZERO)
        }
    }

    /// A peer that cuts its first `n` answers off half way and closes their
    /// connection, then answers after `latency`.
    pub fn cutting(n: u64, latency: Duration) -> Self {
        Peer {
            cut_first: n,
            ..Peer::new(latency)
        }
    }

    /// A peer that keeps every call it receives, in order.
    pub fn logging(latency: Duration) -> Self {
        Peer {
            log: true,
            ..Peer::new(latency)
        }
    }

    /// The same peer, standing for a stateless transport (HTTP).
    pub fn stateless(self) -> Self {
        Peer {
            stateless: true,
            ..self
        }
    }

    pub fn is_stateless(&self) -> bool {
        self.stateless
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
            let Some((answer, number)) = self.answer(&line, index) else {
                continue;
            };
            self.counts.change_on(index, 1);
            let (peer, writer) = (self.clone(), writer.clone());
            let latency = self.latency_of.map_or(self.latency, |of| of(number));
            let cut = number < self.cut_first;
            tokio::task::spawn_local(async move {
                tokio::time::sleep(latency).await;
                peer.counts.in_flight.fetch_sub(1, Ordering::Relaxed);
                peer.counts.change_on(index, -1);
                // A connection whose side is gone takes no answer.
                let mut writer = writer.lock().await;
                if cut {
                    let _ = writer.write_all(&answer[..answer.len() / 2]).await;
                    let _ = writer.shutdown().await;
                    return;
                }
                let _ = writer.write_all(&answer).await;
            });
        }
    }

    /// Counts a request and makes its answer, with the request's number;
    /// `None` for one that needs none (notifications only).
    fn answer(&self, line: &[u8], connection: usize) -> Option<(Vec<u8>, u64)> {
        let counts = &self.counts;
        let number = counts.requests.fetch_add(1, Ordering::Relaxed);
        let request: Value = serde_json::from_slice(line).ok()?;
        let calls = match &request {
            Value::Array(calls) => calls.iter().collect(),
            one => vec![one],
        };
        counts.calls.fetch_add(calls.len() as u64, Ordering::Relaxed);
        if self.log {
            let mut log = counts.log.lock().unwrap_or_else(|p| p.into_inner());
            log.extend(calls.iter().map(|call| Seen {
                connection,
                method: call["method"].as_str().unwrap_or_default().to_string(),
                params: call.get("params").unwrap_or(&Value::Null).to_string(),
                notification: call.get("id").is_none(),
            }));
        }
        let answers: Vec<Value> = (calls.iter())
            .filter_map(|call| {
                let result = call.get("params").cloned().unwrap_or_else(|| "0x1".into());
                Some(serde_json::json!({"jsonrpc": "2.0", "id": call.get("id")?, "result": result}))
            })
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
        Some((text, number))
    }
}
