//! The connections an endpoint holds: a bounded number, each busy (a
//! request read, its answer going out) or idle (waiting for a request's
//! head). A connection that comes when every slot is held takes the place
//! of the one idle longest: clients that connect and send nothing can fill
//! the slots, but never keep the next scrape out, and memory stays bounded.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Body;

/// The slots of one endpoint.
pub(super) struct Slots {
    capacity: usize,
    epoch: Instant,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    next: u64,
    /// By id, which is the order they came in.
    conns: BTreeMap<u64, Arc<Conn>>,
}

impl Slots {
    pub fn new(capacity: usize) -> Arc<Slots> {
        Arc::new(Slots {
            capacity: capacity.max(1),
            epoch: Instant::now(),
            held: Mutex::new(Held::default()),
        })
    }

    /// A slot for a new connection: a free one; else the slot of the
    /// connection idle longest, which is closed; else, when every
    /// connection is busy (pages reading `/events`, say), the oldest's: a
    /// page reconnects by itself, and a scrape must get in.
    pub fn admit(self: &Arc<Self>) -> Slot {
        let mut held = self.lock();
        if held.conns.len() >= self.capacity {
            let victim = held.longest_idle().or_else(|| held.conns.keys().next().copied());
            if let Some(id) = victim {
                held.evict(id);
            }
        }
        let id = held.next;
        held.next += 1;
        let conn = Arc::new(Conn::new(self.epoch));
        held.conns.insert(id, conn.clone());
        Slot {
            slots: self.clone(),
            id,
            conn,
        }
    }

    /// Closes the connection idle longest, if one is: an accept failed,
    /// most likely for want of a file descriptor, and an idle connection's
    /// is the one to give back.
    pub fn evict_idle(&self) {
        let mut held = self.lock();
        if let Some(id) = held.longest_idle() {
            held.evict(id);
        }
    }

    /// Connections held now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().conns.len()
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        // The map holds no invariant a panic could break half-way.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Held {
    fn longest_idle(&self) -> Option<u64> {
        (self.conns.iter())
            .filter_map(|(id, conn)| Some((conn.idle_since()?, *id)))
            .min()
            .map(|(_, id)| id)
    }

    fn evict(&mut self, id: u64) {
        if let Some(conn) = self.conns.remove(&id) {
            conn.evicted.cancel();
        }
    }
}

/// A connection's hold on its slot, given back when it is dropped.
pub(super) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    pub conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().conns.remove(&self.id);
    }
}

/// What the endpoint knows of one connection.
pub(super) struct Conn {
    epoch: Instant,
    /// Requests read whose answers are not sent whole yet.
    busy: AtomicUsize,
    /// When it last went idle or sent bytes, in nanoseconds from `epoch`.
    active_at: AtomicU64,
    /// Cancelled when its slot went to a newer connection: it closes.
    pub evicted: CancellationToken,
}

impl Conn {
    fn new(epoch: Instant) -> Conn {
        let conn = Conn {
            epoch,
            busy: AtomicUsize::new(0),
            active_at: AtomicU64::new(0),
            evicted: CancellationToken::new(),
        };
        conn.touch();
        conn
    }

    fn touch(&self) {
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.active_at.store(nanos, Ordering::Release);
    }

    /// Since when it has waited for a request's head; `None` while busy.
    pub fn idle_since(&self) -> Option<Instant> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.epoch + Duration::from_nanos(self.active_at.load(Ordering::Acquire)))
    }

    /// Marks it busy until the guard is dropped.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }
}

/// A request being answered: its connection is busy while this lives.
pub(super) struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        // Touched first: once it reads idle, its wait starts from now.
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, which keeps its connection busy until it is sent
/// whole (or dropped): an `/events` stream is busy as long as it goes, so
/// the rule for idle connections never closes it.
pub(super) struct Tracked {
    body: Body,
    _busy: Busy,
}

impl Tracked {
    pub fn new(body: Body, busy: Busy) -> Tracked {
        Tracked { body, _busy: busy }
    }
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream that notes each write: bytes going out are the
/// client reading an answer, so a slow reader's wait for its next request
/// starts once it has read the answer, not while it still reads.
pub(super) struct Watched<S> {
    stream: S,
    conn: Arc<Conn>,
}

impl<S> Watched<S> {
    pub fn new(stream: S, conn: Arc<Conn>) -> Watched<S> {
        Watched { stream, conn }
    }

    fn noted(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = &written {
            if *n > 0 {
                self.conn.touch();
            }
        }
        written
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.noted(written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.noted(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_endpoint_gives_the_slot_idle_longest_to_the_newcomer() {
        let slots = Slots::new(3);
        let first = slots.admit();
        tokio::time::advance(Duration::from_millis(10)).await;
        let second = slots.admit();
        tokio::time::advance(Duration::from_millis(10)).await;
        let third = slots.admit();
        // The first answers a request, and goes idle after the others.
        drop(first.conn.busy());
        let fourth = slots.admit();
        assert_eq!(slots.len(), 3);
        assert!(second.conn.evicted.is_cancelled(), "idle longest");
        assert!(!first.conn.evicted.is_cancelled() && !third.conn.evicted.is_cancelled());
        assert!(!fourth.conn.evicted.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_gives_way_only_when_none_is_idle() {
        let slots = Slots::new(2);
        let (events, scrape) = (slots.admit(), slots.admit());
        let _reading = events.conn.busy();
        let _ = slots.admit();
        assert!(scrape.conn.evicted.is_cancelled(), "the idle one went");
        assert!(!events.conn.evicted.is_cancelled(), "not the busy one");
        let slots = Slots::new(2);
        let (older, newer) = (slots.admit(), slots.admit());
        let (_a, _b) = (older.conn.busy(), newer.conn.busy());
        let _ = slots.admit();
        assert!(older.conn.evicted.is_cancelled(), "all busy: the oldest");
        assert!(!newer.conn.evicted.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_from_its_last_answer_or_byte_sent() {
        let slots = Slots::new(1);
        let slot = slots.admit();
        let came = Instant::now();
        assert_eq!(slot.conn.idle_since(), Some(came));
        let busy = slot.conn.busy();
        assert_eq!(slot.conn.idle_since(), None, "busy while answering");
        tokio::time::advance(Duration::from_secs(5)).await;
        drop(busy);
        assert_eq!(slot.conn.idle_since(), Some(came + Duration::from_secs(5)));
        drop(slot);
        assert_eq!(slots.len(), 0, "given back");
    }
}
