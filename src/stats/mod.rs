//! Recording what happened: per-thread recorders handed over once a second,
//! merged into run totals and per-second rows.

mod buckets;
mod connects;
mod derive;
mod durations;
mod examples;
mod flows;
mod latency_log;
mod outcome;
pub mod race;
pub mod read;
mod ready;
mod sample;
mod saved;
mod series;
mod snapshot;
mod summary;
mod usage;
mod verdict;
mod warnings;

pub use buckets::{BucketCounts, BUCKET_BOUNDS_US};
pub use connects::{ConnectSummary, Connects};
pub use derive::{Due, Ending, Recorded};
pub use durations::{CallDurations, DurationCounts, OutcomeKey, DURATION_BUCKETS};
pub use examples::{excerpt, Cause, ErrorExample, EXAMPLES_PER_OUTCOME, EXCERPT_BYTES};
pub use flows::{FailedStep, FlowCounts, FlowSummary};
pub use latency_log::{tag_for, tagged, Interval, LatencyLog, TOTAL_TAG};
pub use outcome::{Outcome, OutcomeKind, ProtocolKind};
pub use ready::{ChildReady, ReadySummary, Spread};
pub use sample::{Quarter, Sample, SAMPLES_PER_SECOND, SAMPLE_COLUMNS};
pub use saved::{SavedFlow, SavedMethod, SavedRecorder};
pub use series::{ClosedSecond, Series, Spool};
pub use snapshot::{latency_buckets, Snapshot};
pub use summary::{
    over_one_percent, BatchSummary, ChildShutdown, ControlEvent, Gathered, LatencySummary, MethodSummary,
    RunSummary, ScheduleSummary, SecondRow, SetupCallTimes, SetupSummary, StageSummary, SubscriptionSummary,
    LATE_THRESHOLD,
};
pub use usage::{ServerUsage, UsageSample, Watched};
pub use verdict::{
    none_succeeded, server_did, unanswered, weigh_answers, ClientCpu, Evidence, NoneSucceeded, Unanswered,
    Verdict, SATURATED_SHARE,
};
pub use warnings::{
    count, noun_for, BehindCause, BehindFacts, Capacity, Facts, Warning, WarningCode, INSECURE,
    JUDGED_SECONDS, LATE_START,
};

use std::time::Duration;

use hdrhistogram::Histogram;

/// Three significant digits over microseconds: 1 µs resolution below 2 ms,
/// 0.1% relative error above.
pub const SIGNIFICANT_DIGITS: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    // Auto-resizing: memory follows the largest value seen, not a fixed worst case.
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid precision")
}

pub fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// Everything counted for one method.
#[derive(Clone)]
pub struct MethodStats {
    /// From the intended send time to the answer: the headline figure.
    pub latency: Histogram<u64>,
    /// From the actual send to the answer.
    pub service: Histogram<u64>,
    /// Size of each call's answer (its own entry in a batch), in bytes.
    pub answer_bytes: Histogram<u64>,
    pub outcomes: [u64; OutcomeKind::COUNT],
    pub protocol: [u64; ProtocolKind::COUNT],
    /// Error codes, few per run: a short list beats a hash map.
    pub rpc_codes: Vec<(i64, u64)>,
    /// Statuses of the calls whose outcome was `http_status`.
    pub http_statuses: Vec<(u16, u64)>,
    /// The first few answers that failed an expectation.
    pub examples: Vec<String>,
    /// The first few failed calls of each outcome (indexed by
    /// [`OutcomeKind`]; `ok` stays empty).
    pub error_examples: [Vec<ErrorExample>; OutcomeKind::COUNT],
    /// Every call's duration by outcome, in fixed buckets (for `--otlp`).
    pub durations: CallDurations,
}

/// Examples of failed expectations kept per method.
pub const MAX_EXAMPLES: usize = 5;

impl Default for MethodStats {
    fn default() -> Self {
        MethodStats {
            latency: new_histogram(),
            service: new_histogram(),
            answer_bytes: new_histogram(),
            outcomes: [0; OutcomeKind::COUNT],
            protocol: [0; ProtocolKind::COUNT],
            rpc_codes: Vec::new(),
            http_statuses: Vec::new(),
            examples: Vec::new(),
            error_examples: Default::default(),
            durations: CallDurations::default(),
        }
    }
}

