//! The built-in JSON-RPC 2.0 server: a faithful target for trying volley and
//! for its own tests, with added latency and injected errors that it counts.
//! HTTP/1.1 and cleartext HTTP/2 on the main listener; newline-delimited
//! JSON and WebSocket on listeners of their own.

mod auth;
mod body;
mod capacity;
mod chain;
mod chaos;
mod handler;
mod latency;
mod listeners;
mod methods;
mod reply;
mod stand_in;
mod stream;
mod subscribe;
mod timer;
pub mod tls;

pub use capacity::Capacity;
pub use chain::{MAX_BLOCK_TRANSACTIONS, MAX_RECEIPTS_AFTER};
pub use chaos::{Chaos, ChaosCounts, Fault};
pub use handler::INJECTED_ERROR;
pub use latency::Latency;
pub use stream::LspEnd;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::tls::NetStream;
use handler::Handler;
use reply::{event_stream, json, mcp_session, misbehave, no_answer, plain};

/// Requests larger than this are refused with 413.
pub(crate) const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub latency: Latency,
    /// Share of calls answered with an injected error (-32000).
    pub error_rate: f64,
    pub seed: u64,
    /// Answer batches in a random order, as the spec allows.
    pub shuffle_batches: bool,
    pub threads: usize,
    /// Faults to answer with on purpose (on the other listeners, those that
    /// mean something without HTTP).
    pub chaos: Chaos,
    /// Also serve newline-delimited JSON on this TCP address.
    pub tcp: Option<SocketAddr>,
    /// Also serve newline-delimited JSON on this Unix socket.
    pub unix: Option<std::path::PathBuf>,
    /// Also serve WebSocket on this address.
    pub ws: Option<SocketAddr>,
    /// TLS on the main listener (HTTP/2 or HTTP/1.1 by ALPN) and the
    /// WebSocket one.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// MCP's streamable HTTP: `initialize` opens a session whose id every
    /// later request must carry, answers come as event streams to clients
    /// that accept them (with a log message before each), notifications
    /// get 202.
    pub mcp: bool,
    /// How often a `newHeads` subscription brings a notification.
    pub heads_every: Duration,
    /// Over stdio with LSP's framing: this long after `initialize` is
    /// answered, a `$/progress` notification whose `value.kind` is `end`
    /// (as a language server says its indexing is done).
    pub ready_after: Option<Duration>,
    /// Calls a second past which answers queue (`--capacity`).
    pub capacity: Option<Arc<Capacity>>,
    /// Methods answered with a result of their own (`--differ`), to test
    /// the comparison of targets' answers.
    pub differ: Vec<String>,
    /// Counts ids seen twice (`--count-duplicate-ids`): every id is kept,
    /// so it costs memory and a lock per call; for checking shards' ids.
    pub count_duplicate_ids: bool,
    /// Transactions each `eth_getBlockByNumber` block lists (at most
    /// `MAX_BLOCK_TRANSACTIONS`), their hashes handed out for receipts.
    pub block_transactions: u64,
    /// Asks of a handed-out hash answered `null` before its receipt comes.
    pub receipts_after: u32,
    /// Every HTTP request (every WebSocket handshake) must carry a JWT
    /// signed with this, its `iat` within 60 s: an Engine API's rule.
    pub jwt_secret: Option<Arc<crate::jwt::JwtSecret>>,
    /// A header whose values are counted (lowercase), each distinct value
    /// kept.
    pub count_header: Option<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8545)),
            latency: Latency::None,
            error_rate: 0.0,
            seed: 0,
            shuffle_batches: false,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            chaos: Chaos::default(),
            tcp: None,
            unix: None,
            ws: None,
            tls: None,
            mcp: false,
            heads_every: Duration::from_secs(1),
            ready_after: None,
            count_duplicate_ids: false,
            capacity: None,
            differ: Vec::new(),
            block_transactions: 0,
            receipts_after: 0,
            jwt_secret: None,
            count_header: None,
        }
    }
}

