//! One HTTP/1.1 keep-alive connection: writes each request at once and
//! reads its answer in place (`answers.rs`), with the framing decided in
//! `framing.rs`.

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::answers::Answers;
use super::framing;
use super::HttpTarget;
use crate::tls::NetStream;
use crate::transport::{MadeHeader, Reply, TransportError};

/// One keep-alive connection.
pub struct HttpConnection<S = NetStream> {
    answers: Answers<S>,
    head: Bytes,
    out: Vec<u8>,
    /// Answers read whole on this stream: a connection that has carried
    /// one may have been closed by the server since.
    answered: u64,
    /// Where a fresh stream comes from when the server closed this one
    /// between calls; `None` for a stream given from outside. Boxed: the
    /// connection lives in an enum beside pointer-sized variants.
    target: Option<Box<HttpTarget>>,
    /// Headers made for each request (generated values, a fresh JWT).
    made: std::sync::Arc<[MadeHeader]>,
    /// Streams opened in place of one the server closed while idle, not
    /// yet taken into the run's connection counts.
    reopened: u32,
}

impl HttpConnection<NetStream> {
    pub async fn open(target: &HttpTarget) -> Result<Self, TransportError> {
        let stream = target.connect().await?;
        let mut connection = HttpConnection::over(stream, target.head.clone(), target.max_response());
        connection.made = target.made().clone();
        connection.target = Some(Box::new(target.clone()));
        Ok(connection)
    }

    /// Sends one request and reads its answer. A keep-alive connection the
    /// server closed while it sat idle, without `Connection: close`, is
    /// replaced by a new one first, so the call never meets the dead one.
    pub async fn exchange(&mut self, body: Bytes) -> Result<Reply, TransportError> {
        if self.answered > 0 && self.answers.closed_while_idle().await {
            let reopened = match &self.target {
                Some(target) => Some(target.connect().await),
                None => None,
            };
            match reopened {
                Some(Ok(stream)) => {
                    self.answers.restart(stream);
                    self.answered = 0;
                    self.reopened = self.reopened.saturating_add(1);
                }
                Some(Err(e)) => {
                    self.answers.closed = true;
                    return Err(e);
                }
                None => {}
            }
        }
        self.send(body).await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> HttpConnection<S> {
    pub fn over(stream: S, head: Bytes, limit: usize) -> Self {
        HttpConnection {
            answers: Answers::new(stream, limit),
            head,
            out: Vec::with_capacity(1024),
            answered: 0,
            target: None,
            made: std::sync::Arc::new([]),
            reopened: 0,
        }
    }

    /// The streams opened in place of closed ones since the last asking:
    /// the run counts them as its other reopenings.
    pub fn take_reopened(&mut self) -> u32 {
        std::mem::take(&mut self.reopened)
    }

    pub fn is_closed(&self) -> bool {
        self.answers.closed
    }

    /// Sends one request on this stream and reads its answer. Any error
    /// leaves the connection closed: its stream is in an unknown state.
    pub async fn send(&mut self, body: Bytes) -> Result<Reply, TransportError> {
        let reused = self.answered > 0;
        self.answers.heard = false;
        let written = self.write_request(&body).await;
        // Written, it is no longer needed: the request builder's buffer is
        // reclaimed in place only once no request holds a part of it.
        drop(body);
        let result = match written {
            Ok(()) => self.answers.read_answer().await,
            Err(e) => Err(e),
        };
        match &result {
            Ok(_) => self.answered += 1,
            Err(_) => self.answers.closed = true,
        }
        // A reused connection that failed before any byte of its answer
        // came was most likely closed by the server before the request
        // reached it: said apart, since the server never saw this call.
        result.map_err(|e| match e {
            TransportError::Io(reason) if reused && !self.answers.heard => {
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

    async fn write_request(&mut self, body: &[u8]) -> Result<(), TransportError> {
        self.out.clear();
        framing::frame_request(&mut self.out, &self.head, &self.made, &self.answers.session, body);
        let stream = &mut self.answers.stream;
        stream
            .write_all(&self.out)
            .await
            .map_err(|e| io_error("sending the request", e))?;
        // TLS holds records until flushed; a plain socket's flush is free.
        stream
            .flush()
            .await
            .map_err(|e| io_error("sending the request", e))
    }
}

pub(super) fn io_error(doing: &str, e: std::io::Error) -> TransportError {
    TransportError::Io(format!("{doing}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::http::framing::{MAX_HEADERS, MAX_HEAD_BYTES, MAX_INTERIM, MAX_LINE_BYTES};
    use crate::transport::{Options, DEFAULT_MAX_RESPONSE_BYTES};
    use tokio::io::{duplex, AsyncReadExt};

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

    /// A body that runs to the close may be as large as the limit, and
    /// not a byte larger.
    #[tokio::test]
    async fn a_body_to_the_close_may_be_as_large_as_the_limit_and_no_larger() {
        for (length, fits) in [(16, true), (17, false)] {
            let (client, mut server) = duplex(1 << 16);
            let answer = format!("HTTP/1.0 200 OK\r\n\r\n{}", "x".repeat(length));
            let peer = tokio::spawn(async move {
                let mut request = vec![0u8; 4096];
                let _ = server.read(&mut request).await.unwrap();
                server.write_all(answer.as_bytes()).await.unwrap();
            });
            let head = Bytes::from_static(b"POST / HTTP/1.1\r\nHost: x\r\n");
            let mut connection = HttpConnection::over(client, head, 16);
            let reply = connection.send(Bytes::from_static(b"{}")).await;
            peer.await.unwrap();
            match fits {
                true => assert_eq!(reply.unwrap().body.len(), length),
                false => assert!(
                    matches!(reply, Err(TransportError::TooLarge { limit: 16 })),
                    "{reply:?}"
                ),
            }
        }
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
        // As many as allowed, then the answer: read.
        let allowed = "HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM as usize)
            + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let (reply, _, _) = exchange(allowed.as_bytes(), 1 << 20).await;
        assert_eq!(&reply.unwrap().body[..], b"ok");
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
        let target = HttpTarget::resolve(&url, &Options::default()).await.unwrap();
        let mut connection = HttpConnection::open(&target).await.unwrap();
        assert_eq!(
            &connection.exchange(Bytes::from_static(b"{}")).await.unwrap().body[..],
            b"ok"
        );
        // Idle until the server's close has surely come in.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(connection.take_reopened(), 0);
        let second = connection.exchange(Bytes::from_static(b"{}")).await;
        assert_eq!(&second.unwrap().body[..], b"ok");
        assert_eq!(connection.take_reopened(), 1, "counted for the run");
        assert_eq!(connection.take_reopened(), 0, "once");
        server.await.unwrap();
    }

    /// A server that keeps the connection: every call on the one stream,
    /// none on a new one.
    #[tokio::test]
    async fn a_connection_kept_alive_carries_every_call() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut request = vec![0u8; 4096];
                    while stream.read(&mut request).await.is_ok_and(|n| n > 0) {
                        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(answer).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let target = HttpTarget::resolve(&url, &Options::default()).await.unwrap();
        let mut connection = HttpConnection::open(&target).await.unwrap();
        for _ in 0..3 {
            let reply = connection.exchange(Bytes::from_static(b"{}")).await.unwrap();
            assert_eq!(&reply.body[..], b"ok");
        }
        assert_eq!(connection.take_reopened(), 0);
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
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
