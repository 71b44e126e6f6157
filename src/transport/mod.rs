//! How requests travel. One small interface: open a connection, exchange a
//! body for a reply. HTTP/1.1 carries one call at a time per connection;
//! HTTP/2 and the stream transports (TCP, Unix sockets, WebSocket, a
//! child's stdio) multiplex many calls, told apart by id.

mod h2;
mod headers;
mod http;
mod memory;
mod ready;
pub mod sse;
mod stream;
pub mod tls;

pub use headers::{bearer, check_header, MadeHeader, MakeValue};

use std::io;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use thiserror::Error;

use crate::redact;

pub use h2::H2Connection;
pub use http::{HttpConnection, HttpTarget, PipelinedConnection, DEFAULT_MAX_RESPONSE_BYTES};
pub use memory::{Peer, PeerCounts, Seen};
pub use ready::ReadySignal;
pub use stream::{hurry_shutdowns, ChildEnd, MuxConnection, StreamAddr, StreamTarget};

/// How to reach a target URL, beyond the URL itself.
#[derive(Clone, Debug)]
pub struct Options {
    /// Header names and values sent with every HTTP request.
    pub headers: Vec<(String, String)>,
    /// Headers whose values are made for each request (for each handshake,
    /// on a WebSocket): generated values, a fresh JWT.
    pub made_headers: Vec<MadeHeader>,
    /// Answers larger than this are cut off and counted as `io`.
    pub max_response: usize,
    /// HTTP/2: by ALPN to `https://`, with prior knowledge to `http://`.
    pub http2: bool,
    pub tls: crate::tls::TlsOptions,
    /// Results for the requests a server sends to volley.
    pub server_answers: ServerAnswers,
    /// What tells a stdio child is ready (`[ready]`).
    pub ready: Option<ReadySignal>,
    /// HTTP/1.1 requests in flight at once on a connection (pipelining);
    /// 1 waits for each answer.
    pub pipeline: usize,
}

/// No header, no TLS settings, the default answer limit, no pipelining.
impl Default for Options {
    fn default() -> Self {
        Options {
            headers: Vec::new(),
            made_headers: Vec::new(),
            max_response: DEFAULT_MAX_RESPONSE_BYTES,
            http2: false,
            tls: Default::default(),
            server_answers: Default::default(),
            ready: None,
            pipeline: 1,
        }
    }
}

/// The result volley answers a server's own requests with (LSP's
/// `workspace/configuration`, `window/workDoneProgress/create`), so a
/// server waiting on one does not stall: by method, else the default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerAnswers {
    /// JSON text of the result for any method not named below.
    pub default: String,
    /// Method name and JSON text of its result.
    pub by_method: Vec<(String, String)>,
}

impl Default for ServerAnswers {
    fn default() -> Self {
        ServerAnswers {
            default: "null".to_string(),
            by_method: Vec::new(),
        }
    }
}

impl ServerAnswers {
    pub fn result_for(&self, method: &str) -> &str {
        self.by_method
            .iter()
            .find(|(name, _)| name == method)
            .map_or(&self.default, |(_, result)| result)
    }
}

/// Where the load goes, parsed from the target URL.
#[derive(Clone, Debug)]
pub enum Target {
    Http(HttpTarget),
    Stream(StreamTarget),
    /// A scripted peer in memory, for tests of what runs above the
    /// transport; no URL names it.
    Memory(Peer),
}

#[derive(Debug, Error)]
pub enum TargetError {
    #[error("target `{}` is not a valid URL: {reason}", redact::url(.url))]
    BadUrl { url: String, reason: String },
    #[error(
        "target `{}`: scheme `{scheme}` is not supported (supported: http, https, ws, wss, tcp, unix)", redact::url(.url)
    )]
    UnsupportedScheme { url: String, scheme: String },
    #[error("header `{name}` is not a valid HTTP header")]
    BadHeader { name: String },
    #[error("TLS for {}: {reason}", redact::url(.url))]
    Tls { url: String, reason: String },
    #[error("cannot resolve {}: {reason}", redact::url(.url))]
    Resolve { url: String, reason: io::Error },
}

/// `check_header` for a target's headers: a bad one is named, its value
/// never shown (a made one's name alone is checked: its values are made
/// later, and cleaned as they are).
fn headers_for_target(options: &Options) -> Result<(), TargetError> {
    let fixed = options.headers.iter().map(|(n, v)| (n, v.as_str()));
    let made = options.made_headers.iter().map(|m| (&m.name, ""));
    for (name, value) in fixed.chain(made) {
        check_header(name, value).map_err(|_| TargetError::BadHeader {
            name: name.to_string(),
        })?;
    }
    Ok(())
}

