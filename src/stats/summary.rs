//! The figures of a finished run, ready for any report format.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{read, OutcomeKind, ProtocolKind};
use super::{ErrorExample, MethodStats, Recorder};

/// Latency percentiles in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// The calls these figures are of: those answered or timed out, not
    /// connect failures or notifications (nothing answers those). Zero:
    /// no latency at all, not an instant one.
    #[serde(default)]
    pub timed: u64,
}

impl LatencySummary {
    pub fn from_micros(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            timed: h.len(),
        }
    }

    /// Whether there is any latency: not for notifications alone (nothing
    /// answers them). A summary written before `timed` was kept reads 0
    /// there, and has latency where its maximum is above 0.
    pub fn any(&self) -> bool {
        self.timed > 0 || self.max_ms > 0.0
    }
}

/// One method's figures (or the total's).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MethodSummary {
    pub method: String,
    pub calls: u64,
    pub ok: u64,
    pub errors: u64,
    pub error_rate: f64,
    /// Calls (not requests: a batch carries several) a second.
    #[serde(rename = "calls_per_s")]
    pub rps: f64,
    /// From the intended send time: what a user of the server would see.
    pub latency: LatencySummary,
    /// From the actual send: what the server took.
    pub service: LatencySummary,
    #[serde(deserialize_with = "read::by_outcome")]
    pub outcomes: BTreeMap<&'static str, u64>,
    pub rpc_error_codes: BTreeMap<i64, u64>,
    #[serde(deserialize_with = "read::by_protocol_rule")]
    pub protocol_errors: BTreeMap<&'static str, u64>,
    pub http_statuses: BTreeMap<u16, u64>,
    pub answer_bytes_mean: f64,
    pub answer_bytes_max: u64,
    /// The first few answers that failed an expectation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertion_examples: Vec<String>,
    /// The first few failed calls of each error outcome, by outcome.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "read::by_outcome"
    )]
    pub error_examples: BTreeMap<&'static str, Vec<ErrorExample>>,
}

impl MethodSummary {
    pub fn new(method: &str, stats: &MethodStats, seconds: f64) -> Self {
        let calls = stats.calls();
        let ok = stats.ok();
        let errors = calls - ok;
        MethodSummary {
            method: method.to_string(),
            calls,
            ok,
            errors,
            error_rate: if calls == 0 {
                0.0
            } else {
                errors as f64 / calls as f64
            },
            rps: if seconds > 0.0 {
                calls as f64 / seconds
            } else {
                0.0
            },
            latency: LatencySummary::from_micros(&stats.latency),
            service: LatencySummary::from_micros(&stats.service),
            outcomes: OutcomeKind::ALL
                .iter()
                .map(|k| (k.name(), stats.outcomes[*k as usize]))
                .collect(),
            rpc_error_codes: stats.rpc_codes.iter().copied().collect(),
            protocol_errors: ProtocolKind::ALL
                .iter()
                .filter(|k| stats.protocol[**k as usize] > 0)
                .map(|k| (k.name(), stats.protocol[*k as usize]))
                .collect(),
            http_statuses: stats.http_statuses.iter().copied().collect(),
            answer_bytes_mean: if stats.answer_bytes.is_empty() {
                0.0
            } else {
                stats.answer_bytes.mean()
            },
            answer_bytes_max: stats.answer_bytes.max(),
            assertion_examples: stats.examples.clone(),
            error_examples: OutcomeKind::ALL
                .iter()
                .filter(|k| !stats.error_examples[**k as usize].is_empty())
                .map(|k| (k.name(), stats.error_examples[*k as usize].clone()))
                .collect(),
        }
    }

    /// Each method's figures, by name, from a recorder's.
    pub fn each(names: &[String], recorder: &Recorder, seconds: f64) -> Vec<MethodSummary> {
        (names.iter().zip(&recorder.methods))
            .map(|(name, stats)| MethodSummary::new(name, stats, seconds))
            .collect()
    }

    pub fn outcome(&self, kind: OutcomeKind) -> u64 {
        self.outcomes.get(kind.name()).copied().unwrap_or(0)
    }
}

