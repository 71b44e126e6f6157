//! A small HTTP endpoint for the live views (`/metrics`, the web page):
//! bound where the user said, a bounded number of connections at once, a
//! bounded wait for a request's head, stopped with the run. Whatever a
//! client does, it never holds the run up.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A response's body: whole, or a stream (the web page's events).
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Connections served at once; one more is closed as it comes, so clients
/// that never leave cannot take memory without bound.
pub const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may go on finishing its answer once the endpoint
/// stops.
const GRACE: Duration = Duration::from_secs(1);

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

/// Serves each request on `listener` with `handler` until `stop`; then
/// each open connection gets [`GRACE`] to finish the answer it is sending.
pub async fn serve<H, F>(listener: TcpListener, handler: H, stop: CancellationToken)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, say: wait rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let (handler, stop) = (handler.clone(), stop.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let answer = handler(request);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(HEAD_TIMEOUT);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(GRACE, connection).await;
                }
            }
        });
    }
}
