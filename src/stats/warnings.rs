//! What a reader must know to trust a run's figures, each with a code a
//! machine matches and a message a person reads. Made in one place, from
//! the figures and the few facts only the command knew before the run (the
//! scenario's own warnings, `--insecure`, a late start, the run's capacity
//! and timeout), so no command derives a cause again.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{RunSummary, Unanswered, LATE_THRESHOLD};

/// What a warning is about: the code CI matches (`"code":
/// "behind_schedule"` in `summary.json`), never the message's wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    /// Found when the scenario was compiled (a concurrency its connections
    /// cannot carry, ...).
    Scenario,
    /// `--insecure`: the server's TLS certificate was not verified.
    Insecure,
    /// The load began well after `--start-at`.
    LateStart,
    /// A shard's thresholds are judged on the whole, by `volley merge`.
    ShardThresholds,
    /// `abort_on_fail` stopped the run: a threshold failed on the figures so far.
    AbortOnFail,
    /// Connection tasks panicked (a bug in volley).
    Panicked,
    /// Stopped before the measured part began.
    StoppedInWarmup,
    /// No call was sent in the measured part.
    NothingMeasured,
    /// Calls were sent and none was answered.
    NoAnswer,
    /// Answers came, then none until the end.
    StoppedAnswering,
    /// Subscriptions were opened and no notification came.
    NoNotifications,
    /// Too short a measured run for `volley compare` to judge.
    TooShortToCompare,
    /// The open model fell behind its schedule; the message says why.
    BehindSchedule,
    /// Added up from the shards of one run by `volley merge`.
    Merged,
    /// Flows kept their connection throughout: the bound of flows in
    /// flight was reached.
    FlowBound,
    /// A code a later volley added, unknown to this one.
    #[serde(other)]
    Other,
}

/// One warning, as it is written to `summary.json` and read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub code: WarningCode,
    pub message: String,
}

impl Warning {
    pub fn new(code: WarningCode, message: impl Into<String>) -> Self {
        Warning {
            code,
            message: message.into(),
        }
    }

    /// The same warning, said of shard `shard` (`I/N`) of a merged run.
    pub fn of_shard(&self, shard: &str) -> Warning {
        Warning::new(self.code, format!("shard {shard}: {}", self.message))
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Said at the start, on the dashboard and in every report of a run that
/// talks TLS without verifying the server.
pub const INSECURE: &str = "INSECURE: --insecure is on, the server's TLS certificate was not verified: these figures may come from a server other than the one named";

/// A start later than this after `--start-at` is said in the results.
pub const LATE_START: Duration = Duration::from_millis(500);

/// A run shorter than this gives too few samples for the rank test of
/// `volley compare` to tell any but a huge change from chance.
pub const JUDGED_SECONDS: u32 = 2;

/// How many calls a run can have in flight, and over how many connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capacity {
    pub connections: usize,
    pub callers: usize,
}

/// What the warnings weigh besides the figures: what only the command
/// knew, handed to the engine once in the run's spec, and what the engine
/// adds from the plan.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// What compiling the scenario warned of.
    pub scenario: Vec<String>,
    /// TLS without verifying the server.
    pub insecure: bool,
    /// How long after `--start-at` the load began.
    pub late_start: Option<Duration>,
    /// `I/N` when the run is a shard of a run with thresholds.
    pub shard_with_thresholds: Option<String>,
    /// What the plan can carry: the engine fills it in.
    pub capacity: Capacity,
    /// Why the run was stopped early by whoever steered it (`abort_on_fail`).
    pub stopped_because: Option<String>,
    /// The bound of flows in flight that give their connection back: the
    /// engine fills it in.
    pub max_flows: usize,
}

impl RunSummary {
    /// Completes the verdict and writes the warnings, from the figures and
    /// `facts`: what the engine does last, so that a summary handed out is
    /// whole and its readers only render it.
    pub fn finish(&mut self, facts: &Facts) {
        super::weigh_answers(self);
        let mut warnings: Vec<Warning> = (facts.scenario.iter())
            .map(|text| Warning::new(WarningCode::Scenario, text.as_str()))
            .collect();
        if facts.insecure {
            warnings.push(Warning::new(WarningCode::Insecure, INSECURE));
        }
        warnings.extend(of_figures(self, facts));
        if let Some(late) = facts.late_start.filter(|l| *l >= LATE_START) {
            warnings.push(Warning::new(
                WarningCode::LateStart,
                format!(
                    "started {:.1} s after --start-at: its seconds do not line up with the other shards'",
                    late.as_secs_f64()
                ),
            ));
        }
        if let Some(shard) = &facts.shard_with_thresholds {
            warnings.push(Warning::new(
                WarningCode::ShardThresholds,
                format!("shard {shard}: these figures are this shard's share; the thresholds are judged on the whole by `volley merge` (a shard does not exit 2)"),
            ));
        }
        if let Some(why) = &facts.stopped_because {
            warnings.push(Warning::new(WarningCode::AbortOnFail, why.as_str()));
        }
        self.warnings = warnings;
    }
}