/// One second of the run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SecondRow {
    pub second: u32,
    pub calls: u64,
    pub ok: u64,
    pub errors: u64,
    /// Calls a second.
    #[serde(rename = "calls_per_s")]
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The second's errors by outcome (those that happened).
    #[serde(deserialize_with = "read::by_outcome")]
    pub error_outcomes: BTreeMap<&'static str, u64>,
    /// Flows that ended in the second (their steps are among its calls),
    /// and of them those that failed.
    #[serde(default)]
    pub flows: u64,
    #[serde(default)]
    pub flow_errors: u64,
    /// The watched server processes over the second: CPU in cores (1.0 is
    /// one core busy) and resident bytes, all of them together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_cores: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rss_bytes: Option<u64>,
}

impl SecondRow {
    /// `length` is how much of the second the run covered (the last one
    /// may be cut short).
    pub fn new(second: u32, window: &Recorder, length: Duration) -> Self {
        let total = window.total();
        let flow_rows = &window.methods[window.call_rows().len()..];
        let flows: u64 = flow_rows.iter().map(MethodStats::calls).sum();
        let flows_ok: u64 = flow_rows.iter().map(MethodStats::ok).sum();
        let latency = LatencySummary::from_micros(&total.latency);
        let calls = total.calls();
        let seconds = length.as_secs_f64();
        SecondRow {
            second,
            calls,
            ok: total.ok(),
            errors: calls - total.ok(),
            rps: if seconds > 0.0 {
                calls as f64 / seconds
            } else {
                0.0
            },
            p50_ms: latency.p50_ms,
            p99_ms: latency.p99_ms,
            max_ms: latency.max_ms,
            error_outcomes: OutcomeKind::ALL
                .iter()
                .skip(1)
                .map(|kind| (kind.name(), total.outcomes[*kind as usize]))
                .filter(|(_, n)| *n > 0)
                .collect(),
            flows,
            flow_errors: flows - flows_ok,
            server_cpu_cores: None,
            server_rss_bytes: None,
        }
    }
}

/// Whether the load generator kept to its schedule (open model only).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScheduleSummary {
    /// Delay between intended and actual send.
    pub start_delay: LatencySummary,
    /// Requests that left more than [`LATE_THRESHOLD`] after their intended time.
    pub late_requests: u64,
    /// Scheduled calls never sent before the run ended.
    pub unsent: u64,
    pub behind: bool,
    /// Of the late requests, those that waited for a connection, every one
    /// busy with calls the server had not answered: the server's lateness,
    /// not volley's.
    #[serde(default)]
    pub late_for_connections: u64,
}

impl ScheduleSummary {
    /// How the schedule was kept, from the start delays of the requests
    /// sent and, of `due` requests, those never sent: the one rule for
    /// "fell behind", which the live view applies to the last second (where
    /// nothing is yet owed) and the summary to the whole run.
    pub fn of(delays: &Histogram<u64>, unsent: u64, due: u64) -> Self {
        let late_requests = late(delays);
        ScheduleSummary {
            start_delay: LatencySummary::from_micros(delays),
            late_requests,
            unsent,
            behind: fell_behind(late_requests, delays.len(), unsent, due),
            late_for_connections: 0,
        }
    }

    /// Whether what the schedule missed needs its cause told: it fell
    /// behind, or any request due was never sent (which the verdict weighs
    /// however few: volley's if volley's, a finding if the server's).
    pub fn needs_cause(&self) -> bool {
        self.behind || self.unsent > 0
    }

    /// Whether the schedule fell behind, by the rule of [`ScheduleSummary::of`],
    /// without the percentiles a summary carries (the live view's check).
    pub fn behind(delays: &Histogram<u64>, unsent: u64, due: u64) -> bool {
        fell_behind(late(delays), delays.len(), unsent, due)
    }
}

/// Requests that left more than [`LATE_THRESHOLD`] after their time.
fn late(delays: &Histogram<u64>) -> u64 {
    delays.len() - delays.count_between(0, super::micros(LATE_THRESHOLD))
}

fn fell_behind(late: u64, requests: u64, unsent: u64, due: u64) -> bool {
    over_one_percent(late, requests) || over_one_percent(unsent, due)
}

/// Batch requests: their round trips and the sizes sent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BatchSummary {
    pub requests: u64,
    /// Whole batch, from the intended send time to the answer.
    pub round_trip: LatencySummary,
    pub size_mean: f64,
    pub size_max: u64,
    /// Calls per batch → batches sent with that many.
    pub sizes: BTreeMap<u64, u64>,
}

