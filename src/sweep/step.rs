//! One step of a sweep: a run at one rate, judged by the SLO overall and
//! method by method, and by whether the rate was kept (unless
//! `--slo-only`); why it failed, in words; each method's knee.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Purpose;
use crate::stats::{
    over_one_percent, BehindCause, BehindFacts, Capacity, ClientCpu, RunSummary, LATE_THRESHOLD,
    SATURATED_SHARE,
};
use crate::thresholds::{Scope, Threshold, ThresholdResult};

/// How a step is judged.
#[derive(Clone, Copy, Debug)]
pub struct Judging<'a> {
    pub slo: &'a [Threshold],
    /// `--slo-only`: a rate not kept is said, but fails nothing.
    pub slo_only: bool,
    pub capacity: Capacity,
}

/// How a step's schedule was not kept: the figures its reason needs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Lateness {
    /// Requests sent more than [`LATE_THRESHOLD`] after their time, of
    /// the requests timed.
    pub late: u64,
    pub timed: u64,
    /// Requests due and never sent, of the requests due.
    pub unsent: u64,
    pub due: u64,
    /// Calls in flight when the step ended.
    pub in_flight: u64,
    /// Calls that failed to connect.
    pub unreachable: u64,
    /// Of the late requests, those that waited for a connection.
    pub late_for_connections: u64,
    /// The share of the step volley's engine threads were busy.
    pub busy_share: f64,
}

impl Lateness {
    /// The step's lateness, when its schedule fell behind.
    pub fn of(summary: &RunSummary) -> Option<Lateness> {
        let schedule = summary.schedule.as_ref().filter(|s| s.behind)?;
        Some(Lateness {
            late: schedule.late_requests,
            timed: summary.gathered.total.start_delay.len(),
            unsent: schedule.unsent,
            due: summary.gathered.due,
            // Callers busy as the schedule ended (their calls then had the
            // grace), or the calls a stop cut.
            in_flight: summary.in_flight_at_end.max(summary.callers_busy_at_end),
            unreachable: summary.total.outcomes.get("connect").copied().unwrap_or(0),
            late_for_connections: schedule.late_for_connections,
            busy_share: summary.client_cpu.busy_share,
        })
    }

    /// The step's cause, by the run's one rule.
    fn cause(&self, capacity: Capacity) -> BehindCause {
        BehindCause::of(&BehindFacts {
            late: self.late,
            late_for_connections: self.late_for_connections,
            unsent: self.unsent,
            busy_at_end: self.in_flight,
            callers: capacity.callers,
            unreachable: self.unreachable,
            busy_share: self.busy_share,
        })
    }

    /// Whether volley itself sent late, with connections to spare.
    pub fn volley_sent_late(&self, capacity: Capacity) -> bool {
        self.cause(capacity).is_volleys()
    }

    /// The rate not kept, in words: the late and the unsent requests with
    /// their shares, then the cause with its remedy.
    pub fn said(&self, capacity: Capacity) -> String {
        let share = |part: u64, whole: u64| part as f64 * 100.0 / whole.max(1) as f64;
        let mut what = Vec::new();
        if over_one_percent(self.late, self.timed) {
            what.push(format!(
                "{:.1}% of requests sent over {} ms late",
                share(self.late, self.timed),
                LATE_THRESHOLD.as_millis()
            ));
        }
        if over_one_percent(self.unsent, self.due) {
            what.push(format!(
                "{:.1}% of requests due never sent",
                share(self.unsent, self.due)
            ));
        }
        if what.is_empty() {
            what.push("the rate was not kept".into());
        }
        let cause = match self.cause(capacity) {
            BehindCause::Unreachable { calls } => {
                format!("the server could not be reached ({calls} calls failed to connect)")
            }
            BehindCause::ServerSlow { .. } if capacity.callers == capacity.connections => {
                format!("every connection busy waiting on the server: {AT_ITS_LIMIT}")
            }
            BehindCause::ServerSlow { .. } => format!(
                "every caller busy waiting on the server ({} calls in flight over {} connections): {AT_ITS_LIMIT}",
                capacity.callers, capacity.connections
            ),
            BehindCause::EngineBusy { busy_share } => format!(
                "connections to spare: volley itself sent late (its engine threads busy {:.0}% of the step)",
                busy_share * 100.0
            ),
            BehindCause::Stalled { .. } => {
                "connections to spare: volley itself sent late (this machine stalled or was busy)".to_string()
            }
        };
        format!("{}: {cause}", what.join(" and "))
    }
}

