//! The built-in server over newline-delimited JSON on TCP and Unix
//! sockets: every line is handled on its own, so with added latency the
//! answers come back in another order than the requests, as a multiplexing
//! client must expect.

use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::chaos::Fault;
use super::handler::Handler;
use super::subscribe::{self, Subscriptions};
use super::{ServeConfig, ServerStats};

/// What every connection of a listener is served with.
#[derive(Clone)]
pub struct Serving {
    pub config: Arc<ServeConfig>,
    pub stats: Arc<ServerStats>,
    pub started: Instant,
    pub stop: CancellationToken,
}

/// A listener for some kind of stream.
pub trait Accept: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;
    fn accept_stream(&self) -> impl Future<Output = io::Result<Self::Stream>> + Send;
}

impl Accept for TcpListener {
    type Stream = TcpStream;
    async fn accept_stream(&self) -> io::Result<TcpStream> {
        let (stream, _) = self.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

#[cfg(unix)]
impl Accept for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept_stream(&self) -> io::Result<tokio::net::UnixStream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// Accepts connections until told to stop, serving each on a task of its
/// own with a seed of its own.
pub fn accept_each<A, F, Fut>(listener: A, serving: Serving, serve: F)
where
    A: Accept,
    F: Fn(A::Stream, Serving, u64) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut seed = serving.config.seed;
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept_stream() => accepted,
                _ = serving.stop.cancelled() => return,
            };
            // Out of descriptors and the like: keep serving the others.
            let Ok(stream) = accepted else { continue };
            seed = seed.wrapping_add(1);
            tokio::spawn(serve(stream, serving.clone(), seed));
        }
    });
}

/// The faults that mean something without HTTP: spoiled bodies, a body
/// cut in half, no answer at all (`None`). HTTP's own (statuses, HTML,
/// transfers) do not apply and the answer goes out as it was.
fn misbehave(fault: Option<Fault>, body: Vec<u8>, serving: &Serving) -> Option<Vec<u8>> {
    let Some(fault) = fault else {
        return Some(body);
    };
    let misbehaved = match fault {
        Fault::Hang => None,
        Fault::Truncated => Some(body[..body.len() / 2].to_vec()),
        other => match other.spoil(&body) {
            Some(spoiled) => Some(spoiled),
            None => return Some(body),
        },
    };
    serving.stats.chaos.count(fault);
    misbehaved
}

/// Handles one request on a task of its own, holding it as configured, and
/// gives the answer (if any) to `send`.
fn answer_later(
    serving: &Serving,
    rng: &Arc<Mutex<SmallRng>>,
    request: Vec<u8>,
    send: impl FnOnce(Vec<u8>) + Send + 'static,
) {
    let (serving, rng) = (serving.clone(), rng.clone());
    tokio::spawn(async move {
        let (answer, fault) = {
            let mut rng = rng.lock().unwrap_or_else(|p| p.into_inner());
            let answer = Handler {
                config: &serving.config,
                stats: &serving.stats,
                started: serving.started,
            }
            .handle(&request, &mut rng);
            (answer, serving.config.chaos.pick(&mut *rng))
        };
        super::hold(answer.hold, &serving.stats).await;
        if let Some(body) = answer.body {
            let Some(body) = misbehave(fault, body, &serving) else {
                return;
            };
            send(body);
        }
    });
}