impl MethodStats {
    pub fn record(&mut self, outcome: Outcome, latency: Duration, service: Duration, bytes: usize) {
        self.count(outcome);
        // Calls that never reached the server have no latency worth showing.
        if !matches!(outcome, Outcome::Connect) {
            self.latency.record(micros(latency)).ok();
            self.service.record(micros(service)).ok();
        }
        if bytes > 0 {
            self.answer_bytes.record(bytes as u64).ok();
        }
        // Every call, a connect failure too: OpenTelemetry's call histogram
        // counts each call with its outcome.
        self.durations.record(outcome, micros(latency));
    }

    /// Records a notification sent in `written`: counted with its outcome,
    /// but outside the latency figures, as nothing answers it (its write
    /// time beside answered calls would pull every percentile down).
    pub fn record_notification(&mut self, outcome: Outcome, written: Duration) {
        self.count(outcome);
        self.durations.record(outcome, micros(written));
    }

    fn count(&mut self, outcome: Outcome) {
        self.outcomes[outcome.kind() as usize] += 1;
        match outcome {
            Outcome::RpcError(code) => bump(&mut self.rpc_codes, code, 1),
            Outcome::HttpStatus(status) => bump(&mut self.http_statuses, status, 1),
            Outcome::Protocol(kind) => self.protocol[kind as usize] += 1,
            _ => {}
        }
    }

    pub fn calls(&self) -> u64 {
        self.outcomes.iter().sum()
    }

    /// Keeps an offending answer, cut to a bounded size, while there is room.
    pub fn add_example(&mut self, expected: &dyn std::fmt::Display, answer: &[u8]) {
        if self.examples.len() >= MAX_EXAMPLES {
            return;
        }
        self.examples
            .push(format!("expected {expected}; got {}", excerpt(answer)));
    }

    /// Keeps a failed call as an example while its outcome has room. The
    /// room is checked first, so a flood of errors costs nothing once the
    /// first few are kept (per hand-over: a recorder lives a quarter second).
    pub fn keep_example<E: std::fmt::Display>(
        &mut self,
        method: &str,
        outcome: Outcome,
        cause: Cause<'_>,
        expected: Option<&E>,
        answer: &[u8],
    ) {
        let kept = &mut self.error_examples[outcome.kind() as usize];
        if outcome == Outcome::Ok || kept.len() >= EXAMPLES_PER_OUTCOME {
            return;
        }
        let expected = expected.map(|e| e as &dyn std::fmt::Display);
        kept.push(ErrorExample::new(method, outcome, cause, expected, answer));
    }

    pub fn ok(&self) -> u64 {
        self.outcomes[OutcomeKind::Ok as usize]
    }

    pub fn merge(&mut self, other: &MethodStats) {
        merge_histogram(&mut self.latency, &other.latency);
        merge_histogram(&mut self.service, &other.service);
        merge_histogram(&mut self.answer_bytes, &other.answer_bytes);
        for (a, b) in self.outcomes.iter_mut().zip(other.outcomes) {
            *a += b;
        }
        for (a, b) in self.protocol.iter_mut().zip(other.protocol) {
            *a += b;
        }
        for &(code, n) in &other.rpc_codes {
            bump(&mut self.rpc_codes, code, n);
        }
        for &(status, n) in &other.http_statuses {
            bump(&mut self.http_statuses, status, n);
        }
        let room = MAX_EXAMPLES.saturating_sub(self.examples.len());
        self.examples.extend(other.examples.iter().take(room).cloned());
        for (kept, more) in self.error_examples.iter_mut().zip(&other.error_examples) {
            let room = EXAMPLES_PER_OUTCOME.saturating_sub(kept.len());
            kept.extend(more.iter().take(room).cloned());
        }
        self.durations.merge(&other.durations);
    }
}

