//! A verdict on the run itself: whether its figures measure the server, or
//! something else too (a generator that fell behind, a client pinned at its
//! CPU, a run cut short). CI gates on it with `--require-valid`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::OutcomeKind;
use super::{RunSummary, ScheduleSummary};

/// Engine threads busy this share of the run's wall time or more were the
/// bottleneck: the figures include volley's own queueing.
pub const SATURATED_SHARE: f64 = 0.95;

/// volley's own CPU use over the run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientCpu {
    /// CPU time of the engine threads, in seconds.
    pub seconds: f64,
    pub threads: usize,
    /// `seconds` over the threads' wall time: 1.0 is every thread busy
    /// throughout.
    pub busy_share: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub valid: bool,
    /// Why not, in words; empty when valid.
    pub reasons: Vec<String>,
}

/// What the verdict weighs.
pub struct Evidence<'a> {
    pub schedule: Option<&'a ScheduleSummary>,
    /// Requests whose send was timed against the schedule (for the late
    /// share: a batch of ten is one request, sent late or on time as one).
    pub requests: u64,
    /// Target requests/s of a constant open-model load.
    pub rate: Option<f64>,
    pub measured_seconds: f64,
    pub cpu: &'a ClientCpu,
    pub partial: bool,
    pub panicked: u64,
    /// Why the schedule fell behind, if it did: only volley's own causes
    /// make its figures untrustworthy; the server's are findings.
    pub behind: Option<super::BehindCause>,
}

impl Verdict {
    pub fn of(evidence: &Evidence) -> Verdict {
        let mut reasons = Vec::new();
        let volleys = evidence.behind.is_none_or(|cause| cause.is_volleys());
        if let Some(schedule) = evidence.schedule.filter(|_| volleys) {
            schedule_reasons(schedule, evidence, &mut reasons);
        }
        let cpu = evidence.cpu;
        if cpu.busy_share >= SATURATED_SHARE {
            reasons.push(format!(
                "the client was saturated: volley's {} engine threads were busy {:.0}% of the run, so the figures include its own queueing (add threads or machines, or lower the load)",
                cpu.threads,
                cpu.busy_share * 100.0
            ));
        }
        if evidence.partial {
            reasons.push("the run was stopped before its end".into());
        }
        if evidence.panicked > 0 {
            reasons.push(format!("{} connection tasks panicked", evidence.panicked));
        }
        Verdict {
            valid: reasons.is_empty(),
            reasons,
        }
    }
}

/// The open model's schedule: calls sent late, requests never sent (the
/// achieved rate below its target).
fn schedule_reasons(schedule: &ScheduleSummary, evidence: &Evidence, reasons: &mut Vec<String>) {
    if super::over_one_percent(schedule.late_requests, evidence.requests) {
        reasons.push(format!(
            "{:.1}% of requests ({} of {}) left more than {} ms after their intended time (the limit is 1%)",
            schedule.late_requests as f64 * 100.0 / evidence.requests.max(1) as f64,
            schedule.late_requests,
            evidence.requests,
            super::LATE_THRESHOLD.as_millis()
        ));
    }
    // A stop cuts the schedule: what was due as it came was never sent by
    // the stop's doing, which "stopped before its end" already says.
    if schedule.unsent > 0 && !evidence.partial {
        let achieved = match (evidence.rate, evidence.measured_seconds > 0.0) {
            (Some(rate), true) => {
                let unsent_rate = schedule.unsent as f64 / evidence.measured_seconds;
                format!(
                    " (about {:.1} requests/s short of the target {rate})",
                    unsent_rate
                )
            }
            _ => String::new(),
        };
        let (requests, were) = match schedule.unsent {
            1 => ("request", "was"),
            _ => ("requests", "were"),
        };
        reasons.push(format!(
            "{} {requests} due {were} never sent{achieved}",
            schedule.unsent
        ));
    }
}

