//! The web page's events: the live feed as one JSON document, every second
//! while the runs go and once more, marked final, when they are over. A
//! figure not known yet (no second complete, a target still waiting) is
//! `null`, never 0.

use std::collections::BTreeMap;

use serde::Serialize;

use super::results::Ended;
use super::series::TargetSeries;
use crate::feed::{has_latency, Feed, Phase, TargetInfo, TargetNow};
use crate::report::targets::Ratios;
use crate::stats::{MethodSummary, Snapshot};

/// What the page knows beside the feed: the series over the whole run,
/// each run's end, the files served.
#[derive(Default)]
pub struct Beside {
    pub series: Vec<TargetSeries>,
    pub ended: Vec<Option<Ended>>,
    /// The result files served, by the names the page links to.
    pub files: Vec<String>,
    /// `--web-control`: the page may pause, resume and steer.
    pub control: bool,
}

#[derive(Serialize)]
pub struct Event<'a> {
    /// `tick` while the runs go; `final` once they are over and judged.
    pub kind: &'static str,
    pub scenario: &'a str,
    pub shard: Option<u32>,
    /// The targets run all at once (else one after another).
    pub parallel: bool,
    /// The page's buttons steer the runs (`--web-control`).
    pub control: bool,
    /// The result files, once written (the final event).
    pub files: &'a [String],
    pub targets: Vec<TargetEvent<'a>>,
}

#[derive(Serialize)]
pub struct TargetEvent<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub transport: &'a str,
    /// `waiting`, `running` or `finished`.
    pub phase: &'static str,
    pub elapsed_s: Option<f64>,
    pub planned_s: Option<f64>,
    /// Open model (the target in requests/s) or closed (calls in flight).
    pub open: Option<bool>,
    pub target: Option<f64>,
    pub paused: Option<bool>,
    pub behind: Option<bool>,
    pub in_flight: Option<u64>,
    /// The last complete second.
    pub last_second: Option<Second>,
    /// The whole run so far.
    pub whole: Option<Figures>,
    /// The whole run's calls/s, p50 and p99 against the first target's:
    /// `null` for the first target and where either has no such figure.
    pub ratio: Option<Ratios>,
    pub methods: Vec<Figures>,
    pub thresholds: Vec<ThresholdEvent>,
    /// `[second, calls/s, p50 ms, p99 ms, errors/s]` over the whole run,
    /// each point standing for `history_step_s` seconds or fewer.
    pub history: Vec<[f64; 5]>,
    pub history_step_s: f64,
    /// Each method's `[second, calls/s, mean ms]` over the whole run.
    pub method_series: Vec<MethodSeries<'a>>,
    /// The percentiles, last second and whole run.
    pub latency: Latencies,
    /// The latency histograms (upper bound in ms, calls), last second and
    /// whole run.
    pub histogram: Histograms<'a>,
    pub subscriptions: Option<Subscriptions>,
    /// The run's verdict and warnings, once it ended.
    pub ended: Option<&'a Ended>,
}

#[derive(Serialize)]
pub struct MethodSeries<'a> {
    pub method: &'a str,
    pub points: Vec<[f64; 3]>,
}

#[derive(Serialize, Default)]
pub struct Latencies {
    pub last_second: Option<Spectrum>,
    pub whole: Option<Spectrum>,
}

#[derive(Serialize)]
pub struct Spectrum {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Spectrum {
    /// `None` without a timed call (none connected, or notifications
    /// only): no latency, not 0 ms.
    fn of(m: &MethodSummary) -> Option<Spectrum> {
        let l = &m.latency;
        (m.latency.timed > 0).then_some(Spectrum {
            p50_ms: l.p50_ms,
            p90_ms: l.p90_ms,
            p99_ms: l.p99_ms,
            p999_ms: l.p999_ms,
            max_ms: l.max_ms,
        })
    }
}

#[derive(Serialize, Default)]
pub struct Histograms<'a> {
    pub last_second: &'a [(f64, u64)],
    pub whole: &'a [(f64, u64)],
}

#[derive(Serialize)]
pub struct Subscriptions {
    pub opened: u64,
    pub notifications: u64,
    /// Messages that answered no call.
    pub unsolicited: u64,
}

