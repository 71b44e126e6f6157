//! HTTP/1.1 framing as pure functions, bytes in and verdicts out: a
//! request's head and frame, an answer's head (read with `httparse`), and
//! how its body is delimited and its chunks read (RFC 9112 §6.3, §7.1).
//! `connection.rs` does the reading and writing around them.

use std::ops::Range;

use bytes::Bytes;

use crate::rpc::wire;
use crate::transport::headers::{write_value, MadeHeader};
use crate::transport::TransportError;

/// Headers read from an answer at most.
pub(super) const MAX_HEADERS: usize = 64;
/// An answer's head, or a chunked answer's trailers, larger than this is
/// refused: no server needs more, and one that never ends must not grow
/// the buffer without bound.
pub(super) const MAX_HEAD_BYTES: usize = wire::MAX_HEAD_BYTES;
/// A chunk-size line (extensions included) longer than this is refused.
pub(super) const MAX_LINE_BYTES: usize = 4 * 1024;
/// Interim (1xx) answers taken before the real one, at most: a server
/// sending them forever must not hold the call in a loop.
pub(super) const MAX_INTERIM: u32 = 16;

/// Everything of a request's head before its `Content-Length`, the same
/// for every request to a target: serialized once.
pub(super) fn request_head<'a>(
    path: &str,
    authority: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Bytes {
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {authority}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    Bytes::from(head)
}

/// A whole request appended to `out`, for one write (pipelined requests
/// go out together): the target's
/// `head`, the headers `made` for this request, MCP's `session` when the
/// server gave one, the body's length and the body.
pub(super) fn frame_request(
    out: &mut Vec<u8>,
    head: &[u8],
    made: &[MadeHeader],
    session: &[u8],
    body: &[u8],
) {
    out.extend_from_slice(head);
    for header in made {
        out.extend_from_slice(header.name.as_bytes());
        out.extend_from_slice(b": ");
        write_value(out, header);
        out.extend_from_slice(b"\r\n");
    }
    if !session.is_empty() {
        out.extend_from_slice(b"Mcp-Session-Id: ");
        out.extend_from_slice(session);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}

/// How the answer's body is delimited.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BodyLength {
    Length(usize),
    Chunked,
    UntilClose,
}

/// What an answer's head says.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) status: u16,
    /// Of the head itself.
    pub(super) length: usize,
    pub(super) framing: BodyLength,
    /// The server closes the connection after this answer.
    pub(super) close: bool,
    /// The body is a server-sent-event stream (MCP's streamable HTTP).
    pub(super) event_stream: bool,
    /// Where in the input the `Mcp-Session-Id` value lies, if given.
    pub(super) session: Option<Range<usize>>,
}