/// What the server counted, so tests can hold volley's counts against it.
#[derive(Debug, Default, Serialize)]
pub struct ServerStats {
    /// HTTP requests received.
    pub requests: AtomicU64,
    pub batches: AtomicU64,
    /// Requests with an id (answered).
    pub calls: AtomicU64,
    pub notifications: AtomicU64,
    /// Every error object sent, injected or not.
    pub error_answers: AtomicU64,
    pub injected_errors: AtomicU64,
    /// Hold times really applied (µs): a timer wakes late, never early, so
    /// these are what a client's latency should be held against.
    #[serde(skip)]
    pub holds: Mutex<Option<hdrhistogram::Histogram<u64>>>,
    /// Faults applied, one by one.
    #[serde(skip)]
    pub chaos: ChaosCounts,
    /// MCP sessions opened by `initialize`.
    pub mcp_sessions: AtomicU64,
    /// Requests refused for want of a valid session id.
    pub mcp_refused: AtomicU64,
    /// Answers sent as event streams.
    pub event_streams: AtomicU64,
    /// `eth_subscribe` subscriptions opened, and notifications sent.
    pub subscriptions: AtomicU64,
    pub subscription_notifications: AtomicU64,
    #[serde(skip)]
    sessions: Mutex<std::collections::HashSet<String>>,
    /// Calls whose id an earlier call had (with `count_duplicate_ids`).
    pub duplicate_ids: AtomicU64,
    #[serde(skip)]
    ids: Mutex<std::collections::HashSet<Box<str>>>,
    /// Distinct transaction hashes handed out (in blocks, or sent); one
    /// forgotten (past `chain`'s bound) and handed out again counts again.
    pub transactions_handed_out: AtomicU64,
    /// Receipt asks of a hash handed out; those answered with a receipt;
    /// asks of a hash never handed out.
    pub receipts_asked: AtomicU64,
    pub receipts_found: AtomicU64,
    pub receipts_unknown: AtomicU64,
    /// MCP `resources/read` calls answered with a resource.
    pub resources_read: AtomicU64,
    /// Connections that carried a request (HTTP), WebSocket handshakes
    /// accepted.
    pub connections_served: AtomicU64,
    /// Requests (handshakes) whose JWT was taken, and those refused.
    pub jwt_accepted: AtomicU64,
    pub jwt_refused: AtomicU64,
    /// The `iat`s of the JWTs taken.
    #[serde(skip)]
    pub jwt_iats: auth::Distinct,
    /// Requests (handshakes) carrying the counted header, and its values.
    pub header_seen: AtomicU64,
    #[serde(skip)]
    pub header_values: auth::Distinct,
    #[serde(skip)]
    ledger: chain::Ledger,
}

impl ServerStats {
    /// The median hold really applied, if any request was held.
    pub fn median_hold(&self) -> Option<std::time::Duration> {
        let holds = self.holds.lock().unwrap_or_else(|p| p.into_inner());
        let holds = holds.as_ref().filter(|h| !h.is_empty())?;
        Some(std::time::Duration::from_micros(holds.value_at_quantile(0.5)))
    }

