//! Multiplexed JSON-RPC: newline-delimited JSON over TCP (`tcp://`) or a
//! Unix socket (`unix:///path`, the framing of geth's IPC), one message a
//! frame over WebSocket (`ws://`, `wss://`), or a child process's stdio
//! (NDJSON or LSP's `Content-Length`; see `child`). Many calls are in flight on one
//! connection; answers come in any order and are matched by id, and
//! messages that answer nothing (subscription notifications) are counted,
//! never taken for answers.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::WebSocketStream;

mod child;

use child::keep_stderr_tail;
pub use child::{hurry_shutdowns, ChildEnd};

use super::tls::{self, ClientTls};
use super::{Options, Reply, Scheme, ServerAnswers, TargetError, TransportError};
use crate::rpc::wire::{self, Framing, Message};
use crate::tls::{NetStream, ALPN_HTTP1};

#[derive(Clone, Debug)]
pub enum StreamAddr {
    Tcp(Vec<SocketAddr>),
    Unix(PathBuf),
    /// A WebSocket URL and the addresses it resolves to; TLS for `wss://`.
    Ws {
        url: String,
        addrs: Vec<SocketAddr>,
        tls: Option<ClientTls>,
    },
    /// A child process, spoken to over its stdin and stdout.
    Stdio {
        argv: Vec<String>,
        framing: Framing,
    },
}

#[derive(Clone, Debug)]
pub struct StreamTarget {
    url: String,
    pub(super) addr: StreamAddr,
    max_response: usize,
    server_answers: std::sync::Arc<ServerAnswers>,
    /// Sent with a WebSocket's opening handshake (an API key, say).
    headers: HandshakeHeaders,
    /// The process ids of the children started so far (stdio targets),
    /// for whoever watches what the server spends.
    children: std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
}

/// Header values may be secrets: `Debug` shows the names only.
#[derive(Clone, Default)]
struct HandshakeHeaders(Vec<(String, String)>);

impl std::fmt::Debug for HandshakeHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| name))
            .finish()
    }
}

impl StreamTarget {
    pub(super) async fn resolve(url: &str, options: &Options) -> Result<Self, TargetError> {
        let max_response = options.max_response;
        let bad = |reason: &str| TargetError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let scheme = Scheme::of(url).ok_or_else(|| bad("expected tcp://, unix://, ws:// or wss://"))?;
        // After `://`: the scheme itself is known.
        let rest = url.split_once("://").map_or("", |(_, rest)| rest);
        let addr = match scheme {
            Scheme::Ws | Scheme::Wss => {
                let secure = scheme.is_tls();
                let authority = rest.split(['/', '?']).next().unwrap_or("");
                let (host, port) = super::host_and_port(url, authority, Some(if secure { 443 } else { 80 }))?;
                let lookup_host = host.trim_start_matches('[').trim_end_matches(']');
                let addrs = super::resolve_host(url, (lookup_host, port)).await?;
                let tls = secure
                    .then(|| ClientTls::new(url, host, &options.tls, ALPN_HTTP1))
                    .transpose()?;
                for (name, value) in &options.headers {
                    super::header_for_target(name, value)?;
                }
                StreamAddr::Ws {
                    url: url.to_string(),
                    addrs,
                    tls,
                }
            }
            Scheme::Unix if rest.is_empty() => return Err(bad("expected unix:///path/to/socket")),
            Scheme::Unix => StreamAddr::Unix(PathBuf::from(rest)),
            Scheme::Tcp => {
                let (host, port) = super::host_and_port(url, rest.trim_end_matches('/'), None)?;
                let lookup_host = host.trim_start_matches('[').trim_end_matches(']');
                StreamAddr::Tcp(super::resolve_host(url, (lookup_host, port)).await?)
            }
            Scheme::Http | Scheme::Https => return Err(bad("expected tcp://HOST:PORT")),
        };
        Ok(StreamTarget {
            url: url.to_string(),
            addr,
            max_response,
            server_answers: std::sync::Arc::new(options.server_answers.clone()),
            headers: HandshakeHeaders(options.headers.clone()),
            children: Default::default(),
        })
    }

