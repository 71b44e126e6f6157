//! The load a run puts on its target: the model (closed or open), the
//! connections, how long, and the stages the rate or concurrency follows.
//! Plain data, checked by the scenario, read by the engine.

use std::time::Duration;

use super::Shard;

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

impl Pacing {
    /// Whether requests are due at set times.
    pub fn is_open(self) -> bool {
        matches!(self, Pacing::Open { .. })
    }
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
    /// How long calls in flight when the schedule ends may still take to
    /// be answered (and counted); those unanswered then are timeouts.
    pub grace: Duration,
    /// Engine threads, each running its own share of the connections.
    pub threads: usize,
    pub seed: u64,
    /// Steps of rate (open) or concurrency (closed) after the warmup, each
    /// ramped linearly from the previous value. Empty: a constant load.
    pub stages: Vec<Stage>,
    /// Closed model with stages: calls in flight before the first ramp
    /// (the whole run's: a shard takes its share as it goes).
    pub initial_concurrency: usize,
    /// Which share of the run this machine takes. Connections and the
    /// request limit are the shard's own already; rates, stages and
    /// concurrency stay the whole run's, and the engine takes its share of
    /// them request by request.
    pub shard: Shard,
    /// A replay at its recorded pace: when each request of the run is due,
    /// in seconds from its start (the open model's rate is then their mean).
    pub recorded: Option<std::sync::Arc<[f64]>>,
    /// A replay that keeps its captured connections: per connection, the
    /// run's requests it sends, in order (`connections` is their number).
    pub groups: Option<std::sync::Arc<[Box<[u64]>]>>,
    /// A connection is closed after carrying this many requests (a batch or
    /// a flow is one), and opened anew with its setup calls.
    pub reconnect_every: Option<u64>,
    /// Flows in flight at once that give their connection back between
    /// steps (stateless transports, the open model); past it, a flow keeps
    /// its connection throughout.
    pub max_flows: usize,
}

/// Flows in flight by default: ample (each is a caller's buffers, a few
/// kilobytes), so that connections, not this, bound a run.
pub const DEFAULT_MAX_FLOWS: usize = 10_000;

/// One step of a staged load: ramp to `target` over `duration`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    /// Calls per second (open model) or calls in flight (closed).
    pub target: f64,
}

impl LoadPlan {
    /// Whether requests are due at set times (the open model).
    pub fn is_open(&self) -> bool {
        self.pacing.is_open()
    }

    /// Callers on each connection: at least one.
    pub fn callers_per_connection(&self) -> usize {
        self.per_connection.max(1)
    }

    /// This machine's callers: the most calls it can have in flight.
    /// Callers come in equal numbers per connection, so there may be more
    /// than the calls asked for (10 over 4 connections: 12); the closed
    /// model keeps the extra ones idle, as it does between stages.
    pub fn callers(&self) -> usize {
        self.connections.saturating_mul(self.callers_per_connection())
    }

    /// The connection caller `index` runs on.
    pub fn connection_of(&self, caller: usize) -> usize {
        caller / self.callers_per_connection()
    }

    /// Where caller `index` stands in the order callers become active:
    /// one from each connection in turn, so a lowered concurrency spreads
    /// over every connection rather than filling the first.
    pub fn activation_rank(&self, caller: usize) -> usize {
        let per = self.callers_per_connection();
        (caller % per) * self.connections.max(1) + caller / per
    }

    /// Calls in flight this machine keeps in a constant closed model: its
    /// share of the run's concurrency, as far as its callers reach.
    pub fn closed_concurrency(&self) -> usize {
        (self.shard.share(self.initial_concurrency as u64) as usize).min(self.callers())
    }

    /// The whole run's rate, when it is one constant rate (the open model
    /// without stages).
    pub fn constant_rate(&self) -> Option<f64> {
        match self.pacing {
            Pacing::Open { rate } if self.stages.is_empty() => Some(rate),
            _ => None,
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 s of warmup at 100/s, a ramp to 300/s over 10 s, then 5 s at 300.
    fn ramp() -> LoadPlan {
        LoadPlan {
            pacing: Pacing::Open { rate: 100.0 },
            connections: 2,
            per_connection: 1,
            duration: None,
            requests: None,
            warmup: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            grace: Duration::from_secs(1),
            threads: 4,
            seed: 0,
            stages: vec![
                Stage {
                    duration: Duration::from_secs(10),
                    target: 300.0,
                },
                Stage {
                    duration: Duration::from_secs(5),
                    target: 300.0,
                },
            ],
            initial_concurrency: 1,
            shard: Shard::WHOLE,
            recorded: None,
            groups: None,
            reconnect_every: None,
            max_flows: crate::plan::DEFAULT_MAX_FLOWS,
        }
    }

    #[test]
    fn a_ramps_requests_fall_due_as_its_rate_grows() {
        let profile = ramp().profile(100.0);
        // The warmup: 200 requests; 5 s into the ramp, 100·5 + 10·5² more.
        assert_eq!(profile.due_within(2.0), 200.0);
        assert_eq!(profile.due_within(7.0), 950.0);
        assert_eq!(profile.due_time(950.0), Some(7.0));
        assert_eq!(profile.value_at(7.0), 200.0);
        assert_eq!(profile.value_at(1.0), 100.0, "the warmup holds the start");
        assert_eq!(profile.value_at(16.0), 300.0);
        assert_eq!(profile.value_at(100.0), 300.0, "past the end, the last value");
        let mut previous = -1.0;
        for n in [0.0, 1.0, 150.0, 199.0, 201.0, 777.0, 2100.0, 2999.0, 3699.0] {
            let t = profile.due_time(n).unwrap();
            assert!(t > previous, "due times grow: {n} at {t}");
            assert!((profile.due_within(t) - n).abs() < 1e-6, "{n} is due at {t}");
            previous = t;
        }
        assert_eq!(
            profile.due_time(200.0 + 2000.0 + 1500.0),
            None,
            "past the last stage"
        );
    }

    #[test]
    fn stages_are_bounded_in_measured_seconds_and_threads_by_connections() {
        assert_eq!(ramp().stage_bounds(), [(0.0, 10.0), (10.0, 15.0)]);
        assert_eq!(ramp().threads_used(), 2, "no more threads than connections");
        let one = LoadPlan { threads: 0, ..ramp() };
        assert_eq!(one.threads_used(), 1);
        let many = LoadPlan {
            connections: 9,
            ..ramp()
        };
        assert_eq!(many.threads_used(), 4);
    }

    #[test]
    fn the_first_active_callers_are_spread_over_every_connection() {
        let plan = LoadPlan {
            connections: 4,
            per_connection: 64,
            ..ramp()
        };
        assert_eq!(plan.callers(), 256);
        // 128 of 256 active: 32 on each connection, not connections 0 and 1.
        let mut active = [0; 4];
        for caller in (0..256).filter(|c| plan.activation_rank(*c) < 128) {
            active[plan.connection_of(caller)] += 1;
        }
        assert_eq!(active, [32; 4]);
        let mut ranks: Vec<usize> = (0..256).map(|c| plan.activation_rank(c)).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..256).collect::<Vec<_>>(), "each rank once");
        let one_each = LoadPlan {
            per_connection: 0,
            ..plan
        };
        assert_eq!(one_each.callers(), 4, "at least one caller a connection");
        assert_eq!(one_each.activation_rank(3), 3);
    }
}
