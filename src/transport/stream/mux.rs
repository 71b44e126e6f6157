//! One multiplexed connection: the writer every caller shares, the
//! registry of requests waiting for their answers (by first id), and the
//! exchange and probe that use them. `readers.rs` hands the answers in.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::WebSocketStream;

use super::child::keep_stderr_tail;
use super::readers::{read_answers, read_frames, read_headed};
use super::target::{StreamAddr, StreamTarget};
use crate::rpc::wire::{self, Framing};
use crate::tls::NetStream;
use crate::transport::{Reply, ServerAnswers, TransportError};

/// A request waiting for its answer: its consecutive ids and where the
/// answer goes.
pub(super) struct Waiting {
    pub(super) calls: u64,
    pub(super) answer: oneshot::Sender<Bytes>,
}

/// Where requests are written: a byte stream (one line each) or a
/// WebSocket (one text frame each). Byte streams frame each message in a
/// reused buffer and write it at once: two writes would be two packets on
/// a socket without Nagle, and two system calls on a pipe.
pub(super) enum Writer {
    Lines(Box<dyn AsyncWrite + Unpin>, Vec<u8>),
    /// LSP's framing: a `Content-Length` header before each message.
    Headed(Box<dyn AsyncWrite + Unpin>, Vec<u8>),
    Frames(SplitSink<WebSocketStream<NetStream>, Frame>),
    /// Closed on purpose (a child's stdin, at the end of a run).
    Closed,
}

impl Writer {
    pub(super) async fn send(&mut self, body: &[u8]) -> Result<(), String> {
        match self {
            Writer::Lines(w, framed) => {
                framed.clear();
                framed.extend_from_slice(body);
                framed.push(b'\n');
                w.write_all(framed).await.map_err(|e| e.to_string())
            }
            Writer::Headed(w, framed) => {
                framed.clear();
                wire::write_lsp_message(framed, body);
                w.write_all(framed).await.map_err(|e| e.to_string())?;
                w.flush().await.map_err(|e| e.to_string())
            }
            Writer::Frames(sink) => {
                let text = String::from_utf8_lossy(body).into_owned();
                sink.send(Frame::Text(text.into()))
                    .await
                    .map_err(|e| e.to_string())
            }
            Writer::Closed => Err("the connection was closed".into()),
        }
    }
}

/// Hears of a subscription's notification, by the subscription's index,
/// with its `result` as raw JSON (none when it had none).
pub type Listener = Box<dyn FnMut(usize, Option<&str>)>;

/// One multiplexed connection, shared by the callers on one engine thread.
pub struct MuxConnection {
    pub(super) writer: tokio::sync::Mutex<Writer>,
    /// The child process of a stdio target, killed and reaped on drop.
    pub(super) child: RefCell<Option<tokio::process::Child>>,
    /// That child's life: the calls sent to it, its first answer, its
    /// ready signal and its memory.
    pub(super) life: std::cell::OnceCell<std::sync::Arc<super::ChildLife>>,
    /// What tells that child is ready, when the scenario names it.
    pub(super) ready: std::cell::OnceCell<std::sync::Arc<crate::transport::ReadySignal>>,
    /// The last bytes the child wrote to stderr.
    pub(super) stderr_tail: RefCell<Vec<u8>>,
    /// First id of each request in flight.
    pub(super) waiting: RefCell<BTreeMap<u64, Waiting>>,
    pub(super) closed: Cell<bool>,
    /// Why the connection closed, for the calls that fail with it.
    pub(super) closed_because: RefCell<Option<String>>,
    /// Its reader died of a panic (a bug in volley, never a server's doing).
    pub(super) reader_panicked: Cell<bool>,
    /// Messages that answered no request in flight.
    pub(super) unsolicited: Cell<u64>,
    /// While set, the next such message goes here instead: a probe's
    /// answer, which may carry no id to route it by (`volley check`).
    pub(super) probe: RefCell<Option<oneshot::Sender<Bytes>>>,
    /// Ids of the subscriptions opened on this connection.
    pub(super) subscriptions: RefCell<Vec<Box<str>>>,
    /// Hears of each notification of a subscription, by its index above.
    pub(super) listener: RefCell<Option<Listener>>,
    pub(super) server_answers: std::sync::Arc<ServerAnswers>,
}

impl MuxConnection {
    pub(super) fn new(writer: Writer, server_answers: std::sync::Arc<ServerAnswers>) -> Rc<Self> {
        Rc::new(MuxConnection {
            writer: tokio::sync::Mutex::new(writer),
            child: RefCell::new(None),
            life: std::cell::OnceCell::new(),
            ready: std::cell::OnceCell::new(),
            stderr_tail: RefCell::new(Vec::new()),
            waiting: RefCell::new(BTreeMap::new()),
            closed: Cell::new(false),
            closed_because: RefCell::new(None),
            reader_panicked: Cell::new(false),
            unsolicited: Cell::new(0),
            probe: RefCell::new(None),
            subscriptions: RefCell::new(Vec::new()),
            listener: RefCell::new(None),
            server_answers,
        })
    }

