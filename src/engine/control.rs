//! Steering a run while it goes: pause and resume, and a manual target
//! (rate or concurrency) that replaces the plan's from the moment it is set.
//! Every change is logged so the summary can show when it happened.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::time::Instant;

use tokio::sync::Notify;

use super::timetable::{Due, Override, Timetable};
use crate::plan::Profile;
use crate::stats::ControlEvent;

/// Changes of rate allowed in one run; later ones are refused.
pub const MAX_CHANGES: usize = 1024;

/// What the engine and whoever steers it (the dashboard's keys) share.
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
    /// Each pause as (from, to) in seconds from the start; `to` is
    /// infinite while it lasts. Paused time is no measured time.
    pauses: Mutex<Vec<(f64, f64)>>,
    /// Why whoever steers the run stopped it early, when it did.
    stopped_because: OnceLock<String>,
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
    /// The open model's times (none in the closed model).
    pub timetable: Option<Arc<Timetable>>,
    pub open: bool,
    /// The most calls in flight the closed model can have: its callers.
    pub callers: usize,
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
            pauses: Mutex::new(Vec::new()),
            stopped_because: OnceLock::new(),
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
            target.round().clamp(1.0, run.callers.max(1) as f64)
        };
        if target == now {
            return;
        }
        let unit = if run.open { "requests/s" } else { "calls in flight" };
        self.set_target(target, run.claimed.load(Ordering::Acquire), run.open, unit);
    }

    /// Seconds paused between `from` and `to` (seconds from the start).
    pub fn paused_within(&self, from: f64, to: f64) -> f64 {
        let pauses = self.pauses.lock().unwrap_or_else(|p| p.into_inner());
        (pauses.iter())
            .map(|(start, end)| (end.min(to) - start.max(from)).max(0.0))
            .sum()
    }

    /// The target set by hand that is in force, if it was ever set: what
    /// the run ended at, rather than what it was planned at.
    pub fn steered_to(&self) -> Option<f64> {
        self.manual_target()
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

    /// Says why the run is being stopped (the caller cancels it): the
    /// summary's warnings carry the first reason given.
    pub fn stop_because(&self, why: String) {
        let _ = self.stopped_because.set(why);
    }

    pub fn stopped_because(&self) -> Option<String> {
        self.stopped_because.get().cloned()
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
        self.log_at(self.seconds(), what);
    }

    fn log_at(&self, at_s: f64, what: String) {
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
        let now = self.seconds();
        let mut pauses = self.pauses.lock().unwrap_or_else(|p| p.into_inner());
        match (paused, pauses.last_mut()) {
            (true, _) => pauses.push((now, f64::INFINITY)),
            (false, Some(last)) => last.1 = now,
            (false, None) => {}
        }
        drop(pauses);
        // The event and the pause at one reading of the clock.
        self.log_at(now, if paused { "paused".into() } else { "resumed".into() });
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
        let timetable = self.run.get()?.timetable.as_ref()?;
        match timetable.due(seq, self.override_for(seq)) {
            Due::At(seconds) => Some(seconds),
            Due::Paused | Due::Past => None,
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

#[cfg(test)]
mod tests {
    //! The open model's schedule under steering, wired as the engine wires it
    //! (a `Schedule` and the `Control` that overrides it), with a start set in
    //! the past so that "now" is known to lie well before or after the
    //! requests claimed: which request is due when is asserted exactly.

    use std::time::Duration;

    use super::*;
    use crate::engine::schedule::Schedule;
    use crate::plan::{LoadPlan, Pacing};

    /// An open-model run of `rate` requests/s for `duration`, started `ago`.
    fn open_run(rate: f64, ago: Duration, duration: Duration) -> (Arc<Control>, Schedule, Instant) {
        open_shard(rate, ago, duration, Default::default())
    }

    /// As `open_run`, this machine being `shard` of the run.
    fn open_shard(
        rate: f64,
        ago: Duration,
        duration: Duration,
        shard: crate::plan::Shard,
    ) -> (Arc<Control>, Schedule, Instant) {
        let plan = LoadPlan {
            pacing: Pacing::Open { rate },
            connections: 1,
            per_connection: 1,
            duration: Some(duration),
            requests: None,
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(1),
            grace: Duration::from_secs(1),
            threads: 1,
            seed: 0,
            stages: Vec::new(),
            initial_concurrency: 1,
            shard,
            recorded: None,
            groups: None,
            reconnect_every: None,
            max_flows: crate::plan::DEFAULT_MAX_FLOWS,
        };
        let start = Instant::now()
            .checked_sub(ago)
            .expect("the clock goes back that far");
        let control = Arc::new(Control::new());
        let schedule = Schedule::new(&plan, start, control.clone());
        control.started(RunInfo {
            start,
            claimed: schedule.claimed.clone(),
            profile: plan.profile(rate),
            timetable: schedule.timetable(),
            open: true,
            callers: 1,
        });
        (control, schedule, start)
    }

    /// Claims `n` requests; their intended times in seconds from `start`.
    fn claim(schedule: &Schedule, start: Instant, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| (schedule.claim().expect("a request is due").intended - start).as_secs_f64())
            .collect()
    }

    /// Every claim left in the run.
    fn claim_all(schedule: &Schedule, start: Instant) -> Vec<f64> {
        std::iter::from_fn(|| schedule.claim())
            .map(|c| (c.intended - start).as_secs_f64())
            .collect()
    }

    fn assert_spaced(times: &[f64], from: f64, rate: f64) {
        for (k, t) in times.iter().enumerate() {
            let due = from + k as f64 / rate;
            assert!((t - due).abs() < 1e-6, "request {k} due at {t} s, not {due} s");
        }
    }

    fn seconds(start: Instant, s: f64) -> Instant {
        start + Duration::from_secs_f64(s)
    }

    #[test]
    fn a_raised_rate_starts_after_the_requests_already_handed_out() {
        // 1 s into the run, callers have claimed 2000 requests at 200/s:
        // the last is due at 9.995 s.
        let (control, schedule, start) = open_run(200.0, Duration::from_secs(1), Duration::from_secs(11));
        let before = claim(&schedule, start, 2000);
        assert_spaced(&before, 0.0, 200.0);
        for _ in 0..5 {
            control.step(true);
        }
        // 200 → 220 → 242 → 266 → 293 → 322.
        assert_eq!(control.manual_target(), Some(322.0));
        assert_eq!(control.target_now(), 322.0);
        let events = control.events();
        let steps: Vec<&str> = events.iter().map(|e| e.what.as_str()).collect();
        assert_eq!(
            steps,
            [
                "target set to 220 requests/s",
                "target set to 242 requests/s",
                "target set to 266 requests/s",
                "target set to 293 requests/s",
                "target set to 322 requests/s",
            ]
        );
        // The requests handed out keep their times; the new rate takes over
        // where they end (10 s), not from now (1 s): no request is due twice
        // as densely, nothing is owed. 322 fit in the last second.
        let after = claim_all(&schedule, start);
        assert_eq!(after.len(), 322);
        assert_spaced(&after, 10.0, 322.0);
        let all: Vec<f64> = before.iter().chain(&after).copied().collect();
        let closest = all.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
        assert!(
            closest > 1.0 / 322.0 - 1e-6,
            "a burst: two requests {closest} s apart"
        );
        // What the run counts as due agrees: 200/s to 10 s, then 322/s.
        assert_eq!(schedule.due_before(seconds(start, 5.0025)), 1001);
        assert_eq!(schedule.due_before(seconds(start, 10.5)), 2000 + 161);
        assert_eq!(schedule.due_before(seconds(start, 11.0)), 2322);
    }

    /// A shard's requests are the run's every `count`-th, due when one
    /// machine would send them: a raised rate takes over after this
    /// shard's own last request handed out, at its share of the new rate.
    #[test]
    fn a_shards_raised_rate_starts_after_its_own_requests_at_its_share() {
        let shard = crate::plan::Shard { index: 0, count: 2 };
        let (control, schedule, start) =
            open_shard(400.0, Duration::from_secs(1), Duration::from_secs(11), shard);
        // Its 2000 requests are the run's 0, 2, ... 3998: every 5 ms to 9.995 s.
        let before = claim(&schedule, start, 2000);
        assert_spaced(&before, 0.0, 200.0);
        control.step(true);
        assert_eq!(control.manual_target(), Some(440.0));
        let after = claim_all(&schedule, start);
        assert_eq!(after.len(), 220, "half of 440/s in the last second");
        assert_spaced(&after, 10.0, 220.0);
        assert_eq!(schedule.due_before(seconds(start, 10.5)), 2000 + 110);
    }

    #[test]
    fn a_rate_raised_while_behind_starts_now_and_owes_nothing() {
        // 5 s into the run at 200/s, only the first second's requests were
        // claimed: the generator is 4 s behind.
        let (control, schedule, start) = open_run(200.0, Duration::from_secs(5), Duration::from_secs(60));
        let before = claim(&schedule, start, 200);
        assert_spaced(&before, 0.0, 200.0);
        let (earliest, latest) = (start.elapsed().as_secs_f64(), {
            control.step(true);
            start.elapsed().as_secs_f64()
        });
        assert_eq!(control.manual_target(), Some(220.0));
        // The new schedule starts when the rate was set: the 800 requests
        // the old one had due by then are not sent in a burst.
        let after = claim(&schedule, start, 100);
        let from = after[0];
        assert!(
            (earliest..=latest).contains(&from),
            "the raised rate starts at {from} s, not when set ({earliest}..{latest} s)"
        );
        assert_spaced(&after, from, 220.0);
        assert_eq!(schedule.due_before(seconds(start, from + 0.5025)), 200 + 111);
    }

    #[test]
    fn a_pause_sends_nothing_and_owes_nothing() {
        // 1 s into the run at 100/s: requests 0..=100 (to 1.0 s) were sent,
        // and callers hold 101..=105 (to 1.05 s), not yet due.
        let (control, schedule, start) = open_run(100.0, Duration::from_secs(1), Duration::from_secs(60));
        assert_spaced(&claim(&schedule, start, 106), 0.0, 100.0);
        control.toggle_pause();
        assert!(control.is_paused());
        // The callers holding requests wake in the pause and give them back
        // (the worker's `withdraw`); a caller that claims in the pause is
        // told "now", finds the run paused, and gives it back too.
        for _ in 101..=105 {
            schedule.withdraw();
        }
        let now = start.elapsed();
        let in_pause = schedule.claim().unwrap().intended - start;
        assert!(in_pause >= now, "a claim in a pause is due now, not {in_pause:?}");
        schedule.withdraw();
        // Paused for at least 50 ms (five requests' worth at 100/s).
        std::thread::sleep(Duration::from_millis(50));
        let earliest = start.elapsed().as_secs_f64();
        control.toggle_pause();
        let latest = start.elapsed().as_secs_f64();
        assert!(!control.is_paused());
        // On resume the schedule restarts from the resume: nothing falls due
        // for the paused time, so nothing is sent in a burst.
        let after = claim(&schedule, start, 100);
        let from = after[0];
        assert!(
            (earliest..=latest).contains(&from),
            "the load resumes at {from} s, not when resumed ({earliest}..{latest} s)"
        );
        assert_spaced(&after, from, 100.0);
        // Due: the 101 requests before the pause and 51 in the first 0.505 s
        // after it; the ones given back are not.
        assert_eq!(schedule.due_before(seconds(start, from + 0.505)), 101 + 51);
        let events: Vec<String> = control.events().into_iter().map(|e| e.what).collect();
        assert_eq!(events, ["paused", "resumed"]);
    }

    #[test]
    fn a_rate_set_while_paused_takes_effect_on_resume() {
        let (control, schedule, start) = open_run(100.0, Duration::from_secs(1), Duration::from_secs(60));
        claim(&schedule, start, 101);
        control.toggle_pause();
        control.step(true);
        assert_eq!(control.target_now(), 110.0);
        let earliest = start.elapsed().as_secs_f64();
        control.toggle_pause();
        let latest = start.elapsed().as_secs_f64();
        let after = claim(&schedule, start, 50);
        assert!((earliest..=latest).contains(&after[0]), "{} s", after[0]);
        assert_spaced(&after, after[0], 110.0);
    }

    #[test]
    fn paused_time_is_counted_within_any_window() {
        let (control, _, _) = open_run(100.0, Duration::from_secs(1), Duration::from_secs(60));
        control.toggle_pause();
        control.toggle_pause();
        let recorded = control.pauses.lock().unwrap().clone();
        assert_eq!(recorded.len(), 1);
        assert!(
            recorded[0].1.is_finite() && recorded[0].1 >= recorded[0].0,
            "{recorded:?}"
        );
        // Two pauses, the second still going.
        *control.pauses.lock().unwrap() = vec![(2.0, 5.0), (8.0, f64::INFINITY)];
        assert_eq!(control.paused_within(0.0, 10.0), 5.0);
        assert_eq!(control.paused_within(3.0, 9.0), 3.0);
        assert_eq!(control.paused_within(6.0, 7.5), 0.0);
        assert_eq!(control.paused_within(4.0, 4.5), 0.5);
    }
}