/// What a step broke when its schedule was not kept (beside the SLO's
/// limits it broke, if any).
pub const RATE_NOT_KEPT: &str = "rate not kept";

/// One step of the sweep: a run at one rate, and what the SLO made of it.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub target: String,
    /// Requests a second asked for.
    pub rate: f64,
    /// Requests a second sent and answered over the measured time.
    pub achieved: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub error_rate: f64,
    /// "pass", "fail", or "invalid" (volley itself was the limit: its
    /// engine threads saturated, or a connection task panicked).
    pub verdict: &'static str,
    /// Why the search ran it: its next rate, a retry, or a repeat.
    pub purpose: Purpose,
    /// What failed the step: the SLO's thresholds, as `text (figure)`;
    /// `rate not kept`; `stopped early`.
    pub broken: Vec<String>,
    /// Whether the schedule was kept (said, not judged, with `--slo-only`).
    pub rate_kept: bool,
    /// Why the step failed or was invalid, in words (and a rate not kept
    /// under `--slo-only`); empty otherwise.
    pub reason: String,
    /// Methods that broke the SLO at this rate.
    pub methods_broken: Vec<String>,
}

impl Step {
    /// Judges a step's run by the SLO, overall and method by method. A
    /// schedule that fell behind while volley had CPU to spare is the
    /// server's doing (every connection held waiting on it): a failure,
    /// unless `--slo-only`.
    pub fn judge(target: &str, rate: f64, summary: &RunSummary, judging: &Judging) -> Step {
        let failed: Vec<ThresholdResult> = judging
            .slo
            .iter()
            .map(|t| t.evaluate(summary))
            .filter(|r| !r.passed)
            .collect();
        let late = Lateness::of(summary);
        let rate_fails = late.is_some() && !judging.slo_only;
        let mut broken: Vec<String> = failed
            .iter()
            .map(|r| format!("{} ({})", r.expression, r.shown))
            .collect();
        if rate_fails {
            broken.push(RATE_NOT_KEPT.into());
        }
        let limit = client_limit(&summary.client_cpu, summary.panicked_connections);
        // Sent late with connections to spare: volley did not drive the
        // rate, so the step says nothing of the server.
        let undriven = rate_fails && late.is_some_and(|l| l.volley_sent_late(judging.capacity));
        let verdict = match (limit.is_some() || undriven, broken.is_empty()) {
            (true, _) => "invalid",
            (false, true) => "pass",
            (false, false) => "fail",
        };
        let mut reasons: Vec<String> = limit.into_iter().collect();
        reasons.extend(failed.iter().map(threshold_said));
        if let Some(late) = late {
            let said = late.said(judging.capacity);
            reasons.push(match judging.slo_only {
                true => format!("not judged (--slo-only): {said}"),
                false => said,
            });
        }
        let methods_broken = summary
            .methods
            .iter()
            .filter(|m| {
                per_method(judging.slo, &m.method)
                    .iter()
                    .any(|t| !t.evaluate(summary).passed)
            })
            .map(|m| m.method.clone())
            .collect();
        let seconds = summary.measured_seconds;
        Step {
            target: target.to_string(),
            rate,
            achieved: if seconds > 0.0 {
                summary.requests as f64 / seconds
            } else {
                0.0
            },
            p50_ms: summary.total.latency.p50_ms,
            p90_ms: summary.total.latency.p90_ms,
            p99_ms: summary.total.latency.p99_ms,
            error_rate: summary.total.error_rate,
            verdict,
            purpose: Purpose::Search,
            broken,
            rate_kept: late.is_none(),
            reason: reasons.join("; "),
            methods_broken,
        }
    }

    /// Marks a step its server clearly broke, stopped before its end.
    pub fn stopped_early(&mut self) {
        self.verdict = "fail";
        self.broken.push("stopped early".into());
        let said = "stopped early: most calls failed";
        self.reason = match self.reason.is_empty() {
            true => said.to_string(),
            false => format!("{said}; {}", self.reason),
        };
    }

