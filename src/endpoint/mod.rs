//! A small HTTP endpoint for the live views (`/metrics`, the web page):
//! bound where the user said (loopback unless told otherwise), answering
//! only a loopback `Host` there, a bounded number of connections at once,
//! a short wait for each request's head, stopped with the run. Whatever a
//! client does, it never holds the run up, and clients that connect and
//! send nothing never keep a scrape or the page out.

mod slots;

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{ready, Either};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use slots::{Slot, Slots, Tracked, Watched};

/// A response's body: whole, or a stream (the web page's events).
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Connections held at once. One more takes the slot of the one idle
/// longest (see `slots.rs`), so this bounds memory and open files without
/// ever turning a scrape away.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a connection may wait before the head of its next request is
/// in: from when it came, or from the last byte of its previous answer.
/// Short, as servers keep it against clients that hold connections and
/// send nothing (slowloris): a scraper or a browser sends its request at
/// once. A request read is never timed: an `/events` reader stays.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a connection may go on finishing its answer once the endpoint
/// stops.
const GRACE: Duration = Duration::from_secs(1);

/// A live view served on an endpoint: the flags that place it, and why it
/// stays on loopback unless told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// `/metrics`, for Prometheus.
    Metrics,
    /// The live web page and its `/events`.
    Page,
}

impl View {
    pub fn flag(self) -> &'static str {
        match self {
            View::Metrics => "--metrics-listen",
            View::Page => "--web-listen",
        }
    }

    /// The flag that serves it beyond loopback, to any `Host`.
    pub fn public_flag(self) -> &'static str {
        match self {
            View::Metrics => "--metrics-listen-public",
            View::Page => "--web-listen-public",
        }
    }

    /// Refuses an address other than loopback unless `public` says so:
    /// each view names the targets to whoever reaches it.
    pub fn check_address(self, addr: SocketAddr, public: bool) -> Result<(), String> {
        if addr.ip().is_loopback() || public {
            return Ok(());
        }
        let (shows, it) = match self {
            View::Metrics => ("the metrics name the targets to whoever reaches them", "them"),
            View::Page => ("the page shows the targets' URLs to whoever reaches it", "it"),
        };
        Err(format!(
            "{} {addr}: not a loopback address, and {shows}; give {} to serve {it} there anyway, or listen on 127.0.0.1",
            self.flag(),
            self.public_flag()
        ))
    }
}

/// Who may read an endpoint: anyone who reaches it when `public`; else
/// only requests whose `Host` is a loopback name or address. A web page
/// elsewhere that points its own name at 127.0.0.1 (DNS rebinding) sends
/// its own name, and is refused.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub view: View,
    pub public: bool,
}

impl Access {
    /// The answer to a request not let in, if it is not.
    fn refusal(self, request: &Request<Incoming>) -> Option<Response<Body>> {
        let host = request.headers().get(HOST).map(|h| h.to_str().unwrap_or(""));
        if self.public || host.is_none_or(loopback_host) {
            return None;
        }
        let what = match self.view {
            View::Metrics => "metrics answer",
            View::Page => "page answers",
        };
        Some(respond(
            StatusCode::FORBIDDEN,
            "text/plain; charset=utf-8",
            format!(
                "volley's {what} a Host of localhost or a loopback address only; {} lets any Host in\n",
                self.view.public_flag()
            ),
        ))
    }
}

/// A `Host` (a name or an address, and maybe a port) that names this
/// machine's loopback: `localhost`, `127.0.0.1`, `[::1]`. Any port: one
/// reached through a forwarded port (`ssh -L`) names the port forwarded.
/// A request without `Host` (HTTP/1.0) came from no browser, and is let in.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Binds `addr`.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// A whole response of `status`, `content_type` and `body`.
pub fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed_unsync());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// How many connections, and how long each may wait for a request's head.
#[derive(Clone, Copy)]
struct Limits {
    slots: usize,
    head: Duration,
}

/// Serves each request on `listener` that `access` lets in with `handler`
/// until `stop`; then each open connection gets [`GRACE`] to finish the
/// answer it is sending.
pub async fn serve<H, F>(listener: TcpListener, access: Access, handler: H, stop: CancellationToken)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let limits = Limits {
        slots: MAX_CONNECTIONS,
        head: HEAD_TIMEOUT,
    };
    serve_within(listener, limits, access, handler, stop).await;
}

async fn serve_within<H, F>(
    listener: TcpListener,
    limits: Limits,
    access: Access,
    handler: H,
    stop: CancellationToken,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let slots = Slots::new(limits.slots);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, say: one idle connection gives
                // its own back, and we wait rather than spin.
                Err(_) => {
                    slots.evict_idle();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let slot = slots.admit();
        let task = connection(stream, slot, limits.head, access, handler.clone(), stop.clone());
        tokio::spawn(task);
    }
}

/// One connection, in `slot`, until it closes, is evicted, waits over
/// `head` for a request's head, or the endpoint stops.
async fn connection<H, F>(
    stream: TcpStream,
    slot: Slot,
    head: Duration,
    access: Access,
    handler: H,
    stop: CancellationToken,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let conn = slot.conn.clone();
    let service = {
        let conn = conn.clone();
        hyper::service::service_fn(move |request| {
            let busy = conn.busy();
            let answer = match access.refusal(&request) {
                Some(refused) => Either::Left(ready(refused)),
                None => Either::Right(handler(request)),
            };
            async move { Ok::<_, Infallible>(answer.await.map(|body| Tracked::new(body, busy))) }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // hyper's own limit too; whether it counts from the connection or from
    // its first byte has changed between versions, so the rule below is
    // the one that holds.
    builder.timer(TokioTimer::new()).header_read_timeout(head);
    let io = TokioIo::new(Watched::new(stream, conn.clone()));
    let connection = builder.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    loop {
        let deadline = conn.idle_since().unwrap_or_else(Instant::now) + head;
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = conn.evicted.cancelled() => return,
            _ = tokio::time::sleep_until(deadline) => {
                if conn.idle_since().is_some_and(|since| since.elapsed() >= head) {
                    return;
                }
            }
            _ = stop.cancelled() => {
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(GRACE, connection).await;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
