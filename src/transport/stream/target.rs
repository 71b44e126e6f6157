//! A stream target, resolved once before the run (TCP and WebSocket
//! addresses, a Unix socket's path, a child's command line), and how each
//! kind is connected, the WebSocket opening handshake included.

use std::net::SocketAddr;
use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

use crate::rpc::wire::Framing;
use crate::tls::{NetStream, ALPN_HTTP1};
use crate::transport::headers::{self, MadeHeader, Request};
use crate::transport::tls::{self, ClientTls};
use crate::transport::{Options, Scheme, ServerAnswers, TargetError, TransportError};

#[derive(Clone, Debug)]
pub enum StreamAddr {
    Tcp(Vec<SocketAddr>),
    Unix(PathBuf),
    /// A WebSocket URL and the addresses it resolves to; TLS for `wss://`.
    Ws {
        url: String,
        addrs: Vec<SocketAddr>,
        tls: Option<ClientTls>,
    },
    /// A child process, spoken to over its stdin and stdout.
    Stdio {
        argv: Vec<String>,
        framing: Framing,
    },
}

#[derive(Clone, Debug)]
pub struct StreamTarget {
    url: String,
    pub(super) addr: StreamAddr,
    pub(super) max_response: usize,
    pub(super) server_answers: std::sync::Arc<ServerAnswers>,
    /// Sent with a WebSocket's opening handshake (an API key, say).
    headers: HandshakeHeaders,
    /// The process ids of the children started so far (stdio targets),
    /// each with the calls sent to it, for whoever watches what the server
    /// spends.
    pub(super) children: std::sync::Arc<std::sync::Mutex<Vec<std::sync::Arc<super::ChildLife>>>>,
    /// What tells a child is ready (a stdio target's, when the scenario
    /// names it); without it, its first answer.
    pub(super) ready: Option<std::sync::Arc<crate::transport::ReadySignal>>,
}

/// Header values may be secrets: `Debug` shows the names only. The made
/// ones are made for each handshake.
#[derive(Clone, Default)]
struct HandshakeHeaders(Vec<(String, String)>, Vec<MadeHeader>);

impl std::fmt::Debug for HandshakeHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let made = self.1.iter().map(|m| &m.name);
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| name).chain(made))
            .finish()
    }
}

impl StreamTarget {
    pub(in crate::transport) async fn resolve(url: &str, options: &Options) -> Result<Self, TargetError> {
        let max_response = options.max_response;
        let bad = |reason: &str| TargetError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let scheme = Scheme::of(url).ok_or_else(|| bad("expected tcp://, unix://, ws:// or wss://"))?;
        // After `://`: the scheme itself is known.
        let rest = url.split_once("://").map_or("", |(_, rest)| rest);
        let addr = match scheme {
            Scheme::Ws | Scheme::Wss => {
                let secure = scheme.is_tls();
                let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
                // The user information is sent as a header (`credentials`), not looked up.
                let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
                let default_port = if secure { 443 } else { 80 };
                let (host, addrs) = crate::transport::lookup(url, authority, Some(default_port)).await?;
                let tls = secure
                    .then(|| ClientTls::new(url, host, &options.tls, ALPN_HTTP1))
                    .transpose()?;
                crate::transport::headers_for_target(options)?;
                StreamAddr::Ws {
                    url: url.to_string(),
                    addrs,
                    tls,
                }
            }
            Scheme::Unix if rest.is_empty() => return Err(bad("expected unix:///path/to/socket")),
            Scheme::Unix => StreamAddr::Unix(PathBuf::from(rest)),
            Scheme::Tcp => {
                let authority = rest.trim_end_matches('/');
                if authority.contains(['/', '?', '#']) {
                    return Err(bad("tcp:// takes HOST:PORT alone, with no path or query"));
                }
                let (_, addrs) = crate::transport::lookup(url, authority, None).await?;
                StreamAddr::Tcp(addrs)
            }
            Scheme::Http | Scheme::Https => return Err(bad("expected tcp://HOST:PORT")),
        };
        Ok(StreamTarget {
            url: url.to_string(),
            addr,
            max_response,
            server_answers: std::sync::Arc::new(options.server_answers.clone()),
            headers: HandshakeHeaders(options.headers.clone(), options.made_headers.clone()),
            children: Default::default(),
            ready: None,
        })
    }