    /// Notes a call's id (its JSON text); counts it when seen before.
    pub fn note_id(&self, id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if !ids.insert(id.into()) {
            self.duplicate_ids.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// A server running on its own threads; dropping it stops the server.
pub struct ServerHandle {
    pub addr: SocketAddr,
    /// The newline-delimited JSON listener, if asked for.
    pub tcp_addr: Option<SocketAddr>,
    pub unix_path: Option<std::path::PathBuf>,
    /// The WebSocket listener, if asked for.
    pub ws_addr: Option<SocketAddr>,
    pub stats: Arc<ServerStats>,
    tls: bool,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Removed when the server stops, so no socket file outlives it.
    #[cfg(unix)]
    socket_file: Option<listeners::SocketFile>,
}

impl ServerHandle {
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// The WebSocket listener's URL, if there is one.
    pub fn ws_url(&self) -> Option<String> {
        let scheme = if self.tls { "wss" } else { "ws" };
        self.ws_addr.map(|addr| format!("{scheme}://{addr}"))
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // Only once nothing listens on it any more.
        #[cfg(unix)]
        drop(self.socket_file.take());
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Serves JSON-RPC on this process's stdin and stdout until stdin closes:
/// LSP's framing (`Content-Length` heads) or one message a line (MCP).
/// With LSP framing, the session's end is returned too: the exit status is
/// 0 only after `shutdown` and `exit`, as LSP asks of servers.
pub fn serve_stdio(
    config: ServeConfig,
    framing: crate::rpc::wire::Framing,
) -> std::io::Result<(Arc<ServerStats>, Option<stream::LspEnd>)> {
    let stats = Arc::new(ServerStats::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.max(1))
        .enable_all()
        .build()?;
    let serving = stream::Serving {
        config: Arc::new(config),
        stats: stats.clone(),
        started: Instant::now(),
        stop: CancellationToken::new(),
    };
    let end = runtime.block_on(async move {
        let seed = serving.config.seed;
        let io = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
        if framing == crate::rpc::wire::Framing::ContentLength {
            Some(stream::serve_headed(io, serving, seed).await)
        } else {
            stream::serve_connection(io, serving, seed).await;
            None
        }
    });
    // Tasks blocked on stdin must not hold the process open after `exit`.
    runtime.shutdown_background();
    Ok((stats, end))
}

/// Binds `config.listen` (port 0 picks a free port) and the other
/// listeners asked for, and serves on background threads until the handle
/// is dropped. A listener that cannot be bound fails the whole start with
/// an error naming its flag, address and reason.
pub fn spawn(config: ServeConfig) -> std::io::Result<ServerHandle> {
    #[allow(unused_mut)] // The socket file is taken out on Unix only.
    let mut bound = listeners::Bound::bind(&config)?;
    let addr = bound.main.local_addr()?;
    let tcp_addr = bound.tcp.as_ref().map(|l| l.local_addr()).transpose()?;
    let ws_addr = bound.ws.as_ref().map(|l| l.local_addr()).transpose()?;
    // The handle keeps the file, to remove it once the server has stopped.
    #[cfg(unix)]
    let socket_file = bound.socket_file.take();
    let unix_path = config.unix.clone();
    let tls_on = config.tls.is_some();
    let stats = Arc::new(ServerStats::default());
    let stop = CancellationToken::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.max(1))
        .thread_name("volley-serve")
        .enable_all()
        .build()?;
    let thread = {
        let (stats, stop) = (stats.clone(), stop.clone());
        std::thread::Builder::new()
            .name("volley-serve-main".into())
            .spawn(move || runtime.block_on(serve_all(bound, config, stats, stop)))?
    };
    Ok(ServerHandle {
        addr,
        ws_addr,
        tcp_addr,
        unix_path,
        stats,
        tls: tls_on,
        stop,
        thread: Some(thread),
        #[cfg(unix)]
        socket_file,
    })
}

/// Serves every listener until `stop`: the stream ones on tasks of their
/// own, the main one here.
async fn serve_all(
    bound: listeners::Bound,
    config: ServeConfig,
    stats: Arc<ServerStats>,
    stop: CancellationToken,
) {
    let config = Arc::new(config);
    let serving = stream::Serving {
        config: config.clone(),
        stats: stats.clone(),
        started: Instant::now(),
        stop: stop.clone(),
    };
    let listen = |std: std::net::TcpListener| TcpListener::from_std(std).expect("a bound listener converts");
    if let Some(tcp) = bound.tcp {
        stream::accept_each(listen(tcp), serving.clone(), stream::serve_connection);
    }
    if let Some(ws) = bound.ws {
        match config.tls.clone() {
            Some(tls) => {
                let acceptor = tokio_rustls::TlsAcceptor::from(tls);
                stream::accept_each(listen(ws), serving.clone(), move |stream, serving, seed| {
                    let acceptor = acceptor.clone();
                    async move {
                        if let Some(stream) = handshake(&acceptor, stream).await {
                            stream::serve_websocket(stream, serving, seed).await;
                        }
                    }
                });
            }
            None => stream::accept_each(listen(ws), serving.clone(), stream::serve_websocket),
        }
    }
    #[cfg(unix)]
    if let Some(unix) = bound.unix {
        let listener = tokio::net::UnixListener::from_std(unix).expect("a bound listener converts");
        stream::accept_each(listener, serving, stream::serve_connection);
    }
    serve(listen(bound.main), config, stats, stop).await;
}

async fn serve(
    listener: TcpListener,
    config: Arc<ServeConfig>,
    stats: Arc<ServerStats>,
    stop: CancellationToken,
) {
    let started = Instant::now();
    let addr = listener.local_addr().ok();
    let mut listener = Some(listener);
    let mut connection_index = 0u64;
    // Each outage closes every connection of its generation.
    let mut generation = stop.child_token();
    let mut next_outage = config
        .chaos
        .outage
        .map(|(_, every)| tokio::time::Instant::now() + every);
    loop {
        let outage = async {
            match next_outage {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let accepted = tokio::select! {
            accepted = listener.as_ref().expect("listening between outages").accept() => accepted,
            _ = outage => {
                let (length, every) = config.chaos.outage.expect("an outage is scheduled");
                stats.chaos.outages.fetch_add(1, Ordering::Relaxed);
                drop(listener.take());
                generation.cancel();
                generation = stop.child_token();
                tokio::select! {
                    _ = tokio::time::sleep(length) => {}
                    _ = stop.cancelled() => return,
                }
                match addr.map(TcpListener::bind) {
                    Some(bound) => match bound.await {
                        Ok(again) => listener = Some(again),
                        Err(_) => return,
                    },
                    None => return,
                }
                next_outage = next_outage.map(|at| at + every);
                continue;
            }
            _ = stop.cancelled() => return,
        };
        // Out of descriptors and the like: keep serving the others.
        let Ok((stream, _)) = accepted else { continue };
        connection_index += 1;
        spawn_connection(
            stream,
            connection_index,
            config.clone(),
            stats.clone(),
            generation.clone(),
            started,
        );
    }
}

/// Serves one accepted connection on a task of its own, until the client
/// leaves or an outage closes its generation (`closed`).
fn spawn_connection(
    stream: tokio::net::TcpStream,
    connection_index: u64,
    config: Arc<ServeConfig>,
    stats: Arc<ServerStats>,
    closed: CancellationToken,
    started: Instant,
) {
    let _ = stream.set_nodelay(true);
    if config.chaos.faults.iter().any(|(f, _)| *f == Fault::Reset) {
        // Closing with linger zero sends a reset, not a polite FIN. (The
        // deprecation is about a non-zero linger blocking on drop; a
        // zero one returns at once.)
        #[allow(deprecated)]
        let _ = stream.set_linger(Some(Duration::ZERO));
    }
    // One generator per connection: requests on a connection come one
    // at a time, so the lock is never contended.
    let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(
        config.seed.wrapping_add(connection_index),
    )));
    let acceptor = config.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    // Counted at its first request: a client's reachability check opens a
    // connection and sends nothing.
    let served = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tokio::spawn(async move {
        // An outage ends the connection whatever it is doing: its TLS
        // handshake, the first byte's wait, or its requests.
        let serve = async move {
            let stream = match acceptor {
                Some(acceptor) => match handshake(&acceptor, stream).await {
                    Some(stream) => stream,
                    None => return,
                },
                None if tls_to_plain(&stream).await => return,
                None => NetStream::Plain(stream),
            };
            let service = hyper::service::service_fn(move |request| {
                let (config, stats, rng) = (config.clone(), stats.clone(), rng.clone());
                if !served.swap(true, Ordering::Relaxed) {
                    stats.connections_served.fetch_add(1, Ordering::Relaxed);
                }
                async move { Ok::<_, Infallible>(respond(request, &config, &stats, &rng, started).await) }
            });
            // HTTP/1.1, or HTTP/2 for a client that starts with its preface
            // (cleartext with prior knowledge).
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            // Answers to pipelined requests go out together, in one write.
            builder.http1().pipeline_flush(true);
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        };
        tokio::select! {
            _ = serve => {}
            _ = closed.cancelled() => {}
        }
    });
}

/// Whether a client opened this plain connection with a TLS handshake
/// (its first byte a handshake record's, 22): answered `400` in plain HTTP
/// and closed, so the client can tell it met plain HTTP. (hyper, flushing
/// pipelined answers together, closes without its own `400`.)
async fn tls_to_plain(stream: &tokio::net::TcpStream) -> bool {
    let mut first = [0u8; 1];
    if !matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 22) {
        return false;
    }
    let refusal = b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    let mut written = 0;
    while written < refusal.len() {
        let _ = stream.writable().await;
        match stream.try_write(&refusal[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => break,
        }
    }
    true
}

/// A TLS handshake with a client, given a few seconds; a client that fails
/// it is dropped (and counted by no one: it never sent a request).
async fn handshake(acceptor: &tokio_rustls::TlsAcceptor, stream: tokio::net::TcpStream) -> Option<NetStream> {
    let accepted = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await;
    match accepted {
        Ok(Ok(stream)) => Some(NetStream::Tls(Box::new(stream.into()))),
        _ => None,
    }
}

type AnswerBody = BoxBody<Bytes, std::io::Error>;

fn full(bytes: impl Into<Bytes>) -> AnswerBody {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed()
}

async fn respond(
    request: Request<Incoming>,
    config: &ServeConfig,
    stats: &ServerStats,
    rng: &Mutex<SmallRng>,
    started: Instant,
) -> Response<AnswerBody> {
    if request.method() != Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "JSON-RPC over HTTP takes POST\n");
    }
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let raw = |name: &str| request.headers().get(name).map(HeaderValue::as_bytes);
    if let Some(name) = &config.count_header {
        auth::count_header(config, stats, raw(name));
    }
    if let Err(why) = auth::check(config, stats, raw("authorization")) {
        return plain(StatusCode::UNAUTHORIZED, format!("JWT refused: {why}\n"));
    }
    let (session, wants_events) = (
        header("mcp-session-id"),
        header("accept").is_some_and(|a| a.contains("text/event-stream")),
    );
    let body = match Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "request too large\n"),
    };
    let mut opened = None;
    if config.mcp {
        match mcp_session(&body, session, stats) {
            Ok(new) => opened = new,
            Err(refusal) => return refusal,
        }
    }
    let (answer, fault) = {
        let mut rng = rng.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let answer = Handler {
            config,
            stats,
            started,
        }
        .handle(&body, &mut rng);
        (answer, config.chaos.pick(&mut *rng))
    };
    hold(answer.hold, stats).await;
    stall(config, stats, started).await;
    let Some(answer) = answer.body else {
        return no_answer(config);
    };
    let mut response = match fault {
        Some(fault) => misbehave(fault, answer, stats).await,
        None if config.mcp && wants_events => {
            stats.event_streams.fetch_add(1, Ordering::Relaxed);
            event_stream(&answer)
        }
        None => json(StatusCode::OK, full(answer)),
    };
    if let Some(session) = opened {
        let value = HeaderValue::from_str(&session).expect("a hex session id is a valid header");
        response.headers_mut().insert("mcp-session-id", value);
    }
    response
}

/// Holds the answer for its added latency, recording the hold really
/// applied.
async fn hold(hold: Duration, stats: &ServerStats) {
    if !hold.is_zero() {
        let held_from = Instant::now();
        timer::sleep(hold).await;
        let held = crate::stats::micros(held_from.elapsed());
        let mut holds = stats.holds.lock().unwrap_or_else(|p| p.into_inner());
        holds
            .get_or_insert_with(crate::stats::new_histogram)
            .record(held)
            .ok();
    }
}

/// Chaos: an answer ready during a stall (the first `length` of every
/// `every`) waits for the stall's end.
async fn stall(config: &ServeConfig, stats: &ServerStats, started: Instant) {
    if let Some((length, every)) = config.chaos.stall {
        let phase = Duration::from_nanos((started.elapsed().as_nanos() % every.as_nanos()) as u64);
        if phase < length {
            stats.chaos.stalled.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(length - phase).await;
        }
    }
}
