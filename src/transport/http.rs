//! JSON-RPC over HTTP/1.1: one POST per request, keep-alive, one call in
//! flight per connection.
//!
//! Written by hand rather than with hyper's client: a load generator's
//! client does one thing, and doing it directly (a request head serialized
//! once, one write per request, buffers reused, the answer parsed in place
//! with `httparse`) cut volley's user CPU per call by 40% (1.96 s to 1.16 s over 5 s)
//! against the built-in server on the 2-core development machine (see
//! `benches/peers.sh`).

use std::future::Future;
use std::net::SocketAddr;
use std::task::Poll;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::tls::{self, ClientTls};
use super::{Options, Reply, TargetError, TransportError};
use crate::rpc::wire;
use crate::tls::{NetStream, ALPN_H2, ALPN_HTTP1};

/// Answers larger than this are cut off and counted as `io`.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// Headers read from an answer at most.
const MAX_HEADERS: usize = 64;
/// An answer's head, or a chunked answer's trailers, larger than this is
/// refused: no server needs more, and one that never ends must not grow
/// the buffer without bound.
const MAX_HEAD_BYTES: usize = wire::MAX_HEAD_BYTES;
/// A chunk-size line (extensions included) longer than this is refused.
const MAX_LINE_BYTES: usize = 4 * 1024;
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
        let secure = uri.scheme_str() == Some("https");
        let authority = uri
            .authority()
            .map(|a| a.as_str())
            .ok_or_else(|| bad("no host"))?;
        // Credentials (`user:pass@`) are not the host's business here.
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = super::host_and_port(url, host_port, Some(if secure { 443 } else { 80 }))?;
        let lookup_host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs = super::resolve_host(url, (lookup_host, port)).await?;
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
        let mut head = format!("POST {path} HTTP/1.1\r\nHost: {authority}\r\n");
        for (name, value) in extra {
            super::header_for_target(name, value)?;
        }
        for (name, value) in super::headers::request_headers(extra, super::headers::Request::Post) {
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
        let mut stream = self.connect().await?;
        tls::settle(&mut stream)
            .await
            .map_err(|e| self.connect_error(e))?;
        Ok(tls::describe(&stream))
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
    /// Answers read whole on this stream: a connection that has carried
    /// one may have been closed by the server since.
    answered: u64,
    /// Some byte of the answer being read has come.
    heard: bool,
    /// Where a fresh stream comes from when the server closed this one
    /// between calls; `None` for a stream given from outside. Boxed: the
    /// connection lives in an enum beside pointer-sized variants.
    target: Option<Box<HttpTarget>>,
    /// MCP's `Mcp-Session-Id`, as the server last gave it: sent back on
    /// every later request of this connection.
    session: Vec<u8>,
}

impl HttpConnection<NetStream> {
    pub async fn open(target: &HttpTarget) -> Result<Self, TransportError> {
        let stream = target.connect().await?;
        let mut connection = HttpConnection::over(stream, target.head.clone(), target.max_response);
        connection.target = Some(Box::new(target.clone()));
        Ok(connection)
    }

    /// Sends one request and reads its answer. A keep-alive connection the
    /// server closed while it sat idle, without `Connection: close`, is
    /// replaced by a new one first, so the call never meets the dead one.
    pub async fn exchange(&mut self, body: Bytes) -> Result<Reply, TransportError> {
        if self.answered > 0 && self.closed_while_idle().await {
            let reopened = match &self.target {
                Some(target) => Some(target.connect().await),
                None => None,
            };
            match reopened {
                Some(Ok(stream)) => {
                    self.stream = stream;
                    self.input.clear();
                    self.answered = 0;
                }
                Some(Err(e)) => {
                    self.closed = true;
                    return Err(e);
                }
                None => {}
            }
        }
        self.send(body).await
    }
}

/// How the answer's body is delimited.
#[derive(Debug, PartialEq, Eq)]
enum BodyLength {
    Length(usize),
    Chunked,
    UntilClose,
}

/// Interim (1xx) answers taken before the real one, at most: a server
/// sending them forever must not hold the call in a loop.
const MAX_INTERIM: u32 = 16;