    /// A child process per connection: LSP's framing (`Content-Length`),
    /// or one JSON message a line (MCP).
    pub fn command(argv: Vec<String>, framing: Framing, options: &Options) -> Self {
        let url = format!("stdio: {}", argv.join(" "));
        StreamTarget {
            url,
            addr: StreamAddr::Stdio { argv, framing },
            max_response: options.max_response,
            server_answers: std::sync::Arc::new(options.server_answers.clone()),
            headers: HandshakeHeaders::default(),
            children: Default::default(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The children started so far, by process id (a stdio target's).
    pub fn children(&self) -> Vec<u32> {
        self.children.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether connections are child processes.
    pub fn is_command(&self) -> bool {
        matches!(self.addr, StreamAddr::Stdio { .. })
    }

    fn connect_error(&self, source: std::io::Error) -> TransportError {
        TransportError::Connect {
            url: self.url.clone(),
            reason: source,
        }
    }

    /// Returns what TLS agreed on, for `wss://`.
    pub(super) async fn check_reachable(&self) -> Result<Option<String>, TransportError> {
        match &self.addr {
            StreamAddr::Ws { .. } => Ok(tls::describe(self.connect_ws().await?.get_ref())),
            StreamAddr::Stdio { .. } => self.spawn().map(|_| None),
            _ => self.connect().await.map(|_| None),
        }
    }

    async fn connect_ws(&self) -> Result<WebSocketStream<NetStream>, TransportError> {
        let StreamAddr::Ws { url, addrs, tls } = &self.addr else {
            unreachable!("a WebSocket target")
        };
        let stream = tls::connect(addrs, tls.as_ref())
            .await
            .map_err(|e| self.connect_error(e))?;
        // A frame, like a message, is held to the answer limit: a length
        // a server names past it ends the connection instead of being read.
        // A read buffer of 4 KiB, tungstenite's before 0.25 (its default is
        // now 128 KiB, allocated up front for every connection).
        let config = WebSocketConfig::default()
            .max_message_size(Some(self.max_response))
            .max_frame_size(Some(self.max_response))
            .read_buffer_size(4 * 1024);
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| self.connect_error(std::io::Error::other(e)))?;
        let wanted = crate::transport::headers::request_headers(
            &self.headers.0,
            crate::transport::headers::Request::Upgrade,
        );
        for (name, value) in wanted {
            // Checked when the scenario was read; a bad one is skipped, never shown.
            if let (Ok(name), Ok(value)) = (
                hyper::header::HeaderName::from_bytes(name.as_bytes()),
                hyper::header::HeaderValue::from_str(value),
            ) {
                request.headers_mut().insert(name, value);
            }
        }
        let (socket, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
            .await
            .map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Io(e) => self.connect_error(tls::explain(e, "ws://")),
                other => self.connect_error(std::io::Error::other(other)),
            })?;
        Ok(socket)
    }

    async fn connect(
        &self,
    ) -> Result<(Box<dyn AsyncRead + Unpin>, Box<dyn AsyncWrite + Unpin>), TransportError> {
        match &self.addr {
            StreamAddr::Ws { .. } | StreamAddr::Stdio { .. } => unreachable!("connected elsewhere"),
            StreamAddr::Tcp(addrs) => {
                let stream = tokio::net::TcpStream::connect(&addrs[..])
                    .await
                    .map_err(|e| self.connect_error(e))?;
                stream.set_nodelay(true).map_err(|e| self.connect_error(e))?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read), Box::new(write)))
            }
            #[cfg(unix)]
            StreamAddr::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(|e| self.connect_error(e))?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read), Box::new(write)))
            }
            #[cfg(not(unix))]
            StreamAddr::Unix(_) => {
                Err(self.connect_error(std::io::Error::other("Unix sockets need a Unix system")))
            }
        }
    }
}

