//! What a run looks like right now, published a few times a second for the
//! dashboard, the progress lines and the metrics endpoint. Plain data: the
//! engine fills it and never learns who reads it.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::{MethodSummary, SecondRow};

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
    /// The run has ended: this is its last snapshot.
    pub finished: bool,
}

/// `n` buckets spaced evenly on a log scale from the lowest to the highest
/// latency recorded (microsecond histogram in, milliseconds out).
pub fn latency_buckets(h: &Histogram<u64>, n: usize) -> Vec<(f64, u64)> {
    if h.is_empty() || n == 0 {
        return Vec::new();
    }
    let low = (h.min().max(1)) as f64;
    let high = (h.max().max(h.min() + 1)) as f64;
    let ratio = (high / low).powf(1.0 / n as f64);
    let mut buckets = Vec::with_capacity(n);
    let mut below = low;
    let mut counted = h.count_between(0, low as u64);
    for i in 0..n {
        let upper = if i + 1 == n { high } else { below * ratio };
        let count = h.count_between(below as u64 + 1, upper as u64);
        buckets.push((upper / 1000.0, count + std::mem::take(&mut counted)));
        below = upper;
    }
    buckets
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
}
