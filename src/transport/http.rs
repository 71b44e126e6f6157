//! JSON-RPC over HTTP/1.1: one POST per request, keep-alive, one call in
//! flight per connection.
//!
//! Written by hand rather than with hyper's client: a load generator's
//! client does one thing, and doing it directly (a request head serialized
//! once, one write per request, buffers reused, the answer parsed in place
//! with `httparse`) cut volley's user CPU per call by 40% (1.96 s to 1.16 s over 5 s)
//! against the built-in server on the 2-core development machine (see
//! `benches/peers.sh`).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::tls::{self, ClientTls, NetStream, ALPN_H2, ALPN_HTTP1};
use super::{Options, Reply, TargetError, TransportError};

/// Answers larger than this are cut off and counted as `io`.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// Headers read from an answer at most.
const MAX_HEADERS: usize = 64;
const READ_CHUNK: usize = 16 * 1024;

#[derive(Clone)]
pub struct HttpTarget {
    url: String,
    addrs: Vec<SocketAddr>,
    /// Everything of a request's head before its `Content-Length`.
    head: Bytes,
    /// Answers larger than this are cut off.
    max_response: usize,
    /// Extra headers, for transports that build their own requests.
    headers: Vec<(String, String)>,
    /// HTTP/2 instead of HTTP/1.1: by ALPN over TLS, else cleartext with
    /// prior knowledge.
    pub(super) http2: bool,
    /// For `https://`.
    pub(super) tls: Option<ClientTls>,
}

/// Header values may be secrets: never shown.
impl std::fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTarget")
            .field("url", &self.url)
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