/// What the figures say of themselves: connection tasks that panicked,
/// calls left unanswered, subscriptions that brought nothing, a run too
/// short to compare, and a schedule not kept, with its cause.
fn of_figures(summary: &RunSummary, facts: &Facts) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if summary.panicked_connections > 0 {
        warnings.push(Warning::new(
            WarningCode::Panicked,
            format!(
                "{} panicked (a bug in volley: please report it); the calls they made are counted",
                count(summary.panicked_connections, "connection task")
            ),
        ));
    }
    let run = Duration::from_secs_f64(summary.measured_seconds.max(0.0));
    let run_shown = humantime::format_duration(Duration::from_millis(run.as_millis() as u64));
    warnings.extend(unanswered(summary));
    if let Some(subs) = summary.subscriptions.as_ref().filter(|s| s.notifications == 0) {
        warnings.push(Warning::new(
            WarningCode::NoNotifications,
            format!(
                "subscriptions received nothing: {} opened, no notification came in the measured {run_shown} (are its params a topic the server sends on, and often enough for the run?)",
                count(subs.opened, "subscription")
            ),
        ));
    }
    let judged = f64::from(JUDGED_SECONDS);
    if summary.total.calls > 0 && summary.measured_seconds < judged {
        warnings.push(Warning::new(
            WarningCode::TooShortToCompare,
            format!("a measured run of {run_shown} is too short for `volley compare` to tell a change from chance: measure at least {judged} s"),
        ));
    }
    for flow in summary.flows.iter().filter(|f| f.held_connection > 0) {
        warnings.push(Warning::new(
            WarningCode::FlowBound,
            format!(
                "{} of {} kept a connection through every step: {} flows were in flight at once, the bound (--max-flows, load.max_flows); the others gave theirs back between steps",
                count(flow.held_connection, "flow"),
                flow.flow,
                facts.max_flows
            ),
        ));
    }
    if let Some(schedule) = summary.schedule.as_ref().filter(|s| s.needs_cause()) {
        warnings.push(Warning::new(
            WarningCode::BehindSchedule,
            format!(
                "{}: {} left more than {} ms late (start delay p99 {:.1} ms) and {} never sent; the latency figures include this wait",
                behind_cause(summary, facts.capacity),
                count(schedule.late_requests, "request"),
                LATE_THRESHOLD.as_millis(),
                schedule.start_delay.p99_ms,
                count(schedule.unsent, "request")
            ),
        ));
    }
    warnings
}

/// Why the figures say nothing of the server, when they do not, with the
/// calls a stop left waiting.
fn unanswered(summary: &RunSummary) -> Option<Warning> {
    let in_flight = summary.in_flight_at_end;
    let run = Duration::from_secs_f64(summary.measured_seconds.max(0.0));
    let run_shown = humantime::format_duration(Duration::from_millis(run.as_millis() as u64));
    let silence = super::unanswered(summary)?;
    let code = match silence {
        Unanswered::StoppedInWarmup => WarningCode::StoppedInWarmup,
        Unanswered::NothingSent => WarningCode::NothingMeasured,
        Unanswered::NoAnswer | Unanswered::ConnectionsHeld { .. } => WarningCode::NoAnswer,
        Unanswered::StoppedAnswering { .. } => WarningCode::StoppedAnswering,
    };
    let message = match silence {
        Unanswered::StoppedInWarmup => "stopped before the measured part began: nothing was measured (the warmup's calls are in no figure)".to_string(),
        Unanswered::NothingSent => format!(
            "nothing was measured: no call was sent in the measured {run_shown} (after any warmup); a replay file used up in the warmup, or a run shorter than a call, leaves every figure at zero"
        ),
        // A stop skips the grace: what it cut is in no figure.
        _ if in_flight > 0 => format!(
            "{silence}; {} still waiting for an answer when the run was stopped, in no figure: a stop skips the grace in which each would have been answered or counted as a timeout",
            count(in_flight, "call"),
        ),
        _ => silence.to_string(),
    };
    Some(Warning::new(code, message))
}

