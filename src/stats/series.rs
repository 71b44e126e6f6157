//! A run's series: its rows a second, its latency histograms a second and
//! its samples a quarter second. The engine hands each over as it closes,
//! to a [`Spool`]: kept in memory ([`Series`]), or written out as the run
//! goes and read back at its end (the report's files), so that a long run
//! holds no more at its hundredth hour than at its first minute.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::{LatencyLog, Sample, SecondRow};

/// One second of the run as it closes: its row and its non-empty
/// histograms, each method's (tagged with its name made a valid tag) and
/// the total's.
pub struct ClosedSecond<'a> {
    pub row: &'a SecondRow,
    /// The second's length: the last may be cut short by the run's end.
    pub length: Duration,
    pub histograms: Vec<(String, &'a Histogram<u64>)>,
}

/// Where a run's closed seconds and quarter seconds go.
pub trait Spool: Send {
    fn second(&mut self, second: &ClosedSecond<'_>);
    fn quarter(&mut self, samples: &[Sample]);
    /// Everything handed over, whole and in order, for the summary and the
    /// files at the end; what could not be kept is said in the error.
    fn take(&mut self) -> Series;
}

/// The series whole, in memory.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub timeseries: Vec<SecondRow>,
    pub latency_log: LatencyLog,
    pub samples: Vec<Sample>,
}

impl Series {
    /// Whether nothing was handed over.
    pub fn is_empty(&self) -> bool {
        self.timeseries.is_empty() && self.latency_log.intervals.is_empty() && self.samples.is_empty()
    }

    /// Adds `later`'s series after these.
    pub fn extend(&mut self, later: Series) {
        self.timeseries.extend(later.timeseries);
        self.latency_log.intervals.extend(later.latency_log.intervals);
        self.samples.extend(later.samples);
    }
}

impl Spool for Series {
    fn second(&mut self, closed: &ClosedSecond<'_>) {
        let second = closed.row.second;
        for (tag, histogram) in &closed.histograms {
            self.latency_log
                .push(second, closed.length, tag.clone(), histogram);
        }
        self.timeseries.push(closed.row.clone());
    }

    fn quarter(&mut self, samples: &[Sample]) {
        self.samples.extend_from_slice(samples);
    }

    fn take(&mut self) -> Series {
        std::mem::take(self)
    }
}