    /// Opens a connection and starts its reader. Must run inside a `LocalSet`.
    pub async fn open(target: &StreamTarget) -> Result<Rc<Self>, TransportError> {
        let new = |writer| MuxConnection::new(writer, target.server_answers.clone());
        if let StreamAddr::Stdio { framing, .. } = target.addr {
            let content_length = framing == Framing::ContentLength;
            let (mut child, life) = target.spawn()?;
            let stdin = child.stdin.take().expect("piped");
            let stdout = child.stdout.take().expect("piped");
            let stderr = child.stderr.take().expect("piped");
            let writer = if content_length {
                Writer::Headed(Box::new(stdin), Vec::new())
            } else {
                Writer::Lines(Box::new(stdin), Vec::new())
            };
            let connection = new(writer);
            if let Some(ready) = &target.ready {
                let _ = connection.ready.set(ready.clone());
            }
            *connection.child.borrow_mut() = Some(child);
            let _ = connection.life.set(life);
            let weak = Rc::downgrade(&connection);
            tokio::task::spawn_local(keep_stderr_tail(weak.clone(), stderr));
            if content_length {
                tokio::task::spawn_local(read_headed(weak, Box::new(stdout), target.max_response));
            } else {
                tokio::task::spawn_local(read_answers(weak, Box::new(stdout), target.max_response));
            }
            return Ok(connection);
        }
        if let StreamAddr::Ws { .. } = target.addr {
            let (sink, frames) = target.connect_ws().await?.split();
            let connection = new(Writer::Frames(sink));
            tokio::task::spawn_local(read_frames(Rc::downgrade(&connection), frames));
            return Ok(connection);
        }
        let (reader, writer) = target.connect().await?;
        let connection = new(Writer::Lines(writer, Vec::new()));
        tokio::task::spawn_local(read_answers(
            Rc::downgrade(&connection),
            reader,
            target.max_response,
        ));
        Ok(connection)
    }

