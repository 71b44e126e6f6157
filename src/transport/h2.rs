//! JSON-RPC over HTTP/2 (`--http2`): over TLS when ALPN settles on `h2`, or
//! cleartext with prior knowledge to an `http://` target. One POST per
//! request as with HTTP/1.1, but many in flight on each connection, each on
//! a stream of its own.

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http2::{self, SendRequest};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::http::HttpTarget;
use super::{MadeHeader, Reply, TransportError};

const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

pub struct H2Connection {
    sender: SendRequest<Full<Bytes>>,
    uri: Uri,
    headers: RefCell<HeaderMap>,
    /// Headers made for each request, by their names as HTTP/2 sends them.
    made: Vec<(HeaderName, MadeHeader)>,
    /// Where each made value is written before it becomes a header.
    scratch: RefCell<Vec<u8>>,
    limit: usize,
    /// An answer came on this connection: the server speaks HTTP/2.
    answered: Cell<bool>,
}

impl H2Connection {
    /// Opens a connection and starts HTTP/2 on it, all within `within`.
    /// In cleartext (h2c, by prior knowledge) it is open only once the
    /// server has said something: a server of HTTP/2 sends its settings at
    /// once, and one of HTTP/1.1 may stay silent on the preface (ganache
    /// does), which would otherwise read as a server that never answers.
    pub async fn open(target: &HttpTarget, within: Duration) -> Result<Rc<Self>, TransportError> {
        let deadline = tokio::time::Instant::now() + within;
        let (heard, first) = tokio::sync::oneshot::channel();
        let handshake = async {
            let stream = Heard {
                inner: target.connect().await?,
                first: Some(heard),
            };
            http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .map_err(|e| target.connect_error(io::Error::other(e)))
        };
        let not_ready = || target.connect_error(super::not_ready_within(within));
        let (sender, driver) =
            (tokio::time::timeout_at(deadline, handshake).await).map_err(|_| not_ready())??;
        tokio::task::spawn_local(async move {
            // Ends when the connection closes; callers notice through
            // `is_closed` or a failed exchange.
            let _ = driver.await;
        });
        if target.tls.is_none() {
            let silent = |what: &str| {
                target.connect_error(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the server {what} after volley's HTTP/2 preface (h2c, by prior knowledge): it does not speak HTTP/2 in cleartext; without --http2 volley speaks HTTP/1.1"
                    ),
                ))
            };
            match tokio::time::timeout_at(deadline, first).await {
                // An HTTP/1.1 server answers the preface as a bad request.
                Ok(Ok(bytes)) if bytes.starts_with(b"HTTP/1.") => {
                    let status = String::from_utf8_lossy(&bytes[bytes.len().min(9)..]);
                    let status: String = status.chars().take_while(char::is_ascii_digit).collect();
                    return Err(silent(&format!("answered with HTTP/1.1 (status {status})")));
                }
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return Err(silent("closed the connection without a word")),
                Err(_) => {
                    let waited = humantime::format_duration(within);
                    return Err(silent(&format!("sent nothing within {waited} (the timeout)")));
                }
            }
        }
        let mut headers = HeaderMap::new();
        let wanted =
            super::headers::request_headers(target.headers(), target.made(), super::headers::Request::Post);
        for (name, value) in wanted {
            if let (Ok(name), Ok(mut value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                value.set_sensitive(true);
                headers.insert(name, value);
            }
        }
        // Checked when the scenario was read; a bad name is skipped, never shown.
        let made = (target.made().iter())
            .filter_map(|m| Some((HeaderName::from_bytes(m.name.as_bytes()).ok()?, m.clone())))
            .collect();
        let uri = target
            .url()
            .parse()
            .map_err(|_| TransportError::Io("the target URL is not a URI".into()))?;
        Ok(Rc::new(H2Connection {
            sender,
            uri,
            headers: RefCell::new(headers),
            made,
            scratch: RefCell::new(Vec::new()),
            limit: target.max_response(),
            answered: Cell::new(false),
        }))
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    pub async fn exchange(&self, body: Bytes) -> Result<Reply, TransportError> {
        let reply = self.round_trip(body).await;
        match &reply {
            Ok(_) => self.answered.set(true),
            Err(TransportError::Io(reason)) if !self.answered.get() => {
                return Err(TransportError::Io(format!(
                    "{reason} (no HTTP/2 answer ever came on this connection: does the server speak HTTP/2? Without --http2 volley speaks HTTP/1.1)"
                )))
            }
            Err(_) => {}
        }
        reply
    }

    async fn round_trip(&self, body: Bytes) -> Result<Reply, TransportError> {
        let mut sender = self.sender.clone();
        sender
            .ready()
            .await
            .map_err(|e| TransportError::Io(with_causes(&e)))?;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.borrow().clone();
        self.add_made(request.headers_mut());
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| TransportError::Io(with_causes(&e)))?;
        let status = response.status().as_u16();
        // MCP: the session the server gives goes back on every later request.
        if let Some(session) = response.headers().get(MCP_SESSION_ID) {
            self.headers.borrow_mut().insert(MCP_SESSION_ID, session.clone());
        }
        let event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
        // The body is held to the answer limit here; every other size a
        // server names over HTTP/2 is held by hyper (frames to the 16 KiB
        // volley advertises, a head to its 16 KiB header-list limit).
        let body = Limited::new(response.into_body(), self.limit)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    TransportError::TooLarge { limit: self.limit }
                } else {
                    TransportError::Io(with_causes(&*e))
                }
            })?
            .to_bytes();
        let (body, others) = if event_stream {
            super::sse::decode(&body)
        } else {
            (body, 0)
        };
        Ok(Reply { status, body, others })
    }
}

impl H2Connection {
    /// This request's made headers, each value written afresh (hyper keeps
    /// a header value in bytes of its own: one copy per header and request).
    fn add_made(&self, headers: &mut HeaderMap) {
        let mut scratch = self.scratch.borrow_mut();
        for (name, header) in &self.made {
            scratch.clear();
            super::headers::write_value(&mut scratch, header);
            if let Ok(mut value) = HeaderValue::from_bytes(&scratch) {
                value.set_sensitive(true);
                headers.insert(name.clone(), value);
            }
        }
    }
}

/// An error and what caused it: hyper's own text alone ("http2 error")
/// does not say what went wrong.
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

/// A stream that says when the server's first byte came.
struct Heard<S> {
    inner: S,
    /// The first bytes the server sent (a few: enough to tell HTTP/1.1's
    /// status line from HTTP/2's settings frame).
    first: Option<tokio::sync::oneshot::Sender<Vec<u8>>>,
}

/// The first bytes kept of what a server sends.
const FIRST_BYTES: usize = 16;

impl<S: AsyncRead + Unpin> AsyncRead for Heard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            if let Some(first) = self.first.take() {
                let read = &buf.filled()[before..];
                let _ = first.send(read[..read.len().min(FIRST_BYTES)].to_vec());
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Heard<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
