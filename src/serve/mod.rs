//! The built-in JSON-RPC 2.0 server: a faithful target for trying volley and
//! for its own tests, with added latency and injected errors that it counts.

mod handler;
mod latency;
mod methods;

pub use handler::INJECTED_ERROR;
pub use latency::Latency;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use handler::Handler;

/// Requests larger than this are refused with 413.
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

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
}

impl ServerStats {
    /// The median hold really applied, if any request was held.
    pub fn median_hold(&self) -> Option<std::time::Duration> {
        let holds = self.holds.lock().unwrap_or_else(|p| p.into_inner());
        let holds = holds.as_ref().filter(|h| !h.is_empty())?;
        Some(std::time::Duration::from_micros(holds.value_at_quantile(0.5)))
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// A server running on its own threads; dropping it stops the server.
pub struct ServerHandle {
    pub addr: SocketAddr,
    pub stats: Arc<ServerStats>,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Binds `config.listen` (port 0 picks a free port) and serves on
/// background threads until the handle is dropped.
pub fn spawn(config: ServeConfig) -> std::io::Result<ServerHandle> {
    let listener = std::net::TcpListener::bind(config.listen)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
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
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("a bound listener converts");
                    serve(listener, Arc::new(config), stats, stop).await;
                });
            })?
    };
    Ok(ServerHandle {
        addr,
        stats,
        stop,
        thread: Some(thread),
    })
}

async fn serve(
    listener: TcpListener,
    config: Arc<ServeConfig>,
    stats: Arc<ServerStats>,
    stop: CancellationToken,
) {
    let started = Instant::now();
    let mut connection_index = 0u64;
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of descriptors and the like: keep serving the others.
                Err(_) => continue,
            },
            _ = stop.cancelled() => return,
        };
        let _ = stream.set_nodelay(true);
        connection_index += 1;
        // One generator per connection: requests on a connection come one
        // at a time, so the lock is never contended.
        let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(
            config.seed.wrapping_add(connection_index),
        )));
        let (config, stats, stop) = (config.clone(), stats.clone(), stop.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let (config, stats, rng) = (config.clone(), stats.clone(), rng.clone());
                async move { Ok::<_, Infallible>(respond(request, &config, &stats, &rng, started).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = stop.cancelled() => {}
            }
        });
    }
}

async fn respond(
    request: Request<Incoming>,
    config: &ServeConfig,
    stats: &ServerStats,
    rng: &Mutex<SmallRng>,
    started: Instant,
) -> Response<Full<Bytes>> {
    if request.method() != Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "JSON-RPC over HTTP takes POST\n");
    }
    let body = match Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "request too large\n"),
    };
    let answer = {
        let mut rng = rng.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Handler {
            config,
            stats,
            started,
        }
        .handle(&body, &mut rng)
    };
    if !answer.hold.is_zero() {
        let held_from = Instant::now();
        tokio::time::sleep(answer.hold).await;
        let held = crate::stats::micros(held_from.elapsed());
        let mut holds = stats.holds.lock().unwrap_or_else(|p| p.into_inner());
        holds
            .get_or_insert_with(crate::stats::new_histogram)
            .record(held)
            .ok();
    }
    match answer.body {
        Some(body) => {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        None => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::NO_CONTENT;
            response
        }
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}
