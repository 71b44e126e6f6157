//! How requests travel. One small interface: connect, exchange a body for a
//! reply. Each connection is owned by exactly one engine task, so a
//! connection count asked for is the count opened.

mod http;

use std::fmt;
use std::io;

use bytes::Bytes;
use thiserror::Error;

pub use http::{HttpConnection, HttpTarget, DEFAULT_MAX_RESPONSE_BYTES};

/// Where the load goes, parsed from the target URL.
#[derive(Clone, Debug)]
pub enum Target {
    Http(HttpTarget),
}

#[derive(Debug, Error)]
pub enum TargetError {
    #[error("target `{url}` is not a valid URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("target `{url}`: scheme `{scheme}` is not supported yet (supported: http)")]
    UnsupportedScheme { url: String, scheme: String },
    #[error("header `{name}` is not a valid HTTP header")]
    BadHeader { name: String },
    #[error("cannot resolve {url}: {source}")]
    Resolve { url: String, source: io::Error },
}

impl Target {
    /// Parses `url` and resolves its host once, before the run.
    pub async fn resolve(
        url: &str,
        headers: &[(String, String)],
        max_response: usize,
    ) -> Result<Target, TargetError> {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
        match scheme {
            "http" => Ok(Target::Http(
                HttpTarget::resolve(url, headers, max_response).await?,
            )),
            "" => Err(TargetError::BadUrl {
                url: url.to_string(),
                reason: "expected a URL such as http://127.0.0.1:8545".to_string(),
            }),
            other => Err(TargetError::UnsupportedScheme {
                url: url.to_string(),
                scheme: other.to_string(),
            }),
        }
    }

    /// The URL as given, for reports.
    pub fn url(&self) -> &str {
        match self {
            Target::Http(t) => t.url(),
        }
    }

    pub fn transport_name(&self) -> &'static str {
        match self {
            Target::Http(_) => "http/1.1",
        }
    }

    /// Opens and closes one connection, so an unreachable target is a clear
    /// error before the run instead of a run full of `connect` outcomes.
    pub async fn check_reachable(&self) -> Result<(), TransportError> {
        match self {
            Target::Http(t) => t.check_reachable().await,
        }
    }
}

/// An answer as the transport delivered it.
#[derive(Clone, Debug)]
pub struct Reply {
    /// HTTP status, or 200 for transports without one.
    pub status: u16,
    pub body: Bytes,
}

#[derive(Debug, Error)]
pub enum TransportError {
    #[error("cannot connect to {url}: {source}")]
    Connect { url: String, source: io::Error },
    #[error("{0}")]
    Io(String),
    #[error("answer larger than {limit} bytes")]
    TooLarge { limit: usize },
}

/// One open connection to the target.
pub enum Connection {
    Http(HttpConnection),
}

impl Connection {
    pub async fn open(target: &Target) -> Result<Connection, TransportError> {
        match target {
            Target::Http(t) => Ok(Connection::Http(HttpConnection::open(t).await?)),
        }
    }

    pub async fn exchange(&mut self, body: Bytes) -> Result<Reply, TransportError> {
        match self {
            Connection::Http(c) => c.exchange(body).await,
        }
    }

    /// A closed connection is reopened before the next call, not counted as
    /// an error: servers may close idle keep-alive connections at will.
    pub fn is_closed(&self) -> bool {
        match self {
            Connection::Http(c) => c.is_closed(),
        }
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Connection")
    }
}