impl Head {
    /// A 1xx answer other than 101: the real one follows (after a 101 the
    /// connection speaks another protocol).
    pub(super) fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// The head at the start of `input`, once it has all come: `None` until
/// then. `scanned`: how far earlier calls looked without finding the end,
/// so a head that comes in pieces is parsed again only once a blank line
/// has come (a server sending it a byte at a time costs a scan of each
/// byte, not a parse of the whole head per byte). A head past
/// `MAX_HEAD_BYTES` is an error however it came: whole, or in pieces.
pub(super) fn head_in(
    input: &[u8],
    scanned: Option<usize>,
    limit: usize,
) -> Result<Option<Head>, TransportError> {
    let too_large = || TransportError::Io(format!("the answer's head is larger than {MAX_HEAD_BYTES} bytes"));
    let complete = match scanned {
        // Most answers arrive whole: parsed at once, nothing scanned.
        None => true,
        Some(scanned) => ends_a_line_twice(&input[scanned..]),
    };
    if complete {
        if let Some(head) = parse_head(input, limit)? {
            if head.length > MAX_HEAD_BYTES {
                return Err(too_large());
            }
            return Ok(Some(head));
        }
    }
    if input.len() > MAX_HEAD_BYTES {
        return Err(too_large());
    }
    Ok(None)
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

/// The offset of the first CRLF in `input`, `None` until one has come.
/// `scanned`: how far earlier calls looked (from one byte back: a CR may
/// have ended the last read). A line longer than `MAX_LINE_BYTES` is an
/// error.
pub(super) fn line_end(input: &[u8], scanned: usize) -> Result<Option<usize>, TransportError> {
    let from = scanned.saturating_sub(1);
    if let Some(at) = input[from..].windows(2).position(|w| w == b"\r\n") {
        return Ok(Some(from + at));
    }
    if input.len() > MAX_LINE_BYTES {
        return Err(TransportError::Io(format!(
            "a line of a chunked answer is longer than {MAX_LINE_BYTES} bytes"
        )));
    }
    Ok(None)
}

/// What a chunk-size line announces.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Chunk {
    /// The last chunk: the trailer section follows.
    Last,
    /// `size` bytes of the body, then a CRLF: `framed` bytes in all.
    Data { size: usize, framed: usize },
}

/// The chunk a chunk-size line announces, held to the `room` left of the
/// body's `limit` before any of it is read: no size a server names can
/// overflow or be waited for.
pub(super) fn chunk(line: &[u8], room: usize, limit: usize) -> Result<Chunk, TransportError> {
    let size = chunk_size(line).ok_or_else(|| {
        TransportError::Io(format!(
            "bad chunk size `{}` in a chunked answer",
            String::from_utf8_lossy(&line[..line.len().min(32)])
        ))
    })?;
    if size == 0 {
        return Ok(Chunk::Last);
    }
    let too_large = TransportError::TooLarge { limit };
    let size = usize::try_from(size)
        .ok()
        .filter(|size| *size <= room)
        .ok_or(too_large)?;
    let framed = size.checked_add(2).ok_or(TransportError::TooLarge { limit })?;
    Ok(Chunk::Data { size, framed })
}

/// The data of a chunk, from `framed` (its data and the CRLF after it).
pub(super) fn chunk_data(framed: &[u8]) -> Result<&[u8], TransportError> {
    match framed.strip_suffix(b"\r\n") {
        Some(data) => Ok(data),
        None => Err(TransportError::Io(
            "a chunk of a chunked answer does not end with CRLF".into(),
        )),
    }
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

/// Takes one line of the trailer section after the last chunk, `taken`
/// counting the section's bytes so far: true at the empty line that ends
/// it. Trailers are not used, only held to field lines within
/// `MAX_HEAD_BYTES`.
pub(super) fn trailer_line(line: &[u8], taken: &mut usize) -> Result<bool, TransportError> {
    if !line.is_empty() && !line.contains(&b':') {
        return Err(TransportError::Io(
            "a trailer line of a chunked answer is not a field".into(),
        ));
    }
    *taken += line.len() + 2;
    if line.is_empty() {
        return Ok(true);
    }
    if *taken > MAX_HEAD_BYTES {
        return Err(TransportError::Io(format!(
            "the trailers of a chunked answer are larger than {MAX_HEAD_BYTES} bytes"
        )));
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 1024;

    fn head(input: &[u8]) -> Head {
        head_in(input, None, LIMIT).unwrap().expect("a whole head")
    }

    fn refused(input: &[u8]) -> String {
        head_in(input, None, LIMIT).expect_err("an error").to_string()
    }

    #[test]
    fn a_request_is_its_head_then_session_length_and_body() {
        let head = request_head("/rpc?x=1", "h:1", [("Accept", "a"), ("X-Key", "k")]);
        assert_eq!(
            &head[..],
            b"POST /rpc?x=1 HTTP/1.1\r\nHost: h:1\r\nAccept: a\r\nX-Key: k\r\n"
        );
        let mut out = b"ahead|".to_vec();
        frame_request(&mut out, &head, &[], b"", b"{}");
        assert_eq!(
            out,
            [b"ahead|", &head[..], b"Content-Length: 2\r\n\r\n{}"].concat()
        );
        out.clear();
        frame_request(&mut out, b"H\r\n", &[], b"s-1", b"");
        assert_eq!(out, b"H\r\nMcp-Session-Id: s-1\r\nContent-Length: 0\r\n\r\n");
    }

    #[test]
    fn a_head_says_status_length_framing_and_where_its_session_lies() {
        let input = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: abc\r\nContent-Length: 5\r\n\r\nhello";
        let parsed = head(input);
        let session = parsed.session.clone().expect("a session id");
        assert_eq!(&input[session], b"abc");
        assert_eq!(
            (
                parsed.status,
                parsed.length,
                parsed.framing,
                parsed.close,
                parsed.event_stream
            ),
            (200, input.len() - 5, BodyLength::Length(5), false, true)
        );
        assert_eq!(head(b"HTTP/1.1 200 OK\r\n\r\n").framing, BodyLength::UntilClose);
        let chunked = head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n");
        assert_eq!(chunked.framing, BodyLength::Chunked);
    }

    #[test]
    fn who_closes_the_connection_after_an_answer() {
        let closes = |input: &[u8]| head(input).close;
        assert!(closes(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n\r\n"
        ));
        assert!(!closes(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(closes(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(!closes(
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(closes(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"));
        // A token is a whole element of the list, not a part of one.
        assert!(!closes(
            b"HTTP/1.1 200 OK\r\nConnection: closed, , x\r\nContent-Length: 0\r\n\r\n"
        ));
    }

    #[test]
    fn answers_without_a_body_ignore_their_framing_fields() {
        for status in [
            "100 Continue",
            "103 Early Hints",
            "204 No Content",
            "304 Not Modified",
        ] {
            let input = format!("HTTP/1.1 {status}\r\nContent-Length: x\r\nTransfer-Encoding: gzip\r\n\r\n");
            assert_eq!(head(input.as_bytes()).framing, BodyLength::Length(0), "{status}");
        }
        let interim = |input: &[u8]| head(input).is_interim();
        assert!(interim(b"HTTP/1.1 100 Continue\r\n\r\n"));
        assert!(!interim(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"));
        assert!(!interim(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
    }

    #[test]
    fn invalid_framing_is_refused_by_rule() {
        let cases: [(&[u8], &str); 5] = [
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "both",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "differ",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: ,\r\n\r\n",
                "empty Transfer-Encoding",
            ),
            (
                b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                "HTTP/1.0",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1025\r\n\r\n",
                "larger than 1024",
            ),
        ];
        for (input, says) in cases {
            let error = refused(input);
            assert!(
                error.contains(says),
                "{}: {error}",
                String::from_utf8_lossy(input)
            );
        }
        assert_eq!(
            head(b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n").framing,
            BodyLength::Length(1024)
        );
    }

    #[test]
    fn a_head_in_pieces_is_parsed_once_its_blank_line_has_come() {
        // Not even parsed: nothing after `scanned` ends it, though the
        // whole input would be a head.
        let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(head_in(whole, Some(whole.len() - 1), LIMIT).unwrap(), None);
        assert!(head_in(whole, Some(whole.len() - 3), LIMIT).unwrap().is_some());
        assert!(head_in(b"HTTP/1.1 200 OK\n\n", Some(10), LIMIT)
            .unwrap()
            .is_some());
        assert_eq!(head_in(b"HTTP/1.1 200 OK\r\n", None, LIMIT).unwrap(), None);
        assert!(ends_a_line_twice(b"x\n\r\n") && ends_a_line_twice(b"\n\n"));
        assert!(!ends_a_line_twice(b"\r\n\r") && !ends_a_line_twice(b"\n\r"));
    }

    #[test]
    fn a_head_past_its_bound_is_refused_whole_or_unfinished() {
        let field = format!("X: {}\r\n", "y".repeat(MAX_HEAD_BYTES));
        let unfinished = format!("HTTP/1.1 200 OK\r\n{field}");
        assert!(refused(unfinished.as_bytes()).contains("head is larger"));
        let whole = format!("HTTP/1.1 200 OK\r\n{field}Content-Length: 0\r\n\r\n");
        assert!(refused(whole.as_bytes()).contains("head is larger"));
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X: 1\r\n".repeat(MAX_HEADERS + 1));
        assert!(refused(many.as_bytes()).contains("header fields"));
        assert!(refused(b"SSH-2.0-OpenSSH\r\n\r\n").contains("not an HTTP/1.1 answer"));
    }

    #[test]
    fn a_line_ends_at_its_crlf_even_split_across_reads() {
        assert_eq!(line_end(b"4\r\nabcd", 0).unwrap(), Some(1));
        // The CR ended the last read: found from one byte back.
        assert_eq!(line_end(b"4\r\n", 2).unwrap(), Some(1));
        assert_eq!(line_end(b"4;x\r", 0).unwrap(), None);
        let long = vec![b'0'; MAX_LINE_BYTES + 1];
        assert!(line_end(&long, 0)
            .unwrap_err()
            .to_string()
            .contains("longer than"));
        assert_eq!(line_end(&long[..MAX_LINE_BYTES], 0).unwrap(), None);
    }

    #[test]
    fn a_chunk_is_held_to_the_room_left_before_it_is_read() {
        assert_eq!(chunk(b"0", 0, LIMIT).unwrap(), Chunk::Last);
        assert_eq!(
            chunk(b"a;x=y", 10, LIMIT).unwrap(),
            Chunk::Data { size: 10, framed: 12 }
        );
        let past = chunk(b"b", 10, LIMIT).unwrap_err();
        assert!(
            matches!(past, TransportError::TooLarge { limit: LIMIT }),
            "{past:?}"
        );
        let huge = chunk(b"ffffffffffffffffff", usize::MAX, usize::MAX).unwrap_err();
        assert!(matches!(huge, TransportError::TooLarge { .. }), "{huge:?}");
        let bad = chunk(b"0x1", LIMIT, LIMIT).unwrap_err().to_string();
        assert!(bad.contains("bad chunk size `0x1`"), "{bad}");
        assert_eq!(chunk_data(b"abcd\r\n").unwrap(), b"abcd");
        let unended = chunk_data(b"abcdXY").unwrap_err().to_string();
        assert!(unended.contains("does not end with CRLF"), "{unended}");
    }

    #[test]
    fn trailers_are_fields_ended_by_an_empty_line_and_bounded() {
        let mut taken = 0;
        assert!(!trailer_line(b"T: 1", &mut taken).unwrap());
        assert!(trailer_line(b"", &mut taken).unwrap());
        assert_eq!(taken, 8);
        let error = trailer_line(b"not a field", &mut 0).unwrap_err().to_string();
        assert!(error.contains("not a field"), "{error}");
        let mut taken = MAX_HEAD_BYTES - 5;
        let error = trailer_line(b"T: 1", &mut taken).unwrap_err().to_string();
        assert!(error.contains("trailers"), "{error}");
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
}