/// Every address `host` (anything `lookup_host` takes) resolves to,
/// looked up once before a run; connections try them in turn (`localhost`
/// may be 127.0.0.1 and ::1, with the server on only one).
async fn resolve_host(
    url: &str,
    host: impl tokio::net::ToSocketAddrs,
) -> Result<Vec<std::net::SocketAddr>, TargetError> {
    let addrs: Vec<_> = tokio::net::lookup_host(host)
        .await
        .map_err(|reason| TargetError::Resolve {
            url: url.to_string(),
            reason,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(TargetError::BadUrl {
            url: url.to_string(),
            reason: "the host resolves to no address".into(),
        });
    }
    Ok(addrs)
}

/// The one lookup of a target's host: the host of a URL's `authority` as
/// written (an IPv6 literal keeps its brackets, as TLS names it) and every
/// address it resolves to, by `host_and_port`'s rules.
async fn lookup<'a>(
    url: &str,
    authority: &'a str,
    default_port: Option<u16>,
) -> Result<(&'a str, Vec<std::net::SocketAddr>), TargetError> {
    let (host, port) = host_and_port(url, authority, default_port)?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    Ok((host, resolve_host(url, (bare, port)).await?))
}

/// A URL's user information (`user:password@`) as the `Authorization`
/// header it stands for (HTTP Basic, decoded from percent-encoding), for
/// HTTP and WebSocket targets; `None` without it. `tcp://` and `unix://`
/// have nowhere to send it: refused. A header that sets `Authorization`
/// is the user's to give, and a URL's credentials beside it are refused
/// too, never quietly dropped.
fn credentials(url: &str) -> Result<Option<String>, TargetError> {
    let Some((_, rest)) = url.split_once("://") else {
        return Ok(None);
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let Some((info, _)) = authority.rsplit_once('@') else {
        return Ok(None);
    };
    let bad = |reason: &str| TargetError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    match Scheme::of(url) {
        Some(Scheme::Http | Scheme::Https | Scheme::Ws | Scheme::Wss) => {}
        _ => {
            return Err(bad(
                "this scheme carries no user information (user:password@): give HOST:PORT",
            ))
        }
    }
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(info).collect();
    use base64::Engine;
    Ok(Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(decoded)
    )))
}

/// The host and port of a URL's `authority` (`host:port`, `[::1]:port`,
/// or a bare host when the scheme has a `default_port`). A port that is
/// not a number from 1 to 65535 is an error naming the URL, never a quiet
/// fall back to the scheme's default. The one reading of a host and port,
/// for targets and the recording proxy's upstream alike.
pub fn host_and_port<'a>(
    url: &str,
    authority: &'a str,
    default_port: Option<u16>,
) -> Result<(&'a str, u16), TargetError> {
    let bad = |reason: String| TargetError::BadUrl {
        url: url.to_string(),
        reason,
    };
    // The port follows the last colon, unless that colon is inside an IPv6 literal.
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.is_empty() {
        return Err(bad("no host".into()));
    }
    let port = match (port, default_port) {
        // `u16::from_str` takes a leading `+`: digits only.
        (Some(port), _) => Some(port)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| bad(format!("port `{port}` is not a number from 1 to 65535")))?,
        (None, Some(default)) => default,
        (None, None) => return Err(bad("no port: expected HOST:PORT".into())),
    };
    Ok((host, port))
}

/// The URL schemes volley speaks, each named once: what every question
/// about a target URL (which transport, multiplexed or not, TLS or not,
/// how reports name it) is answered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
    Tcp,
    Unix,
    Ws,
    Wss,
}