/// What one engine thread recorded since its last hand-over.
#[derive(Clone)]
pub struct Recorder {
    pub methods: Vec<MethodStats>,
    /// How late calls left against their intended send time (open model).
    pub start_delay: Histogram<u64>,
    /// Of the requests late by more than [`LATE_THRESHOLD`], those that
    /// waited for a free connection: every one was busy with calls the
    /// server had not answered (open model).
    pub late_for_connections: u64,
    /// Requests sent (a batch is one request).
    pub requests: u64,
    /// HTTP status of every answered request.
    pub statuses: Vec<(u16, u64)>,
    /// Batch answer entries that matched no call.
    pub extra_entries: u64,
    /// Round trip of each batch request, from its intended send time.
    pub batch_latency: Histogram<u64>,
    /// Calls in each batch request sent.
    pub batch_sizes: Histogram<u64>,
    /// Connections whose setup calls all succeeded, and those that failed.
    pub setup_ok: u64,
    pub setup_failed: u64,
    pub setup_error: Option<String>,
    /// The latest failed answer seen, in short.
    pub last_error: Option<String>,
    /// Messages from the server that answered no call (subscription
    /// notifications, late or stray answers) on multiplexed transports.
    pub unsolicited: u64,
    /// Child processes (stdio targets) that ended during the run, and how
    /// the first of them ended.
    pub children_exited: u64,
    pub child_exit: Option<String>,
    /// Subscriptions opened, the notifications they brought, and the gaps
    /// between consecutive notifications of one subscription (µs).
    pub subscriptions: u64,
    pub notifications: u64,
    pub notification_gaps: Histogram<u64>,
    /// How connections opened.
    pub connects: Connects,
    /// Each flow's counts beside its row. Flows' rows are the last
    /// `flows.len()` of `methods`, outside every total (their steps are
    /// counted as calls already).
    pub flows: Vec<FlowCounts>,
}

impl Recorder {
    pub fn new(methods: usize) -> Self {
        Recorder {
            methods: vec![MethodStats::default(); methods],
            start_delay: new_histogram(),
            late_for_connections: 0,
            requests: 0,
            statuses: Vec::new(),
            extra_entries: 0,
            batch_latency: new_histogram(),
            batch_sizes: new_histogram(),
            setup_ok: 0,
            setup_failed: 0,
            setup_error: None,
            last_error: None,
            unsolicited: 0,
            children_exited: 0,
            child_exit: None,
            subscriptions: 0,
            notifications: 0,
            notification_gaps: new_histogram(),
            connects: Connects::default(),
            flows: Vec::new(),
        }
    }

    /// A recorder of `rows` rows, the last of them one per flow, each
    /// flow of `steps` steps.
    pub fn with_flows(rows: usize, steps: &[usize]) -> Self {
        let mut recorder = Recorder::new(rows);
        recorder.flows = steps.iter().map(|n| FlowCounts::new(*n)).collect();
        recorder
    }

    /// The rows of calls (every row but the flows').
    pub fn call_rows(&self) -> &[MethodStats] {
        &self.methods[..self.methods.len().saturating_sub(self.flows.len())]
    }

    pub fn note_child_exit(&mut self, exit: String) {
        self.children_exited += 1;
        self.child_exit.get_or_insert(exit);
    }

    /// Keeps a short description of a failed answer (once per hand-over, so
    /// a flood of errors costs one allocation a tick).
    pub fn note_error(&mut self, method: &str, outcome: Outcome, answer: &[u8]) {
        if self.last_error.is_some() {
            return;
        }
        let shown = excerpt(answer);
        self.last_error = Some(if shown.is_empty() {
            format!("{method}: {outcome}")
        } else {
            format!("{method}: {outcome}: {shown}")
        });
    }

    pub fn record_batch(&mut self, size: usize, latency: Duration) {
        self.batch_sizes.record(size as u64).ok();
        self.batch_latency.record(micros(latency)).ok();
    }

    pub fn record_status(&mut self, status: u16) {
        bump(&mut self.statuses, status, 1);
    }