/// Why an open-model run fell behind its schedule: the one rule, which
/// the run's warning, its verdict and a sweep step's reason each put in
/// their words. Only volley's own causes make the figures untrustworthy;
/// the server's are findings about it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BehindCause {
    /// (d) Calls failed to connect: the server's outage.
    Unreachable { calls: u64 },
    /// (c) Requests waited for a connection, every one busy with calls the
    /// server had not answered: the server did not keep up with the rate.
    ServerSlow { waited: u64 },
    /// (a) Connections to spare, and volley's engine threads busy: volley
    /// sent late.
    EngineBusy { busy_share: f64 },
    /// (b) Connections to spare and the engine threads mostly idle: the
    /// process or the machine stalled (other work, a pause).
    Stalled { busy_share: f64 },
}

/// Engine threads busy this share of the run or more: lateness with
/// connections to spare is theirs; below it, the machine's.
pub const ENGINE_BUSY_SHARE: f64 = 0.5;

/// What tells the causes apart, from a run's figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct BehindFacts {
    pub late: u64,
    /// Of the late, those that waited for a free connection.
    pub late_for_connections: u64,
    pub unsent: u64,
    /// Callers busy as the schedule ended, and how many the plan had (0:
    /// not known, as in a merge).
    pub busy_at_end: u64,
    pub callers: usize,
    pub unreachable: u64,
    pub busy_share: f64,
}

impl BehindFacts {
    pub fn of(summary: &RunSummary, callers: usize) -> Self {
        let schedule = summary.schedule.as_ref();
        BehindFacts {
            late: schedule.map_or(0, |s| s.late_requests),
            late_for_connections: schedule.map_or(0, |s| s.late_for_connections),
            unsent: schedule.map_or(0, |s| s.unsent),
            busy_at_end: summary.in_flight_at_end.max(summary.callers_busy_at_end),
            callers,
            unreachable: summary.total.outcome(super::OutcomeKind::Connect),
            busy_share: summary.client_cpu.busy_share,
        }
    }
}

impl BehindCause {
    pub fn of(facts: &BehindFacts) -> Self {
        let waited = facts.late_for_connections.min(facts.late);
        // Late requests tell their own cause; only without them (requests
        // unsent) does every caller busy at the end put it on the server.
        let every_caller_busy = facts.callers > 0 && facts.busy_at_end >= facts.callers as u64;
        if facts.unreachable > 0 {
            BehindCause::Unreachable {
                calls: facts.unreachable,
            }
        } else if (facts.late > 0 && waited * 2 >= facts.late) || (facts.late == 0 && every_caller_busy) {
            BehindCause::ServerSlow { waited }
        } else if facts.busy_share >= ENGINE_BUSY_SHARE {
            BehindCause::EngineBusy {
                busy_share: facts.busy_share,
            }
        } else {
            BehindCause::Stalled {
                busy_share: facts.busy_share,
            }
        }
    }

    /// Whether the lateness is volley's own (its figures then cannot be
    /// trusted), not the server's.
    pub fn is_volleys(&self) -> bool {
        matches!(self, BehindCause::EngineBusy { .. } | BehindCause::Stalled { .. })
    }