impl Scheme {
    const ALL: [(&'static str, Scheme); 6] = [
        ("http", Scheme::Http),
        ("https", Scheme::Https),
        ("tcp", Scheme::Tcp),
        ("unix", Scheme::Unix),
        ("ws", Scheme::Ws),
        ("wss", Scheme::Wss),
    ];

    /// The scheme before `://`, if the URL has one.
    fn name(url: &str) -> Option<&str> {
        url.split_once("://").map(|(scheme, _)| scheme)
    }

    /// The scheme of a target URL, if volley speaks it.
    pub fn of(url: &str) -> Option<Scheme> {
        let name = Self::name(url)?;
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, scheme)| *scheme)
    }

    /// Carries many calls at once on one connection.
    pub fn is_multiplexed(self) -> bool {
        matches!(self, Scheme::Tcp | Scheme::Unix | Scheme::Ws | Scheme::Wss)
    }

    pub fn is_tls(self) -> bool {
        matches!(self, Scheme::Https | Scheme::Wss)
    }

    /// The transport, named as reports name it.
    pub fn label(self, http2: bool) -> &'static str {
        match self {
            Scheme::Ws => "websocket",
            Scheme::Wss => "websocket (tls)",
            Scheme::Tcp => "tcp (ndjson)",
            Scheme::Unix => "unix (ndjson)",
            Scheme::Https if http2 => "http/2 (tls)",
            Scheme::Https => "http/1.1 (tls)",
            Scheme::Http if http2 => "http/2 (h2c)",
            Scheme::Http => "http/1.1",
        }
    }
}

/// Whether a target URL names a transport that carries many calls at once
/// on one connection.
pub fn is_multiplexed(url: &str) -> bool {
    Scheme::of(url).is_some_and(Scheme::is_multiplexed)
}

/// The transport a target URL will use, named as reports name it.
pub fn transport_label(url: &str, http2: bool) -> &'static str {
    if url.starts_with("stdio") {
        return "stdio";
    }
    Scheme::of(url).unwrap_or(Scheme::Http).label(http2)
}

/// The transport as a run's header and `summary.json` name it: its label,
/// and how deep HTTP/1.1 is pipelined where it is.
pub fn describe(url: &str, http2: bool, pipeline: usize) -> String {
    let label = transport_label(url, http2);
    match pipeline {
        0 | 1 => label.to_string(),
        depth => format!("{label}, pipelined {depth} deep"),
    }
}

impl Target {
    /// Parses `url`, resolves its host and reads its TLS files once, before
    /// the run.
    pub async fn resolve(url: &str, options: &Options) -> Result<Target, TargetError> {
        let with_credentials;
        let authorization = |name: &str| name.eq_ignore_ascii_case("authorization");
        let given = options.headers.iter().any(|(name, _)| authorization(name))
            || options.made_headers.iter().any(|m| authorization(&m.name));
        let options = match credentials(url)? {
            Some(_) if given => {
                return Err(TargetError::BadUrl {
                    url: url.to_string(),
                    reason: "its user information (user:password@) and an Authorization header both give credentials: keep one".into(),
                })
            }
            Some(basic) => {
                with_credentials = Options {
                    headers: [("Authorization".to_string(), basic)]
                        .into_iter()
                        .chain(options.headers.iter().cloned())
                        .collect(),
                    ..options.clone()
                };
                &with_credentials
            }
            None => options,
        };
        match (Scheme::of(url), Scheme::name(url)) {
            (Some(Scheme::Http | Scheme::Https), _) => {
                Ok(Target::Http(HttpTarget::resolve(url, options).await?))
            }
            (Some(_), _) => Ok(Target::Stream(StreamTarget::resolve(url, options).await?)),
            (None, None | Some("")) => Err(TargetError::BadUrl {
                url: url.to_string(),
                reason: "expected a URL such as http://127.0.0.1:8545".to_string(),
            }),
            (None, Some(other)) => Err(TargetError::UnsupportedScheme {
                url: url.to_string(),
                scheme: other.to_string(),
            }),
        }
    }

    /// The URL as given: requests go there. Outputs show it through
    /// [`redact::url`].
    pub fn url(&self) -> &str {
        match self {
            Target::Http(t) => t.url(),
            Target::Stream(t) => t.url(),
            Target::Memory(_) => "memory",
        }
    }

    /// Whether a connection carries no session, so that any connection
    /// serves a flow's next step (HTTP/1.1 and h2; a WebSocket, a socket
    /// or a child may hold a session's state).
    pub fn is_stateless(&self) -> bool {
        match self {
            Target::Http(_) => true,
            Target::Stream(_) => false,
            Target::Memory(peer) => peer.is_stateless(),
        }
    }

