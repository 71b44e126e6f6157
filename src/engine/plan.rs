//! The load plan: how calls are paced and when the run stops, as one
//! schedule that every connection task claims its next request from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::control::Control;

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
    /// Exactly this many connections.
    pub connections: usize,
    /// Calls in flight on each connection: 1 for HTTP/1.1, more for a
    /// multiplexed transport (each a caller task sharing the connection).
    pub per_connection: usize,
    /// Measured duration (after the warmup). The run stops at whichever of
    /// duration and requests comes first.
    pub duration: Option<Duration>,
    /// Measured requests to send (a batch is one request); a warmup comes on top.
    pub requests: Option<u64>,
    /// Sent but left out of the statistics.
    pub warmup: Duration,
    pub timeout: Duration,
    /// Engine threads, each running its own share of the connections.
    pub threads: usize,
    pub seed: u64,
    /// Steps of rate (open) or concurrency (closed) after the warmup, each
    /// ramped linearly from the previous value. Empty: a constant load.
    pub stages: Vec<Stage>,
    /// Closed model with stages: calls in flight before the first ramp.
    pub initial_concurrency: usize,
}

/// One step of a staged load: ramp to `target` over `duration`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    /// Calls per second (open model) or calls in flight (closed).
    pub target: f64,
}

impl LoadPlan {
    pub fn threads_used(&self) -> usize {
        self.threads.clamp(1, self.connections.max(1))
    }

    /// The load over time from the run's start: `start_value` (rate, or
    /// concurrency) through the warmup, then the stages.
    pub fn profile(&self, start_value: f64) -> Profile {
        Profile::new(start_value, self.warmup, &self.stages)
    }

    /// Where each stage starts and ends, in seconds of measured time.
    pub fn stage_bounds(&self) -> Vec<(f64, f64)> {
        let mut at = 0.0;
        self.stages
            .iter()
            .map(|stage| {
                let start = at;
                at += stage.duration.as_secs_f64();
                (start, at)
            })
            .collect()
    }
}

/// A load that changes linearly between points in time.
#[derive(Clone, Debug)]
pub struct Profile {
    segments: Vec<Segment>,
}

#[derive(Clone, Debug)]
struct Segment {
    /// Seconds from the run's start.
    start: f64,
    /// Seconds; infinite for a constant load with no end.
    length: f64,
    from: f64,
    to: f64,
    /// Requests due before this segment (open model).
    due_before: f64,
}

impl Segment {
    fn due(&self) -> f64 {
        if self.length.is_infinite() {
            f64::INFINITY
        } else {
            (self.from + self.to) / 2.0 * self.length
        }
    }
}

impl Profile {
    fn new(start_value: f64, warmup: Duration, stages: &[Stage]) -> Self {
        let mut segments = Vec::new();
        let mut push = |length: f64, from: f64, to: f64| {
            let (start, due_before) = segments.last().map_or((0.0, 0.0), |s: &Segment| {
                (s.start + s.length, s.due_before + s.due())
            });
            segments.push(Segment {
                start,
                length,
                from,
                to,
                due_before,
            });
        };
        if stages.is_empty() {
            push(f64::INFINITY, start_value, start_value);
        } else {
            if !warmup.is_zero() {
                push(warmup.as_secs_f64(), start_value, start_value);
            }
            let mut previous = start_value;
            for stage in stages {
                push(stage.duration.as_secs_f64(), previous, stage.target);
                previous = stage.target;
            }
        }
        Profile { segments }
    }

    /// The value (rate or concurrency) `seconds` after the start.
    pub fn value_at(&self, seconds: f64) -> f64 {
        let Some(segment) = self.segments.iter().find(|s| seconds < s.start + s.length) else {
            return self.segments.last().map_or(0.0, |s| s.to);
        };
        if segment.length.is_infinite() {
            return segment.from;
        }
        let progress = ((seconds - segment.start) / segment.length).clamp(0.0, 1.0);
        segment.from + (segment.to - segment.from) * progress
    }

    /// When the request numbered `n` (from 0) is due, in seconds from the
    /// start, under a rate that follows this profile; `None` past its end.
    pub fn due_time(&self, n: f64) -> Option<f64> {
        let segment = self.segments.iter().find(|s| n < s.due_before + s.due())?;
        let left = n - segment.due_before;
        let slope = if segment.length.is_infinite() {
            0.0
        } else {
            (segment.to - segment.from) / segment.length
        };
        // The count grows as from·t + slope·t²/2; solve for t.
        let t = if slope.abs() < 1e-12 {
            left / segment.from
        } else {
            (-segment.from + (segment.from * segment.from + 2.0 * slope * left).max(0.0).sqrt()) / slope
        };
        Some(segment.start + t.max(0.0))
    }

