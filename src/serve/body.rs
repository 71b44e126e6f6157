//! Answer bodies for the chaos faults that live in the transfer itself:
//! sent slowly, cut by a reset, or far too large.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

/// The answer in pieces, with a pause before each, optionally failing
/// (which makes the server drop the connection) after `fail_at` bytes.
pub struct Dribble {
    data: Bytes,
    at: usize,
    piece: usize,
    pause: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    fail_at: Option<usize>,
}

impl Dribble {
    pub fn slow(data: Bytes, piece: usize, pause: Duration) -> Self {
        Dribble {
            data,
            at: 0,
            piece: piece.max(1),
            pause,
            sleep: None,
            fail_at: None,
        }
    }

    pub fn cut(data: Bytes) -> Self {
        let half = data.len() / 2;
        Dribble {
            data,
            at: 0,
            piece: half.max(1),
            pause: Duration::ZERO,
            sleep: None,
            fail_at: Some(half),
        }
    }
}

impl Body for Dribble {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        if this.fail_at.is_some_and(|fail| this.at >= fail) {
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "chaos: reset",
            ))));
        }
        if this.at >= this.data.len() {
            return Poll::Ready(None);
        }
        if !this.pause.is_zero() {
            let pause = this.pause;
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
            ready!(sleep.as_mut().poll(cx));
            this.sleep = None;
        }
        let end = (this.at + this.piece).min(this.data.len());
        let piece = this.data.slice(this.at..end);
        this.at = end;
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.len() as u64)
    }
}

/// `length` bytes of a JSON string, sent without holding them in memory.
pub struct Filler {
    left: usize,
    started: bool,
    chunk: Bytes,
}

impl Filler {
    pub fn new(length: usize) -> Self {
        Filler {
            left: length,
            started: false,
            chunk: Bytes::from(vec![b'x'; 64 * 1024]),
        }
    }
}

impl Body for Filler {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        if this.left == 0 {
            return Poll::Ready(None);
        }
        let piece = if this.started {
            this.chunk.slice(..this.chunk.len().min(this.left))
        } else {
            this.started = true;
            Bytes::from_static(br#"{"jsonrpc":"2.0","result":""#)
        };
        this.left -= piece.len().min(this.left);
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left as u64)
    }
}
