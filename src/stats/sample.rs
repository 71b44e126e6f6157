//! Quarter-second samples of each method's figures: what `volley compare`
//! sets side by side to tell a change from noise. A second is too coarse
//! for a short run (3 s a side can never reach p < 0.01); the engine hands
//! its figures over four times a second, and each hand-over is a sample.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{new_histogram, MethodStats};

/// Samples a second: the engine's hand-overs.
pub const SAMPLES_PER_SECOND: u32 = 4;

/// `samples.csv`'s columns, in order: its header, written and demanded
/// back whole (a renamed or missing column is refused, never read as
/// empty).
pub const SAMPLE_COLUMNS: [&str; 7] = [
    "tick", "method", "length_s", "calls", "errors", "p50_ms", "p99_ms",
];

/// One quarter second of one method's calls (or of all, as `TOTAL`),
/// written a row each to `samples.csv` and read back by the same type.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// Quarter seconds since the measured part began.
    pub tick: u32,
    pub method: String,
    /// Seconds the sample covers: a quarter, less at the run's end.
    pub length_s: f64,
    /// Every call, whatever its outcome: as `calls_per_s` counts them.
    pub calls: u64,
    pub errors: u64,
    /// Of the calls with a latency (all but those that never connected),
    /// as the run's own percentiles are; empty when there were none.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

impl Sample {
    /// Calls a second over the sample.
    pub fn calls_per_s(&self) -> f64 {
        if self.length_s > 0.0 {
            self.calls as f64 / self.length_s
        } else {
            0.0
        }
    }

    /// Whether the sample covers a whole quarter second (the last one of a
    /// run may be cut short, and its rate is then no sample of the rate).
    pub fn is_whole(&self) -> bool {
        self.length_s >= 1.0 / f64::from(SAMPLES_PER_SECOND) - 1e-3
    }
}

/// One quarter second's figures of one method, added up over the threads.
#[derive(Clone, Debug)]
pub struct Quarter {
    pub latency: Histogram<u64>,
    pub calls: u64,
    pub errors: u64,
}

impl Default for Quarter {
    fn default() -> Self {
        Quarter {
            latency: new_histogram(),
            calls: 0,
            errors: 0,
        }
    }
}

impl Quarter {
    pub fn add(&mut self, stats: &MethodStats) {
        self.latency.add(&stats.latency).ok();
        let calls = stats.calls();
        self.calls += calls;
        self.errors += calls - stats.ok();
    }

    pub fn sample(&self, tick: u32, method: &str, length_s: f64) -> Sample {
        let quantile =
            |q: f64| (!self.latency.is_empty()).then(|| self.latency.value_at_quantile(q) as f64 / 1000.0);
        Sample {
            tick,
            method: method.to_string(),
            length_s,
            calls: self.calls,
            errors: self.errors,
            p50_ms: quantile(0.5),
            p99_ms: quantile(0.99),
        }
    }
}

#[cfg(test)]
mod columns {
    use super::*;

    #[test]
    fn a_written_sample_has_the_columns_demanded_back() {
        let mut out = csv::Writer::from_writer(Vec::new());
        let sample = Sample {
            tick: 0,
            method: "m".into(),
            length_s: 0.25,
            calls: 1,
            errors: 0,
            p50_ms: Some(1.0),
            p99_ms: None,
        };
        out.serialize(&sample).unwrap();
        let text = String::from_utf8(out.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next().unwrap(), SAMPLE_COLUMNS.join(","));
    }
}
