//! A user's header replaces volley's own of that name, on every transport
//! that carries headers: a strict server that refuses a request with two
//! `Content-Type`s (or two `User-Agent`s) answers every call.

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, USER_AGENT};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;

/// Each request's values of `Content-Type` and `User-Agent`, in order.
type Seen = Arc<Mutex<Vec<(Vec<String>, Vec<String>)>>>;

fn values(headers: &hyper::HeaderMap, name: hyper::header::HeaderName) -> Vec<String> {
    let all = headers.get_all(name).iter();
    all.map(|v| v.to_str().unwrap().to_string()).collect()
}

/// An HTTP/1.1 and h2c server that refuses (400) a request carrying a
/// header twice, as a strict one does, and records what each carried.
fn strict_server(seen: Seen) -> std::net::SocketAddr {
    common::serve_on_a_thread(move |listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let types = values(request.headers(), CONTENT_TYPE);
                        let agents = values(request.headers(), USER_AGENT);
                        let twice = types.len() != 1 || agents.len() != 1;
                        seen.lock().unwrap().push((types, agents));
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        let call: Value = serde_json::from_slice(&body).unwrap();
                        let answer = serde_json::json!({"jsonrpc": "2.0", "result": "0x1", "id": call["id"]});
                        let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
                        if twice {
                            *response.status_mut() = hyper::StatusCode::BAD_REQUEST;
                            *response.body_mut() = Full::new(Bytes::from_static(b"duplicate header"));
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

fn run_with_headers(target: &str, extra: &str) -> volley::report::RunReport {
    let text = format!(
        "target = \"{target}\"\n{extra}[headers]\ncontent-type = \"application/json-rpc\"\nUser-Agent = \"me/1\"\n[load]\nconcurrency = 2\nrequests = 50\n[[calls]]\nmethod = \"eth_chainId\"\n"
    );
    common::run(&common::scenario(&text))
}

fn assert_replaced(seen: &Seen) {
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 50, "{} requests seen", seen.len());
    for (types, agents) in seen.iter() {
        assert_eq!(types, &["application/json-rpc"]);
        assert_eq!(agents, &["me/1"]);
    }
}

#[test]
fn a_users_content_type_and_user_agent_replace_volleys_over_http1() {
    let seen = Seen::default();
    let addr = strict_server(seen.clone());
    let report = run_with_headers(&format!("http://{addr}/"), "");
    assert_eq!(report.summary.total.ok, 50, "{:?}", report.summary.total.outcomes);
    assert_replaced(&seen);
}

#[test]
fn a_users_content_type_and_user_agent_replace_volleys_over_http2() {
    let seen = Seen::default();
    let addr = strict_server(seen.clone());
    let report = run_with_headers(&format!("http://{addr}/"), "http2 = true\n");
    assert_eq!(report.meta.transport, "http/2 (h2c)");
    assert_eq!(report.summary.total.ok, 50, "{:?}", report.summary.total.outcomes);
    assert_replaced(&seen);
}

#[test]
// tungstenite's handshake callback returns its own (large) error response.
#[allow(clippy::result_large_err)]
fn a_users_user_agent_replaces_volleys_on_the_websocket_handshake() {
    use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

    let seen = Seen::default();
    let record = seen.clone();
    let addr = common::serve_on_a_thread(move |listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            let check = move |request: &Request, response: Response| {
                let headers = request.headers();
                record
                    .lock()
                    .unwrap()
                    .push((values(headers, CONTENT_TYPE), values(headers, USER_AGENT)));
                Ok(response)
            };
            let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
                continue;
            };
            tokio::spawn(async move {
                while let Some(Ok(message)) = socket.next().await {
                    let call: Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
                    let answer = serde_json::json!({"jsonrpc": "2.0", "result": "0x1", "id": call["id"]});
                    if socket.send(answer.to_string().into()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let report = run_with_headers(&format!("ws://{addr}/"), "");
    assert_eq!(report.summary.total.ok, 50);
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    for (types, agents) in seen.iter() {
        // A handshake has no body: the user's Content-Type goes as given, once.
        assert_eq!(types, &["application/json-rpc"]);
        assert_eq!(agents, &["me/1"]);
    }
}
