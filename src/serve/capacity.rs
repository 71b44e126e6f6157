//! `volley serve --capacity N`: a server that does N calls a second and no
//! more. Each call takes its turn of 1/N s on one queue, and its answer
//! waits for its turn to end: below N calls/s answers come at once (plus
//! the added latency); past it, the queue and the latency grow without
//! bound, as a saturated server's do. A known breaking point, for `volley
//! sweep` to find.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Capacity {
    calls_per_s: f64,
    per_call: Duration,
    /// When the queue is next free.
    free_at: Mutex<Option<Instant>>,
}

impl Capacity {
    /// `None` unless `calls_per_s` is a positive, finite rate.
    pub fn new(calls_per_s: f64) -> Option<Capacity> {
        (calls_per_s.is_finite() && calls_per_s > 0.0).then(|| Capacity {
            calls_per_s,
            per_call: Duration::from_secs_f64(1.0 / calls_per_s),
            free_at: Mutex::new(None),
        })
    }

    pub fn calls_per_s(&self) -> f64 {
        self.calls_per_s
    }

    /// Queues `calls` calls arriving at `now`; returns how long their
    /// answer waits for them to be done.
    pub fn wait(&self, calls: u32, now: Instant) -> Duration {
        let mut free_at = self.free_at.lock().unwrap_or_else(|p| p.into_inner());
        let start = free_at.map_or(now, |free| free.max(now));
        let done = start + self.per_call * calls;
        *free_at = Some(done);
        done - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_within_capacity_wait_their_own_turn_only() {
        let capacity = Capacity::new(1000.0).unwrap();
        let start = Instant::now();
        let ms = Duration::from_millis(1);
        // One call a 2 ms at 1,000 calls/s: each waits its 1 ms turn.
        for i in 0..5 {
            assert_eq!(capacity.wait(1, start + ms * 2 * i), ms);
        }
    }

    #[test]
    fn past_capacity_the_queue_grows() {
        let capacity = Capacity::new(1000.0).unwrap();
        let start = Instant::now();
        let ms = Duration::from_millis(1);
        // Two calls a millisecond at 1,000 calls/s: each waits 1 ms longer.
        let waits: Vec<Duration> = (0..4).map(|i| capacity.wait(2, start + ms * i)).collect();
        assert_eq!(waits, [ms * 2, ms * 3, ms * 4, ms * 5]);
        assert!(Capacity::new(0.0).is_none() && Capacity::new(f64::NAN).is_none());
    }
}