impl BatchSummary {
    pub fn new(recorder: &Recorder) -> Option<Self> {
        let sizes = &recorder.batch_sizes;
        if sizes.is_empty() {
            return None;
        }
        Some(BatchSummary {
            requests: sizes.len(),
            round_trip: LatencySummary::from_micros(&recorder.batch_latency),
            size_mean: sizes.mean(),
            size_max: sizes.max(),
            sizes: sizes
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        })
    }
}

/// Per-connection setup calls.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetupSummary {
    pub connections_ok: u64,
    pub connections_failed: u64,
    #[serde(deserialize_with = "read::required")]
    pub first_error: Option<String>,
    /// The setup calls answered right and the time they took, apart from
    /// the load's latency; `None` (null) when none was answered (absent
    /// from a file of a volley that did not time them).
    #[serde(default)]
    pub calls: Option<SetupCallTimes>,
}

/// Setup calls answered right, and how long they took.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SetupCallTimes {
    pub answered: u64,
    pub time: LatencySummary,
}

impl SetupSummary {
    pub fn of(total: &Recorder) -> Self {
        let times = &total.connects.setup_time;
        SetupSummary {
            connections_ok: total.setup_ok,
            connections_failed: total.setup_failed,
            first_error: total.setup_error.clone(),
            calls: (!times.is_empty()).then(|| SetupCallTimes {
                answered: times.len(),
                time: LatencySummary::from_micros(times),
            }),
        }
    }
}

/// Subscriptions opened by setup calls, and what they brought.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubscriptionSummary {
    pub opened: u64,
    pub notifications: u64,
    /// Notifications a second, all subscriptions together.
    pub per_second: f64,
    /// And per subscription.
    pub per_subscription_per_second: f64,
    /// Between consecutive notifications of one subscription; `None` (null
    /// in `summary.json`) when no subscription had two, never zeros.
    #[serde(deserialize_with = "read::required")]
    pub gap: Option<LatencySummary>,
}

impl SubscriptionSummary {
    /// The subscriptions opened and their notifications over `seconds`.
    pub fn new(total: &Recorder, seconds: f64) -> Self {
        let per_second = total.notifications as f64 / seconds.max(1e-9);
        SubscriptionSummary {
            opened: total.subscriptions,
            notifications: total.notifications,
            per_second,
            per_subscription_per_second: per_second / total.subscriptions.max(1) as f64,
            gap: (!total.notification_gaps.is_empty())
                .then(|| LatencySummary::from_micros(&total.notification_gaps)),
        }
    }
}

/// How the stdio children ended once the run was over (or when let go
/// during it: `reconnect_every`, a flow's own session).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildShutdown {
    /// Exited with status 0 after the protocol's shutdown.
    pub clean: u64,
    /// Exited by themselves with a failing status.
    pub failed: u64,
    /// Did not exit in time and were killed.
    pub killed: u64,
}

/// One stage of a staged load.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageSummary {
    /// Its index, from 0. People count stages from 1, and so does every
    /// report (the table, `summary.json`): see [`StageSummary::number`].
    #[serde(
        serialize_with = "number_from_one",
        deserialize_with = "read::number_from_one"
    )]
    pub stage: usize,
    pub start_s: f64,
    pub end_s: f64,
    pub total: MethodSummary,
}

impl StageSummary {
    /// Each stage's figures from its recorder, over its own span (the last
    /// one cut at the run's end, `seconds` into it).
    pub fn each(stages: &[Recorder], bounds: &[(f64, f64)], seconds: f64) -> Vec<StageSummary> {
        (stages.iter().zip(bounds).enumerate())
            .map(|(stage, (recorder, &(start_s, end_s)))| StageSummary {
                stage,
                start_s,
                end_s,
                total: MethodSummary::new("TOTAL", &recorder.total(), end_s.min(seconds) - start_s),
            })
            .collect()
    }

    /// The stage's number as reports show it: the first stage is 1.
    pub fn number(&self) -> usize {
        self.stage + 1
    }
}

fn number_from_one<S: serde::Serializer>(index: &usize, to: S) -> Result<S::Ok, S::Error> {
    to.serialize_u64(*index as u64 + 1)
}

