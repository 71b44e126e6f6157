//! A finished run's summary, derived from its recorders and the facts of
//! its end: the one derivation a run (`engine`) and `volley merge` both
//! use, so every figure of a merged run is the one a single run with the
//! same counts would have reported (its rates included: calls over the
//! measured seconds, never the shards' rates added).

use super::summary::{BatchSummary, Gathered, MethodSummary, RunSummary, ScheduleSummary};
use super::summary::{SetupSummary, StageSummary, SubscriptionSummary};
use super::{BehindCause, BehindFacts, ClientCpu, ConnectSummary, Evidence, FlowSummary, OutcomeKind};
use super::{Recorder, Verdict};

/// What was recorded: every call's figures, the run's and each stage's.
pub struct Recorded<'a> {
    /// The rows' names, in the order of the recorders' methods.
    pub methods: &'a [String],
    pub total: Recorder,
    pub stages: Vec<Recorder>,
    /// Each stage's start and end, seconds into the measured run.
    pub stage_bounds: &'a [(f64, f64)],
}

/// How the run went and ended, beside what was recorded.
pub struct Ending {
    /// Seconds measured, pauses left out: every rate's divisor.
    pub seconds: f64,
    /// Seconds the measured run spanned, pauses in (the stages' clock).
    pub wall: f64,
    pub paused: f64,
    /// The open model's schedule: requests due by the end, and of those
    /// the ones never sent. `None` in the closed model.
    pub schedule: Option<Due>,
    /// The constant open-model rate the run ended at, for the verdict.
    pub rate: Option<f64>,
    /// Connections the plan opened for the mix (0: the mix opens its own).
    pub planned_connections: u64,
    pub subscribed: bool,
    pub set_up: bool,
    /// Each flow's still going at the end, in the mix's order.
    pub flows_in_flight: Vec<u64>,
    /// The plan's callers, when known (a merge does not know each shard's).
    pub callers: Option<usize>,
    pub callers_busy_at_end: u64,
    pub in_flight_at_end: u64,
    pub panicked: u64,
    pub cpu: ClientCpu,
    pub partial: bool,
}

/// The open model's requests due by the end, and of those never sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Due {
    pub due: u64,
    pub unsent: u64,
}

impl RunSummary {
    /// The run's figures and verdict from what was recorded. Left for the
    /// caller: the per-second series, the server's usage, steering's
    /// events, a stdio child's shutdown, and the warnings.
    pub fn derive(recorded: Recorded<'_>, ending: Ending) -> RunSummary {
        let (total, seconds) = (&recorded.total, ending.seconds);
        let calls_of_all = total.total();
        let schedule = ending.schedule.map(|d| ScheduleSummary {
            late_for_connections: total.late_for_connections,
            ..ScheduleSummary::of(&total.start_delay, d.unsent, d.due)
        });
        let behind = schedule.as_ref().filter(|s| s.needs_cause()).map(|s| {
            BehindCause::of(&BehindFacts {
                late: s.late_requests,
                late_for_connections: s.late_for_connections,
                unsent: s.unsent,
                busy_at_end: match ending.callers {
                    Some(_) => ending.in_flight_at_end.max(ending.callers_busy_at_end),
                    None => 0,
                },
                callers: ending.callers.unwrap_or(0),
                unreachable: calls_of_all.outcomes[OutcomeKind::Connect as usize],
                busy_share: ending.cpu.busy_share,
            })
        });
        let verdict = Verdict::of(&Evidence {
            schedule: schedule.as_ref(),
            requests: total.start_delay.len(),
            rate: ending.rate,
            measured_seconds: seconds,
            cpu: &ending.cpu,
            partial: ending.partial,
            panicked: ending.panicked,
            behind,
        });
        RunSummary {
            methods: MethodSummary::each(recorded.methods, total, seconds),
            total: MethodSummary::new("TOTAL", &calls_of_all, seconds),
            connections: ConnectSummary::of(&total.connects, ending.planned_connections),
            requests: total.requests,
            http_statuses: total.statuses.iter().copied().collect(),
            extra_batch_entries: total.extra_entries,
            unsolicited_messages: total.unsolicited,
            children_exited: total.children_exited,
            child_exit: total.child_exit.clone(),
            child_shutdown: None,
            subscriptions: ending
                .subscribed
                .then(|| SubscriptionSummary::new(total, seconds)),
            schedule,
            batches: BatchSummary::new(total),
            setup: ending.set_up.then(|| SetupSummary::of(total)),
            stages: StageSummary::each(&recorded.stages, recorded.stage_bounds, ending.wall),
            events: Vec::new(),
            server: Vec::new(),
            servers_read_once: 0,
            ready: None,
            flows: FlowSummary::each(recorded.methods, total, &ending.flows_in_flight),
            callers_busy_at_end: ending.callers_busy_at_end,
            in_flight_at_end: ending.in_flight_at_end,
            panicked_connections: ending.panicked,
            measured_seconds: seconds,
            paused_seconds: ending.paused,
            steered_to: None,
            client_cpu: ending.cpu,
            verdict,
            warnings: Vec::new(),
            partial: ending.partial,
            timeseries: Vec::new(),
            latency_log: Default::default(),
            samples: Vec::new(),
            gathered: Gathered {
                due: ending.schedule.map_or(0, |d| d.due),
                total: recorded.total,
                stages: recorded.stages,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::WarningCode;

    /// An open-model run of 1,000 requests sent on time, `unsent` more due
    /// and never sent, its 8 callers `busy` at the end.
    fn derived(unsent: u64, busy: u64) -> RunSummary {
        let mut total = Recorder::new(1);
        for _ in 0..1000 {
            total.start_delay.record(100).unwrap();
        }
        let recorded = Recorded {
            methods: &["eth_chainId".to_string()],
            total,
            stages: Vec::new(),
            stage_bounds: &[],
        };
        RunSummary::derive(
            recorded,
            Ending {
                seconds: 1.0,
                wall: 1.0,
                paused: 0.0,
                schedule: Some(Due {
                    due: 1000 + unsent,
                    unsent,
                }),
                rate: Some(1000.0),
                planned_connections: 8,
                subscribed: false,
                set_up: false,
                flows_in_flight: Vec::new(),
                callers: Some(8),
                callers_busy_at_end: busy,
                in_flight_at_end: busy,
                panicked: 0,
                cpu: ClientCpu::default(),
                partial: false,
            },
        )
    }

    /// A few requests never sent, under 1% of those due, while every
    /// caller waited on the server: the server's finding, the verdict
    /// valid. With callers to spare, the same few are volley's.
    #[test]
    fn a_few_requests_never_sent_are_weighed_by_their_cause() {
        let mut server = derived(5, 8);
        assert!(server.verdict.valid, "{:?}", server.verdict);
        let schedule = server.schedule.as_ref().unwrap();
        assert!(!schedule.behind && schedule.needs_cause());
        let volleys = derived(5, 2);
        assert!(!volleys.verdict.valid);
        assert!(
            volleys.verdict.reasons[0].starts_with("5 requests due were never sent"),
            "{:?}",
            volleys.verdict
        );
        assert!(derived(0, 8).verdict.valid);
        // The warning that tells the cause comes whenever one is weighed.
        server.finish(&Default::default());
        assert!(
            (server.warnings.iter()).any(|w| w.code == WarningCode::BehindSchedule),
            "{:?}",
            server.warnings
        );
    }
}
