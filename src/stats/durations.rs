//! Every call's duration counted by its outcome into the fixed buckets of
//! [`BUCKET_BOUNDS_US`]: what a histogram of calls by OpenTelemetry's
//! conventions needs (`--otlp`), where every call counts, a failed one too,
//! under its outcome and its JSON-RPC error's code. The latency histograms
//! cannot give it: they hold no outcome, and leave out the calls that never
//! reached the server. Recorded with the call, per thread and without a
//! lock, and added up as the rest of a recorder is.

use super::{Outcome, OutcomeKind, BUCKET_BOUNDS_US};

/// Buckets of a [`DurationCounts`]: one per bound, and one past the last.
pub const DURATION_BUCKETS: usize = BUCKET_BOUNDS_US.len() + 1;

/// What a call's duration is counted under: its outcome, with a JSON-RPC
/// error's code or an HTTP status as its detail (the other outcomes have
/// none, a protocol error's rule included: its kinds are counted apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutcomeKey {
    pub kind: OutcomeKind,
    pub detail: Option<i64>,
}

impl OutcomeKey {
    pub fn of(outcome: Outcome) -> OutcomeKey {
        let detail = match outcome {
            Outcome::RpcError(code) => Some(code),
            Outcome::HttpStatus(status) => Some(i64::from(status)),
            _ => None,
        };
        OutcomeKey {
            kind: outcome.kind(),
            detail,
        }
    }
}

/// The durations of the calls of one outcome key.
#[derive(Clone, Debug, PartialEq)]
pub struct DurationCounts {
    pub key: OutcomeKey,
    /// Per bucket, not cumulative: bucket `i` holds the durations above
    /// bound `i - 1` and at or below bound `i` (OTLP's explicit buckets, and
    /// what a Prometheus `le` counts); the last, those past the last bound.
    pub buckets: [u64; DURATION_BUCKETS],
    /// Their sum in µs, exact (not read back from a histogram).
    pub sum_us: u64,
}

impl DurationCounts {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// One method's call durations by outcome key, each key in the order it
/// was first seen: few per run, so a short list beats a map.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallDurations(pub Vec<DurationCounts>);

/// The bucket `us` falls in: the first whose bound it does not pass.
fn bucket_of(us: u64) -> usize {
    BUCKET_BOUNDS_US.partition_point(|bound| *bound < us)
}

impl CallDurations {
    /// Counts one call: a binary search over 41 bounds and a short scan,
    /// on the engine's thread.
    pub fn record(&mut self, outcome: Outcome, us: u64) {
        let counts = self.counts_of(OutcomeKey::of(outcome));
        counts.buckets[bucket_of(us)] += 1;
        counts.sum_us = counts.sum_us.saturating_add(us);
    }

    fn counts_of(&mut self, key: OutcomeKey) -> &mut DurationCounts {
        let at = match self.0.iter().position(|c| c.key == key) {
            Some(at) => at,
            None => {
                self.0.push(DurationCounts {
                    key,
                    buckets: [0; DURATION_BUCKETS],
                    sum_us: 0,
                });
                self.0.len() - 1
            }
        };
        &mut self.0[at]
    }

    pub fn merge(&mut self, other: &CallDurations) {
        for more in &other.0 {
            let counts = self.counts_of(more.key);
            for (a, b) in counts.buckets.iter_mut().zip(&more.buckets) {
                *a += b;
            }
            counts.sum_us = counts.sum_us.saturating_add(more.sum_us);
        }
    }

    /// Every call counted, whatever its outcome.
    pub fn count(&self) -> u64 {
        self.0.iter().map(DurationCounts::count).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_lands_once_in_the_first_bucket_whose_bound_it_does_not_pass() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(50), 0, "on the first bound");
        assert_eq!(bucket_of(51), 1);
        assert_eq!(
            bucket_of(60_000_000),
            BUCKET_BOUNDS_US.len() - 1,
            "on the last bound"
        );
        assert_eq!(bucket_of(60_000_001), BUCKET_BOUNDS_US.len(), "past it");
        assert_eq!(bucket_of(u64::MAX), BUCKET_BOUNDS_US.len());
    }

    #[test]
    fn calls_are_kept_apart_by_outcome_and_code_and_add_up_exactly() {
        let mut a = CallDurations::default();
        a.record(Outcome::Ok, 40);
        a.record(Outcome::Ok, 120);
        a.record(Outcome::RpcError(-32000), 1_000);
        a.record(Outcome::RpcError(-32601), 1_000);
        a.record(Outcome::Connect, 0);
        let mut b = CallDurations::default();
        b.record(Outcome::RpcError(-32601), 70_000_000);
        b.record(Outcome::HttpStatus(503), 300);
        a.merge(&b);
        assert_eq!(a.count(), 7);
        let of = |key: OutcomeKey| a.0.iter().find(|c| c.key == key).unwrap();
        let ok = of(OutcomeKey::of(Outcome::Ok));
        assert_eq!((ok.count(), ok.sum_us, ok.buckets[0]), (2, 160, 1));
        let missing = of(OutcomeKey::of(Outcome::RpcError(-32601)));
        assert_eq!(missing.count(), 2);
        assert_eq!(missing.buckets[DURATION_BUCKETS - 1], 1, "past the last bound");
        assert_eq!(of(OutcomeKey::of(Outcome::RpcError(-32000))).count(), 1);
        let status = of(OutcomeKey::of(Outcome::HttpStatus(503)));
        assert_eq!(status.key.detail, Some(503));
        assert_eq!(
            of(OutcomeKey::of(Outcome::Connect)).count(),
            1,
            "a call never sent counts too"
        );
        assert_eq!(a.0.len(), 5, "one entry per outcome and code");
    }
}