    /// A child process per connection: LSP's framing (`Content-Length`),
    /// or one JSON message a line (MCP).
    pub fn command(argv: Vec<String>, framing: Framing, options: &Options) -> Self {
        let url = format!("stdio: {}", argv.join(" "));
        StreamTarget {
            url,
            addr: StreamAddr::Stdio { argv, framing },
            max_response: options.max_response,
            server_answers: std::sync::Arc::new(options.server_answers.clone()),
            headers: HandshakeHeaders::default(),
            children: Default::default(),
            ready: options.ready.clone().map(std::sync::Arc::new),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The children started so far, by process id (a stdio target's).
    pub fn children(&self) -> Vec<u32> {
        let children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        children.iter().map(|life| life.pid).collect()
    }

    /// The calls sent to each child so far, by process id: each child's
    /// share of the load (setup calls and the warmup's too).
    pub fn calls_by_child(&self) -> Vec<(u32, u64)> {
        let children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        (children.iter())
            .map(|life| (life.pid, life.calls.load(std::sync::atomic::Ordering::Relaxed)))
            .collect()
    }

    /// What each child's life came to so far, in the order they started.
    pub fn lives(&self) -> Vec<crate::stats::ChildReady> {
        let children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        children.iter().map(|life| life.record()).collect()
    }

    /// The signal its children are waited for, in words.
    pub fn ready_signal(&self) -> Option<String> {
        self.ready.as_ref().map(|signal| signal.to_string())
    }

    /// Whether connections are child processes.
    pub fn is_command(&self) -> bool {
        matches!(self.addr, StreamAddr::Stdio { .. })
    }

    pub(super) fn connect_error(&self, source: std::io::Error) -> TransportError {
        TransportError::Connect {
            url: self.url.clone(),
            reason: source,
        }
    }

    /// Returns what TLS agreed on, for `wss://`.
    pub(in crate::transport) async fn check_reachable(&self) -> Result<Option<String>, TransportError> {
        match &self.addr {
            StreamAddr::Ws { .. } => Ok(tls::describe(self.connect_ws().await?.get_ref())),
            StreamAddr::Stdio { .. } => self.spawn().map(|_| None),
            _ => self.connect().await.map(|_| None),
        }
    }

    pub(super) async fn connect_ws(&self) -> Result<WebSocketStream<NetStream>, TransportError> {
        let StreamAddr::Ws { url, addrs, tls } = &self.addr else {
            unreachable!("a WebSocket target")
        };
        let stream = tls::connect(addrs, tls.as_ref())
            .await
            .map_err(|e| self.connect_error(e))?;
        // A frame, like a message, is held to the answer limit: a length
        // a server names past it ends the connection instead of being read.
        // A read buffer of 4 KiB, tungstenite's before 0.25 (its default is
        // now 128 KiB, allocated up front for every connection).
        let config = WebSocketConfig::default()
            .max_message_size(Some(self.max_response))
            .max_frame_size(Some(self.max_response))
            .read_buffer_size(4 * 1024);
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| self.connect_error(std::io::Error::other(e)))?;
        let HandshakeHeaders(fixed, made) = &self.headers;
        let wanted = headers::request_headers(fixed, made, Request::Upgrade);
        let mut value = Vec::new();
        let made = made.iter().map(|header| {
            value.clear();
            headers::write_value(&mut value, header);
            (
                header.name.as_str(),
                hyper::header::HeaderValue::from_bytes(&value),
            )
        });
        let fixed =
            (wanted.into_iter()).map(|(name, value)| (name, hyper::header::HeaderValue::from_str(value)));
        for (name, value) in fixed.collect::<Vec<_>>().into_iter().chain(made) {
            // Checked when the scenario was read; a bad one is skipped, never shown.
            if let (Ok(name), Ok(value)) = (hyper::header::HeaderName::from_bytes(name.as_bytes()), value) {
                request.headers_mut().insert(name, value);
            }
        }
        let (socket, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
            .await
            .map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Io(e) => self.connect_error(tls::explain(e, "ws://")),
                other => self.connect_error(std::io::Error::other(other)),
            })?;
        Ok(socket)
    }

    pub(super) async fn connect(
        &self,
    ) -> Result<(Box<dyn AsyncRead + Unpin>, Box<dyn AsyncWrite + Unpin>), TransportError> {
        match &self.addr {
            StreamAddr::Ws { .. } | StreamAddr::Stdio { .. } => unreachable!("connected elsewhere"),
            StreamAddr::Tcp(addrs) => {
                let stream = tokio::net::TcpStream::connect(&addrs[..])
                    .await
                    .map_err(|e| self.connect_error(e))?;
                stream.set_nodelay(true).map_err(|e| self.connect_error(e))?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read), Box::new(write)))
            }
            #[cfg(unix)]
            StreamAddr::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(|e| self.connect_error(e))?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read), Box::new(write)))
            }
            #[cfg(not(unix))]
            StreamAddr::Unix(_) => {
                Err(self.connect_error(std::io::Error::other("Unix sockets need a Unix system")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            max_response: 1024,
            ..Options::default()
        }
    }

    #[tokio::test]
    async fn an_ipv6_literal_is_looked_up_without_its_brackets_with_the_schemes_port() {
        let target = StreamTarget::resolve("tcp://[::1]:9/", &options()).await.unwrap();
        let StreamAddr::Tcp(addrs) = target.addr else {
            panic!("a TCP target: {:?}", target.addr)
        };
        assert_eq!(addrs, ["[::1]:9".parse().unwrap()]);
        let target = StreamTarget::resolve("ws://[::1]/rpc?x=1", &options())
            .await
            .unwrap();
        let StreamAddr::Ws { addrs, .. } = target.addr else {
            panic!("a WebSocket target: {:?}", target.addr)
        };
        assert_eq!(addrs, ["[::1]:80".parse().unwrap()]);
        let error = StreamTarget::resolve("tcp://[::1]", &options())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("no port"), "{error}");
    }
}