/// Why a run's figures say nothing of the server, when they do not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unanswered {
    /// Stopped (Ctrl-C) before the measured part began.
    StoppedInWarmup,
    /// No call was sent in the measured part (a replay used up in the
    /// warmup, a run shorter than a call).
    NothingSent,
    /// Calls were sent and none was answered.
    NoAnswer,
    /// No call was sent in the measured part, though requests were due:
    /// every connection waited, all along, on calls the server had not
    /// answered (sent in the warmup).
    ConnectionsHeld { unsent: u64 },
    /// Answers came, then none for at least this many seconds at the end:
    /// longer than any answered call took, so the server stopped.
    StoppedAnswering { answered: u64, silent_s: f64 },
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unanswered::StoppedInWarmup => f.write_str("stopped before the measured part began"),
            Unanswered::NothingSent => f.write_str("nothing was measured: no call was sent"),
            Unanswered::NoAnswer => f.write_str("the server answered no call"),
            Unanswered::ConnectionsHeld { unsent } => write!(
                f,
                "the server answered no call: every connection waited, the whole measured part, on calls it never answered (sent in the warmup), and {unsent} requests due were never sent"
            ),
            Unanswered::StoppedAnswering { answered, silent_s } => write!(
                f,
                "{answered} calls answered, then none for the last {silent_s:.1} s or more: the server stopped answering"
            ),
        }
    }
}

/// Whether the run's figures describe the server at all. Calls a healthy
/// server had in flight at the end are answered in the grace, within the
/// usual latency, and say nothing.
pub fn unanswered(summary: &RunSummary) -> Option<Unanswered> {
    let total = &summary.total;
    let calls = total.calls;
    let cut = summary.in_flight_at_end > 0;
    // Calls that ended without a word from the server: timed out, never
    // connected, or cut off.
    let silent = SILENT.iter().map(|kind| total.outcome(*kind)).sum::<u64>();
    if calls > 0 && silent == calls && summary.children_exited == 0 {
        return Some(Unanswered::NoAnswer);
    }
    if calls == 0 {
        // Subscriptions alone, or children that ended, are figures of their own.
        if summary.subscriptions.is_some() || summary.children_exited > 0 {
            return None;
        }
        let unsent = summary.schedule.as_ref().map_or(0, |s| s.unsent);
        return Some(match (summary.partial && summary.measured_seconds < 1e-3, cut) {
            (true, _) => Unanswered::StoppedInWarmup,
            (false, true) => Unanswered::NoAnswer,
            // Held: callers still waited at the end on calls sent before
            // the measured part (a replay used up leaves none waiting).
            (false, false) if unsent > 0 && summary.callers_busy_at_end > 0 => {
                Unanswered::ConnectionsHeld { unsent }
            }
            (false, false) => Unanswered::NothingSent,
        });
    }
    // Calls left waiting at the end: cut by a stop, or timed out in the
    // grace (which counts in the last second).
    let timed_out = total.outcome(OutcomeKind::Timeout) > 0;
    if !cut && !timed_out {
        return None;
    }
    // Rows cover whole seconds: the silence is at least this long.
    let last_answering_second = (summary.timeseries.iter())
        .rposition(|row| {
            row.calls
                > SILENT
                    .iter()
                    .map(|k| row.error_outcomes.get(k.name()).unwrap_or(&0))
                    .sum()
        })
        .map_or(0.0, |i| i as f64 + 1.0);
    let silent_s = summary.measured_seconds - last_answering_second;
    // A stop cuts a slow but healthy server's calls too: its silence must
    // be longer than any call took. Calls that timed out had the grace.
    let longer_than_a_call = timed_out || silent_s * 1000.0 > summary.total.latency.max_ms;
    (silent_s >= 1.0 && longer_than_a_call).then_some(Unanswered::StoppedAnswering {
        answered: calls - silent,
        silent_s,
    })
}