/// Serves one newline-delimited JSON connection until it closes or stops.
pub async fn serve_connection<S>(stream: S, serving: Serving, seed: u64)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, mut writer) = tokio::io::split(stream);
    let (answers, mut outbox) = mpsc::unbounded_channel::<Vec<u8>>();
    let write = tokio::spawn(async move {
        while let Some(mut answer) = outbox.recv().await {
            answer.push(b'\n');
            // Whatever else is ready goes in the same write.
            while let Ok(mut more) = outbox.try_recv() {
                more.push(b'\n');
                answer.extend_from_slice(&more);
            }
            if writer.write_all(&answer).await.is_err() {
                return;
            }
        }
    });
    let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(seed)));
    let mut subscriptions = Subscriptions::default();
    let send: subscribe::Send = {
        let answers = answers.clone();
        Arc::new(move |message| answers.send(message).is_ok())
    };
    let mut lines = BufReader::new(reader);
    let mut line = Vec::new();
    // A client's line is held to the HTTP body limit: one without its end
    // within it closes the connection, never grows the server's memory.
    let most = super::MAX_REQUEST_BYTES as u64 + 1;
    loop {
        line.clear();
        let mut limited = tokio::io::AsyncReadExt::take(&mut lines, most);
        let read = tokio::select! {
            read = limited.read_until(b'\n', &mut line) => read,
            _ = serving.stop.cancelled() => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) if n as u64 == most && line.last() != Some(&b'\n') => break,
            Ok(_) => {}
        }
        let request = std::mem::take(&mut line);
        if request.iter().all(u8::is_ascii_whitespace) || subscriptions.intercept(&request, &serving, &send) {
            continue;
        }
        let answers = answers.clone();
        answer_later(&serving, &rng, request, move |body| {
            let _ = answers.send(body);
        });
    }
    // Subscriptions hold senders: they end first, so the writer can.
    drop((subscriptions, send, answers));
    let _ = write.await;
}

/// `shutdown` or `exit` when `request` is one of LSP's lifecycle messages.
fn lifecycle_method(request: &[u8]) -> Option<&'static str> {
    let named = |name: &[u8]| request.windows(name.len()).any(|w| w == name);
    if !named(b"\"shutdown\"") && !named(b"\"exit\"") && !named(b"\"initialize\"") {
        return None;
    }
    let message = crate::rpc::wire::Message::parse(request)?;
    match message.method? {
        "\"initialize\"" => Some("initialize"),
        "\"shutdown\"" => Some("shutdown"),
        "\"exit\"" => Some("exit"),
        _ => None,
    }
}

/// LSP's word that a server's work (its indexing) is done (`--ready-after`).
const READY: &[u8] =
    br#"{"jsonrpc":"2.0","method":"$/progress","params":{"token":"volley","value":{"kind":"end"}}}"#;

/// Serves one WebSocket connection: a JSON-RPC message a text frame, each
/// handled on its own so answers may come back in another order.
pub async fn serve_websocket<S>(stream: S, serving: Serving, seed: u64)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    // Messages held to the HTTP body limit too (tungstenite's own is 64 MiB).
    // A read buffer of 4 KiB, tungstenite's before 0.25 (its default is now
    // 128 KiB, allocated up front for every connection).
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(super::MAX_REQUEST_BYTES))
        .max_frame_size(Some(super::MAX_REQUEST_BYTES))
        .read_buffer_size(4 * 1024);
    let (checked, stats) = (serving.config.clone(), serving.stats.clone());
    // The handshake is the WebSocket's one HTTP request: its headers are
    // held to the server's rules there (a JWT), and a refusal is a 401.
    #[allow(clippy::result_large_err)] // tungstenite's own refusal type
    let check = move |request: &tokio_tungstenite::tungstenite::handshake::server::Request, response| {
        let headers = request.headers();
        if let Some(name) = &checked.count_header {
            super::auth::count_header(&checked, &stats, headers.get(name).map(|v| v.as_bytes()));
        }
        let authorization = headers.get("authorization").map(|v| v.as_bytes());
        match super::auth::check(&checked, &stats, authorization) {
            Ok(()) => Ok(response),
            Err(why) => {
                let mut refusal = tokio_tungstenite::tungstenite::handshake::server::ErrorResponse::new(
                    Some(format!("JWT refused: {why}\n")),
                );
                *refusal.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                Err(refusal)
            }
        }
    };
    let accepted = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config)).await;
    let Ok(socket) = accepted else {
        return;
    };
    (serving.stats.connections_served).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (mut sink, mut frames) = socket.split();
    let (answers, mut outbox) = mpsc::unbounded_channel::<Message>();
    let write = tokio::spawn(async move {
        while let Some(message) = outbox.recv().await {
            if sink.send(message).await.is_err() {
                return;
            }
        }
    });
    let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(seed)));
    let mut subscriptions = Subscriptions::default();
    let send: subscribe::Send = {
        let answers = answers.clone();
        Arc::new(move |message: Vec<u8>| {
            let text = String::from_utf8_lossy(&message).into_owned();
            answers.send(Message::Text(text.into())).is_ok()
        })
    };
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = serving.stop.cancelled() => break,
        };
        let request: Vec<u8> = match frame {
            Some(Ok(Message::Text(text))) => Vec::from(bytes::Bytes::from(text)),
            Some(Ok(Message::Binary(data))) => Vec::from(data),
            Some(Ok(Message::Ping(data))) => {
                let _ = answers.send(Message::Pong(data));
                continue;
            }
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
            Some(Ok(_)) => continue,
        };
        if subscriptions.intercept(&request, &serving, &send) {
            continue;
        }
        let answers = answers.clone();
        answer_later(&serving, &rng, request, move |body| {
            let _ = answers.send(Message::Text(String::from_utf8_lossy(&body).into_owned().into()));
        });
    }
    drop((subscriptions, send, answers));
    let _ = write.await;
}