    /// Whether the server clearly broke: most calls failed, or it answered
    /// at most half the rate asked. No rate above this one is worth trying.
    pub fn clearly_broke(&self) -> bool {
        self.verdict == "fail" && (self.error_rate >= 0.5 || self.achieved <= self.rate / 2.0)
    }
}

/// A threshold that failed, with what was measured.
fn threshold_said(result: &ThresholdResult) -> String {
    match &result.note {
        Some(note) => format!("{} failed: not measured ({note})", result.expression),
        None => format!("{} failed: {} measured", result.expression, result.shown),
    }
}

/// Why volley itself was the limit of a step, if it was.
fn client_limit(cpu: &ClientCpu, panicked: u64) -> Option<String> {
    if cpu.busy_share >= SATURATED_SHARE {
        return Some(format!(
            "volley itself was the limit: its {} engine threads were busy {:.0}% of the step",
            cpu.threads,
            cpu.busy_share * 100.0
        ));
    }
    (panicked > 0).then(|| format!("volley itself was the limit: {panicked} connection tasks panicked"))
}

/// Whether a step's figures so far say the server clearly broke: most of
/// at least a hundred calls failed.
pub fn broke_so_far(total: &crate::stats::MethodSummary) -> bool {
    total.calls >= 100 && total.errors * 2 > total.calls
}

