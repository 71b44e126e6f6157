//! Gathering the threads' hand-overs: per-second windows, run totals, stage
//! totals, and the snapshots published while the run goes.

use std::collections::BTreeMap;
use std::time::Duration;

use super::state::{Chunk, TICKS_PER_SECOND};
use crate::stats::{
    latency_buckets, tagged, BucketCounts, ClosedSecond, MethodSummary, Quarter, Recorder, ScheduleSummary,
    SecondRow, Snapshot, Spool, TOTAL_TAG,
};

/// Buckets in the latency histogram of a snapshot.
const HISTOGRAM_BUCKETS: usize = 12;

pub(super) struct Gatherer {
    methods: Vec<String>,
    /// Seconds not complete yet.
    windows: BTreeMap<u32, Recorder>,
    /// Per thread: the last tick handed over, and whether it finished.
    reported: Vec<Option<u32>>,
    finished: Vec<bool>,
    in_flight: Vec<u64>,
    /// The last second of a timed run closes with the run, however the
    /// final hand-overs race the deadline.
    last_second: Option<u32>,
    /// Quarter seconds not complete yet: per method, then the total.
    quarters: BTreeMap<u32, Vec<Quarter>>,
    /// The last quarter of a timed run, as `last_second`.
    last_tick: Option<u32>,
    /// Where each closed second and quarter second goes.
    pub spool: Box<dyn Spool>,
    pub stage_totals: Vec<Recorder>,
    pub total: Recorder,
    /// Requests sent by the threads that finished.
    pub sent: u64,
    last_window: Option<Recorder>,
    /// Rows completed since the last snapshot.
    fresh_rows: Vec<SecondRow>,
    last_error: Option<String>,
    published_tick: Option<u32>,
    /// An empty recorder of the run's shape, for each new window.
    blank: Recorder,
}

impl Gatherer {
    /// `blank` is an empty recorder of the run's shape (its rows and flows).
    pub fn new(
        methods: Vec<String>,
        blank: Recorder,
        threads: usize,
        (duration, stages): (Option<Duration>, usize),
        spool: Box<dyn Spool>,
    ) -> Self {
        Gatherer {
            windows: BTreeMap::new(),
            reported: vec![None; threads],
            finished: vec![false; threads],
            in_flight: vec![0; threads],
            last_second: duration.map(|d| (d.as_secs_f64().ceil() as u32).max(1) - 1),
            quarters: BTreeMap::new(),
            last_tick: duration
                .map(|d| ((d.as_secs_f64() * f64::from(TICKS_PER_SECOND)).ceil() as u32).max(1) - 1),
            spool,
            stage_totals: vec![blank.clone(); stages],
            total: blank.clone(),
            sent: 0,
            last_window: None,
            fresh_rows: Vec::new(),
            last_error: None,
            published_tick: None,
            methods,
            blank,
        }
    }

    /// Takes one hand-over; returns whether a new round of ticks is in, so
    /// that a snapshot is due.
    pub fn add(&mut self, chunk: Chunk) -> bool {
        self.total.merge(&chunk.recorder);
        for (stage, recorder) in &chunk.stages {
            self.total.merge(recorder);
            if let Some(total) = self.stage_totals.get_mut(*stage) {
                total.merge(recorder);
            }
        }
        if chunk.recorder.last_error.is_some() {
            self.last_error.clone_from(&chunk.recorder.last_error);
        }
        let mut second = chunk.tick / TICKS_PER_SECOND;
        if let Some(last) = self.last_second {
            second = second.min(last);
        }
        let window = self.windows.entry(second).or_insert_with(|| self.blank.clone());
        window.merge(&chunk.recorder);
        chunk
            .stages
            .iter()
            .for_each(|(_, recorder)| window.merge(recorder));
        self.add_quarter(&chunk);
        self.reported[chunk.thread] = Some(chunk.tick);
        self.in_flight[chunk.thread] = chunk.in_flight;
        if let Some(sent) = chunk.last {
            self.sent += sent;
            self.finished[chunk.thread] = true;
            self.in_flight[chunk.thread] = 0;
        }
        while let Some((second, window)) = self.pop_complete() {
            self.close(second, window, Duration::from_secs(1));
        }
        while let Some((tick, quarter)) = self.pop_complete_quarter() {
            self.close_quarter(tick, &quarter, 1.0 / f64::from(TICKS_PER_SECOND));
        }
        let round = self.round();
        if round > self.published_tick {
            self.published_tick = round;
            return true;
        }
        false
    }

    /// The latest tick every running thread has handed over.
    fn round(&self) -> Option<u32> {
        self.reported
            .iter()
            .zip(&self.finished)
            .filter(|(_, done)| !**done)
            .map(|(tick, _)| *tick)
            .min()
            .flatten()
    }

    fn pop_complete(&mut self) -> Option<(u32, Recorder)> {
        let (&second, _) = self.windows.first_key_value()?;
        if self.last_second.is_some_and(|last| second >= last) || self.finished.iter().all(|f| *f) {
            return None;
        }
        let through = (second + 1) * TICKS_PER_SECOND - 1;
        let complete = self
            .reported
            .iter()
            .zip(&self.finished)
            .all(|(tick, done)| *done || tick.is_some_and(|t| t >= through));
        if !complete {
            return None;
        }
        self.windows.remove(&second).map(|window| (second, window))
    }