    pub fn merge(&mut self, other: &Recorder) {
        for (a, b) in self.methods.iter_mut().zip(&other.methods) {
            a.merge(b);
        }
        merge_histogram(&mut self.start_delay, &other.start_delay);
        self.requests += other.requests;
        for &(status, n) in &other.statuses {
            bump(&mut self.statuses, status, n);
        }
        self.extra_entries += other.extra_entries;
        merge_histogram(&mut self.batch_latency, &other.batch_latency);
        merge_histogram(&mut self.batch_sizes, &other.batch_sizes);
        self.setup_ok += other.setup_ok;
        self.setup_failed += other.setup_failed;
        if self.setup_error.is_none() {
            self.setup_error.clone_from(&other.setup_error);
        }
        self.unsolicited += other.unsolicited;
        self.late_for_connections += other.late_for_connections;
        self.subscriptions += other.subscriptions;
        self.notifications += other.notifications;
        merge_histogram(&mut self.notification_gaps, &other.notification_gaps);
        self.connects.merge(&other.connects);
        self.children_exited += other.children_exited;
        if self.child_exit.is_none() {
            self.child_exit.clone_from(&other.child_exit);
        }
        if other.last_error.is_some() {
            self.last_error.clone_from(&other.last_error);
        }
        if self.flows.len() < other.flows.len() {
            self.flows.resize(other.flows.len(), FlowCounts::default());
        }
        for (a, b) in self.flows.iter_mut().zip(&other.flows) {
            a.merge(b);
        }
    }

    /// All calls together (flows' rows left out: their steps are calls).
    pub fn total(&self) -> MethodStats {
        let mut total = MethodStats::default();
        for method in self.call_rows() {
            total.merge(method);
        }
        total
    }

    pub fn calls(&self) -> u64 {
        self.call_rows().iter().map(MethodStats::calls).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.requests == 0 && self.calls() == 0
    }
}

fn merge_histogram(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    if from.is_empty() {
        return;
    }
    into.add(from)
        .expect("auto-resizing histograms of equal precision always merge");
}

