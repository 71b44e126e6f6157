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
pub use child::ChildEnd;

use super::tls::{self, ClientTls, NetStream, ALPN_HTTP1};
use super::{Options, Reply, ServerAnswers, TargetError, TransportError};
use crate::rpc::wire::{self, Message};

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
        content_length: bool,
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
        let ws = url
            .strip_prefix("ws://")
            .map(|rest| (rest, false))
            .or_else(|| url.strip_prefix("wss://").map(|rest| (rest, true)));
        let addr = if let Some((rest, secure)) = ws {
            let authority = rest.split('/').next().unwrap_or("");
            let host = match authority.rsplit_once(':') {
                Some((host, port)) if !port.contains(']') => host,
                _ => authority,
            };
            let authority = if authority == host {
                format!("{authority}:{}", if secure { 443 } else { 80 })
            } else {
                authority.to_string()
            };
            let addrs = super::resolve_host(url, authority.as_str()).await?;
            let tls = secure
                .then(|| ClientTls::new(url, host, &options.tls, ALPN_HTTP1))
                .transpose()?;
            for (name, value) in &options.headers {
                super::check_header(name, value)?;
            }
            StreamAddr::Ws {
                url: url.to_string(),
                addrs,
                tls,
            }
        } else if let Some(path) = url.strip_prefix("unix://") {
            if path.is_empty() {
                return Err(bad("expected unix:///path/to/socket"));
            }
            StreamAddr::Unix(PathBuf::from(path))
        } else {
            let rest = url
                .strip_prefix("tcp://")
                .ok_or_else(|| bad("expected tcp://HOST:PORT"))?;
            let authority = rest.trim_end_matches('/');
            StreamAddr::Tcp(super::resolve_host(url, authority).await?)
        };
        Ok(StreamTarget {
            url: url.to_string(),
            addr,
            max_response,
            server_answers: std::sync::Arc::new(options.server_answers.clone()),
            headers: HandshakeHeaders(options.headers.clone()),
        })
    }

    /// A child process per connection: `content_length` for LSP's framing,
    /// else one JSON message a line (MCP).
    pub fn command(argv: Vec<String>, content_length: bool, options: &Options) -> Self {
        let url = format!("stdio: {}", argv.join(" "));
        StreamTarget {
            url,
            addr: StreamAddr::Stdio { argv, content_length },
            max_response: options.max_response,
            server_answers: std::sync::Arc::new(options.server_answers.clone()),
            headers: HandshakeHeaders::default(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
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
        let config = WebSocketConfig {
            max_message_size: Some(self.max_response),
            ..WebSocketConfig::default()
        };
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| self.connect_error(std::io::Error::other(e)))?;
        for (name, value) in &self.headers.0 {
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
                tokio_tungstenite::tungstenite::Error::Io(e) => self.connect_error(tls::explain(e)),
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
                framed.extend_from_slice(b"Content-Length: ");
                framed.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
                framed.extend_from_slice(b"\r\n\r\n");
                framed.extend_from_slice(body);
                w.write_all(framed).await.map_err(|e| e.to_string())?;
                w.flush().await.map_err(|e| e.to_string())
            }
            Writer::Frames(sink) => {
                let text = String::from_utf8_lossy(body).into_owned();
                sink.send(Frame::Text(text)).await.map_err(|e| e.to_string())
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
    /// Messages that answered no request in flight.
    unsolicited: Cell<u64>,
    /// Ids of the subscriptions opened on this connection.
    subscriptions: RefCell<Vec<Box<str>>>,
    /// Hears of each notification of a subscription, by its index above.
    listener: RefCell<Option<Listener>>,
    server_answers: std::sync::Arc<ServerAnswers>,
}

impl MuxConnection {
    /// Opens a connection and starts its reader. Must run inside a `LocalSet`.
    pub async fn open(target: &StreamTarget) -> Result<Rc<Self>, TransportError> {
        let new = |writer| {
            Rc::new(MuxConnection {
                writer: tokio::sync::Mutex::new(writer),
                child: RefCell::new(None),
                stderr_tail: RefCell::new(Vec::new()),
                waiting: RefCell::new(BTreeMap::new()),
                closed: Cell::new(false),
                unsolicited: Cell::new(0),
                subscriptions: RefCell::new(Vec::new()),
                listener: RefCell::new(None),
                server_answers: target.server_answers.clone(),
            })
        };
        if let StreamAddr::Stdio { content_length, .. } = target.addr {
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

    pub fn is_closed(&self) -> bool {
        self.closed.get()
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
            return Err(TransportError::Io("the connection is closed".into()));
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
        if let Err(e) = self.writer.lock().await.send(&body).await {
            self.closed.set(true);
            return Err(TransportError::Io(format!("sending the request: {e}")));
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
                Err(_) => Err(TransportError::Io(
                    "the connection closed before the answer came".into(),
                )),
            },
        }
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

/// Reads answers line by line and hands each to the request it answers.
async fn read_answers(
    connection: std::rc::Weak<MuxConnection>,
    mut reader: Box<dyn AsyncRead + Unpin>,
    limit: usize,
) {
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut scanned = 0;
    loop {
        while let Some(at) = input[scanned..].iter().position(|b| *b == b'\n') {
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
            // An answer larger than the limit: drop the connection rather
            // than hold it; the requests waiting on it fail as `io`.
            break;
        }
        input.reserve(16 * 1024);
        match reader.read_buf(&mut input).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    hang_up(&connection);
}

/// Reads WebSocket frames and hands each to the request it answers.
async fn read_frames(
    connection: std::rc::Weak<MuxConnection>,
    mut frames: SplitStream<WebSocketStream<NetStream>>,
) {
    while let Some(frame) = frames.next().await {
        let Some(connection) = connection.upgrade() else {
            return;
        };
        match frame {
            Ok(Frame::Text(text)) => deliver(&connection, Bytes::from(text)),
            Ok(Frame::Binary(data)) => deliver(&connection, Bytes::from(data)),
            Ok(Frame::Close(_)) | Err(_) => break,
            // Pings: tungstenite queues the pong and sends it as the next
            // read begins, so an idle socket answers too (tested).
            Ok(_) => {}
        }
    }
    hang_up(&connection);
}

/// Reads messages framed by `Content-Length` headers (LSP).
async fn read_headed(
    connection: std::rc::Weak<MuxConnection>,
    mut reader: Box<dyn AsyncRead + Unpin>,
    limit: usize,
) {
    let mut input = BytesMut::with_capacity(64 * 1024);
    'read: loop {
        // Every complete message in the buffer first.
        loop {
            let body = match wire::next_headed(&input) {
                Ok(Some(body)) => body,
                Ok(None) if input.len() > limit => break 'read,
                Ok(None) => break,
                Err(_) => break 'read,
            };
            let message = input.split_to(body.end).freeze().slice(body.start..);
            let Some(connection) = connection.upgrade() else {
                return;
            };
            deliver(&connection, message);
        }
        input.reserve(16 * 1024);
        match reader.read_buf(&mut input).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    hang_up(&connection);
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
    let Ok(message) = serde_json::from_slice::<Message>(message) else {
        return false;
    };
    let Some(method) = message.method else {
        return false;
    };
    if let Some(id) = message.id {
        let result = connection
            .server_answers
            .result_for(method.get().trim_matches('"'));
        let reply = format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{}}}"#, id.get());
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
        .and_then(|p| serde_json::from_str::<Params>(p.get()).ok())
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

/// Marks a connection whose reader ended as closed; the requests waiting
/// on it fail as `io`.
fn hang_up(connection: &std::rc::Weak<MuxConnection>) {
    if let Some(connection) = connection.upgrade() {
        connection.closed.set(true);
        connection.waiting.borrow_mut().clear();
    }
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
        None => connection.unsolicited.set(connection.unsolicited.get() + 1),
    }
}

/// The id of an answer, or of the first entry of a batch answer that has one.
fn answer_id(line: &[u8]) -> Option<u64> {
    let id_of = |raw: &RawValue| -> Option<u64> {
        let message: Message = serde_json::from_str(raw.get()).ok()?;
        let text = message.id?.get();
        text.trim_matches('"').parse().ok()
    };
    match wire::first_significant_byte(line)? {
        b'[' => {
            let entries: Vec<&RawValue> = serde_json::from_slice(line).ok()?;
            entries.into_iter().find_map(id_of)
        }
        _ => id_of(serde_json::from_slice::<&RawValue>(line).ok()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