    pub fn transport_name(&self) -> &'static str {
        match self {
            Target::Http(t) => transport_label(t.url(), t.http2),
            Target::Stream(t) => transport_label(t.url(), false),
            Target::Memory(_) => "memory",
        }
    }

    /// Opens and closes one connection, so an unreachable target is a clear
    /// error before the run instead of a run full of `connect` outcomes.
    /// A server that accepts but never completes the opening (TLS or the
    /// WebSocket handshake) fails it after `within`, never hangs it.
    /// Returns what TLS agreed on (version, cipher suite, ALPN), if any.
    pub async fn check_reachable(&self, within: Duration) -> Result<Option<String>, TransportError> {
        // h2c is open only once the server speaks: the check says so when
        // it does not, bounded by `within` itself (`H2Connection::open`).
        if let Target::Http(t) = self {
            if t.http2 && t.tls.is_none() {
                // Its driver is a local task, gone with the set.
                let local = tokio::task::LocalSet::new();
                return local.run_until(H2Connection::open(t, within)).await.map(|_| None);
            }
        }
        let check = async {
            match self {
                Target::Http(t) => t.check_reachable(within).await,
                Target::Stream(t) => t.check_reachable().await,
                Target::Memory(_) => Ok(None),
            }
        };
        tokio::time::timeout(within, check)
            .await
            .unwrap_or_else(|_| Err(self.not_opened_within(within)))
    }

    fn not_opened_within(&self, within: Duration) -> TransportError {
        TransportError::Connect {
            url: self.url().to_string(),
            reason: not_ready_within(within),
        }
    }
}

/// A connection not open within the timeout.
fn not_ready_within(within: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "the connection was not ready within {} (the timeout): the server accepted but did not complete the opening",
            humantime::format_duration(within)
        ),
    )
}

/// An answer as the transport delivered it.
#[derive(Clone, Debug)]
pub struct Reply {
    /// HTTP status, or 200 for transports without one.
    pub status: u16,
    pub body: Bytes,
    /// Messages that came with the answer but answered nothing (events of
    /// an MCP event stream: log messages, progress).
    pub others: u64,
}

#[derive(Debug, Error)]
pub enum TransportError {
    // Not a `source`: the reason is in the message, and `{:#}` would say it twice.
    #[error("cannot connect to {}: {reason}", redact::url(.url))]
    Connect { url: String, reason: io::Error },
    #[error("{0}")]
    Io(String),
    #[error("answer larger than {limit} bytes")]
    TooLarge { limit: usize },
}

/// One open connection to the target. Must be used inside a `LocalSet`.
pub enum Connection {
    Http(HttpConnection),
    /// HTTP/1.1 pipelined: shared by the callers on it, answered in order.
    Pipelined(Rc<PipelinedConnection>),
    /// Shared by the callers multiplexed on it.
    Http2(Rc<H2Connection>),
    /// Shared by the callers multiplexed on it.
    Stream(Rc<MuxConnection>),
}

impl Connection {
    /// Opens a connection (TCP, TLS, the WebSocket handshake, a child), or
    /// fails after `within`: a server that accepts and stays silent must
    /// not hold a caller forever.
    pub async fn open(target: &Target, within: Duration) -> Result<Connection, TransportError> {
        // Bounded by `within` itself, to say what it waited for.
        if let Target::Http(t) = target {
            if t.http2 {
                return Ok(Connection::Http2(H2Connection::open(t, within).await?));
            }
        }
        let open = async {
            match target {
                Target::Http(t) if t.http2 => unreachable!("opened above"),
                Target::Http(t) if t.pipeline > 1 => {
                    Ok(Connection::Pipelined(PipelinedConnection::open(t).await?))
                }
                Target::Http(t) => Ok(Connection::Http(HttpConnection::open(t).await?)),
                Target::Stream(t) => Ok(Connection::Stream(MuxConnection::open(t).await?)),
                Target::Memory(peer) => Ok(Connection::Stream(peer.open(DEFAULT_MAX_RESPONSE_BYTES))),
            }
        };
        tokio::time::timeout(within, open)
            .await
            .unwrap_or_else(|_| Err(target.not_opened_within(within)))
    }

    /// Sends a request whose calls have the ids `first_id..first_id + calls`.
    pub async fn exchange(
        &mut self,
        body: Bytes,
        first_id: u64,
        calls: u64,
    ) -> Result<Reply, TransportError> {
        match self {
            Connection::Http(c) => c.exchange(body).await,
            Connection::Pipelined(c) => c.exchange(body).await,
            Connection::Http2(c) => c.exchange(body).await,
            Connection::Stream(c) => c.exchange(body, first_id, calls).await,
        }
    }