impl<S: AsyncRead + AsyncWrite + Unpin> HttpConnection<S> {
    pub fn over(stream: S, head: Bytes, limit: usize) -> Self {
        HttpConnection {
            stream,
            head,
            limit,
            out: Vec::with_capacity(1024),
            input: BytesMut::with_capacity(READ_CHUNK),
            closed: false,
            answered: 0,
            heard: false,
            target: None,
            session: Vec::new(),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Sends one request on this stream and reads its answer. Any error
    /// leaves the connection closed: its stream is in an unknown state.
    pub async fn send(&mut self, body: Bytes) -> Result<Reply, TransportError> {
        let reused = self.answered > 0;
        self.heard = false;
        let result = match self.write_request(&body).await {
            Ok(()) => self.read_answer().await,
            Err(e) => Err(e),
        };
        match &result {
            Ok(_) => self.answered += 1,
            Err(_) => self.closed = true,
        }
        // A reused connection that failed before any byte of its answer
        // came was most likely closed by the server before the request
        // reached it: said apart, since the server never saw this call.
        result.map_err(|e| match e {
            TransportError::Io(reason) if reused && !self.heard => {
                TransportError::Io(self.closed_unannounced(&reason))
            }
            other => other,
        })
    }

    fn closed_unannounced(&self, reason: &str) -> String {
        format!(
            "the server closed this keep-alive connection (after {} on it, without `Connection: close`) before answering; the request may never have reached it ({reason})",
            match self.answered {
                1 => "1 answer".to_string(),
                n => format!("{n} answers"),
            }
        )
    }

    /// Whether the server closed this idle connection (or wrote to it out
    /// of turn, as a `408` before closing). The read is polled once, never
    /// waited for, and costs no system call when nothing came: tokio knows
    /// the socket was drained by the last answer's read and reads it again
    /// only once the kernel has reported something.
    async fn closed_while_idle(&mut self) -> bool {
        if !self.input.is_empty() {
            // Bytes after the last answer: nothing to pair them with.
            return true;
        }
        self.input.reserve(READ_CHUNK);
        let mut read = std::pin::pin!(self.stream.read_buf(&mut self.input));
        let polled = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
        // End of stream, an error, or bytes nobody asked for.
        polled.is_ready()
    }

    async fn write_request(&mut self, body: &[u8]) -> Result<(), TransportError> {
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
            .map_err(|e| io_error("sending the request", e))
    }

    /// Reads the final answer, skipping interim (1xx) ones.
    async fn read_answer(&mut self) -> Result<Reply, TransportError> {
        let mut interim = 0;
        let head = loop {
            let head = self.read_head().await?;
            if let Some(session) = &head.session {
                self.session.clear();
                self.session.extend_from_slice(&self.input[session.clone()]);
            }
            self.input.advance(head.length);
            // 1xx answers are interim: the real one follows (101 aside,
            // after which the connection speaks another protocol).
            if !(100..200).contains(&head.status) || head.status == 101 {
                break head;
            }
            interim += 1;
            if interim > MAX_INTERIM {
                return Err(TransportError::Io(format!(
                    "more than {MAX_INTERIM} interim (1xx) answers to one request"
                )));
            }
        };
        let body = match head.framing {
            BodyLength::Length(length) => {
                // Room for the whole body at once (its length is within the
                // limit): a large answer is read into place, not copied
                // over and over as the buffer doubles.
                self.input.reserve(length.saturating_sub(self.input.len()));
                while self.input.len() < length {
                    // There is room for the rest: reading never grows (and
                    // copies) the buffer.
                    self.read_more().await?;
                }
                self.input.split_to(length).freeze()
            }
            BodyLength::Chunked => self.read_chunked().await?,
            BodyLength::UntilClose => self.read_until_close().await?,
        };
        if head.close {
            self.closed = true;
        }
        let (body, others) = if head.event_stream {
            super::sse::decode(&body)
        } else {
            (body, 0)
        };
        Ok(Reply {
            status: head.status,
            body,
            others,
        })
    }

    /// Reads until a whole answer head is in, at most `MAX_HEAD_BYTES`.
    /// A head that comes in pieces is parsed again only once a blank line
    /// has come: a server sending it a byte at a time costs a scan of each
    /// byte, not a parse of the whole head per byte.
    async fn read_head(&mut self) -> Result<Head, TransportError> {
        let mut scanned = None;
        loop {
            let complete = match scanned {
                // Most answers arrive whole: parsed at once, nothing scanned.
                None => true,
                Some(scanned) => ends_a_line_twice(&self.input[scanned..]),
            };
            let too_large =
                || TransportError::Io(format!("the answer's head is larger than {MAX_HEAD_BYTES} bytes"));
            if complete {
                if let Some(head) = parse_head(&self.input, self.limit)? {
                    // The bound holds however the head came: whole in one
                    // read, or in pieces.
                    if head.length > MAX_HEAD_BYTES {
                        return Err(too_large());
                    }
                    return Ok(head);
                }
            }
            if self.input.len() > MAX_HEAD_BYTES {
                return Err(too_large());
            }
            // From two bytes back: the blank line may straddle two reads.
            scanned = Some(self.input.len().saturating_sub(2));
            self.fill().await?;
        }
    }

    /// A body without a length: everything until the server closes.
    async fn read_until_close(&mut self) -> Result<Bytes, TransportError> {
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
        Ok(self.input.split().freeze())
    }

    /// Reads more of the answer; the end of the stream here is an error.
    async fn fill(&mut self) -> Result<(), TransportError> {
        self.input.reserve(READ_CHUNK);
        self.read_more().await
    }

    /// Reads what fits in the buffer's spare room (there must be some).
    async fn read_more(&mut self) -> Result<(), TransportError> {
        debug_assert!(self.input.capacity() > self.input.len());
        match self.stream.read_buf(&mut self.input).await {
            Ok(0) => Err(TransportError::Io(
                "the connection closed before the answer was complete".into(),
            )),
            Ok(_) => {
                self.heard = true;
                Ok(())
            }
            Err(e) => Err(io_error("reading the answer", e)),
        }
    }

    /// A chunked body (RFC 9112 §7.1), held to the size limit as it comes:
    /// a chunk's size is checked against what room is left before any of
    /// it is read, so no size a server names can overflow or be waited for.
    async fn read_chunked(&mut self) -> Result<Bytes, TransportError> {
        let mut body = BytesMut::new();
        loop {
            let line_end = self.line_end().await?;
            let line = &self.input[..line_end];
            let size = chunk_size(line).ok_or_else(|| {
                TransportError::Io(format!(
                    "bad chunk size `{}` in a chunked answer",
                    String::from_utf8_lossy(&line[..line.len().min(32)])
                ))
            })?;
            self.input.advance(line_end + 2);
            if size == 0 {
                self.skip_trailers().await?;
                return Ok(body.freeze());
            }
            // `body` never passes the limit, so the room left is exact.
            let room = self.limit - body.len();
            let size = usize::try_from(size)
                .ok()
                .filter(|size| *size <= room)
                .ok_or(TransportError::TooLarge { limit: self.limit })?;
            let with_crlf = size
                .checked_add(2)
                .ok_or(TransportError::TooLarge { limit: self.limit })?;
            while self.input.len() < with_crlf {
                self.fill().await?;
            }
            if &self.input[size..with_crlf] != b"\r\n" {
                return Err(TransportError::Io(
                    "a chunk of a chunked answer does not end with CRLF".into(),
                ));
            }
            body.extend_from_slice(&self.input[..size]);
            self.input.advance(with_crlf);
        }
    }

    /// The trailer section after the last chunk: field lines, then an empty
    /// line, all within `MAX_HEAD_BYTES`. Trailers are not used.
    async fn skip_trailers(&mut self) -> Result<(), TransportError> {
        let mut taken = 0;
        loop {
            let end = self.line_end().await?;
            if end > 0 && !self.input[..end].contains(&b':') {
                return Err(TransportError::Io(
                    "a trailer line of a chunked answer is not a field".into(),
                ));
            }
            self.input.advance(end + 2);
            taken += end + 2;
            if end == 0 {
                return Ok(());
            }
            if taken > MAX_HEAD_BYTES {
                return Err(TransportError::Io(format!(
                    "the trailers of a chunked answer are larger than {MAX_HEAD_BYTES} bytes"
                )));
            }
        }
    }

    /// The offset of the first CRLF in the input, reading as needed; a
    /// line longer than `MAX_LINE_BYTES` is an error.
    async fn line_end(&mut self) -> Result<usize, TransportError> {
        let mut scanned: usize = 0;
        loop {
            // From one byte back: a CR may have ended the last read.
            let from = scanned.saturating_sub(1);
            if let Some(at) = self.input[from..].windows(2).position(|w| w == b"\r\n") {
                return Ok(from + at);
            }
            if self.input.len() > MAX_LINE_BYTES {
                return Err(TransportError::Io(format!(
                    "a line of a chunked answer is longer than {MAX_LINE_BYTES} bytes"
                )));
            }
            scanned = self.input.len();
            self.fill().await?;
        }
    }
}

/// What an answer's head says.
struct Head {
    status: u16,
    /// Of the head itself.
    length: usize,
    framing: BodyLength,
    /// The server closes the connection after this answer.
    close: bool,
    /// The body is a server-sent-event stream (MCP's streamable HTTP).
    event_stream: bool,
    /// Where in the input the `Mcp-Session-Id` value lies, if given.
    session: Option<std::ops::Range<usize>>,
}

/// The headers that say how a body is delimited, as found.
#[derive(Default)]
struct FramingFields {
    /// The `Content-Length`; every such field must agree.
    length: Option<u64>,
    /// A `Transfer-Encoding` field was there.
    transfer_encoding: bool,
    /// Its codings, all fields together, are exactly `chunked`.
    chunked: bool,
}

/// Parses a complete answer head; `None` until it has all arrived.
fn parse_head(input: &[u8], limit: usize) -> Result<Option<Head>, TransportError> {
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
        Err(httparse::Error::TooManyHeaders) => {
            return Err(TransportError::Io(format!(
                "the answer has more than {MAX_HEADERS} header fields"
            )))
        }
        Err(e) => return Err(TransportError::Io(format!("not an HTTP/1.1 answer: {e}"))),
    };
    let status = response.code.unwrap_or(0);
    let http10 = response.version == Some(0);
    // RFC 9112 §6.3 rule 1: these answers have no body, whatever their
    // fields say, so those fields are not looked at.
    let no_body = status == 204 || status == 304 || (100..200).contains(&status);
    let (mut keep_alive, mut close) = (false, false);
    let mut event_stream = false;
    let mut session = None;
    let mut fields = FramingFields::default();
    for header in response.headers.iter() {
        let (name, value) = (header.name, header.value);
        if name.eq_ignore_ascii_case("content-type") {
            event_stream = value.starts_with(b"text/event-stream");
        } else if name.eq_ignore_ascii_case("mcp-session-id") {
            // The value borrows from `input`: its offset is where it lies.
            let start = value.as_ptr() as usize - input.as_ptr() as usize;
            session = Some(start..start + value.len());
        } else if name.eq_ignore_ascii_case("connection") {
            close |= has_token(value, b"close");
            keep_alive |= has_token(value, b"keep-alive");
        } else if !no_body {
            fields.add(name, value)?;
        }
    }
    Ok(Some(Head {
        status,
        length: head_len,
        framing: if no_body {
            BodyLength::Length(0)
        } else {
            framing(http10, &fields, limit)?
        },
        // HTTP/1.0 closes unless asked not to; 101 leaves HTTP behind.
        close: close || (http10 && !keep_alive) || status == 101,
        event_stream,
        session,
    }))
}

impl FramingFields {
    /// Takes in one header field, if it is one of those that frame a body.
    fn add(&mut self, name: &str, value: &[u8]) -> Result<(), TransportError> {
        if name.eq_ignore_ascii_case("content-length") {
            let length = wire::content_length(value).ok_or_else(|| {
                TransportError::Io(format!(
                    "an invalid Content-Length `{}`",
                    String::from_utf8_lossy(&value[..value.len().min(32)])
                ))
            })?;
            if self.length.is_some_and(|earlier| earlier != length) {
                return Err(TransportError::Io("two Content-Length fields that differ".into()));
            }
            self.length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            for coding in list_elements(value) {
                // `chunked` must be the one coding, and only once: volley
                // asks for no other (it sends no `TE`).
                if !coding.eq_ignore_ascii_case(b"chunked") || self.chunked {
                    return Err(TransportError::Io(format!(
                        "Transfer-Encoding `{}`: volley accepts only `chunked`, once",
                        String::from_utf8_lossy(&value[..value.len().min(64)])
                    )));
                }
                self.chunked = true;
            }
            self.transfer_encoding = true;
        }
        Ok(())
    }
}

/// How the body of an answer that has one is delimited, by RFC 9112
/// §6.3's rules 3 to 8 in their order; framing that is invalid is an
/// error, never a guess at a body.
fn framing(http10: bool, fields: &FramingFields, limit: usize) -> Result<BodyLength, TransportError> {
    let invalid = |why: &str| Err(TransportError::Io(format!("invalid framing: {why}")));
    if fields.transfer_encoding {
        if http10 {
            // §6.1: Transfer-Encoding in HTTP/1.0 means faulty framing.
            return invalid("Transfer-Encoding in an HTTP/1.0 answer");
        }
        if fields.length.is_some() {
            // §6.3 rule 3: the mark of request smuggling; an error here.
            return invalid("both Transfer-Encoding and Content-Length");
        }
        if !fields.chunked {
            return invalid("an empty Transfer-Encoding");
        }
        return Ok(BodyLength::Chunked);
    }
    match fields.length {
        Some(length) => usize::try_from(length)
            .ok()
            .filter(|length| *length <= limit)
            .map(BodyLength::Length)
            .ok_or(TransportError::TooLarge { limit }),
        // Rule 8: until the server closes.
        None => Ok(BodyLength::UntilClose),
    }
}

/// Whether `bytes` hold the end of a head: a line end right after another
/// (`\n\n` or `\n\r\n`, as `httparse` takes either).
fn ends_a_line_twice(bytes: &[u8]) -> bool {
    bytes.windows(2).enumerate().any(|(at, w)| {
        w[0] == b'\n' && (w[1] == b'\n' || (w[1] == b'\r' && bytes.get(at + 2) == Some(&b'\n')))
    })
}

/// The elements of a comma-separated field value, without the optional
/// whitespace around them; empty elements are skipped (RFC 9110 §5.6.1).
fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|b| *b == b',')
        .map(wire::trim_ows)
        .filter(|element| !element.is_empty())
}