/// A request waiting for its answer: its consecutive ids and where the
/// answer goes.
struct Waiting {
    calls: u64,
    answer: oneshot::Sender<Bytes>,
}

/// Where requests are written: a byte stream (one line each) or a
/// WebSocket (one text frame each). Byte streams frame each message in a
/// reused buffer and write it at once: two writes would be two packets on
/// a socket without Nagle, and two system calls on a pipe.
enum Writer {
    Lines(Box<dyn AsyncWrite + Unpin>, Vec<u8>),
    /// LSP's framing: a `Content-Length` header before each message.
    Headed(Box<dyn AsyncWrite + Unpin>, Vec<u8>),
    Frames(SplitSink<WebSocketStream<NetStream>, Frame>),
    /// Closed on purpose (a child's stdin, at the end of a run).
    Closed,
}

impl Writer {
    async fn send(&mut self, body: &[u8]) -> Result<(), String> {
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

/// Hears of a subscription's notification, by the subscription's index.
pub type Listener = Box<dyn FnMut(usize)>;

/// One multiplexed connection, shared by the callers on one engine thread.
pub struct MuxConnection {
    writer: tokio::sync::Mutex<Writer>,
    /// The child process of a stdio target, killed and reaped on drop.
    child: RefCell<Option<tokio::process::Child>>,
    /// The last bytes the child wrote to stderr.
    stderr_tail: RefCell<Vec<u8>>,
    /// First id of each request in flight.
    waiting: RefCell<BTreeMap<u64, Waiting>>,
    closed: Cell<bool>,
    /// Why the connection closed, for the calls that fail with it.
    closed_because: RefCell<Option<String>>,
    /// Its reader died of a panic (a bug in volley, never a server's doing).
    reader_panicked: Cell<bool>,
    /// Messages that answered no request in flight.
    unsolicited: Cell<u64>,
    /// While set, the next such message goes here instead: a probe's
    /// answer, which may carry no id to route it by (`volley check`).
    probe: RefCell<Option<oneshot::Sender<Bytes>>>,
    /// Ids of the subscriptions opened on this connection.
    subscriptions: RefCell<Vec<Box<str>>>,
    /// Hears of each notification of a subscription, by its index above.
    listener: RefCell<Option<Listener>>,
    server_answers: std::sync::Arc<ServerAnswers>,
}

impl MuxConnection {
    fn new(writer: Writer, server_answers: std::sync::Arc<ServerAnswers>) -> Rc<Self> {
        Rc::new(MuxConnection {
            writer: tokio::sync::Mutex::new(writer),
            child: RefCell::new(None),
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
            let mut child = target.spawn()?;
            let stdin = child.stdin.take().expect("piped");
            let stdout = child.stdout.take().expect("piped");
            let stderr = child.stderr.take().expect("piped");
            let writer = if content_length {
                Writer::Headed(Box::new(stdin), Vec::new())
            } else {
                Writer::Lines(Box::new(stdin), Vec::new())
            };
            let connection = new(writer);
            *connection.child.borrow_mut() = Some(child);
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
    fn closed_because(&self) -> String {
        self.closed_because
            .borrow()
            .clone()
            .unwrap_or_else(|| "the connection closed".into())
    }

    /// Notifications for subscription `id` (the result of the call that
    /// opened it) go to `listener` with the subscription's index, instead
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

/// Hangs the connection up however its reader ends: at the end of the
/// stream, past a bound, or in a panic (a bug), so that no call waits on a
/// reader that is gone and the engine reopens the connection.
struct HangUpOnExit {
    connection: std::rc::Weak<MuxConnection>,
    /// Why the reader stopped, when it chose to.
    reason: Option<String>,
}

impl HangUpOnExit {
    fn new(connection: &std::rc::Weak<MuxConnection>) -> Self {
        HangUpOnExit {
            connection: connection.clone(),
            reason: None,
        }
    }
}

impl Drop for HangUpOnExit {
    fn drop(&mut self) {
        let panicked = std::thread::panicking();
        let reason = self.reason.take().unwrap_or_else(|| {
            let why = if panicked {
                "volley's reader of this connection panicked (a bug in volley; the panic is on stderr)"
            } else {
                "volley stopped reading this connection"
            };
            why.to_string()
        });
        hang_up(&self.connection, reason, panicked);
    }
}

/// Why a byte stream's reader stopped, from what its last read gave.
fn read_ended(read: std::io::Result<usize>) -> Option<String> {
    match read {
        Ok(0) => Some("the server closed the connection".into()),
        Ok(_) => None,
        Err(e) => Some(format!("reading from the server: {e}")),
    }
}

/// Reads answers line by line and hands each to the request it answers.
async fn read_answers(
    connection: std::rc::Weak<MuxConnection>,
    mut reader: Box<dyn AsyncRead + Unpin>,
    limit: usize,
) {
    let mut exit = HangUpOnExit::new(&connection);
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut scanned = 0;
    loop {
        while let Some(at) = input[scanned..].iter().position(|b| *b == b'\n') {
            if scanned + at > limit {
                // Whole, but too large: it came in one read, past the check below.
                exit.reason = Some(format!("a message larger than the limit of {limit} bytes"));
                return;
            }
            let line = input.split_to(scanned + at + 1).freeze();
            scanned = 0;
            let Some(connection) = connection.upgrade() else {
                return;
            };
            let line = line.slice(..line.len() - 1);
            if wire::first_significant_byte(&line).is_some() {
                deliver(&connection, line);
            }
        }
        scanned = input.len();
        if input.len() > limit {
            // An answer larger than the limit: the connection is dropped
            // rather than held; the requests waiting on it fail as `io`.
            exit.reason = Some(format!(
                "a message larger than the limit of {limit} bytes (no end of line within it)"
            ));
            return;
        }
        input.reserve(16 * 1024);
        if let Some(reason) = read_ended(reader.read_buf(&mut input).await) {
            exit.reason = Some(reason);
            return;
        }
    }
}

/// Reads WebSocket frames and hands each to the request it answers.
async fn read_frames(
    connection: std::rc::Weak<MuxConnection>,
    mut frames: SplitStream<WebSocketStream<NetStream>>,
) {
    let mut exit = HangUpOnExit::new(&connection);
    exit.reason = Some("the server closed the connection".into());
    while let Some(frame) = frames.next().await {
        let Some(connection) = connection.upgrade() else {
            return;
        };
        match frame {
            Ok(Frame::Text(text)) => deliver(&connection, Bytes::from(text)),
            Ok(Frame::Binary(data)) => deliver(&connection, data),
            Ok(Frame::Close(_)) => {
                exit.reason = Some("the server closed the WebSocket".into());
                return;
            }
            // Past the size limit among them: tungstenite checks a frame's
            // length against it before reading the frame.
            Err(e) => {
                exit.reason = Some(format!("the WebSocket failed: {e}"));
                return;
            }
            // Pings: tungstenite queues the pong and sends it as the next
            // read begins, so an idle socket answers too (tested).
            Ok(_) => {}
        }
    }
}

/// Reads messages framed by `Content-Length` headers (LSP). Every size the
/// server names is checked by `wire::next_lsp_message_within` before it is used.
async fn read_headed(
    connection: std::rc::Weak<MuxConnection>,
    mut reader: Box<dyn AsyncRead + Unpin>,
    limit: usize,
) {
    let mut exit = HangUpOnExit::new(&connection);
    let mut input = BytesMut::with_capacity(64 * 1024);
    loop {
        // Every complete message in the buffer first.
        loop {
            let body = match wire::next_lsp_message_within(&input, limit) {
                Ok(Some(body)) => body,
                Ok(None) => break,
                Err(e) => {
                    exit.reason = Some(format!("the server sent {e}"));
                    return;
                }
            };
            let message = input.split_to(body.end).freeze().slice(body.start..);
            let Some(connection) = connection.upgrade() else {
                return;
            };
            deliver(&connection, message);
        }
        input.reserve(16 * 1024);
        if let Some(reason) = read_ended(reader.read_buf(&mut input).await) {
            exit.reason = Some(reason);
            return;
        }
    }
}

/// A message from the server itself (it has a method): a request to the
/// client (LSP's `workspace/configuration`, `window/workDoneProgress/create`),
/// answered as the scenario says (null by default) so the server does not
/// stall; or a notification of a subscription opened on this connection
/// (geth's `eth_subscription`, and the same shape elsewhere), which goes to
/// the listener. False for anything else (counted as unsolicited).
fn from_the_server(connection: &Rc<MuxConnection>, message: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        subscription: &'a RawValue,
    }
    let Some(message) = Message::parse(message) else {
        return false;
    };
    let Some(method) = message.method else {
        return false;
    };
    if let Some(id) = message.id {
        let result = connection.server_answers.result_for(method.trim_matches('"'));
        let reply = format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{}}}"#, id);
        let connection = connection.clone();
        tokio::task::spawn_local(async move {
            let _ = connection.writer.lock().await.send(reply.as_bytes()).await;
        });
        return true;
    }
    let subscriptions = connection.subscriptions.borrow();
    if subscriptions.is_empty() {
        return false;
    }
    let Some(params) = message
        .params
        .and_then(|p| serde_json::from_str::<Params>(p).ok())
    else {
        return false;
    };
    let id = params.subscription.get().trim_matches('"');
    let Some(index) = subscriptions.iter().position(|s| &**s == id) else {
        return false;
    };
    if let Some(listener) = connection.listener.borrow_mut().as_mut() {
        listener(index);
    }
    true
}

/// Marks a connection whose reader ended as closed, saying why: the calls
/// waiting on it fail as `io`, and its writer is closed (a child sees the
/// end of its input and may exit). Borrows are tried, never forced: this
/// may run while a panic unwinds.
fn hang_up(connection: &std::rc::Weak<MuxConnection>, reason: String, panicked: bool) {
    let Some(connection) = connection.upgrade() else {
        return;
    };
    connection.closed.set(true);
    connection
        .reader_panicked
        .set(connection.reader_panicked.get() || panicked);
    if let Ok(mut because) = connection.closed_because.try_borrow_mut() {
        because.get_or_insert(reason);
    }
    // Dropped outside the borrow: each drop wakes a caller.
    let waiting = connection
        .waiting
        .try_borrow_mut()
        .map(|mut waiting| std::mem::take(&mut *waiting));
    drop(waiting);
    let probe = connection.probe.try_borrow_mut().map(|mut probe| probe.take());
    drop(probe);
    if let Ok(mut writer) = connection.writer.try_lock() {
        *writer = Writer::Closed;
    };
}

/// Finds the request an answer belongs to by its (first) id.
fn deliver(connection: &Rc<MuxConnection>, line: Bytes) {
    // A message with a method is the server's own; one that is not a
    // request or a subscription's is counted below as unsolicited.
    if line.windows(8).any(|w| w == b"\"method\"") && from_the_server(connection, &line) {
        return;
    }
    let id = answer_id(&line);
    let mut waiting = connection.waiting.borrow_mut();
    let owner = id.and_then(|id| {
        waiting
            .range(..=id)
            .next_back()
            .filter(|(first, w)| id < *first + w.calls)
            .map(|(first, _)| *first)
    });
    match owner.and_then(|first| waiting.remove(&first)) {
        Some(request) => {
            let _ = request.answer.send(line);
        }
        None => match connection.probe.borrow_mut().take() {
            Some(probe) => {
                let _ = probe.send(line);
            }
            None => connection.unsolicited.set(connection.unsolicited.get() + 1),
        },
    }
}

/// The id of an answer, or of the first entry of a batch answer that has one.
fn answer_id(line: &[u8]) -> Option<u64> {
    let id_of = |text: &[u8]| -> Option<u64> {
        let message = Message::parse(text)?;
        wire::id_number(message.id?).map(|(id, _)| id)
    };
    match wire::first_significant_byte(line)? {
        b'[' => {
            let entries: Vec<&RawValue> = serde_json::from_slice(line).ok()?;
            entries
                .into_iter()
                .find_map(|entry| id_of(entry.get().as_bytes()))
        }
        _ => id_of(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream whose first read panics, as a bug in a reader would.
    struct PanicsOnRead;

    impl AsyncRead for PanicsOnRead {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            panic!("a bug in a reader (on purpose, in a test)")
        }
    }

    #[tokio::test]
    async fn a_reader_that_panics_hangs_its_connection_up_and_fails_its_calls() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let (answer, in_flight) = oneshot::channel();
                connection
                    .waiting
                    .borrow_mut()
                    .insert(1, Waiting { calls: 1, answer });
                let weak = Rc::downgrade(&connection);
                let reader = tokio::task::spawn_local(read_answers(weak, Box::new(PanicsOnRead), 1024));
                assert!(reader.await.unwrap_err().is_panic());
                assert!(connection.is_closed() && connection.reader_panicked());
                assert!(in_flight.await.is_err(), "the call in flight fails");
                let later = connection.exchange(Bytes::from_static(b"{}"), 2, 1).await;
                let error = later.unwrap_err().to_string();
                assert!(error.contains("panicked"), "{error}");
            })
            .await;
    }

    #[tokio::test]
    async fn a_reader_past_a_bound_says_which() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let lsp: &[u8] = b"Content-Length: 18446744073709551615\r\n\r\n";
                read_headed(Rc::downgrade(&connection), Box::new(lsp), 1024).await;
                let error = connection.closed_because();
                assert!(
                    error.contains("18446744073709551615") && error.contains("1024"),
                    "{error}"
                );
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let line: &[u8] = &[b'x'; 2000];
                read_answers(Rc::downgrade(&connection), Box::new(line), 1024).await;
                let error = connection.closed_because();
                assert!(error.contains("larger than the limit of 1024"), "{error}");
                // Whole, ended by its newline, and read at once: still too large.
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let mut line = br#"{"jsonrpc":"2.0","id":1,"result":""#.to_vec();
                line.extend([b'x'; 2000]);
                line.extend(b"\"}\n");
                let (answer, in_flight) = oneshot::channel();
                connection
                    .waiting
                    .borrow_mut()
                    .insert(1, Waiting { calls: 1, answer });
                let line: &'static [u8] = line.leak();
                read_answers(Rc::downgrade(&connection), Box::new(line), 1024).await;
                assert!(in_flight.await.is_err(), "never delivered");
                let error = connection.closed_because();
                assert!(error.contains("larger than the limit of 1024"), "{error}");
            })
            .await;
    }

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

    #[test]
    fn answers_are_found_by_any_id_of_their_request() {
        assert_eq!(answer_id(br#"{"jsonrpc":"2.0","result":1,"id":7}"#), Some(7));
        assert_eq!(
            answer_id(
                br#"[{"jsonrpc":"2.0","error":{"code":1,"message":""},"id":null},{"id":"9","result":1}]"#
            ),
            Some(9)
        );
        assert_eq!(
            answer_id(br#"{"jsonrpc":"2.0","method":"eth_subscription","params":{}}"#),
            None
        );
        assert_eq!(answer_id(b"garbage"), None);
    }
}
