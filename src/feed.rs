//! The live feed: per target, the latest snapshot its run published, its
//! seconds so far and its thresholds judged on the figures so far. The runs
//! write it; the dashboard, `/metrics` and the web page only read it, each
//! at its own pace, so none of them holds up the run or another.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::engine::Control;
use crate::stats::{OutcomeKind, SecondRow, Snapshot};
use crate::thresholds::{SoFar, Threshold, ThresholdResult};

/// Seconds of history kept per target for the charts.
pub const HISTORY: usize = 600;

/// What a target is, as every view names it.
pub struct TargetInfo {
    /// The label: `[[targets]]`' name, or the one target's host and port.
    pub name: String,
    /// The URL (or `builtin`, or the stdio command), as the dashboard shows it.
    pub url: String,
    /// The transport in words (`http/1.1`, `websocket`...).
    pub transport: String,
    pub thresholds: Vec<Threshold>,
    /// Steers the target's run (pause, rate or concurrency).
    pub control: Arc<Control>,
}

/// One completed second of a target's run, as the charts plot it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Seconds since the measured run began, at the second's end.
    pub second: u32,
    pub calls_per_s: f64,
    /// NaN for a second without latencies (paused, or every call failed
    /// to connect): no latency, not 0 ms.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

/// Where a target's run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not begun: a target run in turn, after the one running.
    Waiting,
    Running,
    /// Its last snapshot is in.
    Finished,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::Running => "running",
            Phase::Finished => "finished",
        }
    }
}

/// A target now, as a reader gets it: a copy, so no lock is held while
/// it is drawn or sent.
#[derive(Clone, Debug, Default)]
pub struct TargetNow {
    /// `None` until the run's first snapshot.
    pub snapshot: Option<Arc<Snapshot>>,
    /// The seconds so far, the last [`HISTORY`] of them.
    pub history: Vec<Point>,
    /// The last complete second, whole.
    pub last_second: Option<SecondRow>,
    /// Each threshold so far, or as judged at the end.
    pub thresholds: Vec<SoFar>,
}

impl TargetNow {
    pub fn phase(&self) -> Phase {
        match &self.snapshot {
            None => Phase::Waiting,
            Some(s) if s.finished => Phase::Finished,
            Some(_) => Phase::Running,
        }
    }
}

#[derive(Default)]
struct State {
    snapshot: Option<Arc<Snapshot>>,
    history: VecDeque<Point>,
    last_second: Option<SecondRow>,
    thresholds: Vec<SoFar>,
}

struct Target {
    info: TargetInfo,
    state: Mutex<State>,
}

/// Whether any of the second's calls has a latency: those that failed to
/// connect have none.
pub fn has_latency(row: &SecondRow) -> bool {
    let unconnected = row
        .error_outcomes
        .get(OutcomeKind::Connect.name())
        .copied()
        .unwrap_or(0);
    row.calls > unconnected
}

/// What whoever steers the runs (the dashboard's keys, the page's
/// buttons) asks of every target running, together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    Pause,
    Resume,
    /// Pauses them all, or, when the first running is paused, resumes
    /// them all, so they stay in step.
    TogglePause,
    /// Each one's target up by its own 10%.
    Raise,
    Lower,
}

/// Every target's latest figures, shared by the runs and the views.
pub struct Feed {
    pub scenario: String,
    /// The shard's index, when the run is a shard of a split run.
    pub shard: Option<u32>,
    /// The targets run all at once (else one after another).
    pub parallel: bool,
    targets: Vec<Target>,
    /// Bumped at each change, for a reader that waits for one.
    changed: watch::Sender<u64>,
    closed: AtomicBool,
}

impl Feed {
    pub fn new(scenario: &str, shard: Option<u32>, parallel: bool, targets: Vec<TargetInfo>) -> Feed {
        Feed {
            scenario: scenario.to_string(),
            shard,
            parallel,
            targets: targets
                .into_iter()
                .map(|info| Target {
                    info,
                    state: Mutex::default(),
                })
                .collect(),
            changed: watch::Sender::new(0),
            closed: AtomicBool::new(false),
        }
    }

