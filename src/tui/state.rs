//! What the dashboard shows, read from the live feed.

use std::sync::Arc;

use crate::feed::{Feed, Phase, TargetInfo, TargetNow};
use crate::stats::Snapshot;

pub struct Dashboard {
    pub feed: Arc<Feed>,
    /// Every target as of the last refresh.
    pub targets: Vec<TargetNow>,
    /// Whole-run percentiles instead of the last second's.
    pub cumulative: bool,
    /// With several targets at once: the per-method table shown.
    pub per_method: bool,
}

impl Dashboard {
    pub fn new(feed: Arc<Feed>) -> Self {
        let targets = feed.all_now();
        Dashboard {
            feed,
            targets,
            cumulative: false,
            per_method: false,
        }
    }

    /// Reads the feed again.
    pub fn refresh(&mut self) {
        self.targets = self.feed.all_now();
    }

    /// Whether the targets are shown side by side: several, run at once.
    pub fn side_by_side(&self) -> bool {
        self.feed.parallel && self.targets.len() > 1
    }

    /// The target a one-target view shows: the one running, else the last
    /// that ran, else the first.
    pub fn current(&self) -> usize {
        let running = self.targets.iter().position(|t| t.phase() == Phase::Running);
        let last_begun = self.targets.iter().rposition(|t| t.phase() != Phase::Waiting);
        running.or(last_begun).unwrap_or(0)
    }

    pub fn info(&self, target: usize) -> &TargetInfo {
        self.feed.info(target)
    }

    /// Target `target`'s latest snapshot, or an empty one before its first.
    pub fn snapshot(&self, target: usize) -> &Snapshot {
        static EMPTY: std::sync::OnceLock<Snapshot> = std::sync::OnceLock::new();
        match self.targets.get(target).and_then(|t| t.snapshot.as_deref()) {
            Some(snapshot) => snapshot,
            None => EMPTY.get_or_init(Snapshot::default),
        }
    }

    /// Achieved calls/s of `target`: the last complete second's.
    pub fn achieved(&self, target: usize) -> Option<f64> {
        self.snapshot(target).interval.as_ref().map(|i| i.rps)
    }

    /// Fraction of `target`'s planned time elapsed, if its run is timed.
    pub fn progress(&self, target: usize) -> Option<f64> {
        let s = self.snapshot(target);
        let planned = s.planned?;
        Some((s.elapsed.as_secs_f64() / planned.as_secs_f64().max(1e-9)).clamp(0.0, 1.0))
    }
}