/// The SLO's whole-run thresholds, scoped to `method` (a method's own
/// thresholds apply only to it).
pub fn per_method(slo: &[Threshold], method: &str) -> Vec<Threshold> {
    slo.iter()
        .filter_map(|t| match t.scope() {
            Scope::Total => format!("{method}.{}", t.text()).parse().ok(),
            Scope::Method(m) if m == method => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// Each method's knee: the highest rate it held and the lowest at which it
/// broke the SLO, over every valid step; a rate run more than once counts
/// by its latest step, as the search counts it.
pub fn knees(steps: &[Step], methods: &[String]) -> BTreeMap<String, (Option<f64>, Option<f64>)> {
    let valid: Vec<&Step> = steps.iter().filter(|s| s.verdict != "invalid").collect();
    let latest: Vec<&Step> = valid
        .iter()
        .enumerate()
        .filter(|(i, s)| !valid[i + 1..].iter().any(|later| later.rate == s.rate))
        .map(|(_, s)| *s)
        .collect();
    methods
        .iter()
        .map(|method| {
            let (broke, held): (Vec<&Step>, Vec<&Step>) =
                latest.iter().partition(|s| s.methods_broken.contains(method));
            let held_at = held.iter().map(|s| s.rate).reduce(f64::max);
            let broke_at = broke.iter().map(|s| s.rate).reduce(f64::min);
            (method.clone(), (held_at, broke_at))
        })
        .collect()
}

/// What a step whose every connection waited on the server says: from
/// outside, a server at its limit and one short of connections look alike.
const AT_ITS_LIMIT: &str =
    "the server is at its limit at this rate, or more --connections help if it serves more at once";

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stats::{MethodSummary, Outcome, Recorder, ScheduleSummary};

    /// A step's run: `calls` answered at 1 ms, `late` of them sent late,
    /// each having waited for a connection (every one busy on the server).
    fn run(calls: u64, late: u64) -> RunSummary {
        let mut recorder = Recorder::new(1);
        let ms = Duration::from_millis(1);
        for _ in 0..calls {
            recorder.methods[0].record(Outcome::Ok, ms, ms, 10);
        }
        let mut delays = crate::stats::new_histogram();
        delays.record_n(100, calls - late).unwrap();
        delays.record_n(50_000, late).unwrap();
        recorder.start_delay = delays.clone();
        let (methods, total) = (
            vec![MethodSummary::new("m", &recorder.methods[0], 1.0)],
            MethodSummary::new("TOTAL", &recorder.total(), 1.0),
        );
        RunSummary {
            requests: calls,
            schedule: Some(ScheduleSummary {
                late_for_connections: late,
                ..ScheduleSummary::of(&delays, 0, calls)
            }),
            callers_busy_at_end: 4,
            gathered: crate::stats::Gathered {
                total: recorder,
                stages: Vec::new(),
                due: calls,
            },
            ..RunSummary::of_methods(methods, total, 1.0)
        }
    }

    fn judged(summary: &RunSummary, slo: &[&str], slo_only: bool) -> Step {
        let slo: Vec<Threshold> = slo.iter().map(|t| t.parse().unwrap()).collect();
        let judging = Judging {
            slo: &slo,
            slo_only,
            capacity: Capacity {
                connections: 4,
                callers: 4,
            },
        };
        Step::judge("t", 1000.0, summary, &judging)
    }

    #[test]
    fn a_step_whose_rate_was_not_kept_fails_and_says_why() {
        let step = judged(&run(1000, 26), &["p99 < 50ms"], false);
        assert_eq!(step.verdict, "fail");
        assert!(!step.rate_kept);
        assert_eq!(step.broken, ["rate not kept"]);
        assert_eq!(
            step.reason,
            "2.6% of requests sent over 10 ms late: every connection busy waiting on the server: the server is at its limit at this rate, or more --connections help if it serves more at once"
        );
        let kept = judged(&run(1000, 10), &["p99 < 50ms"], false);
        assert_eq!(
            (kept.verdict, kept.rate_kept, kept.reason.as_str()),
            ("pass", true, "")
        );
    }

    #[test]
    fn a_step_volley_sent_late_with_connections_to_spare_is_invalid_not_a_failure() {
        // Late, none having waited for a connection: volley's lateness,
        // however many callers were busy as it ended.
        let mut summary = run(1000, 26);
        summary.schedule.as_mut().expect("open").late_for_connections = 0;
        let step = judged(&summary, &["p99 < 50ms"], false);
        assert_eq!(step.verdict, "invalid", "{}", step.reason);
        assert!(step.reason.contains("volley itself sent late"), "{}", step.reason);
        // The server holding every connection is still the server's failure.
        assert_eq!(judged(&run(1000, 26), &["p99 < 50ms"], false).verdict, "fail");
    }

    #[test]
    fn with_slo_only_a_rate_not_kept_is_said_but_fails_nothing() {
        let step = judged(&run(1000, 26), &["p99 < 50ms"], true);
        assert_eq!(step.verdict, "pass");
        assert!(!step.rate_kept && step.broken.is_empty());
        assert_eq!(
            step.reason,
            "not judged (--slo-only): 2.6% of requests sent over 10 ms late: every connection busy waiting on the server: the server is at its limit at this rate, or more --connections help if it serves more at once"
        );
        let slow = judged(&run(1000, 26), &["p99 < 0.5ms"], true);
        assert_eq!(slow.verdict, "fail", "the SLO still judges");
    }

    #[test]
    fn a_threshold_that_failed_is_named_with_its_measured_value() {
        let step = judged(&run(1000, 0), &["p99 < 0.5ms", "error_rate < 1%"], false);
        assert_eq!(step.verdict, "fail");
        assert_eq!(step.broken, ["p99 < 0.5ms (1 ms)"]);
        assert_eq!(step.reason, "p99 < 0.5ms failed: 1 ms measured");
        assert_eq!(step.methods_broken, ["m"]);
        let mut early = step.clone();
        early.stopped_early();
        assert_eq!(
            early.reason,
            "stopped early: most calls failed; p99 < 0.5ms failed: 1 ms measured"
        );
    }

    #[test]
    fn a_rate_not_kept_names_its_cause_and_remedy() {
        let late = Lateness {
            late: 26,
            timed: 1000,
            unsent: 40,
            due: 1040,
            in_flight: 8,
            unreachable: 0,
            late_for_connections: 26,
            ..Lateness::default()
        };
        let over = |connections, callers| Capacity { connections, callers };
        assert_eq!(
            late.said(over(8, 8)),
            "2.6% of requests sent over 10 ms late and 3.8% of requests due never sent: every connection busy waiting on the server: the server is at its limit at this rate, or more --connections help if it serves more at once"
        );
        assert_eq!(
            late.said(over(2, 8)),
            "2.6% of requests sent over 10 ms late and 3.8% of requests due never sent: every caller busy waiting on the server (8 calls in flight over 2 connections): the server is at its limit at this rate, or more --connections help if it serves more at once"
        );
        let spare = Lateness {
            unsent: 0,
            late_for_connections: 0,
            ..late
        };
        assert_eq!(
            spare.said(over(16, 16)),
            "2.6% of requests sent over 10 ms late: connections to spare: volley itself sent late (this machine stalled or was busy)"
        );
        let down = Lateness {
            unreachable: 3,
            ..spare
        };
        assert_eq!(
            down.said(over(8, 8)),
            "2.6% of requests sent over 10 ms late: the server could not be reached (3 calls failed to connect)"
        );
    }

    #[test]
    fn volley_as_the_limit_is_said_in_the_reason() {
        let mut summary = run(1000, 0);
        summary.client_cpu = ClientCpu {
            seconds: 3.9,
            threads: 4,
            busy_share: 0.97,
        };
        let step = judged(&summary, &["p99 < 50ms"], false);
        assert_eq!(step.verdict, "invalid");
        assert_eq!(
            step.reason,
            "volley itself was the limit: its 4 engine threads were busy 97% of the step"
        );
    }

    /// A step at `rate` that achieved it, at 1 ms.
    pub(in crate::sweep) fn step(rate: f64, verdict: &'static str, methods_broken: &[&str]) -> Step {
        Step {
            target: "t".into(),
            rate,
            achieved: rate,
            p50_ms: 1.0,
            p90_ms: 1.0,
            p99_ms: 1.0,
            error_rate: 0.0,
            verdict,
            purpose: Purpose::Search,
            broken: Vec::new(),
            rate_kept: true,
            reason: String::new(),
            methods_broken: methods_broken.iter().map(|m| m.to_string()).collect(),
        }
    }

    #[test]
    fn each_method_knee_is_the_lowest_rate_it_broke_at() {
        let steps = [
            step(100.0, "pass", &[]),
            step(200.0, "fail", &["eth_call"]),
            step(400.0, "fail", &["eth_call", "eth_chainId"]),
            step(150.0, "pass", &[]),
            step(300.0, "invalid", &["eth_chainId"]),
        ];
        let methods = [
            "eth_call".to_string(),
            "eth_chainId".to_string(),
            "web3".to_string(),
        ];
        let knees = knees(&steps, &methods);
        assert_eq!(knees["eth_call"], (Some(150.0), Some(200.0)));
        assert_eq!(
            knees["eth_chainId"],
            (Some(200.0), Some(400.0)),
            "an invalid step says nothing"
        );
        assert_eq!(knees["web3"], (Some(400.0), None));
    }

    #[test]
    fn a_rate_run_again_counts_by_its_latest_step_for_the_knee() {
        let steps = [
            step(100.0, "pass", &[]),
            step(200.0, "fail", &["m"]),
            step(200.0, "pass", &[]),
            step(400.0, "fail", &["m"]),
        ];
        let knees = knees(&steps, &["m".to_string()]);
        assert_eq!(knees["m"], (Some(200.0), Some(400.0)), "the retry held");
    }

    #[test]
    fn the_slo_applies_to_each_method_by_itself() {
        let slo: Vec<Threshold> = ["p99 < 100ms", "eth_call.error_rate < 1%", "web3.p50 < 1ms"]
            .iter()
            .map(|t| t.parse().unwrap())
            .collect();
        let texts = |m: &str| {
            per_method(&slo, m)
                .iter()
                .map(|t| t.text().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            texts("eth_call"),
            ["eth_call.p99 < 100ms", "eth_call.error_rate < 1%"]
        );
        assert_eq!(texts("eth_chainId"), ["eth_chainId.p99 < 100ms"]);
    }

    #[test]
    fn a_server_that_answers_half_or_fails_most_clearly_broke() {
        let mut s = step(1000.0, "fail", &[]);
        assert!(!s.clearly_broke());
        s.achieved = 500.0;
        assert!(s.clearly_broke());
        s.achieved = 900.0;
        s.error_rate = 0.5;
        assert!(s.clearly_broke());
        s.verdict = "invalid";
        assert!(
            !s.clearly_broke(),
            "volley's own limit says nothing of the server"
        );
    }

    #[test]
    fn most_of_a_hundred_calls_failed_is_a_break() {
        let mut total = MethodSummary::new("TOTAL", &Default::default(), 1.0);
        (total.calls, total.errors) = (100, 51);
        assert!(broke_so_far(&total));
        total.errors = 50;
        assert!(!broke_so_far(&total), "half is not most");
        (total.calls, total.errors) = (99, 99);
        assert!(!broke_so_far(&total), "too few to say");
    }
}