    /// Sends `body` as it is and returns what came back within `within`,
    /// whatever its ids: `volley check`'s probes (invalid JSON, an empty
    /// batch) are answered with ids no call has. `None`: nothing came (on a
    /// stream; HTTP always answers, if with an empty body).
    pub async fn probe(&mut self, body: Bytes, within: Duration) -> Result<Option<Reply>, TransportError> {
        let exchanged = match self {
            Connection::Http(c) => tokio::time::timeout(within, c.exchange(body)).await,
            Connection::Pipelined(c) => tokio::time::timeout(within, c.exchange(body)).await,
            Connection::Http2(c) => tokio::time::timeout(within, c.exchange(body)).await,
            Connection::Stream(c) => {
                let answer = c.probe(&body, within).await?;
                return Ok(answer.map(|body| Reply {
                    status: 200,
                    body,
                    others: 0,
                }));
            }
        };
        match exchanged {
            Ok(reply) => reply.map(Some),
            Err(_) => Err(TransportError::Io(format!(
                "no HTTP answer within {}",
                humantime::format_duration(within)
            ))),
        }
    }

    /// Connections opened inside the last exchanges in place of one the
    /// server closed while idle (HTTP/1.1 replaces its stream itself).
    pub fn take_reopened(&mut self) -> u32 {
        match self {
            Connection::Http(c) => c.take_reopened(),
            _ => 0,
        }
    }

    /// A closed connection is reopened before the next call, not counted as
    /// an error: servers may close idle keep-alive connections at will.
    pub fn is_closed(&self) -> bool {
        match self {
            Connection::Http(c) => c.is_closed(),
            Connection::Pipelined(c) => c.is_closed(),
            Connection::Http2(c) => c.is_closed(),
            Connection::Stream(c) => c.is_closed(),
        }
    }

    /// How a closed stdio connection's child ended; `None` for others.
    pub async fn child_exit(&self) -> Option<String> {
        match self {
            Connection::Stream(c) if c.is_closed() => c.child_exit().await,
            _ => None,
        }
    }

    /// Ends a stdio child as its protocol says (see `MuxConnection::shut_down`);
    /// `None` for connections without one.
    pub async fn shut_down(self) -> Option<ChildEnd> {
        match self {
            Connection::Stream(c) => c.shut_down().await,
            _ => None,
        }
    }

    /// Whether this handle is the connection's last: no other caller holds
    /// it, so ending it now cuts no call short.
    pub fn is_last_handle(&self) -> bool {
        match self {
            Connection::Http(_) => true,
            Connection::Pipelined(c) => Rc::strong_count(c) == 1,
            Connection::Http2(c) => Rc::strong_count(c) == 1,
            Connection::Stream(c) => Rc::strong_count(c) == 1,
        }
    }

    /// Whether the connection is a child process's stdio, which ends by its
    /// protocol's shutdown (`shut_down`) rather than by a close.
    pub fn has_child(&self) -> bool {
        matches!(self, Connection::Stream(c) if c.has_child())
    }

    /// The multiplexed connection underneath, where subscriptions live.
    pub fn multiplexed(&self) -> Option<&MuxConnection> {
        match self {
            Connection::Stream(c) => Some(c),
            _ => None,
        }
    }

    /// Another handle on a multiplexed connection; `None` for one that
    /// carries a single call at a time.
    pub fn another_handle(&self) -> Option<Connection> {
        match self {
            Connection::Http(_) => None,
            Connection::Pipelined(c) => Some(Connection::Pipelined(c.clone())),
            Connection::Http2(c) => Some(Connection::Http2(c.clone())),
            Connection::Stream(c) => Some(Connection::Stream(c.clone())),
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connection")
    }
}

#[cfg(test)]
mod credentials_tests {
    use super::*;

    #[test]
    fn a_urls_user_information_is_basic_credentials_decoded() {
        let basic = credentials("https://alice:hunter%32pass@example.com/v3/k?x=1").unwrap();
        // base64("alice:hunter2pass"), as RFC 7617 writes it.
        assert_eq!(basic.as_deref(), Some("Basic YWxpY2U6aHVudGVyMnBhc3M="));
        assert_eq!(
            credentials("ws://u:p@127.0.0.1:1/").unwrap().as_deref(),
            Some("Basic dTpw")
        );
        assert_eq!(
            credentials("http://127.0.0.1:1/a@b").unwrap(),
            None,
            "an @ in the path is no user"
        );
        assert_eq!(credentials("http://127.0.0.1:1/").unwrap(), None);
        let refused = credentials("tcp://u:p@127.0.0.1:1").unwrap_err().to_string();
        assert!(
            refused.contains("carries no user information") && !refused.contains(":p@"),
            "{refused}"
        );
    }
}
