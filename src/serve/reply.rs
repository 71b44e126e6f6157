//! The HTTP answers made other than plainly: the empty one to
//! notifications, MCP's sessions and event streams, and chaos's faults.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::{body, full, AnswerBody, Fault, ServeConfig, ServerStats};

/// The empty answer to a request of notifications only.
pub(super) fn no_answer(config: &ServeConfig) -> Response<AnswerBody> {
    let mut response = Response::new(full(Bytes::new()));
    // MCP's streamable HTTP says 202 for notifications.
    *response.status_mut() = if config.mcp {
        StatusCode::ACCEPTED
    } else {
        StatusCode::NO_CONTENT
    };
    response
}

/// MCP: an `initialize` opens a session (its id is returned); anything
/// else must name an open one, or is refused with 400 as MCP's SDKs do.
#[allow(clippy::result_large_err)]
pub(super) fn mcp_session(
    body: &[u8],
    session: Option<String>,
    stats: &ServerStats,
) -> Result<Option<String>, Response<AnswerBody>> {
    let initialize = crate::rpc::wire::Message::parse(body)
        .is_some_and(|m| m.method.is_some_and(|m| m == "\"initialize\""));
    let mut sessions = stats.sessions.lock().unwrap_or_else(|p| p.into_inner());
    if initialize {
        let id = format!("{:032x}", rand::random::<u128>());
        sessions.insert(id.clone());
        stats.mcp_sessions.fetch_add(1, Ordering::Relaxed);
        return Ok(Some(id));
    }
    if session.is_some_and(|s| sessions.contains(&s)) {
        return Ok(None);
    }
    stats.mcp_refused.fetch_add(1, Ordering::Relaxed);
    let refusal = br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;
    Err(json(StatusCode::BAD_REQUEST, full(&refusal[..])))
}

/// An answer as a server-sent-event stream, after a log message, as MCP
/// servers send progress and logs before the answer itself.
pub(super) fn event_stream(answer: &[u8]) -> Response<AnswerBody> {
    let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working on it"}}"#;
    let mut text = format!("event: message\ndata: {log}\n\nevent: message\n");
    // A line break in the answer (kept from a request's params) starts a
    // new `data:` line; the client joins them again.
    for line in String::from_utf8_lossy(answer).split('\n') {
        text.push_str("data: ");
        text.push_str(line);
        text.push('\n');
    }
    text.push('\n');
    let mut response = Response::new(full(text));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}

/// Answers with `fault` where it applies to this answer (counting it), or
/// plainly where it does not (a batch fault on a single call, say).
pub(super) async fn misbehave(fault: Fault, answer: Vec<u8>, stats: &ServerStats) -> Response<AnswerBody> {
    let error_body =
        || full(&br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"},"id":null}"#[..]);
    let response = match fault {
        Fault::Http500Body | Fault::Http503Body => {
            let status = if fault == Fault::Http500Body { 500 } else { 503 };
            // The same call's id, so the body is a proper answer to it.
            let id = serde_json::from_slice::<serde_json::Value>(&answer)
                .ok()
                .and_then(|v| v.get("id").cloned());
            let body = match id {
                Some(id) => full(
                    serde_json::json!({"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"},"id":id})
                        .to_string(),
                ),
                None => error_body(),
            };
            Some(json(StatusCode::from_u16(status).expect("a valid status"), body))
        }
        Fault::Http500 => Some(json(StatusCode::INTERNAL_SERVER_ERROR, full(Bytes::new()))),
        Fault::Http503 => Some(json(StatusCode::SERVICE_UNAVAILABLE, full(Bytes::new()))),
        Fault::Html => {
            let page = "<html><head><title>502 Bad Gateway</title></head><body>bad gateway</body></html>";
            let mut response = Response::new(full(page));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
            Some(response)
        }
        Fault::Truncated => Some(json(StatusCode::OK, full(answer[..answer.len() / 2].to_vec()))),
        Fault::Trickle => {
            let piece = answer.len().div_ceil(4);
            Some(json(
                StatusCode::OK,
                body::Dribble::slow(answer.clone().into(), piece, Duration::from_millis(5)).boxed(),
            ))
        }
        Fault::Oversized => Some(json(StatusCode::OK, body::Filler::new(16 * 1024 * 1024).boxed())),
        Fault::Reset => Some(json(
            StatusCode::OK,
            body::Dribble::cut(answer.clone().into()).boxed(),
        )),
        Fault::Hang => {
            stats.chaos.count(fault);
            std::future::pending::<()>().await;
            unreachable!("a hung answer never comes")
        }
        body_fault => fault_body(body_fault, &answer).map(|spoiled| json(StatusCode::OK, full(spoiled))),
    };
    match response {
        Some(response) => {
            stats.chaos.count(fault);
            response
        }
        None => json(StatusCode::OK, full(answer)),
    }
}

fn fault_body(fault: Fault, answer: &[u8]) -> Option<Vec<u8>> {
    fault.spoil(answer)
}

pub(super) fn json(status: StatusCode, body: AnswerBody) -> Response<AnswerBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(super) fn plain(status: StatusCode, text: impl Into<Bytes>) -> Response<AnswerBody> {
    let mut response = Response::new(full(text));
    *response.status_mut() = status;
    response
}