impl HttpTarget {
    pub(super) async fn resolve(url: &str, options: &Options) -> Result<Self, TargetError> {
        let extra = &options.headers;
        let bad = |reason: &str| TargetError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let host = uri.host().ok_or_else(|| bad("no host"))?;
        let secure = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
        let lookup_host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs = super::resolve_host(url, (lookup_host, port)).await?;
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nUser-Agent: volley/{}\r\n",
            env!("CARGO_PKG_VERSION")
        );
        for (name, value) in extra {
            super::check_header(name, value)?;
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let alpn = if options.http2 { ALPN_H2 } else { ALPN_HTTP1 };
        let tls = secure
            .then(|| ClientTls::new(url, host, &options.tls, alpn))
            .transpose()?;
        Ok(HttpTarget {
            url: url.to_string(),
            addrs,
            head: Bytes::from(head),
            max_response: options.max_response,
            headers: extra.to_vec(),
            http2: options.http2,
            tls,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Opens a connection, over TLS for `https://`.
    pub(super) async fn connect(&self) -> Result<NetStream, TransportError> {
        tls::connect(&self.addrs, self.tls.as_ref())
            .await
            .map_err(|e| self.connect_error(e))
    }

    pub(super) fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    pub(super) fn max_response(&self) -> usize {
        self.max_response
    }

    /// Returns what TLS agreed on, if any.
    pub(super) async fn check_reachable(&self) -> Result<Option<String>, TransportError> {
        let check = async {
            let mut stream = self.connect().await?;
            tls::settle(&mut stream)
                .await
                .map_err(|e| self.connect_error(e))?;
            Ok(tls::describe(&stream))
        };
        match tokio::time::timeout(Duration::from_secs(5), check).await {
            Ok(result) => result,
            Err(_) => Err(self.connect_error(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer within 5 s",
            ))),
        }
    }

    pub(super) fn connect_error(&self, source: std::io::Error) -> TransportError {
        TransportError::Connect {
            url: self.url.clone(),
            reason: source,
        }
    }
}

/// One keep-alive connection.
pub struct HttpConnection<S = NetStream> {
    stream: S,
    head: Bytes,
    limit: usize,
    out: Vec<u8>,
    input: BytesMut,
    closed: bool,
    /// MCP's `Mcp-Session-Id`, as the server last gave it: sent back on
    /// every later request of this connection.
    session: Vec<u8>,
}

impl HttpConnection<NetStream> {
    pub async fn open(target: &HttpTarget) -> Result<Self, TransportError> {
        let stream = target.connect().await?;
        Ok(HttpConnection::over(
            stream,
            target.head.clone(),
            target.max_response,
        ))
    }
}

/// How the answer's body is delimited.
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

impl<S: AsyncRead + AsyncWrite + Unpin> HttpConnection<S> {
    pub fn over(stream: S, head: Bytes, limit: usize) -> Self {
        HttpConnection {
            stream,
            head,
            limit,
            out: Vec::with_capacity(1024),
            input: BytesMut::with_capacity(READ_CHUNK),
            closed: false,
            session: Vec::new(),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub async fn exchange(&mut self, body: Bytes) -> Result<Reply, TransportError> {
        let result = self.exchange_inner(&body).await;
        if result.is_err() {
            self.closed = true;
        }
        result
    }

    async fn exchange_inner(&mut self, body: &[u8]) -> Result<Reply, TransportError> {
        self.out.clear();
        self.out.extend_from_slice(&self.head);
        if !self.session.is_empty() {
            self.out.extend_from_slice(b"Mcp-Session-Id: ");
            self.out.extend_from_slice(&self.session);
            self.out.extend_from_slice(b"\r\n");
        }
        self.out.extend_from_slice(b"Content-Length: ");
        self.out
            .extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        self.out.extend_from_slice(b"\r\n\r\n");
        self.out.extend_from_slice(body);
        self.stream
            .write_all(&self.out)
            .await
            .map_err(|e| io_error("sending the request", e))?;
        // TLS holds records until flushed; a plain socket's flush is free.
        self.stream
            .flush()
            .await
            .map_err(|e| io_error("sending the request", e))?;

        loop {
            let Head {
                status,
                length: head_len,
                framing,
                close,
                event_stream,
                session,
            } = loop {
                if let Some(parsed) = parse_head(&self.input)? {
                    break parsed;
                }
                self.fill().await?;
            };
            if let Some(session) = session {
                self.session.clear();
                self.session.extend_from_slice(&self.input[session]);
            }
            // 1xx answers are interim: the real one follows.
            if (100..200).contains(&status) && status != 101 {
                self.input.advance(head_len);
                continue;
            }
            self.input.advance(head_len);
            let body = match framing {
                Framing::Length(length) => {
                    if length > self.limit {
                        return Err(TransportError::TooLarge { limit: self.limit });
                    }
                    while self.input.len() < length {
                        self.fill().await?;
                    }
                    self.input.split_to(length).freeze()
                }
                Framing::Chunked => self.read_chunked().await?,
                Framing::UntilClose => {
                    loop {
                        if self.input.len() > self.limit {
                            return Err(TransportError::TooLarge { limit: self.limit });
                        }
                        self.input.reserve(READ_CHUNK);
                        let read = self.stream.read_buf(&mut self.input).await;
                        if read.map_err(|e| io_error("reading the answer", e))? == 0 {
                            break;
                        }
                    }
                    self.closed = true;
                    self.input.split().freeze()
                }
            };
            if close {
                self.closed = true;
            }
            if event_stream {
                let (body, others) = super::sse::decode(&body);
                return Ok(Reply { status, body, others });
            }
            return Ok(Reply {
                status,
                body,
                others: 0,
            });
        }
    }

    /// Reads more of the answer; the end of the stream here is an error.
    async fn fill(&mut self) -> Result<(), TransportError> {
        self.input.reserve(READ_CHUNK);
        match self.stream.read_buf(&mut self.input).await {
            Ok(0) => Err(TransportError::Io(
                "the connection closed before the answer was complete".into(),
            )),
            Ok(_) => Ok(()),
            Err(e) => Err(io_error("reading the answer", e)),
        }
    }

    async fn read_chunked(&mut self) -> Result<Bytes, TransportError> {
        let mut body = BytesMut::new();
        loop {
            let line_end = self.line_end(0).await?;
            let size_text = std::str::from_utf8(&self.input[..line_end]).unwrap_or("");
            let size_text = size_text.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| {
                TransportError::Io(format!("bad chunk size `{size_text}` in a chunked answer"))
            })?;
            self.input.advance(line_end + 2);
            if size == 0 {
                // Trailers, if any, end with an empty line.
                loop {
                    let end = self.line_end(0).await?;
                    self.input.advance(end + 2);
                    if end == 0 {
                        return Ok(body.freeze());
                    }
                }
            }
            if body.len() + size > self.limit {
                return Err(TransportError::TooLarge { limit: self.limit });
            }
            while self.input.len() < size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.input[..size]);
            if &self.input[size..size + 2] != b"\r\n" {
                return Err(TransportError::Io(
                    "a chunk of a chunked answer does not end with CRLF".into(),
                ));
            }
            self.input.advance(size + 2);
        }
    }

    /// The offset of the next CRLF at or after `from`, reading as needed.
    async fn line_end(&mut self, from: usize) -> Result<usize, TransportError> {
        loop {
            if let Some(at) = self.input[from..].windows(2).position(|w| w == b"\r\n") {
                return Ok(from + at);
            }
            if self.input.len() > 64 * 1024 {
                return Err(TransportError::Io("a chunked answer has an overlong line".into()));
            }
            self.fill().await?;
        }
    }
}

/// What an answer's head says.
struct Head {
    status: u16,
    /// Of the head itself.
    length: usize,
    framing: Framing,
    /// The server closes the connection after this answer.
    close: bool,
    /// The body is a server-sent-event stream (MCP's streamable HTTP).
    event_stream: bool,
    /// Where in the input the `Mcp-Session-Id` value lies, if given.
    session: Option<std::ops::Range<usize>>,
}

/// Parses a complete answer head.
fn parse_head(input: &[u8]) -> Result<Option<Head>, TransportError> {
    // Left uninitialized: zeroing 64 headers per answer showed in profiles.
    let mut headers = [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let head_len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        input,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(TransportError::Io(format!("not an HTTP/1.1 answer: {e}"))),
    };
    let status = response.code.unwrap_or(0);
    let mut framing = Framing::UntilClose;
    let mut close = response.version == Some(0);
    let mut event_stream = false;
    let mut session = None;
    for header in response.headers.iter() {
        let value = header.value;
        if header.name.eq_ignore_ascii_case("content-type") {
            event_stream = value.starts_with(b"text/event-stream");
            continue;
        }
        if header.name.eq_ignore_ascii_case("mcp-session-id") {
            // The value borrows from `input`: its offset is where it lies.
            let start = value.as_ptr() as usize - input.as_ptr() as usize;
            session = Some(start..start + value.len());
            continue;
        }
        if header.name.eq_ignore_ascii_case("content-length") {
            let length = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
            let length = length.ok_or_else(|| TransportError::Io("a bad Content-Length".into()))?;
            if !matches!(framing, Framing::Chunked) {
                framing = Framing::Length(length);
            }
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            if value.windows(7).any(|w| w.eq_ignore_ascii_case(b"chunked")) {
                framing = Framing::Chunked;
            }
        } else if header.name.eq_ignore_ascii_case("connection") {
            if value.eq_ignore_ascii_case(b"close") {
                close = true;
            } else if value.eq_ignore_ascii_case(b"keep-alive") {
                close = false;
            }
        }
    }
    if status == 204 || status == 304 || (100..200).contains(&status) {
        framing = Framing::Length(0);
    }
    Ok(Some(Head {
        status,
        length: head_len,
        framing,
        close,
        event_stream,
        session,
    }))
}

fn io_error(doing: &str, e: std::io::Error) -> TransportError {
    TransportError::Io(format!("{doing}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    /// Runs one exchange against a peer that answers with `answer` (sent in
    /// pieces of `piece` bytes); returns the reply and the request seen.
    async fn exchange(answer: &[u8], piece: usize) -> (Result<Reply, TransportError>, String, bool) {
        let (client, mut server) = duplex(1 << 20);
        let answer = answer.to_vec();
        let peer = tokio::spawn(async move {
            let mut request = vec![0u8; 4096];
            let n = server.read(&mut request).await.unwrap();
            for chunk in answer.chunks(piece) {
                server.write_all(chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
            drop(server);
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        let mut connection = HttpConnection::over(
            client,
            Bytes::from_static(b"POST / HTTP/1.1\r\nHost: x\r\n"),
            DEFAULT_MAX_RESPONSE_BYTES,
        );
        let reply = connection.exchange(Bytes::from_static(b"{\"a\":1}")).await;
        (reply, peer.await.unwrap(), connection.is_closed())
    }

    #[tokio::test]
    async fn writes_one_request_and_reads_a_sized_answer_in_pieces() {
        let (reply, request, closed) =
            exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello", 3).await;
        let reply = reply.unwrap();
        assert_eq!(
            (reply.status, &reply.body[..], closed),
            (200, &b"hello"[..], false)
        );
        assert_eq!(
            request,
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
        );
    }

    #[tokio::test]
    async fn decodes_chunked_answers_and_skips_interim_ones() {
        let answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n2\r\nef\r\n0\r\nTrailer: 1\r\n\r\n";
        for piece in [1, 7, 1000] {
            let (reply, _, _) = exchange(answer, piece).await;
            let reply = reply.unwrap();
            assert_eq!((reply.status, &reply.body[..]), (503, &b"abcdef"[..]));
        }
    }

    #[tokio::test]
    async fn honours_connection_close_and_close_delimited_bodies() {
        let (reply, _, closed) = exchange(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
            100,
        )
        .await;
        assert_eq!(&reply.unwrap().body[..], b"ok");
        assert!(closed);
        let (reply, _, closed) = exchange(b"HTTP/1.0 200 OK\r\n\r\nuntil the end", 4).await;
        assert_eq!(&reply.unwrap().body[..], b"until the end");
        assert!(closed);
        let (reply, _, _) = exchange(b"HTTP/1.1 204 No Content\r\n\r\n", 100).await;
        assert_eq!(reply.unwrap().body.len(), 0);
    }

    #[tokio::test]
    async fn a_cut_answer_or_garbage_is_an_io_error() {
        let (reply, _, closed) = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 100).await;
        assert!(matches!(reply, Err(TransportError::Io(_))), "{reply:?}");
        assert!(closed);
        let (reply, _, _) = exchange(b"SSH-2.0-OpenSSH\r\n\r\n", 100).await;
        assert!(
            matches!(reply, Err(TransportError::Io(ref m)) if m.contains("not an HTTP/1.1 answer")),
            "{reply:?}"
        );
        let (reply, _, _) = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n", 100).await;
        assert!(matches!(reply, Err(TransportError::TooLarge { .. })), "{reply:?}");
    }
}
