//! Steering a run while it goes: pause and resume, and a manual target
//! (rate or concurrency) that replaces the plan's from the moment it is set.
//! Every change is logged so the summary can show when it happened.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde::Serialize;
use tokio::sync::Notify;

use super::plan::Profile;

/// Changes of rate allowed in one run; later ones are refused.
pub const MAX_CHANGES: usize = 1024;

/// One change made during the run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ControlEvent {
    /// Seconds since the run's start (warmup included).
    pub at_s: f64,
    pub what: String,
}

/// From request `at_seq` on, requests are due `1/rate` apart from `at_s`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Override {
    pub at_seq: u64,
    pub at_s: f64,
    /// Zero while paused.
    pub rate: f64,
}

/// Shared by the engine and whoever steers it (the dashboard's keys).
#[derive(Debug)]
pub struct Control {
    paused: AtomicBool,
    resumed: Notify,
    /// A manual target (f64 bits) once set; 0 means "follow the plan".
    manual: AtomicU64,
    /// Append-only schedule overrides of the open model.
    overrides: Vec<OnceLock<Override>>,
    override_count: AtomicUsize,
    /// What the run is, set when it starts.
    run: OnceLock<RunInfo>,
    events: Mutex<Vec<ControlEvent>>,
}

/// What steering needs to know of the run.
#[derive(Debug)]
pub(super) struct RunInfo {
    pub start: Instant,
    /// Requests handed out by the schedule so far.
    pub claimed: Arc<AtomicU64>,
    /// Open model: the planned rate over time; closed: the planned
    /// concurrency over time (constant without stages).
    pub profile: Profile,
    pub open: bool,
    /// The most calls in flight the closed model can have.
    pub connections: usize,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            paused: AtomicBool::new(false),
            resumed: Notify::new(),
            manual: AtomicU64::new(0),
            overrides: (0..MAX_CHANGES).map(|_| OnceLock::new()).collect(),
            override_count: AtomicUsize::new(0),
            run: OnceLock::new(),
            events: Mutex::new(Vec::new()),
        }
    }
}

impl Control {
    pub fn new() -> Self {
        Control::default()
    }

    pub(super) fn started(&self, info: RunInfo) {
        let _ = self.run.set(info);
    }

    /// The target now: requests/s (open model) or calls in flight (closed).
    pub fn target_now(&self) -> f64 {
        if let Some(manual) = self.manual_target() {
            return manual;
        }
        self.run
            .get()
            .map_or(0.0, |run| run.profile.value_at(run.start.elapsed().as_secs_f64()))
    }

    /// Pauses the load, or resumes it.
    pub fn toggle_pause(&self) {
        let Some(run) = self.run.get() else { return };
        let claimed = run.claimed.load(Ordering::Acquire);
        let rate = run.open.then(|| self.target_now());
        self.set_paused(!self.is_paused(), claimed, rate);
    }

    /// Raises (`up`) or lowers the target by a step of 10% (at least 1).
    pub fn step(&self, up: bool) {
        let Some(run) = self.run.get() else { return };
        let now = self.target_now();
        let step = (now * 0.1).max(1.0);
        let mut target = if up { now + step } else { now - step };
        target = if run.open {
            target.max(1.0).round()
        } else {
            target.round().clamp(1.0, run.connections as f64)
        };
        if target == now {
            return;
        }
        let unit = if run.open { "requests/s" } else { "calls in flight" };
        self.set_target(target, run.claimed.load(Ordering::Acquire), run.open, unit);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// Waits until the run is resumed (returns at once when not paused).
    pub async fn wait_resumed(&self) {
        while self.is_paused() {
            let resumed = self.resumed.notified();
            if !self.is_paused() {
                break;
            }
            resumed.await;
        }
    }

    /// The manual target, if one was set.
    pub fn manual_target(&self) -> Option<f64> {
        let value = f64::from_bits(self.manual.load(Ordering::Acquire));
        (value > 0.0).then_some(value)
    }

    pub fn events(&self) -> Vec<ControlEvent> {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn seconds(&self) -> f64 {
        self.run
            .get()
            .map_or(0.0, |run| run.start.elapsed().as_secs_f64())
    }

    fn log(&self, what: String) {
        let at_s = self.seconds();
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ControlEvent { at_s, what });
    }

    /// Pauses or resumes; `claimed` is how many requests the schedule has
    /// handed out, `rate` the open model's rate from now on (if open).
    fn set_paused(&self, paused: bool, claimed: u64, rate: Option<f64>) {
        if self.paused.swap(paused, Ordering::AcqRel) == paused {
            return;
        }
        if let Some(rate) = rate {
            // Paused time owes no requests; the schedule restarts on resume.
            self.push_override(claimed, if paused { 0.0 } else { rate });
        }
        if !paused {
            self.resumed.notify_waiters();
        }
        self.log(if paused { "paused".into() } else { "resumed".into() });
    }

    /// Sets a manual target: a rate (open model, rescheduling from now) or
    /// a concurrency (closed).
    fn set_target(&self, target: f64, claimed: u64, open: bool, unit: &str) {
        self.manual.store(target.to_bits(), Ordering::Release);
        if open && !self.is_paused() {
            self.push_override(claimed, target);
        }
        self.log(format!("target set to {target} {unit}"));
    }

    fn push_override(&self, at_seq: u64, rate: f64) {
        let index = self.override_count.load(Ordering::Acquire);
        if index >= MAX_CHANGES {
            return;
        }
        // Requests already claimed keep the times they were given; the new
        // rate takes over after them (or now, if the schedule is behind).
        let at_s = match self.due_seconds(at_seq) {
            Some(due) if rate > 0.0 => due.max(self.seconds()),
            _ => self.seconds(),
        };
        let _ = self.overrides[index].set(Override { at_seq, at_s, rate });
        self.override_count.store(index + 1, Ordering::Release);
    }

    /// When request `seq` is due under the schedule in force, in seconds
    /// from the start; `None` while paused or outside the open model.
    fn due_seconds(&self, seq: u64) -> Option<f64> {
        let run = self.run.get().filter(|run| run.open)?;
        match self.override_for(seq) {
            Some(o) if o.rate > 0.0 => Some(o.at_s + (seq - o.at_seq) as f64 / o.rate),
            Some(_) => None,
            None => run.profile.due_time(seq as f64),
        }
    }

    /// The override in force for request `seq`, if any.
    pub(super) fn override_for(&self, seq: u64) -> Option<Override> {
        let count = self.override_count.load(Ordering::Acquire);
        (0..count)
            .rev()
            .filter_map(|i| self.overrides[i].get())
            .find(|o| o.at_seq <= seq)
            .copied()
    }

    /// The override in force at `seconds` after the start, if any.
    pub(super) fn override_at(&self, seconds: f64) -> Option<Override> {
        let count = self.override_count.load(Ordering::Acquire);
        (0..count)
            .rev()
            .filter_map(|i| self.overrides[i].get())
            .find(|o| o.at_s <= seconds)
            .copied()
    }
}
