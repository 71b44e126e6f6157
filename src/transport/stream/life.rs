//! A stdio child's life as the run sees it: when it was spawned, when it
//! first answered, when it said it was ready (the scenario's signal, such
//! as LSP's `$/progress` end), its resident memory then and as it ended,
//! and the calls sent to it (its share of the load). Kept by its
//! connection, read by whoever reports on the children.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Not yet (the `u64` fields below).
const NOT_YET: u64 = u64::MAX;

#[derive(Debug)]
pub struct ChildLife {
    pub pid: u32,
    spawned: Instant,
    /// The calls sent to it.
    pub calls: AtomicU64,
    /// µs from the spawn to its first answer, and to its ready signal.
    first_answer_us: AtomicU64,
    ready_us: AtomicU64,
    /// Resident bytes when it became ready (its first answer, without a
    /// signal), and as it ended.
    rss_ready: AtomicU64,
    rss_end: AtomicU64,
    /// Wakes whoever waits for it to be ready (its shutdown).
    now_ready: tokio::sync::Notify,
}

impl ChildLife {
    pub fn new(pid: u32, spawned: Instant) -> Self {
        ChildLife {
            pid,
            spawned,
            calls: AtomicU64::new(0),
            first_answer_us: AtomicU64::new(NOT_YET),
            ready_us: AtomicU64::new(NOT_YET),
            rss_ready: AtomicU64::new(NOT_YET),
            rss_end: AtomicU64::new(NOT_YET),
            now_ready: tokio::sync::Notify::new(),
        }
    }

    /// Returns once it is ready (at once, if it is).
    pub async fn until_ready(&self) {
        loop {
            let notified = self.now_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ready_us.load(Ordering::Relaxed) != NOT_YET {
                return;
            }
            notified.await;
        }
    }

    /// An answer came: the first one is kept, and is the ready time too
    /// where the scenario names no signal (`signalled`: it does).
    pub fn answered(&self, signalled: bool) {
        if self.first_answer_us.load(Ordering::Relaxed) != NOT_YET {
            return;
        }
        let at = self.since_spawn();
        self.first_answer_us.store(at, Ordering::Relaxed);
        if !signalled {
            self.became_ready(at);
        }
    }

    /// Whether it said it was ready (or answered, without a signal).
    pub fn is_ready(&self) -> bool {
        self.ready_us.load(Ordering::Relaxed) != NOT_YET
    }

    /// The scenario's ready signal came (the first one counts).
    pub fn signalled(&self) {
        if self.ready_us.load(Ordering::Relaxed) == NOT_YET {
            self.became_ready(self.since_spawn());
        }
    }

    /// It is being ended: its memory now is its memory at the end.
    pub fn ending(&self) {
        if let Some((_, rss)) = crate::proc::read(self.pid) {
            self.rss_end.store(rss, Ordering::Relaxed);
        }
    }

    pub fn record(&self) -> crate::stats::ChildReady {
        let ms = |us: &AtomicU64| {
            Some(us.load(Ordering::Relaxed))
                .filter(|v| *v != NOT_YET)
                .map(|v| v as f64 / 1000.0)
        };
        let bytes = |b: &AtomicU64| Some(b.load(Ordering::Relaxed)).filter(|v| *v != NOT_YET);
        crate::stats::ChildReady {
            pid: self.pid,
            calls: self.calls.load(Ordering::Relaxed),
            first_answer_ms: ms(&self.first_answer_us),
            ready_ms: ms(&self.ready_us),
            rss_at_ready_bytes: bytes(&self.rss_ready),
            rss_at_end_bytes: bytes(&self.rss_end),
        }
    }

    fn became_ready(&self, at: u64) {
        if let Some((_, rss)) = crate::proc::read(self.pid) {
            self.rss_ready.store(rss, Ordering::Relaxed);
        }
        self.ready_us.store(at, Ordering::Relaxed);
        self.now_ready.notify_waiters();
    }

    fn since_spawn(&self) -> u64 {
        u64::try_from(self.spawned.elapsed().as_micros()).unwrap_or(NOT_YET - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answer_and_signal_count_and_memory_is_read_then() {
        let me = std::process::id();
        let unsignalled = ChildLife::new(me, Instant::now());
        assert_eq!(unsignalled.record().ready_ms, None);
        unsignalled.answered(false);
        let first = unsignalled.record();
        assert_eq!(first.ready_ms, first.first_answer_ms, "ready at its first answer");
        assert!(first.rss_at_ready_bytes.is_some_and(|b| b > 0));
        unsignalled.answered(false);
        assert_eq!(unsignalled.record(), first, "only the first answer counts");

        let signalled = ChildLife::new(me, Instant::now());
        signalled.answered(true);
        let answered = signalled.record();
        assert!(answered.first_answer_ms.is_some());
        assert_eq!((answered.ready_ms, answered.rss_at_ready_bytes), (None, None));
        signalled.signalled();
        let ready = signalled.record();
        assert!(ready
            .ready_ms
            .is_some_and(|r| r >= answered.first_answer_ms.unwrap()));
        signalled.ending();
        assert!(signalled.record().rss_at_end_bytes.is_some_and(|b| b > 0));
        assert_eq!(
            ChildLife::new(u32::MAX, Instant::now()).record().rss_at_end_bytes,
            None
        );
    }
}