#[derive(Serialize)]
pub struct Second {
    pub second: u32,
    pub calls_per_s: f64,
    /// `null` for a second without latencies (paused, or every call failed
    /// to connect): no latency, not 0 ms.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub errors: u64,
    /// The second's errors by outcome (those that happened).
    pub errors_by_outcome: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
pub struct Figures {
    pub method: String,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub calls_per_s: f64,
    /// `null` when no call connected: no latency, not 0 ms.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

impl Figures {
    fn of(m: &MethodSummary) -> Figures {
        let timed = m.latency.timed > 0;
        Figures {
            method: m.method.clone(),
            calls: m.calls,
            errors: m.errors,
            error_rate: m.error_rate,
            calls_per_s: m.rps,
            p50_ms: timed.then_some(m.latency.p50_ms),
            p99_ms: timed.then_some(m.latency.p99_ms),
            max_ms: timed.then_some(m.latency.max_ms),
        }
    }
}

#[derive(Serialize)]
pub struct ThresholdEvent {
    pub expression: String,
    /// The value so far as people read it, or why there is none.
    pub value: String,
    /// `pass`, `fail` or `pending`.
    pub state: &'static str,
}

/// The feed now as one event, with what the page knows `beside` it.
pub fn event<'a>(feed: &'a Feed, now: &'a [TargetNow], beside: &'a Beside, last: bool) -> Event<'a> {
    let first = now.first().and_then(|t| t.snapshot.as_deref());
    let targets = (feed.infos().zip(now).enumerate())
        .map(|(i, (info, target))| {
            let mut event = target_event(info, target, first.filter(|_| i > 0));
            if let Some(series) = beside.series.get(i) {
                add_series(&mut event, series);
            }
            event.ended = beside.ended.get(i).and_then(Option::as_ref);
            event
        })
        .collect();
    Event {
        kind: if last { "final" } else { "tick" },
        scenario: &feed.scenario,
        shard: feed.shard,
        parallel: feed.parallel,
        control: beside.control,
        files: &beside.files,
        targets,
    }
}

/// The whole run's series, thinned.
fn add_series<'a>(event: &mut TargetEvent<'a>, series: &'a TargetSeries) {
    event.history = series.seconds.points();
    event.history_step_s = series.seconds.step();
    event.method_series = (series.methods.iter())
        .map(|(method, s)| MethodSeries {
            method,
            points: s.points(),
        })
        .collect();
}

/// One target's figures; `first` is the first target's snapshot, for the
/// ratios (none for the first itself).
fn target_event<'a>(info: &'a TargetInfo, now: &'a TargetNow, first: Option<&Snapshot>) -> TargetEvent<'a> {
    let s = now.snapshot.as_deref();
    let whole = s.filter(|s| s.total.calls > 0);
    let ratio = match (whole, first.filter(|f| f.total.calls > 0)) {
        (Some(s), Some(first)) => Some(Ratios::of(&s.total, &first.total)),
        _ => None,
    };
    TargetEvent {
        name: &info.name,
        url: &info.url,
        transport: &info.transport,
        phase: now.phase().name(),
        elapsed_s: s.map(|s| s.elapsed.as_secs_f64()),
        planned_s: s.and_then(|s| s.planned).map(|p| p.as_secs_f64()),
        open: s.map(|s| s.open),
        target: s.filter(|_| now.phase() == Phase::Running).map(|s| s.target),
        paused: s.map(|s| s.paused),
        behind: s.map(|s| s.behind),
        in_flight: s.map(|s| s.in_flight),
        last_second: now.last_second.as_ref().map(|row| Second {
            second: row.second.saturating_add(1),
            calls_per_s: row.rps,
            p50_ms: has_latency(row).then_some(row.p50_ms),
            p99_ms: has_latency(row).then_some(row.p99_ms),
            errors: row.errors,
            errors_by_outcome: row.error_outcomes.clone(),
        }),
        whole: whole.map(|s| Figures::of(&s.total)),
        ratio,
        methods: s.map_or_else(Vec::new, |s| s.methods.iter().map(Figures::of).collect()),
        thresholds: (now.thresholds.iter())
            .map(|t| ThresholdEvent {
                expression: t.expression.clone(),
                value: t.shown.clone(),
                state: t.standing.name(),
            })
            .collect(),
        history: Vec::new(),
        history_step_s: 1.0,
        method_series: Vec::new(),
        latency: Latencies {
            last_second: s.and_then(|s| s.interval.as_ref()).and_then(Spectrum::of),
            whole: whole.and_then(|s| Spectrum::of(&s.total)),
        },
        histogram: s.map_or_else(Histograms::default, |s| Histograms {
            last_second: &s.interval_histogram,
            whole: &s.histogram,
        }),
        subscriptions: s.map(|s| Subscriptions {
            opened: s.subscriptions,
            notifications: s.notifications,
            unsolicited: s.unsolicited,
        }),
        ended: None,
    }
}