fn bump<K: PartialEq + Copy>(list: &mut Vec<(K, u64)>, key: K, by: u64) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, n)) => *n += by,
        None => list.push((key, by)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_every_count() {
        let mut a = Recorder::new(2);
        let mut b = Recorder::new(2);
        let ms = Duration::from_millis(1);
        a.methods[0].record(Outcome::Ok, ms, ms, 10);
        a.methods[0].record(Outcome::RpcError(-32000), ms, ms, 10);
        b.methods[0].record(Outcome::RpcError(-32000), ms * 3, ms, 10);
        b.methods[1].record(Outcome::HttpStatus(503), ms, ms, 0);
        b.methods[1].record(Outcome::Protocol(ProtocolKind::IdMismatch), ms, ms, 5);
        a.merge(&b);
        assert_eq!(a.methods[0].calls(), 3);
        assert_eq!(a.methods[0].rpc_codes, vec![(-32000, 2)]);
        assert_eq!(
            a.methods[0].latency.max(),
            a.methods[0].latency.highest_equivalent(3000)
        );
        assert_eq!(a.methods[1].http_statuses, vec![(503, 1)]);
        assert_eq!(a.methods[1].protocol[ProtocolKind::IdMismatch as usize], 1);
        let total = a.total();
        assert_eq!(total.calls(), 5);
        assert_eq!(total.ok(), 1);
        assert_eq!(total.outcomes[OutcomeKind::RpcError as usize], 2);
    }

    #[test]
    fn examples_are_kept_per_outcome_up_to_the_bound_and_merged_so() {
        let error = "connection reset";
        let mut a = MethodStats::default();
        for _ in 0..10 {
            a.keep_example::<&str>("m", Outcome::Io, Cause::Transport(&error), None, b"");
            a.keep_example::<&str>("m", Outcome::Ok, Cause::Answer, None, b"{}");
        }
        a.keep_example::<&str>("m", Outcome::InvalidJson, Cause::Answer, None, b"<html>");
        let io = &a.error_examples[OutcomeKind::Io as usize];
        assert_eq!(io.len(), EXAMPLES_PER_OUTCOME);
        assert_eq!(io[0].reason, error);
        assert!(a.error_examples[OutcomeKind::Ok as usize].is_empty());
        let mut b = MethodStats::default();
        b.keep_example::<&str>("m", Outcome::InvalidJson, Cause::Answer, None, b"<p>");
        b.merge(&a);
        assert_eq!(
            b.error_examples[OutcomeKind::Io as usize].len(),
            EXAMPLES_PER_OUTCOME
        );
        let answers: Vec<&str> = b.error_examples[OutcomeKind::InvalidJson as usize]
            .iter()
            .map(|e| e.answer.as_str())
            .collect();
        assert_eq!(answers, ["<p>", "<html>"], "the first ones stay first");
    }

    #[test]
    fn connect_failures_have_no_latency() {
        let mut m = MethodStats::default();
        m.record(Outcome::Connect, Duration::from_secs(1), Duration::ZERO, 0);
        assert_eq!(m.calls(), 1);
        assert!(m.latency.is_empty());
    }

    #[test]
    fn a_recorder_merges_every_count_it_keeps() {
        let ms = Duration::from_millis(2);
        let mut a = Recorder::new(1);
        assert!(a.is_empty() && a.calls() == 0);
        a.requests = 1;
        assert!(!a.is_empty(), "a request sent is something");
        let mut b = Recorder::new(1);
        b.methods[0].record(Outcome::Ok, ms, ms, 4);
        assert!(!b.is_empty(), "a call counted is something");
        b.record_batch(7, ms);
        b.record_batch(3, ms);
        (b.setup_failed, b.unsolicited, b.subscriptions, b.notifications) = (2, 3, 4, 5);
        for _ in 0..2 {
            a.merge(&b);
        }
        assert_eq!(a.calls(), 2);
        assert_eq!((a.batch_sizes.len(), a.batch_sizes.max()), (4, 7));
        assert_eq!(a.batch_latency.len(), 4);
        assert_eq!(
            (a.setup_failed, a.unsolicited, a.subscriptions, a.notifications),
            (4, 6, 8, 10)
        );
    }

    #[test]
    fn only_answers_with_bytes_count_in_the_answer_sizes() {
        let mut m = MethodStats::default();
        let ms = Duration::from_millis(1);
        m.record(Outcome::Timeout, ms, ms, 0);
        m.record(Outcome::Ok, ms, ms, 1);
        m.record(Outcome::Ok, ms, ms, 300);
        assert_eq!(m.answer_bytes.len(), 2, "a call with no answer has no size");
        assert_eq!(m.answer_bytes.min(), 1);
        assert_eq!(m.answer_bytes.max(), m.answer_bytes.highest_equivalent(300));
    }

    #[test]
    fn an_example_is_marked_cut_only_when_it_was() {
        let mut m = MethodStats::default();
        let exact = vec![b'a'; EXCERPT_BYTES];
        let longer = vec![b'b'; EXCERPT_BYTES + 1];
        m.add_example(&"a result", &exact);
        m.add_example(&"a result", &longer);
        assert!(m.examples[0].ends_with(&"a".repeat(EXCERPT_BYTES)));
        let kept = format!(
            "{}… ({} bytes in all)",
            "b".repeat(EXCERPT_BYTES),
            EXCERPT_BYTES + 1
        );
        assert!(m.examples[1].ends_with(&kept), "{}", m.examples[1]);
        for _ in 0..MAX_EXAMPLES {
            m.add_example(&"a result", b"x");
        }
        assert_eq!(m.examples.len(), MAX_EXAMPLES);
    }

    #[test]
    fn child_exits_are_counted_and_the_first_is_kept() {
        let mut r = Recorder::new(1);
        r.note_child_exit("exit status: 3".into());
        r.note_child_exit("signal: 9".into());
        let mut total = Recorder::new(1);
        total.note_child_exit("exit status: 1".into());
        total.merge(&r);
        assert_eq!(r.children_exited, 2);
        assert_eq!(r.child_exit.as_deref(), Some("exit status: 3"));
        assert_eq!(total.children_exited, 3);
        assert_eq!(total.child_exit.as_deref(), Some("exit status: 1"));
    }

    #[test]
    fn the_first_error_of_a_hand_over_is_the_one_shown() {
        let mut r = Recorder::new(1);
        r.note_error("eth_call", Outcome::Timeout, b"");
        r.note_error("eth_call", Outcome::InvalidJson, b"<html>");
        assert_eq!(r.last_error.as_deref(), Some("eth_call: timeout"));
        let mut later = Recorder::new(1);
        later.note_error("eth_call", Outcome::InvalidJson, &[b'x'; 300]);
        let shown = format!(
            "eth_call: invalid_json: {}… (300 bytes in all)",
            "x".repeat(EXCERPT_BYTES)
        );
        assert_eq!(later.last_error.as_deref(), Some(shown.as_str()));
        r.merge(&later);
        assert_eq!(r.last_error, later.last_error, "the newest hand-over wins");
    }
}