/// The outcomes of calls that ended without a word from the server.
const SILENT: [OutcomeKind; 3] = [OutcomeKind::Timeout, OutcomeKind::Connect, OutcomeKind::Io];

/// Marks the run's verdict invalid when its figures say nothing of the
/// server: CI must never pass a run of a server that did not answer.
pub fn weigh_answers(summary: &mut RunSummary) {
    if let Some(why) = unanswered(summary) {
        summary.verdict.valid = false;
        summary.verdict.reasons.push(why.to_string());
    }
}

/// What the server did with the run's calls, for the verdict's line: a
/// valid verdict says the figures can be trusted, not that the server is
/// fine, so the line says both (`all 500 calls succeeded`, `the server
/// failed 52% of calls (connect 52%)`). `None` when no call ended.
pub fn server_did(total: &super::MethodSummary) -> Option<String> {
    let calls = total.calls;
    if calls == 0 {
        return None;
    }
    if total.errors == 0 {
        return Some(format!("all {calls} calls succeeded"));
    }
    let mut causes: Vec<(&str, u64)> = (total.outcomes.iter())
        .filter(|(kind, n)| **kind != OutcomeKind::Ok.name() && **n > 0)
        .map(|(kind, n)| (*kind, *n))
        .collect();
    causes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = (causes.iter().take(3))
        .map(|(kind, n)| format!("{kind} {}", share_of(*n, calls)))
        .collect();
    let how = match causes.len() {
        0 => String::new(),
        1..=3 => format!(" ({})", shown.join(", ")),
        _ => format!(" ({}, ...)", shown.join(", ")),
    };
    Some(format!(
        "the server failed {} of calls{how}",
        share_of(total.errors, calls)
    ))
}

/// `n` of `all` as a percentage that never rounds to 0% or 100% when it
/// is neither.
fn share_of(n: u64, all: u64) -> String {
    let percent = n as f64 / all.max(1) as f64 * 100.0;
    match percent {
        _ if n == all => "100%".into(),
        p if p >= 99.5 => "over 99%".into(),
        p if p >= 1.0 => format!("{p:.0}%"),
        p if p >= 0.1 => format!("{p:.1}%"),
        p if p >= 0.01 => format!("{p:.2}%"),
        _ => "under 0.01%".into(),
    }
}

/// A run in which no call succeeded: its calls, the cause most of them
/// ended in, and what to look at. Not a verdict on the measurement (that
/// may be valid) but on the run: CI must not pass it.
#[derive(Clone, Debug, PartialEq)]
pub struct NoneSucceeded {
    pub calls: u64,
    /// The dominant cause, as reports name it: `http_status 404`,
    /// `rpc_error -32601`, `connect`, ...
    pub cause: String,
    pub count: u64,
    pub hint: &'static str,
}

impl fmt::Display for NoneSucceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no call succeeded: {} of {} calls ended in {}. {}",
            self.count, self.calls, self.cause, self.hint
        )
    }
}