/// How an LSP session ended, for the server's exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LspEnd {
    /// `exit` after `shutdown`: exit status 0, as LSP says.
    Clean,
    /// `exit` without `shutdown`, or input that ended without `exit`: 1.
    Abrupt,
}

/// The largest message taken with LSP's framing, as the HTTP listener's
/// largest request: a client naming a larger one is cut off, not waited for.
const MAX_HEADED_MESSAGE: usize = 16 * 1024 * 1024;

/// Serves one connection with LSP's framing (a `Content-Length` header
/// before each message, both ways) until `exit` or the end of the input.
pub async fn serve_headed<S>(stream: S, serving: Serving, seed: u64) -> LspEnd
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    use tokio::io::AsyncReadExt;

    let mut shutdown = false;
    let mut ending = LspEnd::Abrupt;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (answers, mut outbox) = mpsc::unbounded_channel::<Vec<u8>>();
    let write = tokio::spawn(async move {
        let mut out = Vec::new();
        while let Some(answer) = outbox.recv().await {
            // Whatever else is ready goes in the same write.
            out.clear();
            for answer in std::iter::once(answer).chain(std::iter::from_fn(|| outbox.try_recv().ok())) {
                crate::rpc::wire::write_lsp_message(&mut out, &answer);
            }
            let sent = async {
                writer.write_all(&out).await?;
                writer.flush().await
            };
            if sent.await.is_err() {
                return;
            }
        }
    });
    let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(seed)));
    let mut input: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    'read: loop {
        // Messages are taken from the front; the buffer is compacted once
        // per read, not once per message.
        let mut taken = 0;
        loop {
            let body = match crate::rpc::wire::next_lsp_message_within(&input[taken..], MAX_HEADED_MESSAGE) {
                Ok(Some(body)) => body,
                Ok(None) => break,
                // A stream that cannot be followed (no length, a bad one,
                // or one past the bound) ends the session.
                Err(_) => break 'read,
            };
            let request = input[taken + body.start..taken + body.end].to_vec();
            taken += body.end;
            match lifecycle_method(&request) {
                Some("initialize") => {
                    if let Some(after) = serving.config.ready_after {
                        let answers = answers.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(after).await;
                            let _ = answers.send(READY.to_vec());
                        });
                    }
                }
                Some("shutdown") => shutdown = true,
                Some("exit") => {
                    if shutdown {
                        ending = LspEnd::Clean;
                    }
                    break 'read;
                }
                _ => {}
            }
            let answers = answers.clone();
            answer_later(&serving, &rng, request, move |body| {
                let _ = answers.send(body);
            });
        }
        input.drain(..taken);
        let read = tokio::select! {
            read = reader.read(&mut chunk) => read,
            _ = serving.stop.cancelled() => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => input.extend_from_slice(&chunk[..n]),
        }
    }
    drop(answers);
    let _ = write.await;
    ending
}