    /// Adds a hand-over to its quarter second's figures.
    fn add_quarter(&mut self, chunk: &Chunk) {
        let tick = self.last_tick.map_or(chunk.tick, |last| chunk.tick.min(last));
        let methods = self.methods.len();
        let quarter = self
            .quarters
            .entry(tick)
            .or_insert_with(|| vec![Quarter::default(); methods + 1]);
        let recorders = std::iter::once(&chunk.recorder).chain(chunk.stages.iter().map(|(_, r)| r));
        for recorder in recorders {
            let calls = recorder.call_rows().len();
            for (i, stats) in recorder.methods.iter().enumerate() {
                quarter[i].add(stats);
                // A flow's row is not a call: its steps are counted already.
                if i < calls {
                    quarter[methods].add(stats);
                }
            }
        }
    }

    /// The earliest quarter every thread has handed over, as `pop_complete`
    /// does for seconds.
    fn pop_complete_quarter(&mut self) -> Option<(u32, Vec<Quarter>)> {
        let (&tick, _) = self.quarters.first_key_value()?;
        if self.last_tick.is_some_and(|last| tick >= last) || self.finished.iter().all(|f| *f) {
            return None;
        }
        let complete = (self.reported.iter().zip(&self.finished))
            .all(|(reported, done)| *done || reported.is_some_and(|t| t >= tick));
        if !complete {
            return None;
        }
        self.quarters.remove(&tick).map(|quarter| (tick, quarter))
    }

    fn close_quarter(&mut self, tick: u32, quarter: &[Quarter], length_s: f64) {
        let names = self.methods.iter().map(String::as_str).chain([TOTAL_TAG]);
        let samples: Vec<_> = (quarter.iter().zip(names))
            .map(|(figures, name)| figures.sample(tick, name, length_s))
            .collect();
        self.spool.quarter(&samples);
    }

    fn close(&mut self, second: u32, window: Recorder, length: Duration) {
        let row = SecondRow::new(second, &window, length);
        let total = window.total();
        self.spool.second(&ClosedSecond {
            row: &row,
            length,
            histograms: tagged(&self.methods, &window, &total),
        });
        self.fresh_rows.push(row);
        self.last_window = Some(window);
    }

    /// The measured span ends `measured` in, learnt as the run goes (the
    /// open model's request limit): later hand-overs count in its last
    /// second and quarter, as a timed run's do.
    pub fn close_at(&mut self, measured: Duration) {
        let seconds = measured.as_secs_f64();
        self.last_second.get_or_insert((seconds.ceil() as u32).max(1) - 1);
        let ticks = seconds * f64::from(TICKS_PER_SECOND);
        self.last_tick.get_or_insert((ticks.ceil() as u32).max(1) - 1);
    }

    /// Closes the seconds still open once every thread is done; `measured`
    /// is the measured length of the run.
    pub fn finish(&mut self, measured: Duration) {
        let quarter = 1.0 / f64::from(TICKS_PER_SECOND);
        for (tick, figures) in std::mem::take(&mut self.quarters) {
            let covered = (measured.as_secs_f64() - f64::from(tick) * quarter).clamp(0.0, quarter);
            if covered > 0.0 {
                self.close_quarter(tick, &figures, covered);
            }
        }
        for (second, window) in std::mem::take(&mut self.windows) {
            let covered = measured
                .saturating_sub(Duration::from_secs(second as u64))
                .min(Duration::from_secs(1));
            if window.is_empty() && covered.is_zero() {
                continue;
            }
            self.close(second, window, covered);
        }
    }

    /// The run as it stands; `measured` is the measured time so far.
    pub fn snapshot(&mut self, measured: Duration, mut snapshot: Snapshot) -> Snapshot {
        let seconds = measured.as_secs_f64();
        let total = self.total.total();
        snapshot.methods = self
            .methods
            .iter()
            .zip(&self.total.methods)
            .map(|(name, stats)| MethodSummary::new(name, stats, seconds))
            .collect();
        snapshot.method_buckets = (self.total.methods.iter())
            .take(self.methods.len())
            .map(|stats| BucketCounts::of(&stats.latency))
            .collect();
        snapshot.call_durations = (self.total.methods.iter())
            .take(self.methods.len())
            .map(|stats| stats.durations.clone())
            .collect();
        snapshot.total = MethodSummary::new("TOTAL", &total, seconds);
        snapshot.histogram = latency_buckets(&total.latency, HISTOGRAM_BUCKETS);
        snapshot.rpc_codes = total.rpc_codes.iter().copied().collect();
        if let Some(window) = &self.last_window {
            let interval = window.total();
            snapshot.interval = Some(MethodSummary::new("last second", &interval, 1.0));
            snapshot.interval_histogram = latency_buckets(&interval.latency, HISTOGRAM_BUCKETS);
            snapshot.behind = snapshot.open && ScheduleSummary::behind(&window.start_delay, 0, 0);
        }
        snapshot.in_flight = self.in_flight.iter().sum();
        snapshot.new_rows = std::mem::take(&mut self.fresh_rows);
        snapshot.last_error.clone_from(&self.last_error);
        snapshot.subscriptions = self.total.subscriptions;
        snapshot.notifications = self.total.notifications;
        snapshot.unsolicited = self.total.unsolicited;
        snapshot
    }
}
