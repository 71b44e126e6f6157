//! What a run looks like right now, published a few times a second for the
//! dashboard, the progress lines and the metrics endpoint. Plain data: the
//! engine fills it and never learns who reads it.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::{BucketCounts, CallDurations, MethodSummary, SecondRow};

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Since the run's start, warmup included.
    pub elapsed: Duration,
    pub warmup: Duration,
    /// Warmup plus the planned duration, when the run is timed.
    pub planned: Option<Duration>,
    /// The stage in force (from 0), in a staged run.
    pub stage: Option<usize>,
    pub stages: usize,
    /// Open model (requests/s) or closed (calls in flight).
    pub open: bool,
    /// The target now: the plan's, or one set by hand.
    pub target: f64,
    pub paused: bool,
    pub in_flight: u64,
    /// Whole run so far, per method and in total.
    pub methods: Vec<MethodSummary>,
    pub total: MethodSummary,
    /// Each of `methods`' latencies in the fixed buckets, whole run so far,
    /// in the same order.
    pub method_buckets: Vec<BucketCounts>,
    /// Each of `methods`' calls by outcome with their durations, every
    /// call counted, whole run so far, in the same order.
    pub call_durations: Vec<CallDurations>,
    /// The last complete second.
    pub interval: Option<MethodSummary>,
    /// Seconds completed since the previous snapshot.
    pub new_rows: Vec<SecondRow>,
    /// Latency buckets (upper bound in ms, calls), whole run and last second.
    pub histogram: Vec<(f64, u64)>,
    pub interval_histogram: Vec<(f64, u64)>,
    /// The generator is behind its schedule now (open model).
    pub behind: bool,
    /// The latest failed answer, in short.
    pub last_error: Option<String>,
    pub rpc_codes: BTreeMap<i64, u64>,
    /// Subscriptions open and the notifications they brought so far.
    pub subscriptions: u64,
    pub notifications: u64,
    /// Messages that answered no call so far.
    pub unsolicited: u64,
    /// Distinct heads the head race has had from this target so far
    /// (`race = "POINTER"`), and those it delivered before any other
    /// target; the figures reported are tallied at the end.
    pub race: Option<(u64, u64)>,
    /// The watched server processes now: CPU in cores over the last
    /// reading's second, and resident bytes, all together.
    pub server: Option<(f64, u64)>,
    /// The run has ended: this is its last snapshot.
    pub finished: bool,
}

/// `n` buckets spaced evenly on a log scale from the lowest to the highest
/// latency recorded (microsecond histogram in, milliseconds out). Each
/// recorded value lands in exactly one bucket, the first whose upper bound
/// it does not pass (asking the histogram for counts between bounds would
/// count a value on a bound in both neighbours: its buckets are wider).
pub fn latency_buckets(h: &Histogram<u64>, n: usize) -> Vec<(f64, u64)> {
    if h.is_empty() || n == 0 {
        return Vec::new();
    }
    let low = (h.min().max(1)) as f64;
    let high = (h.max().max(h.min() + 1)) as f64;
    let ratio = (high / low).powf(1.0 / n as f64);
    let uppers: Vec<f64> = (1..=n)
        .map(|i| if i == n { high } else { low * ratio.powi(i as i32) })
        .collect();
    let mut counts = vec![0u64; n];
    for recorded in h.iter_recorded() {
        let value = recorded.value_iterated_to() as f64;
        // The last bucket ends at the highest value: what passes the others lands there.
        let bucket = uppers[..n - 1]
            .iter()
            .position(|upper| value <= *upper)
            .unwrap_or(n - 1);
        counts[bucket] += recorded.count_at_value();
    }
    uppers.iter().map(|upper| upper / 1000.0).zip(counts).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_every_value_once() {
        let mut h = super::super::new_histogram();
        for us in [100u64, 150, 900, 1_000, 20_000, 20_000, 250_000] {
            h.record(us).unwrap();
        }
        let buckets = latency_buckets(&h, 8);
        assert_eq!(buckets.len(), 8);
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 7);
        assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0));
        assert!((buckets.last().unwrap().0 - 250.0).abs() < 1.0);
    }

    #[test]
    fn buckets_grow_by_one_ratio_and_count_each_value_once() {
        let mut h = super::super::new_histogram();
        for us in [1_000u64, 1_500, 3_000, 4_000, 6_000, 8_000] {
            h.record(us).unwrap();
        }
        let buckets = latency_buckets(&h, 3);
        // From 1 ms to 8 ms by a ratio of 2 (within the histogram's 3 digits).
        for (bucket, upper) in buckets.iter().zip([2.0, 4.0, 8.0]) {
            assert!((bucket.0 - upper).abs() < upper * 0.001, "{buckets:?}");
        }
        // 4 ms lies on a bound, and the histogram holds it as 4.001 ms: past
        // the bound, and counted there only (by bounds, it was counted twice).
        assert_eq!(
            buckets.iter().map(|b| b.1).collect::<Vec<_>>(),
            [2, 1, 3],
            "{buckets:?}"
        );
        let one = {
            let mut h = super::super::new_histogram();
            h.record(5_000).unwrap();
            h
        };
        let single = latency_buckets(&one, 2);
        assert_eq!(single.iter().map(|b| b.1).sum::<u64>(), 1, "one value, once");
        // One value of 1 ms: the buckets still span a microsecond above it.
        let mut exact = super::super::new_histogram();
        exact.record(1_000).unwrap();
        let spread = latency_buckets(&exact, 2);
        assert_eq!(
            spread.iter().map(|b| b.1).collect::<Vec<_>>(),
            [1, 0],
            "{spread:?}"
        );
        assert_eq!(spread[1].0, 1.001, "{spread:?}");
        assert!(latency_buckets(&one, 0).is_empty());
        assert!(latency_buckets(&super::super::new_histogram(), 4).is_empty());
    }
}
