//! The load plan: how calls are paced and when the run stops, as one
//! schedule that every connection task claims its next request from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Closed or open load model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// Each connection keeps one call in flight and sends the next as soon as
    /// the answer is in.
    Closed,
    /// Requests are due at fixed times (`rate` per second) whether or not
    /// earlier ones were answered.
    Open { rate: f64 },
}

/// Everything about the load, validated.
#[derive(Clone, Debug)]
pub struct LoadPlan {
    pub pacing: Pacing,
    /// Exactly this many connections, each owned by one task.
    pub connections: usize,
    /// Measured duration (after the warmup). The run stops at whichever of
    /// duration and requests comes first.
    pub duration: Option<Duration>,
    /// Requests to send in all (a batch is one request).
    pub requests: Option<u64>,
    /// Sent but left out of the statistics.
    pub warmup: Duration,
    pub timeout: Duration,
    /// Engine threads, each running its own share of the connections.
    pub threads: usize,
    pub seed: u64,
}

impl LoadPlan {
    pub fn threads_used(&self) -> usize {
        self.threads.clamp(1, self.connections.max(1))
    }
}

/// A claim on the next request of the run.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    /// When the request should leave: fixed by the schedule in the open
    /// model, "now" in the closed one.
    pub intended: Instant,
}

/// Hands out requests: one counter shared by all connections, so that in the
/// open model whichever connection is free takes the next due request, and a
/// request due while all connections are busy waits (and shows it).
#[derive(Debug)]
pub struct Schedule {
    claimed: AtomicU64,
    start: Instant,
    /// Nanoseconds between requests in the open model.
    interval_ns: Option<f64>,
    limit: Option<u64>,
    deadline: Option<Instant>,
}

impl Schedule {
    pub fn new(plan: &LoadPlan, start: Instant) -> Self {
        Schedule {
            claimed: AtomicU64::new(0),
            start,
            interval_ns: match plan.pacing {
                Pacing::Open { rate } => Some(1e9 / rate),
                Pacing::Closed => None,
            },
            limit: plan.requests,
            deadline: plan.duration.map(|d| start + plan.warmup + d),
        }
    }

    pub fn claim(&self) -> Option<Claim> {
        if self.interval_ns.is_none() && self.limit.is_none() {
            // Closed model bounded by time: nothing to count.
            return Some(Claim {
                intended: Instant::now(),
            });
        }
        let seq = self.claimed.fetch_add(1, Ordering::Relaxed);
        if self.limit.is_some_and(|limit| seq >= limit) {
            return None;
        }
        let intended = match self.interval_ns {
            Some(ns) => self.start + Duration::from_nanos((seq as f64 * ns) as u64),
            None => Instant::now(),
        };
        if self.deadline.is_some_and(|deadline| intended >= deadline) {
            return None;
        }
        Some(Claim { intended })
    }

    /// Requests the open model had due before `end`.
    pub fn due_before(&self, end: Instant) -> u64 {
        let Some(ns) = self.interval_ns else { return 0 };
        let elapsed = end.saturating_duration_since(self.start).as_nanos() as f64;
        let due = (elapsed / ns).ceil() as u64;
        self.limit.map_or(due, |limit| due.min(limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(pacing: Pacing, requests: Option<u64>, duration: Option<Duration>) -> LoadPlan {
        LoadPlan {
            pacing,
            connections: 1,
            duration,
            requests,
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(1),
            threads: 1,
            seed: 0,
        }
    }

    #[test]
    fn open_model_spaces_requests_evenly_from_the_start() {
        let start = Instant::now();
        let schedule = Schedule::new(
            &plan(Pacing::Open { rate: 100.0 }, None, Some(Duration::from_secs(1))),
            start,
        );
        let times: Vec<_> = (0..3)
            .map(|_| schedule.claim().unwrap().intended - start)
            .collect();
        assert_eq!(
            times,
            [
                Duration::ZERO,
                Duration::from_millis(10),
                Duration::from_millis(20)
            ]
        );
        assert_eq!(schedule.due_before(start + Duration::from_millis(995)), 100);
    }

    #[test]
    fn nothing_is_due_after_the_deadline() {
        let start = Instant::now();
        let schedule = Schedule::new(
            &plan(Pacing::Open { rate: 10.0 }, None, Some(Duration::from_secs(1))),
            start,
        );
        let claimed = std::iter::from_fn(|| schedule.claim()).count();
        assert_eq!(claimed, 10);
    }

    #[test]
    fn a_request_limit_is_exact() {
        let schedule = Schedule::new(&plan(Pacing::Closed, Some(7), None), Instant::now());
        assert_eq!(std::iter::from_fn(|| schedule.claim()).count(), 7);
    }
}
