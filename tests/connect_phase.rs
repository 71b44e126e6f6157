//! Connections first, then the clock: every connection opens, with its
//! setup calls, before the schedule's first request is due, in both load
//! models; how they opened is a figure of its own, and connections that
//! failed to open are counted apart from the calls.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// An HTTP/1.1 server that logs each call's method in the order calls
/// arrive, and answers it.
fn logging_server(log: Arc<Mutex<Vec<String>>>) -> std::net::SocketAddr {
    common::serve_on_a_thread(move |listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let log = log.clone();
                    async move {
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        let call: Value = serde_json::from_slice(&body).unwrap();
                        log.lock()
                            .unwrap()
                            .push(call["method"].as_str().unwrap().to_string());
                        let answer = serde_json::json!({"jsonrpc": "2.0", "result": "0x1", "id": call["id"]});
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(answer.to_string()))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

fn every_setup_before_the_first_call(load: &str) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let addr = logging_server(log.clone());
    let text = format!(
        "target = \"http://{addr}/\"\n[load]\n{load}\n[[setup]]\nmethod = \"hello\"\n[[calls]]\nmethod = \"eth_chainId\"\n"
    );
    let report = common::run(&common::scenario(&text));
    let log = log.lock().unwrap();
    // One hello per connection (the reachability check sends none).
    let connections = report.meta.load.connections;
    let hellos: Vec<usize> = (log.iter().enumerate())
        .filter(|(_, m)| *m == "hello")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hellos.len(), connections, "{log:?}");
    let first_call = log
        .iter()
        .position(|m| m == "eth_chainId")
        .expect("calls were made");
    assert!(
        hellos.iter().all(|&h| h < first_call),
        "a connection was still setting up when the first call came: {log:?}"
    );
    let opened = &report.summary.connections;
    assert_eq!(
        (opened.planned, opened.opened, opened.failed),
        (connections as u64, connections as u64, 0)
    );
    assert!(opened.time.max_ms > 0.0, "each opening was timed");
}

#[test]
fn every_connection_is_open_and_set_up_before_the_first_call_of_a_closed_run() {
    every_setup_before_the_first_call("concurrency = 16\nconnections = 16\nrequests = 200");
}

#[test]
fn every_connection_is_open_and_set_up_before_the_first_call_of_an_open_run() {
    every_setup_before_the_first_call("rate = 400\nconnections = 24\nduration = \"500ms\"");
}

#[test]
// tungstenite's handshake callback returns its own (large) error response.
#[allow(clippy::result_large_err)]
fn connections_that_fail_to_open_are_counted_apart_from_the_calls() {
    use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

    // The reachability check's handshake and two connections' are taken;
    // every later one is refused.
    let handshakes = Arc::new(AtomicUsize::new(0));
    let seen = handshakes.clone();
    let addr = common::serve_on_a_thread(move |listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let check = move |_: &Request, response: Response| {
                if n < 3 {
                    return Ok(response);
                }
                let mut refused = ErrorResponse::new(Some("full".into()));
                *refused.status_mut() = hyper::StatusCode::FORBIDDEN;
                Err(refused)
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
    let text = format!(
        "target = \"ws://{addr}/\"\n[load]\nconcurrency = 4\nconnections = 4\nrequests = 100\n[[calls]]\nmethod = \"eth_chainId\"\n"
    );
    let report = common::run(&common::scenario(&text));
    let c = &report.summary.connections;
    assert_eq!((c.planned, c.opened), (4, 2), "{c:?}");
    // Two refused before the run, and each try again during it.
    assert!(c.failed >= 2, "{c:?}");
    assert!(c.error.as_deref().is_some_and(|e| e.contains("403")), "{c:?}");
    // The calls are counted as calls: those that found no connection as
    // `connect`, apart from the openings.
    let total = &report.summary.total;
    let connect = total.outcomes.get("connect").copied().unwrap_or(0);
    assert_eq!(total.ok + connect, total.calls, "{:?}", total.outcomes);
    assert!(total.ok > 0 && connect > 0, "{:?}", total.outcomes);
    assert_eq!(total.calls, 100);
}

/// A server that answers one request on each connection and closes it,
/// without `Connection: close`: volley opens a new one for the next call.
/// Every connection that carried a request is in the run's counts, those
/// opened in place of a closed one too.
#[test]
fn connections_a_server_closed_while_idle_are_counted_as_reopened() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let addr = common::serve_on_a_thread(move |listener| async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 4096];
                let mut seen = Vec::new();
                let mut id = Value::Null;
                // The whole request: its head, and a body of Content-Length.
                while let Ok(n) = stream.read(&mut request).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&request[..n]);
                    let text = String::from_utf8_lossy(&seen);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = (text[..end].lines())
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().to_string())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            let call: Value = serde_json::from_slice(&seen[end + 4..]).unwrap_or_default();
                            id = call["id"].clone();
                            break;
                        }
                    }
                }
                // A connection that carried a request (the check before the
                // run opens one and sends nothing).
                counted.fetch_add(1, Ordering::SeqCst);
                let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": "0x1"}).to_string();
                let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                let _ = stream.write_all(answer.as_bytes()).await;
                // Closed here, unannounced.
            });
        }
    });
    let report = common::run(&common::scenario(&format!(
        "target = \"http://{addr}/\"\n[load]\nrate = 50\nconnections = 1\nrequests = 20\n[[calls]]\nmethod = \"eth_chainId\"\n"
    )));
    let connections = &report.summary.connections;
    assert_eq!(report.summary.total.calls, 20);
    assert!(connections.reopened > 0, "{connections:?}");
    assert_eq!(
        connections.opened_in_all,
        accepted.load(Ordering::SeqCst) as u64,
        "every connection that carried a request: {connections:?}"
    );
}