    /// Requests due in the first `seconds`.
    pub fn due_within(&self, seconds: f64) -> f64 {
        let mut due = 0.0;
        for segment in &self.segments {
            if seconds <= segment.start {
                break;
            }
            let t = (seconds - segment.start).min(segment.length);
            let value_at_t = if segment.length.is_infinite() {
                segment.from
            } else {
                segment.from + (segment.to - segment.from) * (t / segment.length)
            };
            due += (segment.from + value_at_t) / 2.0 * t;
        }
        due
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
    pub(super) claimed: Arc<AtomicU64>,
    /// Claimed requests given back unsent because the run was paused.
    withdrawn: AtomicU64,
    /// Requests claimed after the warmup, which the request limit counts.
    measured: AtomicU64,
    measure_start: Instant,
    start: Instant,
    /// Pauses and manual rates set during the run.
    control: Arc<Control>,
    /// The rate over time in the open model.
    rate: Option<Profile>,
    limit: Option<u64>,
    deadline: Option<Instant>,
}

impl Schedule {
    pub fn new(plan: &LoadPlan, start: Instant, control: Arc<Control>) -> Self {
        Schedule {
            claimed: Arc::new(AtomicU64::new(0)),
            withdrawn: AtomicU64::new(0),
            measured: AtomicU64::new(0),
            measure_start: start + plan.warmup,
            start,
            control,
            rate: match plan.pacing {
                Pacing::Open { rate } => Some(plan.profile(rate)),
                Pacing::Closed => None,
            },
            limit: plan.requests,
            deadline: plan.duration.map(|d| start + plan.warmup + d),
        }
    }

    pub fn claim(&self) -> Option<Claim> {
        let intended = match &self.rate {
            None => Instant::now(),
            Some(rate) => {
                let seq = self.claimed.fetch_add(1, Ordering::Relaxed);
                match self.control.override_for(seq) {
                    // Paused: the worker waits for the resume and sends then.
                    Some(o) if o.rate <= 0.0 => Instant::now(),
                    Some(o) => {
                        self.start + Duration::from_secs_f64(o.at_s + (seq - o.at_seq) as f64 / o.rate)
                    }
                    None => self.start + Duration::from_secs_f64(rate.due_time(seq as f64)?),
                }
            }
        };
        // The request limit counts measured requests: a warmup comes on top.
        if let Some(limit) = self.limit {
            if intended >= self.measure_start && self.measured.fetch_add(1, Ordering::Relaxed) >= limit {
                return None;
            }
        }
        if self.deadline.is_some_and(|deadline| intended >= deadline) {
            return None;
        }
        Some(Claim { intended })
    }

    /// The run ends at its deadline, not when its requests are claimed: in
    /// the open model the last requests are claimed seconds before they are
    /// due, and connections (and their subscriptions) must stay till then.
    pub fn ends_at_deadline(&self) -> bool {
        self.deadline.is_some() && self.limit.is_none()
    }

    /// Gives back a claimed request that a pause kept from being sent: it is
    /// no longer due.
    pub fn withdraw(&self) {
        self.withdrawn.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests the open model had due before `end`.
    pub fn due_before(&self, end: Instant) -> u64 {
        let Some(rate) = &self.rate else { return 0 };
        let seconds = end.saturating_duration_since(self.start).as_secs_f64();
        let due = match self.control.override_at(seconds) {
            Some(o) => o.at_seq + ((seconds - o.at_s) * o.rate).ceil() as u64,
            None => rate.due_within(seconds).ceil() as u64,
        };
        let due = due.saturating_sub(self.withdrawn.load(Ordering::Relaxed));
        let warmup_due = rate.due_within(
            self.measure_start
                .saturating_duration_since(self.start)
                .as_secs_f64(),
        );
        self.limit
            .map_or(due, |limit| due.min(limit + warmup_due.ceil() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(pacing: Pacing, requests: Option<u64>, duration: Option<Duration>) -> LoadPlan {
        LoadPlan {
            pacing,
            connections: 1,
            per_connection: 1,
            duration,
            requests,
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(1),
            threads: 1,
            seed: 0,
            stages: Vec::new(),
            initial_concurrency: 1,
        }
    }

    #[test]
    fn open_model_spaces_requests_evenly_from_the_start() {
        let start = Instant::now();
        let schedule = Schedule::new(
            &plan(Pacing::Open { rate: 100.0 }, None, Some(Duration::from_secs(1))),
            start,
            Default::default(),
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
            Default::default(),
        );
        let claimed = std::iter::from_fn(|| schedule.claim()).count();
        assert_eq!(claimed, 10);
    }

    #[test]
    fn a_ramp_spreads_requests_as_its_rate_grows() {
        let mut plan = plan(Pacing::Open { rate: 100.0 }, None, None);
        plan.stages = vec![
            Stage {
                duration: Duration::from_secs(10),
                target: 300.0,
            },
            Stage {
                duration: Duration::from_secs(5),
                target: 300.0,
            },
        ];
        let profile = plan.profile(100.0);
        assert_eq!(profile.value_at(0.0), 100.0);
        assert_eq!(profile.value_at(5.0), 200.0);
        assert_eq!(profile.value_at(12.0), 300.0);
        // 10 s ramping 100 → 300 is 2000 requests, then 300/s for 5 s.
        assert!((profile.due_within(10.0) - 2000.0).abs() < 1e-6);
        assert!((profile.due_within(15.0) - 3500.0).abs() < 1e-6);
        assert!((profile.due_time(2000.0).unwrap() - 10.0).abs() < 1e-9);
        assert!((profile.due_time(3200.0).unwrap() - 14.0).abs() < 1e-9);
        assert_eq!(profile.due_time(3500.0), None);
        let start = Instant::now();
        let schedule = Schedule::new(&plan, start, Default::default());
        assert_eq!(std::iter::from_fn(|| schedule.claim()).count(), 3500);
    }

    #[test]
    fn a_request_limit_is_exact() {
        let schedule = Schedule::new(
            &plan(Pacing::Closed, Some(7), None),
            Instant::now(),
            Default::default(),
        );
        assert_eq!(std::iter::from_fn(|| schedule.claim()).count(), 7);
    }
}