    /// A connection over any pair of byte streams, speaking NDJSON (`headed`
    /// false) or LSP framing: what fuzzing and tests drive without a
    /// socket. Must run inside a `LocalSet`.
    #[doc(hidden)]
    pub fn over(
        reader: impl AsyncRead + Unpin + 'static,
        writer: impl AsyncWrite + Unpin + 'static,
        headed: bool,
        limit: usize,
    ) -> Rc<Self> {
        let (reader, writer): (Box<dyn AsyncRead + Unpin>, Box<dyn AsyncWrite + Unpin>) =
            (Box::new(reader), Box::new(writer));
        let writer = match headed {
            true => Writer::Headed(writer, Vec::new()),
            false => Writer::Lines(writer, Vec::new()),
        };
        let connection = MuxConnection::new(writer, Default::default());
        let weak = Rc::downgrade(&connection);
        match headed {
            true => tokio::task::spawn_local(read_headed(weak, reader, limit)),
            false => tokio::task::spawn_local(read_answers(weak, reader, limit)),
        };
        connection
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Whether the connection is a child process's stdio.
    pub fn has_child(&self) -> bool {
        self.child.borrow().is_some()
    }

    /// Whether the connection's reader died of a panic: a bug in volley,
    /// which the engine may count as such. Its calls failed as `io`.
    pub fn reader_panicked(&self) -> bool {
        self.reader_panicked.get()
    }

    /// Marks the connection closed, keeping the first reason given.
    fn close_because(&self, reason: String) {
        self.closed.set(true);
        self.closed_because.borrow_mut().get_or_insert(reason);
    }

    /// Why the connection closed, in words, for the calls that fail on it.
    pub(super) fn closed_because(&self) -> String {
        self.closed_because
            .borrow()
            .clone()
            .unwrap_or_else(|| "the connection closed".into())
    }

    /// Notifications for subscription `id` (the result of the call that
    /// opened it) go to `listener` with the subscription's index and the
    /// notification's result, instead
    /// of being counted as unsolicited.
    pub fn watch(&self, id: &str, listener: impl FnOnce() -> Listener) -> usize {
        let mut subscriptions = self.subscriptions.borrow_mut();
        subscriptions.push(id.into());
        self.listener.borrow_mut().get_or_insert_with(listener);
        subscriptions.len() - 1
    }

    pub fn unsolicited(&self) -> u64 {
        self.unsolicited.get()
    }

    /// Sends one request whose calls have the ids `first_id..first_id + calls`
    /// and waits for its answer. A notification-only request (`calls == 0`)
    /// gets no answer and returns an empty reply once written.
    pub async fn exchange(&self, body: Bytes, first_id: u64, calls: u64) -> Result<Reply, TransportError> {
        if self.closed.get() {
            return Err(TransportError::Io(format!(
                "the connection had already closed when this call was made: {}",
                self.closed_because()
            )));
        }
        if let Some(life) = self.life.get() {
            life.calls.fetch_add(calls, std::sync::atomic::Ordering::Relaxed);
        }
        let answer = if calls > 0 {
            let (sender, receiver) = oneshot::channel();
            self.waiting.borrow_mut().insert(
                first_id,
                Waiting {
                    calls,
                    answer: sender,
                },
            );
            Some(receiver)
        } else {
            None
        };
        // Forget the request if this future is dropped (a timeout). Only a
        // registered request: a notification's id is the next request's.
        // (`then`, not `then_some`: a Forget built and dropped at once would
        // remove another request's entry.)
        let _forget = answer.is_some().then(|| Forget {
            connection: self,
            first_id,
        });
        let mut writer = self.writer.lock().await;
        // A write cut off (its call timed out while the socket was full)
        // leaves part of a message on the wire, and the next would be
        // appended to it: the connection is closed instead.
        let torn = TornWrite(self);
        let sent = writer.send(&body).await;
        std::mem::forget(torn);
        drop(writer);
        if let Err(e) = sent {
            let reason = format!("sending the request: {e}");
            self.close_because(reason.clone());
            return Err(TransportError::Io(reason));
        }
        match answer {
            None => Ok(Reply {
                status: 200,
                body: Bytes::new(),
                others: 0,
            }),
            Some(receiver) => match receiver.await {
                Ok(body) => Ok(Reply {
                    status: 200,
                    body,
                    others: 0,
                }),
                Err(_) => Err(TransportError::Io(format!(
                    "the connection was closed before the answer came: {}",
                    self.closed_because()
                ))),
            },
        }
    }
}

impl MuxConnection {
    /// Sends `body` as it is, with nothing waiting on its ids, and returns
    /// the first message that answers no request in flight within `within`,
    /// or `None` when none came (a rightly unanswered notification, or a
    /// server that said nothing). One probe at a time per connection.
    pub async fn probe(&self, body: &[u8], within: Duration) -> Result<Option<Bytes>, TransportError> {
        if self.closed.get() {
            return Err(TransportError::Io(self.closed_because()));
        }
        let (sender, receiver) = oneshot::channel();
        *self.probe.borrow_mut() = Some(sender);
        if let Err(e) = self.writer.lock().await.send(body).await {
            return Err(TransportError::Io(format!("sending the request: {e}")));
        }
        let answer = tokio::time::timeout(within, receiver).await;
        self.probe.borrow_mut().take();
        match answer {
            Ok(Ok(body)) => Ok(Some(body)),
            Err(_) => Ok(None),
            Ok(Err(_)) => Err(TransportError::Io(format!(
                "the connection closed before an answer came: {}",
                self.closed_because()
            ))),
        }
    }
}

/// Closes its connection when dropped: armed for the length of a write,
/// and forgotten once the write is whole.
struct TornWrite<'a>(&'a MuxConnection);

impl Drop for TornWrite<'_> {
    fn drop(&mut self) {
        self.0.close_because(
            "a request's write was cut off part way (its call timed out while the connection would take no more): the connection was closed, so no later message is appended to it"
                .into(),
        );
    }
}

struct Forget<'a> {
    connection: &'a MuxConnection,
    first_id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.connection.waiting.borrow_mut().remove(&self.first_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_write_cut_off_by_its_timeout_closes_the_connection() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                // The peer reads nothing: 64 bytes fit, the rest waits.
                let (ours, mut theirs) = tokio::io::duplex(64);
                let (reader, writer) = tokio::io::split(ours);
                let connection = MuxConnection::over(reader, writer, false, 1 << 20);
                let body = Bytes::from(format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":["{}"]}}"#,
                    "x".repeat(500)
                ));
                let cut = tokio::time::timeout(Duration::from_secs(1), connection.exchange(body, 1, 1)).await;
                assert!(cut.is_err(), "the call timed out in its write");
                assert!(connection.is_closed());
                assert!(connection.closed_because().contains("cut off part way"));
                let next = connection
                    .exchange(Bytes::from_static(br#"{"id":2}"#), 2, 1)
                    .await;
                assert!(next.unwrap_err().to_string().contains("cut off part way"));
                // What reached the peer is the first call's start, and nothing after it.
                let mut got = vec![0; 200];
                let n = tokio::io::AsyncReadExt::read(&mut theirs, &mut got)
                    .await
                    .unwrap();
                assert_eq!(n, 64);
                assert!(got[..n].starts_with(br#"{"jsonrpc":"2.0","id":1"#));
            })
            .await;
    }
}