    /// The cause in words, with its remedy.
    pub fn said(&self, facts: &BehindFacts, capacity: Capacity) -> String {
        match *self {
            BehindCause::Unreachable { calls } => format!(
                "the server could not be reached for part of the run ({} failed to connect): requests due then waited for it, or were never sent. This is the server's outage, not the generator",
                count(calls, "call")
            ),
            BehindCause::ServerSlow { waited } => {
                // Several calls on a connection: a multiplexed transport,
                // whose calls in flight per connection can be raised too.
                let (over, or_more) = match capacity.callers == capacity.connections {
                    true => (count(capacity.connections as u64, "connection"), ""),
                    false => (
                        format!(
                            "{} in flight at most over {}",
                            count(capacity.callers as u64, "call"),
                            count(capacity.connections as u64, "connection")
                        ),
                        " (or more calls on each: --max-in-flight, or a deeper --pipeline over HTTP/1.1)",
                    ),
                };
                // None late, all unsent: no share of late ones to give.
                let waited = match facts.late {
                    0 => "requests found no connection free".to_string(),
                    late => format!("{waited} of {late} late requests waited for a connection"),
                };
                format!(
                    "the server did not keep up with the offered rate: {waited}, every one busy with calls the server had not answered ({over}). A finding about the server, as the open model counts it; if the server can take more calls at once, add connections{or_more}"
                )
            }
            BehindCause::EngineBusy { busy_share } => format!(
                "volley sent late with connections to spare: its engine threads were busy {:.0}% of the run. Give it more threads (--threads) or lower the rate",
                busy_share * 100.0
            ),
            BehindCause::Stalled { busy_share } => format!(
                "volley sent late with connections to spare while its engine threads were busy only {:.0}% of the run: this machine stalled or was busy with other work. Run it again on a quieter machine",
                busy_share * 100.0
            ),
        }
    }
}

/// Why an open-model run fell behind its schedule, with the remedy.
fn behind_cause(summary: &RunSummary, capacity: Capacity) -> String {
    let facts = BehindFacts::of(summary, capacity.callers);
    BehindCause::of(&facts).said(&facts, capacity)
}

/// `1 connection`, `2 connections`, `3 batches`: a count and its noun,
/// agreed, for every report that counts things in words.
pub fn count(n: u64, noun: &str) -> String {
    format!("{n} {}", noun_for(n == 1, noun))
}

