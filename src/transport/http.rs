//! JSON-RPC over HTTP/1.1: one POST per request, keep-alive, one call in
//! flight per connection.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Reply, TargetError, TransportError};

/// Answers larger than this are cut off and counted as `io`.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct HttpTarget {
    url: String,
    addr: SocketAddr,
    path: Uri,
    headers: HeaderMap,
}

impl HttpTarget {
    pub(super) async fn resolve(url: &str, extra: &[(String, String)]) -> Result<Self, TargetError> {
        let bad = |reason: &str| TargetError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let host = uri.host().ok_or_else(|| bad("no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        let lookup_host = host.trim_start_matches('[').trim_end_matches(']');
        let addr = tokio::net::lookup_host((lookup_host, port))
            .await
            .map_err(|source| TargetError::Resolve {
                url: url.to_string(),
                source,
            })?
            .next()
            .ok_or_else(|| bad("the host resolves to no address"))?;
        let path: Uri = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/")
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let mut headers = HeaderMap::new();
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
        headers.insert(
            HOST,
            HeaderValue::from_str(authority).map_err(|_| bad("bad host"))?,
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in extra {
            let bad_header = || TargetError::BadHeader { name: name.clone() };
            let name_parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad_header())?;
            let mut value = HeaderValue::from_str(value).map_err(|_| bad_header())?;
            value.set_sensitive(true);
            headers.insert(name_parsed, value);
        }
        Ok(HttpTarget {
            url: url.to_string(),
            addr,
            path,
            headers,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub(super) async fn check_reachable(&self) -> Result<(), TransportError> {
        let connect = TcpStream::connect(self.addr);
        match tokio::time::timeout(Duration::from_secs(5), connect).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(source)) => Err(self.connect_error(source)),
            Err(_) => Err(self.connect_error(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer within 5 s",
            ))),
        }
    }

    fn connect_error(&self, source: std::io::Error) -> TransportError {
        TransportError::Connect {
            url: self.url.clone(),
            source,
        }
    }
}

pub struct HttpConnection {
    sender: SendRequest<Full<Bytes>>,
    path: Uri,
    headers: HeaderMap,
}

impl HttpConnection {
    /// Opens a connection. Must run inside a `LocalSet`: the connection's
    /// driver is a task on the same thread as its owner.
    pub async fn open(target: &HttpTarget) -> Result<Self, TransportError> {
        let stream = TcpStream::connect(target.addr)
            .await
            .map_err(|e| target.connect_error(e))?;
        // Requests are written whole; waiting for more bytes only adds latency.
        stream.set_nodelay(true).map_err(|e| target.connect_error(e))?;
        let (sender, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| target.connect_error(std::io::Error::other(e)))?;
        tokio::task::spawn_local(async move {
            // The driver ends when the connection closes; the owner notices
            // through `is_closed` or a failed exchange.
            let _ = driver.await;
        });
        Ok(HttpConnection {
            sender,
            path: target.path.clone(),
            headers: target.headers.clone(),
        })
    }

    pub async fn exchange(&mut self, body: Bytes) -> Result<Reply, TransportError> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.path.clone();
        *request.headers_mut() = self.headers.clone();
        self.sender.ready().await.map_err(io_error)?;
        let response = self.sender.send_request(request).await.map_err(io_error)?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    TransportError::TooLarge {
                        limit: MAX_RESPONSE_BYTES,
                    }
                } else {
                    TransportError::Io(e.to_string())
                }
            })?
            .to_bytes();
        Ok(Reply { status, body })
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

fn io_error(e: hyper::Error) -> TransportError {
    TransportError::Io(e.to_string())
}
