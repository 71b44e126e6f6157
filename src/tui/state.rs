//! What the dashboard shows, built from the engine's snapshots.

use crate::stats::Snapshot;

/// Seconds of history kept for the charts.
const HISTORY: usize = 600;

pub struct Dashboard {
    pub scenario: String,
    pub target: String,
    pub transport: String,
    pub snapshot: Snapshot,
    /// (second, calls/s), (second, p50 ms), (second, p99 ms).
    pub rate: Vec<(f64, f64)>,
    pub p50: Vec<(f64, f64)>,
    pub p99: Vec<(f64, f64)>,
    /// Whole-run percentiles instead of the last second's.
    pub cumulative: bool,
}

impl Dashboard {
    pub fn new(scenario: &str, target: &str, transport: &str) -> Self {
        Dashboard {
            scenario: scenario.to_string(),
            target: target.to_string(),
            transport: transport.to_string(),
            snapshot: Snapshot::default(),
            rate: Vec::new(),
            p50: Vec::new(),
            p99: Vec::new(),
            cumulative: false,
        }
    }

    pub fn update(&mut self, snapshot: &Snapshot) {
        for row in &snapshot.new_rows {
            let x = row.second as f64 + 1.0;
            for (series, y) in [
                (&mut self.rate, row.rps),
                (&mut self.p50, row.p50_ms),
                (&mut self.p99, row.p99_ms),
            ] {
                series.push((x, y));
                if series.len() > HISTORY {
                    series.remove(0);
                }
            }
        }
        self.snapshot = snapshot.clone();
    }

    /// Achieved calls/s: the last complete second's.
    pub fn achieved(&self) -> f64 {
        self.snapshot.interval.as_ref().map_or(0.0, |i| i.rps)
    }

    /// Fraction of the planned time elapsed, if the run is timed.
    pub fn progress(&self) -> Option<f64> {
        let planned = self.snapshot.planned?;
        Some((self.snapshot.elapsed.as_secs_f64() / planned.as_secs_f64().max(1e-9)).clamp(0.0, 1.0))
    }
}