/// The noun, or its regular English plural (every noun these reports use
/// has one).
pub fn noun_for(one: bool, noun: &str) -> String {
    if one {
        noun.to_string()
    } else if ["s", "x", "ch", "sh"].iter().any(|end| noun.ends_with(end)) {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{MethodSummary, ScheduleSummary};

    #[test]
    fn a_schedule_falls_behind_for_an_outage_first_then_a_slow_server_then_volley() {
        let facts = BehindFacts {
            late: 100,
            late_for_connections: 80,
            callers: 8,
            busy_share: 0.9,
            ..BehindFacts::default()
        };
        let cause = |facts: BehindFacts| BehindCause::of(&facts);
        assert_eq!(
            cause(BehindFacts {
                unreachable: 3,
                ..facts
            }),
            BehindCause::Unreachable { calls: 3 }
        );
        assert_eq!(cause(facts), BehindCause::ServerSlow { waited: 80 });
        // Requests never sent while every caller waited on the server.
        let unsent = BehindFacts {
            late: 0,
            late_for_connections: 0,
            unsent: 5,
            busy_at_end: 8,
            ..facts
        };
        assert_eq!(cause(unsent), BehindCause::ServerSlow { waited: 0 });
        let spare = BehindFacts {
            late_for_connections: 10,
            ..facts
        };
        assert_eq!(cause(spare), BehindCause::EngineBusy { busy_share: 0.9 });
        let idle = BehindFacts {
            busy_share: 0.1,
            ..spare
        };
        assert_eq!(cause(idle), BehindCause::Stalled { busy_share: 0.1 });
        assert!(cause(idle).is_volleys() && cause(spare).is_volleys());
        assert!(!cause(facts).is_volleys());
        let capacity = Capacity {
            connections: 8,
            callers: 8,
        };
        let said = cause(facts).said(&facts, capacity);
        assert!(
            said.starts_with(
                "the server did not keep up with the offered rate: 80 of 100 late requests waited"
            ),
            "{said}"
        );
        assert!(!said.contains("--threads"), "{said}");
        // None late, only unsent: no `0 of 0`.
        let said = cause(unsent).said(&unsent, capacity);
        assert!(
            said.starts_with("the server did not keep up with the offered rate: requests found no connection free, every one busy"),
            "{said}"
        );
        assert!(cause(idle)
            .said(&idle, capacity)
            .contains("this machine stalled or was busy"));
        assert!(cause(spare).said(&spare, capacity).contains("--threads"));
    }

    fn run_of(calls: u64, seconds: f64) -> RunSummary {
        let mut total = MethodSummary {
            method: "TOTAL".into(),
            calls,
            ok: calls,
            ..MethodSummary::default()
        };
        total.outcomes.insert("ok", calls);
        RunSummary::of_methods(Vec::new(), total, seconds)
    }

    fn codes(summary: &RunSummary) -> Vec<WarningCode> {
        summary.warnings.iter().map(|w| w.code).collect()
    }

    #[test]
    fn the_facts_and_the_figures_each_give_their_code_in_order() {
        let mut summary = run_of(100, 1.0);
        summary.schedule = Some(ScheduleSummary {
            late_requests: 50,
            behind: true,
            ..ScheduleSummary::default()
        });
        summary.finish(&Facts {
            scenario: vec!["4 connections give at most 4 calls in flight, not 8".into()],
            insecure: true,
            late_start: Some(LATE_START),
            shard_with_thresholds: Some("0/2".into()),
            capacity: Capacity {
                connections: 4,
                callers: 4,
            },
            stopped_because: Some("threshold failed".into()),
            max_flows: 10,
        });
        assert_eq!(
            codes(&summary),
            [
                WarningCode::Scenario,
                WarningCode::Insecure,
                WarningCode::TooShortToCompare,
                WarningCode::BehindSchedule,
                WarningCode::LateStart,
                WarningCode::ShardThresholds,
                WarningCode::AbortOnFail
            ]
        );
        let behind = &summary.warnings[3].message;
        assert!(
            behind.starts_with(
                "volley sent late with connections to spare while its engine threads were busy only 0%"
            ) && behind.contains("50 requests left"),
            "{behind}"
        );
        assert!(
            summary.verdict.valid,
            "warnings alone leave the verdict as it was"
        );
    }

    /// Flows hold their callers between calls: callers busy at the end,
    /// not calls in flight, say every caller was taken.
    #[test]
    fn every_caller_busy_at_the_end_blames_the_server_only_for_requests_unsent() {
        // Late requests that never waited for a connection tell their own
        // cause (volley stalled: stopped 1.5 s against a slow server, every
        // caller busy as it ended); unsent ones, none late, do not.
        let behind = |busy: u64, late: u64| {
            let mut summary = run_of(100, 2.0);
            summary.schedule = Some(ScheduleSummary {
                late_requests: late,
                unsent: 50 - late,
                behind: true,
                ..ScheduleSummary::default()
            });
            summary.callers_busy_at_end = busy;
            summary.finish(&Facts {
                capacity: Capacity {
                    connections: 4,
                    callers: 4,
                },
                ..Facts::default()
            });
            let warning = summary
                .warnings
                .iter()
                .find(|w| w.code == WarningCode::BehindSchedule);
            warning.expect("behind schedule").message.clone()
        };
        for busy in [3, 4] {
            let said = behind(busy, 50);
            assert!(
                said.starts_with("volley sent late with connections to spare"),
                "{said}"
            );
        }
        assert!(
            behind(4, 0).starts_with("the server did not keep up"),
            "{}",
            behind(4, 0)
        );
        assert!(!behind(4, 0).contains("--max-in-flight"), "one call a connection");
        assert!(behind(3, 0).starts_with("volley sent late"), "{}", behind(3, 0));
    }

    #[test]
    fn a_silent_server_is_warned_of_and_makes_the_verdict_invalid() {
        let mut summary = run_of(0, 5.0);
        summary.in_flight_at_end = 3;
        summary.partial = true;
        summary.finish(&Facts::default());
        assert_eq!(codes(&summary), [WarningCode::NoAnswer]);
        assert!(
            summary.warnings[0].message.contains("3 calls still waiting")
                && summary.warnings[0].message.contains("a stop skips the grace"),
            "{}",
            summary.warnings[0]
        );
        assert!(!summary.verdict.valid && summary.verdict.reasons == ["the server answered no call"]);
        let mut quiet = run_of(100, 5.0);
        quiet.finish(&Facts {
            late_start: Some(LATE_START - Duration::from_millis(1)),
            ..Facts::default()
        });
        assert!(quiet.warnings.is_empty(), "{:?}", quiet.warnings);
    }

    #[test]
    fn a_warning_is_written_with_its_code_and_a_later_code_still_reads() {
        let warning = Warning::new(WarningCode::BehindSchedule, "late");
        let json = serde_json::to_value(&warning).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": "behind_schedule", "message": "late"})
        );
        let later: Warning = serde_json::from_str(r#"{"code": "a_later_one", "message": "m"}"#).unwrap();
        assert_eq!(later.code, WarningCode::Other);
        assert_eq!(warning.of_shard("1/2").to_string(), "shard 1/2: late");
        assert!(serde_json::from_str::<Warning>(r#"{"code": "panicked"}"#).is_err());
    }
}