/// Whether every call of the run failed (an expected error counts as a
/// success: the scenario asked for it), and why, by the commonest cause.
pub fn none_succeeded(summary: &RunSummary) -> Option<NoneSucceeded> {
    let total = &summary.total;
    // Calls sent and never answered, cut by a stop before they could time
    // out: no call ended, and none succeeded either. Not a stop in the
    // warmup: its calls are in no figure, and it said nothing of the server.
    let silence = unanswered(summary);
    if let Some(Unanswered::ConnectionsHeld { unsent }) = silence {
        return Some(NoneSucceeded {
            calls: unsent,
            cause: "no answer (never sent: every connection waited on calls the server never answered)"
                .into(),
            count: unsent,
            hint: "Is the server answering? The calls sent in the warmup held every connection.",
        });
    }
    let in_warmup = silence == Some(Unanswered::StoppedInWarmup);
    if total.calls == 0 && summary.in_flight_at_end > 0 && !in_warmup {
        return Some(NoneSucceeded {
            calls: summary.in_flight_at_end,
            cause: "no answer (still waiting when the run was stopped)".into(),
            count: summary.in_flight_at_end,
            hint: "Is the server answering? A stop skips the grace in which they would have timed out.",
        });
    }
    if total.calls == 0 || total.ok > 0 {
        return None;
    }
    let (outcome, count) = total.outcomes.iter().max_by_key(|(_, n)| **n)?;
    let most = |counts: Vec<(String, u64)>| counts.into_iter().max_by_key(|(_, n)| *n);
    let (cause, count, hint) = match *outcome {
        "http_status" => {
            let statuses = total
                .http_statuses
                .iter()
                .filter(|(s, _)| !(200..300).contains(*s));
            let (status, n) = most(statuses.map(|(s, n)| (s.to_string(), *n)).collect())?;
            let hint = match status.as_str() {
                "404" => "Is the target's path right? The server has nothing at it.",
                "401" | "403" => {
                    "Does the endpoint need a header (-H 'Authorization: ...'), or a JWT (--jwt-secret FILE, as an Engine API)?"
                }
                "405" => "Does this URL take POST? It may not be the JSON-RPC endpoint.",
                "429" => "The server is rate-limiting: lower the rate or ask for a higher limit.",
                _ => "The server refused every request: see the examples above.",
            };
            (format!("http_status {status}"), n, hint)
        }
        "rpc_error" => {
            let codes = total.rpc_error_codes.iter().map(|(c, n)| (c.to_string(), *n));
            let (code, n) = most(codes.collect())?;
            let hint = match code.as_str() {
                "-32601" => "Is the method name right? The server has no such method.",
                "-32602" => "Are the params right for this method?",
                "-32700" | "-32600" => "The server could not read the requests: is this a JSON-RPC endpoint?",
                _ => "The server answered every call with an error: see the examples above.",
            };
            (format!("rpc_error {code}"), n, hint)
        }
        "connect" => (outcome.to_string(), *count, "Is the server up at that address?"),
        "timeout" => (
            outcome.to_string(),
            *count,
            "Is --timeout long enough for this server?",
        ),
        "invalid_json" | "protocol" => (
            outcome.to_string(),
            *count,
            "The answers are not JSON-RPC: is the target a JSON-RPC endpoint?",
        ),
        "assertion" => (
            outcome.to_string(),
            *count,
            "Every answer broke the scenario's `expect`: is the expectation right?",
        ),
        _ => (outcome.to_string(), *count, "See the examples above."),
    };
    Some(NoneSucceeded {
        calls: total.calls,
        cause,
        count,
        hint,
    })
}

#[cfg(test)]
mod tests {
    use crate::stats::MethodSummary;

