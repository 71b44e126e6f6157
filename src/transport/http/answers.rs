//! Reading HTTP/1.1 answers off a stream, one after another, with the
//! framing decided in `framing.rs`: shared by the connection that waits
//! for each answer and the pipelined one that reads answers in order.

use std::future::Future;
use std::task::Poll;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::connection::io_error;
use super::framing::{self, BodyLength, Chunk, Head};
use crate::transport::{Reply, TransportError};

pub(super) const READ_CHUNK: usize = 16 * 1024;

/// The read side of a connection: its stream and the bytes read ahead.
pub(super) struct Answers<R> {
    pub(super) stream: R,
    input: BytesMut,
    limit: usize,
    /// The server said it closes after this answer (`Connection: close`),
    /// or the body ran to the close: nothing more comes.
    pub(super) closed: bool,
    /// Some byte of the answer being read has come.
    pub(super) heard: bool,
    /// MCP's `Mcp-Session-Id`, as the server last gave it.
    pub(super) session: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Answers<R> {
    pub(super) fn new(stream: R, limit: usize) -> Self {
        Answers {
            stream,
            input: BytesMut::with_capacity(READ_CHUNK),
            limit,
            closed: false,
            heard: false,
            session: Vec::new(),
        }
    }

    /// Forgets what was read ahead (a new stream takes the old one's place).
    pub(super) fn restart(&mut self, stream: R) {
        self.stream = stream;
        self.input.clear();
    }

    /// Whether the server closed this idle connection (or wrote to it out
    /// of turn, as a `408` before closing). The read is polled once, never
    /// waited for, and costs no system call when nothing came: tokio knows
    /// the socket was drained by the last answer's read and reads it again
    /// only once the kernel has reported something.
    pub(super) async fn closed_while_idle(&mut self) -> bool {
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

    /// Reads the final answer, skipping interim (1xx) ones.
    pub(super) async fn read_answer(&mut self) -> Result<Reply, TransportError> {
        let mut interim = 0;
        let head = loop {
            let head = self.read_head().await?;
            if let Some(session) = &head.session {
                self.session.clear();
                self.session.extend_from_slice(&self.input[session.clone()]);
            }
            self.input.advance(head.length);
            if !head.is_interim() {
                break head;
            }
            interim += 1;
            if interim > framing::MAX_INTERIM {
                return Err(TransportError::Io(format!(
                    "more than {} interim (1xx) answers to one request",
                    framing::MAX_INTERIM
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
            crate::transport::sse::decode(&body)
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
    async fn read_head(&mut self) -> Result<Head, TransportError> {
        let mut scanned = None;
        loop {
            if let Some(head) = framing::head_in(&self.input, scanned, self.limit)? {
                return Ok(head);
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

    /// A chunked body (RFC 9112 §7.1), held to the size limit as it comes.
    async fn read_chunked(&mut self) -> Result<Bytes, TransportError> {
        let mut body = BytesMut::new();
        loop {
            let line_end = self.line_end().await?;
            // `body` never passes the limit, so the room left is exact.
            let room = self.limit - body.len();
            let chunk = framing::chunk(&self.input[..line_end], room, self.limit)?;
            self.input.advance(line_end + 2);
            let Chunk::Data { framed, .. } = chunk else {
                self.skip_trailers().await?;
                return Ok(body.freeze());
            };
            while self.input.len() < framed {
                self.fill().await?;
            }
            body.extend_from_slice(framing::chunk_data(&self.input[..framed])?);
            self.input.advance(framed);
        }
    }

    /// The trailer section after the last chunk; trailers are not used.
    async fn skip_trailers(&mut self) -> Result<(), TransportError> {
        let mut taken = 0;
        loop {
            let end = self.line_end().await?;
            let ended = framing::trailer_line(&self.input[..end], &mut taken)?;
            self.input.advance(end + 2);
            if ended {
                return Ok(());
            }
        }
    }

    /// The offset of the first CRLF in the input, reading as needed.
    async fn line_end(&mut self) -> Result<usize, TransportError> {
        let mut scanned: usize = 0;
        loop {
            if let Some(at) = framing::line_end(&self.input, scanned)? {
                return Ok(at);
            }
            scanned = self.input.len();
            self.fill().await?;
        }
    }
}