    pub fn len(&self) -> usize {
        self.targets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    pub fn info(&self, target: usize) -> &TargetInfo {
        &self.targets[target].info
    }

    pub fn infos(&self) -> impl Iterator<Item = &TargetInfo> {
        self.targets.iter().map(|t| &t.info)
    }

    /// Takes target `target`'s snapshot: what every view shows next.
    pub fn publish(&self, target: usize, snapshot: &Snapshot) {
        let Some(t) = self.targets.get(target) else {
            return;
        };
        let thresholds = (t.info.thresholds.iter())
            .map(|th| th.so_far(&snapshot.methods, &snapshot.total))
            .collect();
        {
            let mut state = t.state.lock().unwrap_or_else(|p| p.into_inner());
            for row in &snapshot.new_rows {
                let timed = has_latency(row);
                state.history.push_back(Point {
                    second: row.second.saturating_add(1),
                    calls_per_s: row.rps,
                    p50_ms: if timed { row.p50_ms } else { f64::NAN },
                    p99_ms: if timed { row.p99_ms } else { f64::NAN },
                    errors: row.errors,
                });
                if state.history.len() > HISTORY {
                    state.history.pop_front();
                }
            }
            if let Some(row) = snapshot.new_rows.last() {
                state.last_second = Some(row.clone());
            }
            state.snapshot = Some(Arc::new(snapshot.clone()));
            state.thresholds = thresholds;
        }
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Takes target `target`'s thresholds as judged on its finished run.
    pub fn judged(&self, target: usize, results: &[ThresholdResult]) {
        let Some(t) = self.targets.get(target) else {
            return;
        };
        t.state.lock().unwrap_or_else(|p| p.into_inner()).thresholds =
            results.iter().map(SoFar::of).collect();
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Target `target` now.
    pub fn now(&self, target: usize) -> TargetNow {
        let state = self.targets[target]
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        TargetNow {
            snapshot: state.snapshot.clone(),
            history: state.history.iter().copied().collect(),
            last_second: state.last_second.clone(),
            thresholds: state.thresholds.clone(),
        }
    }

    /// Every target now, in order.
    pub fn all_now(&self) -> Vec<TargetNow> {
        (0..self.targets.len()).map(|i| self.now(i)).collect()
    }

    /// The latest snapshot of each target that has one, with its info.
    pub fn snapshots(&self) -> Vec<(&TargetInfo, Arc<Snapshot>)> {
        (self.targets.iter())
            .filter_map(|t| {
                let state = t.state.lock().unwrap_or_else(|p| p.into_inner());
                state.snapshot.clone().map(|s| (&t.info, s))
            })
            .collect()
    }

    /// The count of changes so far: a reader redraws when it moves.
    pub fn version(&self) -> u64 {
        *self.changed.borrow()
    }

    /// Waits for a change, from a task.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Steers every target running now through its `Control`, the one way
    /// a run is steered.
    pub fn steer(&self, steer: Steer) {
        let running: Vec<&Control> = (0..self.len())
            .filter(|i| self.now(*i).phase() == Phase::Running)
            .map(|i| &*self.info(i).control)
            .collect();
        let pause = match steer {
            Steer::Pause => true,
            Steer::Resume => false,
            Steer::TogglePause => match running.first() {
                Some(first) => !first.is_paused(),
                None => return,
            },
            Steer::Raise | Steer::Lower => {
                for control in running {
                    control.step(steer == Steer::Raise);
                }
                return;
            }
        };
        for control in running.into_iter().filter(|c| c.is_paused() != pause) {
            control.toggle_pause();
        }
    }

    /// Says every run is over and judged: the views show the final figures.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::SecondRow;

    fn info(name: &str, thresholds: &[&str]) -> TargetInfo {
        TargetInfo {
            name: name.into(),
            url: format!("http://{name}"),
            transport: "http/1.1".into(),
            thresholds: thresholds
                .iter()
                .map(|t| crate::thresholds::parse(t).unwrap())
                .collect(),
            control: Arc::new(Control::new()),
        }
    }

    fn row(second: u32) -> SecondRow {
        SecondRow {
            second,
            calls: 10,
            ok: 10,
            errors: 0,
            rps: 10.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            max_ms: 3.0,
            error_outcomes: Default::default(),
            flows: 0,
            flow_errors: 0,
            server_cpu_cores: None,
            server_rss_bytes: None,
        }
    }

    #[test]
    fn each_target_keeps_its_latest_snapshot_and_a_bounded_history() {
        let feed = Feed::new(
            "demo",
            None,
            true,
            vec![info("a", &["calls > 5"]), info("b", &[])],
        );
        assert_eq!(feed.now(0).phase(), Phase::Waiting);
        let before = feed.version();
        let mut rows: Vec<SecondRow> = (0..HISTORY as u32 + 5).map(row).collect();
        // The last second's calls all failed to connect: no latency.
        let last = rows.last_mut().unwrap();
        last.error_outcomes.insert("connect", last.calls);
        let mut snapshot = Snapshot {
            new_rows: rows,
            ..Snapshot::default()
        };
        snapshot.total.calls = 7;
        feed.publish(0, &snapshot);
        assert!(feed.version() > before, "a reader sees the change");
        let a = feed.now(0);
        assert_eq!(a.phase(), Phase::Running);
        assert_eq!(a.history.len(), HISTORY, "the oldest seconds go");
        assert_eq!(a.history.last().unwrap().second, HISTORY as u32 + 5);
        assert!(a.history.last().unwrap().p99_ms.is_nan(), "no latency, not 0 ms");
        assert_eq!(a.history[0].p99_ms, 2.0);
        assert_eq!(a.last_second.as_ref().unwrap().second, HISTORY as u32 + 4);
        assert_eq!(a.thresholds[0].standing, crate::thresholds::Standing::Pass);
        assert_eq!(feed.now(1).phase(), Phase::Waiting, "the other is untouched");
        assert_eq!(feed.snapshots().len(), 1);
        feed.publish(
            0,
            &Snapshot {
                finished: true,
                ..Snapshot::default()
            },
        );
        assert_eq!(feed.now(0).phase(), Phase::Finished);
        assert_eq!(feed.now(0).history.len(), HISTORY, "history outlives a snapshot");
        // A target the feed does not have is no panic.
        feed.publish(7, &Snapshot::default());
        assert!(!feed.is_closed());
        feed.close();
        assert!(feed.is_closed());
    }
}