/// A call leaving later than this after its intended time is late.
pub const LATE_THRESHOLD: Duration = Duration::from_millis(10);

/// Whether `part` is more than 1% of `whole`: the one rule by which a
/// schedule fell behind (requests late, or due and never sent), shared by
/// the verdict, the warning and the dashboard.
pub fn over_one_percent(part: u64, whole: u64) -> bool {
    part.saturating_mul(100) > whole.max(1)
}

/// One change made during the run (pause, resume, a manual rate or
/// concurrency), as the engine's control logs it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ControlEvent {
    /// Seconds since the run's start (warmup included).
    pub at_s: f64,
    pub what: String,
}

/// A run's counts and histograms as gathered, before any summary: what
/// shards of one run add up to the whole's.
#[derive(Clone)]
pub struct Gathered {
    pub total: Recorder,
    /// Each stage's, in order.
    pub stages: Vec<Recorder>,
    /// Requests the open model had due by the end (0 in the closed model).
    pub due: u64,
}

impl Default for Gathered {
    fn default() -> Self {
        Gathered {
            total: Recorder::new(0),
            stages: Vec::new(),
            due: 0,
        }
    }
}

impl std::fmt::Debug for Gathered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Gathered {{ calls: {}, due: {} }}",
            self.total.calls(),
            self.due
        )
    }
}

/// All the figures of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunSummary {
    pub methods: Vec<MethodSummary>,
    pub total: MethodSummary,
    pub timeseries: Vec<SecondRow>,
    /// Each second's latency histograms, for `latency.hlog`.
    #[serde(skip)]
    pub latency_log: super::LatencyLog,
    /// Each quarter second's figures, for `samples.csv` (what `compare` tests).
    #[serde(skip)]
    pub samples: Vec<super::Sample>,
    /// Everything counted, whole, for a shard's record (a merge adds these).
    #[serde(skip)]
    pub gathered: Gathered,
    /// How the connections opened, before the schedule and during it.
    pub connections: super::ConnectSummary,
    pub requests: u64,
    pub http_statuses: BTreeMap<u16, u64>,
    pub extra_batch_entries: u64,
    /// Messages that answered no call (multiplexed transports).
    pub unsolicited_messages: u64,
    /// Child processes (stdio targets) that ended during the run.
    pub children_exited: u64,
    /// How the first of them ended, with the tail of its stderr.
    #[serde(deserialize_with = "read::required")]
    pub child_exit: Option<String>,
    /// Present for a stdio target.
    #[serde(deserialize_with = "read::required")]
    pub child_shutdown: Option<ChildShutdown>,
    /// Present when the scenario opens subscriptions.
    #[serde(deserialize_with = "read::required")]
    pub subscriptions: Option<SubscriptionSummary>,
    /// Present in the open model.
    #[serde(deserialize_with = "read::required")]
    pub schedule: Option<ScheduleSummary>,
    /// Present when batches were sent.
    #[serde(deserialize_with = "read::required")]
    pub batches: Option<BatchSummary>,
    /// Present when the scenario has setup calls.
    #[serde(deserialize_with = "read::required")]
    pub setup: Option<SetupSummary>,
    /// Present for a staged load.
    pub stages: Vec<StageSummary>,
    /// Pauses and target changes made during the run.
    pub events: Vec<ControlEvent>,
    /// What each watched server process spent (`--observe-pid`, stdio
    /// children); empty when none was watched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<super::ServerUsage>,
    /// Watched processes read less than twice in the measured run (stdio
    /// children that lived under a second): no figures for them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub servers_read_once: u64,
    /// A stdio target's children: how fast each was ready, and its memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<super::ReadySummary>,
    /// Each flow's figures beside its row (none when the scenario has no
    /// flows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<super::FlowSummary>,
    /// Calls a stop (Ctrl-C, a threshold's abort) cut in flight, in no
    /// figure; the schedule's end cuts none (its grace counts them).
    pub in_flight_at_end: u64,
    /// Callers inside a call or a flow when the schedule ended (or a stop
    /// came first): a flow holds its caller between its calls too.
    #[serde(default)]
    pub callers_busy_at_end: u64,
    /// Connection tasks that panicked (a bug); their calls so far are counted.
    pub panicked_connections: u64,
    /// Measured seconds the load ran: paused time is left out.
    pub measured_seconds: f64,
    /// Seconds of the measured run spent paused (left out of every rate).
    pub paused_seconds: f64,
    /// The target (requests/s, or calls in flight) set by hand that was
    /// in force at the end; `None` when the run was never steered.
    #[serde(deserialize_with = "read::required")]
    pub steered_to: Option<f64>,
    /// volley's own CPU use over the run.
    pub client_cpu: super::ClientCpu,
    /// Whether the figures measure the server alone, and if not, why.
    pub verdict: super::Verdict,
    /// What a reader must know to trust the figures, each with its code.
    pub warnings: Vec<super::Warning>,
    /// The run was stopped early (Ctrl-C, SIGTERM, `q`): the figures cover
    /// only what ran. The CSVs say it too, in their `partial` column.
    pub partial: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
