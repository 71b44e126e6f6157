//! An HTTP target, resolved once before the run: its addresses, its TLS
//! client, and its request head serialized.

use std::net::SocketAddr;

use bytes::Bytes;

use super::framing;
use crate::tls::{NetStream, ALPN_H2, ALPN_HTTP1};
use crate::transport::headers::{self, MadeHeader, Request};
use crate::transport::tls::{self, ClientTls};
use crate::transport::{Options, TargetError, TransportError};

#[derive(Clone)]
pub struct HttpTarget {
    url: String,
    addrs: Vec<SocketAddr>,
    /// Everything of a request's head before its `Content-Length`.
    pub(super) head: Bytes,
    /// Answers larger than this are cut off.
    max_response: usize,
    /// Extra headers, for transports that build their own requests.
    headers: Vec<(String, String)>,
    /// Headers made for each request, written after `head`.
    made: std::sync::Arc<[MadeHeader]>,
    /// HTTP/2 instead of HTTP/1.1: by ALPN over TLS, else cleartext with
    /// prior knowledge.
    pub(in crate::transport) http2: bool,
    /// For `https://`.
    pub(in crate::transport) tls: Option<ClientTls>,
    /// Requests in flight at once on a connection: more than one is
    /// pipelining.
    pub(in crate::transport) pipeline: usize,
}

/// Header values and a URL's keys may be secrets: never shown.
impl std::fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTarget")
            .field("url", &crate::redact::url(&self.url))
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

impl HttpTarget {
    pub(in crate::transport) async fn resolve(url: &str, options: &Options) -> Result<Self, TargetError> {
        let extra = &options.headers;
        let bad = |reason: &str| TargetError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let secure = uri.scheme_str() == Some("https");
        let authority = uri
            .authority()
            .map(|a| a.as_str())
            .ok_or_else(|| bad("no host"))?;
        // Credentials (`user:pass@`) are not the host's business here.
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let default_port = if secure { 443 } else { 80 };
        let (host, addrs) = crate::transport::lookup(url, host_port, Some(default_port)).await?;
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        // RFC 9110 §7.2: the Host header is the host and port only, never
        // the credentials a URL may carry.
        let authority = host_port;
        crate::transport::headers_for_target(options)?;
        let made = &options.made_headers;
        let head = framing::request_head(
            path,
            authority,
            headers::request_headers(extra, made, Request::Post),
        );
        let alpn = if options.http2 { ALPN_H2 } else { ALPN_HTTP1 };
        let tls = secure
            .then(|| ClientTls::new(url, host, &options.tls, alpn))
            .transpose()?;
        Ok(HttpTarget {
            url: url.to_string(),
            addrs,
            head,
            max_response: options.max_response,
            headers: extra.to_vec(),
            made: made.clone().into(),
            http2: options.http2,
            tls,
            pipeline: options.pipeline.max(1),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Opens a connection, over TLS for `https://`.
    pub(in crate::transport) async fn connect(&self) -> Result<NetStream, TransportError> {
        tls::connect(&self.addrs, self.tls.as_ref())
            .await
            .map_err(|e| self.connect_error(e))
    }

    pub(in crate::transport) fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    pub(in crate::transport) fn made(&self) -> &std::sync::Arc<[MadeHeader]> {
        &self.made
    }

    pub(in crate::transport) fn max_response(&self) -> usize {
        self.max_response
    }

    /// Returns what TLS agreed on, if any. `within` bounds the whole
    /// check, the pipelining check's wait for its second answer too.
    pub(in crate::transport) async fn check_reachable(
        &self,
        within: std::time::Duration,
    ) -> Result<Option<String>, TransportError> {
        let mut stream = self.connect().await?;
        tls::settle(&mut stream)
            .await
            .map_err(|e| self.connect_error(e))?;
        if self.pipeline > 1 {
            super::pipeline::check(self, self.pipeline, within / 2).await?;
        }
        Ok(tls::describe(&stream))
    }

    pub(in crate::transport) fn connect_error(&self, source: std::io::Error) -> TransportError {
        TransportError::Connect {
            url: self.url.clone(),
            reason: source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_target_is_looked_up_once_its_credentials_and_brackets_are_off() {
        let options = Options {
            max_response: 1024,
            ..Options::default()
        };
        let target = HttpTarget::resolve("http://user:pw@[::1]/rpc", &options)
            .await
            .unwrap();
        assert_eq!(target.addrs, ["[::1]:80".parse().unwrap()]);
        assert!(target.head.starts_with(b"POST /rpc HTTP/1.1\r\nHost: [::1]\r\n"));
        assert!(!String::from_utf8_lossy(&target.head).contains("pw"));
        let target = HttpTarget::resolve("http://127.0.0.1:8545", &options)
            .await
            .unwrap();
        assert_eq!(target.addrs, ["127.0.0.1:8545".parse().unwrap()]);
        assert!(target
            .head
            .starts_with(b"POST / HTTP/1.1\r\nHost: 127.0.0.1:8545\r\n"));
    }
}