/// Whether a `Connection` field's value names `token`.
fn has_token(value: &[u8], token: &[u8]) -> bool {
    list_elements(value).any(|element| element.eq_ignore_ascii_case(token))
}

/// The size of a chunk-size line (`1*HEXDIG [ chunk-ext ]`, RFC 9112
/// §7.1), or `None` when the line is not one. Checked arithmetic: a size
/// past u64 saturates to u64::MAX, past every limit, and never wraps.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let (hex, rest) = line.split_at(digits);
    // Extensions follow optional whitespace and a `;`; they are ignored.
    let rest = wire::trim_ows(rest);
    if hex.is_empty() || !(rest.is_empty() || rest[0] == b';') {
        return None;
    }
    Some(hex.iter().fold(0u64, |size, digit| {
        let value = (*digit as char).to_digit(16).unwrap_or(0);
        size.checked_mul(16)
            .and_then(|size| size.checked_add(u64::from(value)))
            .unwrap_or(u64::MAX)
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
    /// pieces of `piece` bytes); returns the reply, the request seen, and
    /// whether the connection is closed after it.
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
        let reply = connection.send(Bytes::from_static(b"{\"a\":1}")).await;
        (reply, peer.await.unwrap(), connection.is_closed())
    }

    /// The error an answer gets, whole or sent a byte at a time (the same
    /// either way); the connection is closed after it.
    async fn refused(answer: &[u8]) -> TransportError {
        let mut errors = Vec::new();
        // A byte at a time, or near it for long answers (a yield a piece).
        let small = answer.len() / 2048 + 1;
        for piece in [small, 1 << 20] {
            let (reply, _, closed) = exchange(answer, piece).await;
            assert!(closed, "the connection stays open after {reply:?}");
            errors.push(reply.expect_err("an error"));
        }
        assert_eq!(errors[0].to_string(), errors[1].to_string());
        errors.remove(0)
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
        let answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n2 ; e\r\nef\r\n0\r\nTrailer: 1\r\n\r\n";
        for piece in [1, 7, 1000] {
            let (reply, _, closed) = exchange(answer, piece).await;
            let reply = reply.unwrap();
            assert_eq!(
                (reply.status, &reply.body[..], closed),
                (503, &b"abcdef"[..], false)
            );
        }
    }

    #[tokio::test]
    async fn honours_connection_close_and_close_delimited_bodies() {
        let (reply, _, closed) = exchange(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok",
            100,
        )
        .await;
        assert_eq!(&reply.unwrap().body[..], b"ok");
        assert!(closed);
        let (reply, _, closed) = exchange(b"HTTP/1.0 200 OK\r\n\r\nuntil the end", 4).await;
        assert_eq!(&reply.unwrap().body[..], b"until the end");
        assert!(closed);
        let (reply, _, closed) = exchange(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nk",
            4,
        )
        .await;
        assert_eq!(&reply.unwrap().body[..], b"k");
        assert!(!closed);
        // No body for a 204, whatever its fields say (RFC 9112 §6.3 rule 1).
        let (reply, _, _) = exchange(b"HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n", 100).await;
        assert_eq!(reply.unwrap().body.len(), 0);
        // The same number twice is one length (RFC 9110 §8.6).
        let (reply, _, _) = exchange(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok",
            100,
        )
        .await;
        assert_eq!(&reply.unwrap().body[..], b"ok");
    }

    #[tokio::test]
    async fn a_cut_answer_or_garbage_is_an_io_error() {
        let error = refused(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").await;
        assert!(matches!(error, TransportError::Io(_)), "{error:?}");
        let error = refused(b"SSH-2.0-OpenSSH\r\n\r\n").await;
        assert!(error.to_string().contains("not an HTTP/1.1 answer"), "{error}");
        let error = refused(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n").await;
        assert!(matches!(error, TransportError::TooLarge { .. }), "{error:?}");
    }

    #[tokio::test]
    async fn invalid_framing_is_an_error_never_a_guess() {
        const OK: &[u8] = b"HTTP/1.1 200 OK\r\n";
        let cases: [(&[u8], &str); 9] = [
            (
                b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                "both",
            ),
            (b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", "both"),
            (b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok", "differ"),
            (b"Content-Length: +2\r\n\r\nok", "invalid Content-Length"),
            (b"Content-Length: 2a\r\n\r\nok", "invalid Content-Length"),
            (b"Content-Length: 2, 3\r\n\r\nok", "invalid Content-Length"),
            (b"Transfer-Encoding: gzip, chunked\r\n\r\n", "only `chunked`"),
            (
                b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                "only `chunked`",
            ),
            (b"Transfer-Encoding: chunked, gzip\r\n\r\n", "only `chunked`"),
        ];
        for (rest, says) in cases {
            let error = refused(&[OK, rest].concat()).await.to_string();
            assert!(error.contains(says), "{}: {error}", String::from_utf8_lossy(rest));
        }
        let error = refused(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").await;
        assert!(error.to_string().contains("HTTP/1.0"), "{error}");
    }

    #[tokio::test]
    async fn bad_chunks_are_errors() {
        let head: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let bad_sizes: [&[u8]; 6] = [b"+4", b"g", b"", b" 4", b"4x", b"-1"];
        for size in bad_sizes {
            let answer = [head, size, b"\r\nabcd\r\n0\r\n\r\n"].concat();
            let error = refused(&answer).await.to_string();
            assert!(
                error.contains("bad chunk size"),
                "{}: {error}",
                String::from_utf8_lossy(size)
            );
        }
        let error = refused(&[head, b"4\r\nabcdXY0\r\n\r\n"].concat()).await;
        assert!(error.to_string().contains("does not end with CRLF"), "{error}");
        let error = refused(&[head, b"0\r\nnot a field\r\n\r\n"].concat()).await;
        assert!(error.to_string().contains("trailer"), "{error}");
        let long_line = [head, &[b'0'; MAX_LINE_BYTES + 1]].concat();
        assert!(refused(&long_line).await.to_string().contains("longer than"));
    }

    #[tokio::test]
    async fn chunk_sizes_near_and_past_2_to_the_64_are_too_large_never_an_overflow() {
        let head: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n";
        let sizes: [&[u8]; 4] = [
            b"ffffffffffffffff",
            b"fffffffffffffffe",
            b"10000000000000000",
            b"0000000000000000000000000000000000800001",
        ];
        for size in sizes {
            let error = refused(&[head, size, b"\r\nabcd\r\n"].concat()).await;
            assert!(matches!(error, TransportError::TooLarge { .. }), "{error:?}");
        }
        let huge_length = b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n";
        assert!(matches!(
            refused(huge_length).await,
            TransportError::TooLarge { .. }
        ));
    }

    #[tokio::test]
    async fn heads_trailers_and_interim_answers_are_bounded() {
        let many = "X: 1\r\n".repeat(MAX_HEADERS + 1);
        let error = refused(format!("HTTP/1.1 200 OK\r\n{many}\r\n").as_bytes()).await;
        assert!(error.to_string().contains("header fields"), "{error}");
        let huge = format!("HTTP/1.1 200 OK\r\nX: {}\r\n", "y".repeat(MAX_HEAD_BYTES));
        let error = refused(huge.as_bytes()).await;
        assert!(error.to_string().contains("head is larger"), "{error}");
        // A whole head past the bound, blank line and body included.
        let whole = format!(
            "HTTP/1.1 200 OK\r\nX: {}\r\nContent-Length: 2\r\n\r\n{{}}",
            "y".repeat(70_000)
        );
        let error = refused(whole.as_bytes()).await;
        assert!(error.to_string().contains("head is larger"), "{error}");
        let trailers = "T: 1\r\n".repeat(MAX_HEAD_BYTES / 6 + 2);
        let answer = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n{trailers}\r\n");
        let error = refused(answer.as_bytes()).await;
        assert!(error.to_string().contains("trailers"), "{error}");
        let interim = "HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM as usize + 1);
        let error = refused(interim.as_bytes()).await;
        assert!(error.to_string().contains("interim"), "{error}");
    }

    #[test]
    fn chunk_size_lines_are_hex_then_extensions() {
        assert_eq!(chunk_size(b"1f"), Some(31));
        assert_eq!(chunk_size(b"1F;name=value"), Some(31));
        assert_eq!(chunk_size(b"0 \t; x"), Some(0));
        assert_eq!(chunk_size(b"ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(chunk_size(b"1ffffffffffffffff"), Some(u64::MAX));
        for bad in [&b""[..], b";", b"x", b"1 2", b"0x1", b"1\r"] {
            assert_eq!(chunk_size(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    /// A real socket: the server answers once, without `Connection: close`,
    /// and closes. The next call goes out on a new connection, and the
    /// server sees it.
    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced_before_the_next_call() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut request = vec![0u8; 4096];
                let _ = stream.read(&mut request).await.unwrap();
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await
                    .unwrap();
            }
        });
        let options = Options {
            headers: Vec::new(),
            max_response: DEFAULT_MAX_RESPONSE_BYTES,
            http2: false,
            tls: Default::default(),
            server_answers: Default::default(),
        };
        let target = HttpTarget::resolve(&url, &options).await.unwrap();
        let mut connection = HttpConnection::open(&target).await.unwrap();
        assert_eq!(
            &connection.exchange(Bytes::from_static(b"{}")).await.unwrap().body[..],
            b"ok"
        );
        // Idle until the server's close has surely come in.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let second = connection.exchange(Bytes::from_static(b"{}")).await;
        assert_eq!(&second.unwrap().body[..], b"ok");
        server.await.unwrap();
    }

    /// When the close is not seen in time (the call follows at once), the
    /// call that meets it is told apart from other failures.
    #[tokio::test]
    async fn a_call_that_meets_a_connection_closed_unannounced_says_so() {
        let (client, mut server) = duplex(1 << 16);
        let peer = tokio::spawn(async move {
            let mut request = vec![0u8; 4096];
            let _ = server.read(&mut request).await.unwrap();
            server
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await
                .unwrap();
            // Reads the second request, then goes without answering.
            let _ = server.read(&mut request).await.unwrap();
        });
        let mut connection = HttpConnection::over(client, Bytes::from_static(b"POST / HTTP/1.1\r\n"), 1024);
        connection.send(Bytes::from_static(b"{}")).await.unwrap();
        let error = connection.send(Bytes::from_static(b"{}")).await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("(after 1 answer on it, without `Connection: close`)"),
            "{error}"
        );
        peer.await.unwrap();
    }
}