    fn with_outcomes(calls: u64, outcomes: &[(&'static str, u64)]) -> MethodSummary {
        let errors: u64 = outcomes.iter().map(|(_, n)| n).sum();
        let mut total = MethodSummary {
            calls,
            ok: calls - errors,
            errors,
            ..Default::default()
        };
        total.outcomes = outcomes.iter().copied().collect();
        total.outcomes.insert("ok", calls - errors);
        total
    }

    #[test]
    fn the_server_did_says_the_share_failed_by_outcome_never_rounding_to_none_or_all() {
        assert_eq!(server_did(&with_outcomes(0, &[])), None);
        let mut unsorted = with_outcomes(15, &[]);
        (unsorted.ok, unsorted.errors) = (14, 1);
        assert_eq!(server_did(&unsorted).unwrap(), "the server failed 7% of calls");
        assert_eq!(
            server_did(&with_outcomes(500, &[])).unwrap(),
            "all 500 calls succeeded"
        );
        assert_eq!(
            server_did(&with_outcomes(1000, &[("timeout", 40), ("connect", 480)])).unwrap(),
            "the server failed 52% of calls (connect 48%, timeout 4%)"
        );
        assert_eq!(
            server_did(&with_outcomes(100_000, &[("protocol", 3)])).unwrap(),
            "the server failed under 0.01% of calls (protocol under 0.01%)"
        );
        assert_eq!(
            server_did(&with_outcomes(1000, &[("io", 998)])).unwrap(),
            "the server failed over 99% of calls (io over 99%)"
        );
        let four = [("io", 4), ("timeout", 3), ("assertion", 2), ("rpc_error", 1)];
        assert_eq!(
            server_did(&with_outcomes(1000, &four)).unwrap(),
            "the server failed 1% of calls (io 0.4%, timeout 0.3%, assertion 0.2%, ...)"
        );
    }

    use super::*;

    fn evidence<'a>(schedule: Option<&'a ScheduleSummary>, cpu: &'a ClientCpu) -> Evidence<'a> {
        Evidence {
            schedule,
            requests: 1000,
            rate: Some(100.0),
            measured_seconds: 10.0,
            cpu,
            partial: false,
            panicked: 0,
            behind: None,
        }
    }

    fn schedule(late_requests: u64, unsent: u64) -> ScheduleSummary {
        ScheduleSummary {
            start_delay: Default::default(),
            late_requests,
            unsent,
            behind: false,
            late_for_connections: 0,
        }
    }

    #[test]
    fn a_kept_schedule_on_an_idle_client_is_valid() {
        let cpu = ClientCpu {
            busy_share: 0.94,
            ..ClientCpu::default()
        };
        let kept = schedule(10, 0);
        let verdict = Verdict::of(&evidence(Some(&kept), &cpu));
        assert_eq!(
            verdict,
            Verdict {
                valid: true,
                reasons: vec![]
            }
        );
    }

    #[test]
    fn each_reason_makes_a_run_invalid_and_is_said() {
        let idle = ClientCpu::default();
        let late = schedule(11, 0);
        let reasons = Verdict::of(&evidence(Some(&late), &idle)).reasons;
        assert_eq!(reasons.len(), 1);
        assert!(
            reasons[0].starts_with("1.1% of requests (11 of 1000)"),
            "{reasons:?}"
        );
        // Late for the server's sake (every connection busy with calls it
        // had not answered): a finding about the server, not a reason.
        let servers = Evidence {
            behind: Some(super::super::BehindCause::ServerSlow { waited: 11 }),
            ..evidence(Some(&late), &idle)
        };
        assert!(Verdict::of(&servers).valid);
        let stalled = Evidence {
            behind: Some(super::super::BehindCause::Stalled { busy_share: 0.1 }),
            ..evidence(Some(&late), &idle)
        };
        assert!(!Verdict::of(&stalled).valid);
        let unsent = schedule(0, 50);
        let reasons = Verdict::of(&evidence(Some(&unsent), &idle)).reasons;
        assert!(
            reasons[0].contains("50 requests due were never sent (about 5.0 requests/s short"),
            "{reasons:?}"
        );
        let one = schedule(0, 1);
        let reasons = Verdict::of(&evidence(Some(&one), &idle)).reasons;
        assert!(
            reasons[0].starts_with("1 request due was never sent"),
            "{reasons:?}"
        );
        let busy = ClientCpu {
            seconds: 19.0,
            threads: 2,
            busy_share: 0.95,
        };
        let verdict = Verdict::of(&evidence(None, &busy));
        assert!(
            !verdict.valid && verdict.reasons[0].contains("saturated"),
            "{verdict:?}"
        );
        let mut stopped = evidence(None, &idle);
        stopped.partial = true;
        stopped.panicked = 2;
        assert_eq!(Verdict::of(&stopped).reasons.len(), 2);
        // A stop's own unsent requests are the stop's, said once.
        let cut = schedule(0, 3);
        let mut stopped = evidence(Some(&cut), &idle);
        stopped.partial = true;
        assert_eq!(
            Verdict::of(&stopped).reasons,
            ["the run was stopped before its end"]
        );
    }
}
