//! Each second's latency histograms, per method and in total, kept for
//! `latency.hlog`: encoded as they close (HdrHistogram's V2 format, a few
//! hundred bytes for a second of sparse values), so a long run holds bytes,
//! not histograms.

use std::time::Duration;

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

use super::Recorder;

/// The tag of the histogram of every call.
pub const TOTAL_TAG: &str = "TOTAL";

#[derive(Clone, Debug, Default)]
pub struct LatencyLog {
    pub intervals: Vec<Interval>,
}

/// One tag's latencies (µs) over one second of the measured run.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Seconds since the measured part began.
    pub second: u32,
    /// The second's length: the last may be cut short by the run's end.
    pub length: Duration,
    pub tag: String,
    encoded: Vec<u8>,
}

impl Interval {
    pub fn histogram(&self) -> Histogram<u64> {
        Deserializer::new()
            .deserialize(&mut &self.encoded[..])
            .expect("volley encoded it itself")
    }
}

impl LatencyLog {
    /// Keeps one tag's histogram of one second, unless it is empty.
    pub fn push(&mut self, second: u32, length: Duration, tag: String, histogram: &Histogram<u64>) {
        if histogram.is_empty() {
            return;
        }
        let mut encoded = Vec::new();
        V2Serializer::new()
            .serialize(histogram, &mut encoded)
            .expect("a histogram encodes into memory");
        self.intervals.push(Interval {
            second,
            length,
            tag,
            encoded,
        });
    }
}

/// A second's non-empty histograms, tagged: each method's (with its name,
/// made a valid tag) and `total`'s (the window's total, which the caller
/// holds).
pub fn tagged<'a>(
    methods: &[String],
    window: &'a Recorder,
    total: &'a super::MethodStats,
) -> Vec<(String, &'a Histogram<u64>)> {
    methods
        .iter()
        .map(|name| tag_for(name))
        .zip(window.methods.iter().map(|m| &m.latency))
        .chain([(TOTAL_TAG.to_string(), &total.latency)])
        .filter(|(_, histogram)| !histogram.is_empty())
        .collect()
}

/// A method name as an interval log tag: the format forbids commas, spaces
/// and line breaks, so those become `_`.
pub fn tag_for(method: &str) -> String {
    method
        .chars()
        .map(|c| {
            if matches!(c, ',' | ' ' | '\r' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Outcome;

    #[test]
    fn each_seconds_histograms_come_back_whole() {
        let mut window = Recorder::new(2);
        for ms in [1, 2, 3, 40] {
            window.methods[0].record(Outcome::Ok, Duration::from_millis(ms), Duration::ZERO, 0);
        }
        let mut log = LatencyLog::default();
        let methods = ["a b".to_string(), "unused".to_string()];
        let total = window.total();
        for (tag, histogram) in tagged(&methods, &window, &total) {
            log.push(3, Duration::from_millis(500), tag, histogram);
        }
        let tags: Vec<&str> = log.intervals.iter().map(|i| i.tag.as_str()).collect();
        assert_eq!(tags, ["a_b", TOTAL_TAG], "an empty method is left out");
        for interval in &log.intervals {
            let histogram = interval.histogram();
            assert_eq!(histogram.len(), 4);
            assert_eq!(histogram.max(), window.methods[0].latency.max());
            assert_eq!(
                (interval.second, interval.length),
                (3, Duration::from_millis(500))
            );
        }
    }
}
