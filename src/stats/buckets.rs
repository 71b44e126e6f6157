//! Latency counted into fixed buckets, the same for every run, method,
//! target and shard: what a Prometheus histogram needs, since buckets with
//! the same bounds add up across runs where percentiles do not.

use hdrhistogram::Histogram;

/// The buckets' upper bounds in µs: 50 µs to 60 s, spaced evenly on a log
/// scale (each about 1.41 times the one before, 40 steps), each rounded to
/// two significant digits so that its `le` label reads plainly.
pub const BUCKET_BOUNDS_US: [u64; 41] = [
    50, 71, 100, 140, 200, 290, 410, 580, 820, 1_200, 1_700, 2_300, 3_300, 4_700, 6_700, 9_500, 14_000,
    19_000, 27_000, 39_000, 55_000, 78_000, 110_000, 160_000, 220_000, 320_000, 450_000, 630_000, 900_000,
    1_300_000, 1_800_000, 2_600_000, 3_700_000, 5_200_000, 7_300_000, 10_000_000, 15_000_000, 21_000_000,
    30_000_000, 42_000_000, 60_000_000,
];

/// One histogram's latencies in the fixed buckets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BucketCounts {
    /// Per bound of [`BUCKET_BOUNDS_US`], the latencies at or below it
    /// (cumulative, as Prometheus's `le` counts).
    pub at_or_below: Vec<u64>,
    /// Every latency counted, those past the last bound too (`le="+Inf"`).
    pub count: u64,
    /// Their sum in seconds, from the histogram (to its 3 significant digits).
    pub sum_s: f64,
}

impl BucketCounts {
    /// Counts `h` (µs) into the buckets. Each of the histogram's recorded
    /// values lands in the first bucket whose bound it does not pass, read
    /// at the top of its bin (the histogram keeps 3 significant digits: a
    /// value within 0.1% above a bound may be counted past it, never below).
    pub fn of(h: &Histogram<u64>) -> BucketCounts {
        let mut each = [0u64; BUCKET_BOUNDS_US.len()];
        for recorded in h.iter_recorded() {
            let value = recorded.value_iterated_to();
            if let Some(bucket) = BUCKET_BOUNDS_US.iter().position(|bound| value <= *bound) {
                each[bucket] = each[bucket].saturating_add(recorded.count_at_value());
            }
        }
        let mut running = 0u64;
        let at_or_below = each
            .iter()
            .map(|n| {
                running = running.saturating_add(*n);
                running
            })
            .collect();
        BucketCounts {
            at_or_below,
            count: h.len(),
            sum_s: h.mean() * h.len() as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_run_from_50_us_to_60_s_by_one_ratio() {
        assert_eq!(BUCKET_BOUNDS_US[0], 50);
        assert_eq!(BUCKET_BOUNDS_US[40], 60_000_000);
        for pair in BUCKET_BOUNDS_US.windows(2) {
            let ratio = pair[1] as f64 / pair[0] as f64;
            assert!((1.35..1.51).contains(&ratio), "{pair:?}");
        }
    }

    #[test]
    fn each_latency_is_counted_once_at_or_below_its_bound() {
        let mut h = super::super::new_histogram();
        // On a bound, just past it, below the first, past the last.
        for us in [50u64, 51, 10, 100, 100, 1_200, 61_000_000] {
            h.record(us).unwrap();
        }
        let counts = BucketCounts::of(&h);
        let le = |bound: u64| {
            let i = BUCKET_BOUNDS_US.iter().position(|b| *b == bound).unwrap();
            counts.at_or_below[i]
        };
        assert_eq!(le(50), 2, "10 µs and 50 µs");
        assert_eq!(le(71), 3, "and 51 µs");
        assert_eq!(le(100), 5);
        assert_eq!(le(820), 5);
        assert_eq!(le(1_200), 6);
        assert_eq!(le(60_000_000), 6, "61 s lies past the last bound");
        assert_eq!(counts.count, 7, "+Inf holds every latency");
        assert!(counts.at_or_below.windows(2).all(|w| w[0] <= w[1]));
        // About 61.0015 s, to the histogram's 3 significant digits.
        assert!((counts.sum_s - 61.001_411).abs() < 0.1, "{}", counts.sum_s);
        let empty = BucketCounts::of(&super::super::new_histogram());
        assert_eq!(empty.count, 0);
        assert!(empty.at_or_below.iter().all(|n| *n == 0));
        assert_eq!(empty.at_or_below.len(), BUCKET_BOUNDS_US.len());
    }
}
