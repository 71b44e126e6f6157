//! Holds that end when they should. tokio's timer wheel turns once a
//! millisecond and rounds a deadline up to its next turn, so a hold of
//! `--latency 10ms` lasted 11.2 ms at the median (`benches/truth.sh`), and
//! the server, not the client, set what a multiplexed client could reach.
//! Here one thread sleeps to the earliest deadline on the kernel's own
//! timers and wakes each task whose time has come: a 10 ms hold lasts
//! about 10.15 ms at the median, the thread's wake-up and the task's.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Waits `hold`, never less, ending soon after it.
pub async fn sleep(hold: Duration) {
    let Some(at) = Instant::now().checked_add(hold) else {
        return std::future::pending().await;
    };
    Until { at }.await
}

struct Until {
    at: Instant,
}

impl Future for Until {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        // A spurious poll adds the waker again: the task is woken twice,
        // which a task allows.
        timer().add(self.at, cx.waker().clone());
        Poll::Pending
    }
}

/// A task to wake at `at`.
struct Due {
    at: Instant,
    waker: Waker,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at.cmp(&other.at)
    }
}

struct Timer {
    queue: Mutex<BinaryHeap<Reverse<Due>>>,
    thread: Thread,
}

impl Timer {
    fn add(&self, at: Instant, waker: Waker) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let earliest = queue.peek().is_none_or(|Reverse(first)| at < first.at);
        queue.push(Reverse(Due { at, waker }));
        drop(queue);
        // The thread sleeps to what was the earliest deadline: a new
        // earlier one must wake it to sleep again, shorter.
        if earliest {
            self.thread.unpark();
        }
    }

    /// The wakers due by `now`, and the next deadline after them.
    fn take_due(&self, now: Instant) -> (Vec<Waker>, Option<Instant>) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let mut due = Vec::new();
        while let Some(Reverse(first)) = queue.peek() {
            if first.at > now {
                return (due, Some(first.at));
            }
            due.extend(queue.pop().map(|Reverse(d)| d.waker));
        }
        (due, None)
    }
}

/// The one timer thread, started on first use.
fn timer() -> &'static Timer {
    static TIMER: OnceLock<Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let thread = std::thread::Builder::new()
            .name("volley-serve-timer".into())
            .spawn(|| {
                loop {
                    let now = Instant::now();
                    let (due, next) = timer().take_due(now);
                    // Woken outside the lock: a woken task may add at once.
                    due.into_iter().for_each(Waker::wake);
                    // An unpark between reading `next` and parking is kept as
                    // a token: the park returns at once and the queue is read again.
                    match next {
                        Some(at) => std::thread::park_timeout(at.saturating_duration_since(Instant::now())),
                        None => std::thread::park(),
                    }
                }
            })
            .expect("the serve timer thread starts");
        Timer {
            queue: Mutex::new(BinaryHeap::new()),
            thread: thread.thread().clone(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hold_ends_no_earlier_than_asked_and_every_one_ends() {
        let started = Instant::now();
        let holds = [7, 1, 3, 1, 0, 5].map(Duration::from_millis);
        let ended = futures_util::future::join_all(holds.iter().map(|&hold| async move {
            let from = Instant::now();
            sleep(hold).await;
            from.elapsed() >= hold
        }))
        .await;
        assert_eq!(ended, [true; 6]);
        assert!(started.elapsed() >= Duration::from_millis(7));
    }

    #[test]
    fn the_queue_gives_what_is_due_in_order_and_the_next_deadline() {
        let timer = Timer {
            queue: Mutex::new(BinaryHeap::new()),
            thread: std::thread::current(),
        };
        let now = Instant::now();
        for ms in [30, 10, 20] {
            timer.add(now + Duration::from_millis(ms), Waker::noop().clone());
        }
        let (due, next) = timer.take_due(now + Duration::from_millis(20));
        assert_eq!((due.len(), next), (2, Some(now + Duration::from_millis(30))));
        let (due, next) = timer.take_due(now + Duration::from_millis(30));
        assert_eq!((due.len(), next), (1, None));
    }
}
