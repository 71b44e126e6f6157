//! The HTTP side of the recording proxy: each client connection gets one
//! upstream connection of its own (so the capture's connections are the
//! client's), each request is passed on unchanged but for the hop-by-hop
//! headers, and its answer comes back as the upstream sent it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::Mutex;

use super::Recorder;

/// The largest body passed on, either way: past it the client gets 413 or
/// 502 rather than a proxy that holds without bound.
const MAX_BODY: usize = 64 << 20;

/// Headers that belong to one hop, not to the message (RFC 9110 7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
];

pub(super) async fn proxy(stream: tokio::net::TcpStream, conn: u64, recorder: &Arc<Recorder>) {
    let _ = stream.set_nodelay(true);
    let upstream: Arc<Mutex<Option<SendRequest<Full<Bytes>>>>> = Arc::new(Mutex::new(None));
    let recorder = recorder.clone();
    let service = hyper::service::service_fn(move |request| {
        let (recorder, upstream) = (recorder.clone(), upstream.clone());
        async move { Ok::<_, Infallible>(pass_on(request, conn, &recorder, &upstream).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn pass_on(
    request: Request<Incoming>,
    conn: u64,
    recorder: &Recorder,
    upstream: &Mutex<Option<SendRequest<Full<Bytes>>>>,
) -> Response<Full<Bytes>> {
    let arrived = Instant::now();
    let (parts, body) = request.into_parts();
    let Ok(body) = Limited::new(body, MAX_BODY).collect().await.map(|b| b.to_bytes()) else {
        return plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "volley record: request body too large or cut",
        );
    };
    let names: Vec<String> = parts.headers.keys().map(|n| n.as_str().to_string()).collect();
    let path = match parts.uri.path_and_query().map(|p| p.as_str()) {
        None | Some("/") => recorder.upstream.path.clone(),
        Some(path) => path.to_string(),
    };
    let parts_method_is_post = parts.method == hyper::Method::POST;
    let mut forward = Request::builder().method(parts.method).uri(path);
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) && name != hyper::header::HOST {
            forward = forward.header(name, value);
        }
    }
    let forward = forward
        .header(hyper::header::HOST, recorder.upstream.authority.as_str())
        .body(Full::new(body.clone()));
    let Ok(forward) = forward else {
        return plain(
            StatusCode::BAD_REQUEST,
            "volley record: the request could not be passed on",
        );
    };
    // JSON-RPC over HTTP is POSTed: anything else is passed on, unrecorded.
    let recorded = parts_method_is_post;
    let answer = match send(upstream, &recorder.upstream.authority, forward).await {
        Ok(answer) => answer,
        Err(error) => {
            note(recorder, recorded, conn, &names, arrived, &body, None);
            return plain(
                StatusCode::BAD_GATEWAY,
                &format!("volley record: upstream: {error}"),
            );
        }
    };
    let (parts, answer_body) = answer.into_parts();
    let Ok(answer_body) = Limited::new(answer_body, MAX_BODY)
        .collect()
        .await
        .map(|b| b.to_bytes())
    else {
        recorder.write(conn, &names, arrived, &body, None);
        return plain(
            StatusCode::BAD_GATEWAY,
            "volley record: upstream answer too large or cut",
        );
    };
    recorder.write(
        conn,
        &names,
        arrived,
        &body,
        Some((&answer_body, arrived.elapsed())),
    );
    let mut back = Response::builder().status(parts.status);
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) && name != hyper::header::CONTENT_LENGTH {
            back = back.header(name, value);
        }
    }
    back.body(Full::new(answer_body))
        .unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "volley record: bad upstream answer"))
}

/// Records the request when it was a POST, else counts it as passed on.
fn note(
    recorder: &Recorder,
    recorded: bool,
    conn: u64,
    names: &[String],
    arrived: Instant,
    body: &[u8],
    answer: Option<(&[u8], std::time::Duration)>,
) {
    if recorded {
        recorder.write(conn, names, arrived, body, answer);
    } else {
        recorder.pass();
    }
}

/// Sends on this client's upstream connection, opened at its first request
/// and again after the upstream closed it.
async fn send(
    upstream: &Mutex<Option<SendRequest<Full<Bytes>>>>,
    authority: &str,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, String> {
    let mut held = upstream.lock().await;
    if held.as_ref().is_none_or(|s| s.is_closed()) {
        let stream = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        *held = Some(sender);
    }
    let sender = held.as_mut().expect("opened above");
    sender.ready().await.map_err(|e| e.to_string())?;
    sender.send_request(request).await.map_err(|e| e.to_string())
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())));
    *response.status_mut() = status;
    response
}