impl RunSummary {
    /// A valid run of `methods` and their `total` over `seconds`, with
    /// nothing else in it: what a unit test of a figure's reader starts from.
    pub fn of_methods(methods: Vec<MethodSummary>, total: MethodSummary, seconds: f64) -> RunSummary {
        RunSummary {
            requests: total.calls,
            methods,
            total,
            timeseries: Vec::new(),
            latency_log: Default::default(),
            samples: Vec::new(),
            gathered: Default::default(),
            server: Vec::new(),
            servers_read_once: 0,
            ready: None,
            connections: super::ConnectSummary::of(&super::Connects::default(), 1),
            http_statuses: Default::default(),
            extra_batch_entries: 0,
            unsolicited_messages: 0,
            children_exited: 0,
            child_exit: None,
            child_shutdown: None,
            subscriptions: None,
            schedule: None,
            batches: None,
            setup: None,
            stages: Vec::new(),
            events: Vec::new(),
            flows: Vec::new(),
            in_flight_at_end: 0,
            callers_busy_at_end: 0,
            panicked_connections: 0,
            measured_seconds: seconds,
            paused_seconds: 0.0,
            steered_to: None,
            client_cpu: Default::default(),
            verdict: super::Verdict {
                valid: true,
                reasons: Vec::new(),
            },
            warnings: Vec::new(),
            partial: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_behind_past_one_percent_late_or_unsent() {
        let limit = crate::stats::micros(LATE_THRESHOLD);
        let mut delays = crate::stats::new_histogram();
        delays.record_n(10, 99).unwrap();
        delays.record(limit).unwrap();
        let kept = ScheduleSummary::of(&delays, 0, 100);
        assert_eq!(kept.late_requests, 0, "on the threshold is not late");
        assert!(!kept.behind && !ScheduleSummary::behind(&delays, 0, 100));
        assert!(kept.start_delay.max_ms >= 10.0, "the delays are summarized");
        delays.record(limit * 10).unwrap();
        let one_late = ScheduleSummary::of(&delays, 0, 101);
        assert_eq!(one_late.late_requests, 1);
        assert!(!one_late.behind, "1 late of 101 is under 1%");
        delays.record(limit * 10).unwrap();
        assert_eq!(ScheduleSummary::of(&delays, 0, 102).late_requests, 2);
        assert!(ScheduleSummary::of(&delays, 0, 102).behind, "2 of 102 is past 1%");
        assert!(ScheduleSummary::behind(&delays, 0, 102));
        let on_time = {
            let mut h = crate::stats::new_histogram();
            h.record_n(10, 100).unwrap();
            h
        };
        assert!(
            !ScheduleSummary::behind(&on_time, 1, 100),
            "1 unsent of 100 due is kept"
        );
        let unsent = ScheduleSummary::of(&on_time, 2, 100);
        assert!(unsent.behind && unsent.unsent == 2, "2 unsent of 100 fell behind");
        assert!(ScheduleSummary::behind(&on_time, 2, 100));
    }

    #[test]
    fn one_percent_is_the_line_a_schedule_may_reach_but_not_pass() {
        assert!(!over_one_percent(10, 1000), "1% exactly is kept");
        assert!(over_one_percent(11, 1000), "just past 1% fell behind");
        assert!(
            !over_one_percent(0, 0) && over_one_percent(1, 0),
            "nothing due: one late is behind"
        );
        assert!(over_one_percent(u64::MAX, u64::MAX - 1), "no overflow");
        assert!(!over_one_percent(1, 100) && over_one_percent(2, 100));
    }
}
