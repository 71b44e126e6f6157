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
    if let Some(schedule) = summary.schedule.as_ref().filter(|s| s.behind) {
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
        Unanswered::NoAnswer => WarningCode::NoAnswer,
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
/// the run's warning and a sweep step's reason each put in their words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BehindCause {
    /// Calls failed to connect: the server's outage, not the generator.
    Unreachable { calls: u64 },
    /// Every caller was waiting on an answer: the server at this rate.
    EveryCallerBusy,
    /// Callers to spare: volley itself sent late.
    Generator,
}

impl BehindCause {
    /// From the calls that failed to connect and those in flight at the
    /// end, against what the plan could carry.
    pub fn of(unreachable: u64, in_flight: u64, capacity: Capacity) -> Self {
        if unreachable > 0 {
            BehindCause::Unreachable { calls: unreachable }
        } else if in_flight >= capacity.callers as u64 {
            BehindCause::EveryCallerBusy
        } else {
            BehindCause::Generator
        }
    }
}

/// Why an open-model run fell behind its schedule, with the remedy.
fn behind_cause(summary: &RunSummary, capacity: Capacity) -> String {
    let unreachable = summary.total.outcome(super::OutcomeKind::Connect);
    // Calls in flight, or callers held by flows between their calls.
    let in_flight = summary.in_flight_at_end.max(summary.callers_busy_at_end);
    match BehindCause::of(unreachable, in_flight, capacity) {
        BehindCause::Unreachable { calls } => format!(
            "the server could not be reached for part of the run ({} failed to connect): requests due then waited for it. This is the server's outage, not the generator",
            count(calls, "call")
        ),
        BehindCause::EveryCallerBusy => {
            let over = match capacity.callers == capacity.connections {
                true => count(capacity.connections as u64, "connection"),
                false => format!(
                    "{} in flight at most over {}",
                    count(capacity.callers as u64, "call"),
                    count(capacity.connections as u64, "connection")
                ),
            };
            format!(
                "every caller was waiting for an answer ({} in flight at the end): the server was too slow for this rate on {over}. Add connections (or --max-in-flight) or lower the rate to measure the server alone",
                count(in_flight, "call"),
            )
        }
        BehindCause::Generator => {
            "the generator fell behind schedule: give it more threads (--threads) or lower the rate".into()
        }
    }
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
        let capacity = Capacity {
            connections: 4,
            callers: 8,
        };
        let cause = |unreachable, in_flight| BehindCause::of(unreachable, in_flight, capacity);
        assert_eq!(cause(3, 8), BehindCause::Unreachable { calls: 3 });
        assert_eq!(cause(0, 8), BehindCause::EveryCallerBusy);
        assert_eq!(cause(0, 7), BehindCause::Generator);
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
            behind.starts_with("the generator fell behind schedule") && behind.contains("50 requests left"),
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
    fn callers_held_by_flows_are_every_caller_busy_not_a_slow_generator() {
        let behind = |busy: u64| {
            let mut summary = run_of(100, 2.0);
            summary.schedule = Some(ScheduleSummary {
                late_requests: 50,
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
        assert!(behind(4).contains("every caller"), "{}", behind(4));
        assert!(
            behind(3).starts_with("the generator fell behind"),
            "{}",
            behind(3)
        );
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
