//! Judging [`Threshold`]s on a run's figures: at the end on the
//! [`RunSummary`], while it goes for `abort_on_fail`, and before it starts
//! against the scenario's methods and stages.

use std::cmp::Ordering;
use std::fmt;

use super::{Limit, Metric, Op, Scope, SoFar, Standing, Stat, Threshold, ThresholdResult};
use crate::stats::{LatencySummary, MethodSummary, OutcomeKind, RunSummary};

impl Stat {
    fn of(self, latency: &LatencySummary) -> f64 {
        match self {
            Stat::Mean => latency.mean_ms,
            Stat::P50 => latency.p50_ms,
            Stat::P90 => latency.p90_ms,
            Stat::P99 => latency.p99_ms,
            Stat::P999 => latency.p999_ms,
            Stat::Max => latency.max_ms,
        }
    }
}

impl Op {
    fn holds(self, measured_against_limit: Ordering) -> bool {
        let o = measured_against_limit;
        match self {
            Op::Lt => o == Ordering::Less,
            Op::Le => o != Ordering::Greater,
            Op::Gt => o == Ordering::Greater,
            Op::Ge => o != Ordering::Less,
            Op::Eq => o == Ordering::Equal,
            Op::Ne => o != Ordering::Equal,
        }
    }
}

impl Limit {
    /// The unit of a measured value compared with this limit.
    pub(super) fn unit(self) -> &'static str {
        match self {
            Limit::Nanos(_) => "ms",
            Limit::PerSecond(_) => "calls/s",
            Limit::Count(_) => "calls",
            Limit::Percent(_) => "%",
            Limit::Fraction(_) => "fraction",
        }
    }
}

impl fmt::Display for ThresholdResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed { "pass" } else { "FAIL" };
        match &self.note {
            Some(note) => write!(f, "{verdict}  {}  ({}: {note})", self.expression, self.shown),
            None => write!(f, "{verdict}  {}  ({})", self.expression, self.shown),
        }
    }
}

impl Threshold {
    /// Judges the threshold on a finished run. A figure the run does not
    /// have fails: a limit on a method that made no calls is not kept by
    /// making none.
    pub fn evaluate(&self, summary: &RunSummary) -> ThresholdResult {
        // Calls a stop cut unanswered are in no figure: whatever their
        // latency and outcome, a limit that holds on the rest is not
        // passed on calls it did not see.
        let cut = summary.in_flight_at_end;
        let measured = match self.metric {
            Metric::Unsent => self.unsent_in(summary),
            _ => self.figures_in(summary).and_then(|m| self.measure(m)),
        };
        match measured {
            Ok(measured) => {
                let holds = self.op.holds(self.compare(measured));
                ThresholdResult {
                    expression: self.text.clone(),
                    measured: Some(measured),
                    unit: self.limit.unit(),
                    passed: holds && cut == 0,
                    shown: self.show(measured),
                    note: (holds && cut > 0).then(|| {
                        format!("held on the calls seen, but a stop cut {cut} calls unanswered: not passed")
                    }),
                }
            }
            Err(note) => ThresholdResult {
                expression: self.text.clone(),
                measured: None,
                unit: self.limit.unit(),
                passed: false,
                shown: "not measured".into(),
                note: Some(note),
            },
        }
    }

    /// Where the threshold stands on a run still going, for the live
    /// views: its value so far, passing or failing, or pending where
    /// `evaluate_so_far` judges nothing.
    pub fn so_far(&self, methods: &[MethodSummary], total: &MethodSummary) -> SoFar {
        let pending = |shown: String| SoFar {
            expression: self.text.clone(),
            shown,
            standing: Standing::Pending,
        };
        if let Some(result) = self.evaluate_so_far(methods, total) {
            let standing = if result.passed {
                Standing::Pass
            } else {
                Standing::Fail
            };
            return SoFar {
                expression: result.expression,
                shown: result.shown,
                standing,
            };
        }
        let figures = match &self.scope {
            Scope::Total => Some(total),
            Scope::Method(name) => methods.iter().find(|m| &m.method == name),
            Scope::Stage(_) => return pending("judged at the end".into()),
        };
        match figures.map(|m| self.measure(m)) {
            Some(Ok(measured)) => pending(format!("{} so far, may yet pass", self.show(measured))),
            Some(Err(why)) => pending(why),
            None => pending(format!("{} made no calls yet", self.scope_name())),
        }
    }

    /// Judges the threshold on a run still going (its figures so far), for
    /// `abort_on_fail`; `None` for a stage's, which only the end can judge,
    /// and for a count that may yet pass as the run goes on.
    pub fn evaluate_so_far(
        &self,
        methods: &[MethodSummary],
        total: &MethodSummary,
    ) -> Option<ThresholdResult> {
        let figures = match &self.scope {
            Scope::Total => total,
            Scope::Method(name) => methods.iter().find(|m| &m.method == name)?,
            Scope::Stage(_) => return None,
        };
        let measured = self.measure(figures).ok()?;
        let passed = self.op.holds(self.compare(measured));
        // A count only grows over a run: one still short of `> 500` (or of
        // `== 500`, or at `!= 0`) may yet pass, so it stops nothing.
        if !passed && matches!(self.limit, Limit::Count(_)) {
            let ahead = self.compare(measured) == Ordering::Greater;
            let may_yet = match self.op {
                Op::Gt | Op::Ge | Op::Ne => true,
                Op::Eq => !ahead,
                Op::Lt | Op::Le => false,
            };
            if may_yet {
                return None;
            }
        }
        Some(ThresholdResult {
            expression: self.text.clone(),
            measured: Some(measured),
            unit: self.limit.unit(),
            passed,
            shown: self.show(measured),
            note: None,
        })
    }

    /// Requests due and never sent: a count, or a share of those due.
    fn unsent_in(&self, summary: &RunSummary) -> Result<f64, String> {
        let Some(schedule) = &summary.schedule else {
            return Err("the closed model has no schedule: no request is due, so none goes unsent".into());
        };
        let unsent = schedule.unsent;
        let due = schedule.start_delay.timed.saturating_add(unsent);
        Ok(match self.limit {
            Limit::Percent(_) if due > 0 => unsent as f64 * 100.0 / due as f64,
            Limit::Fraction(_) if due > 0 => unsent as f64 / due as f64,
            Limit::Percent(_) | Limit::Fraction(_) => return Err("no request was due".into()),
            _ => unsent as f64,
        })
    }

    fn figures_in<'a>(&self, summary: &'a RunSummary) -> Result<&'a MethodSummary, String> {
        match &self.scope {
            Scope::Total => Ok(&summary.total),
            Scope::Method(name) => summary
                .methods
                .iter()
                .find(|m| &m.method == name)
                .ok_or_else(|| format!("`{name}` is not among the run's methods")),
            Scope::Stage(number) => summary
                .stages
                .iter()
                .find(|s| s.number() == *number)
                .map(|s| &s.total)
                .ok_or_else(|| match summary.stages.len() {
                    0 => "the run had no stages".to_string(),
                    n => format!("the run had {n} stages, not {number}"),
                }),
        }
    }

    fn scope_name(&self) -> String {
        match &self.scope {
            Scope::Total => "the run".into(),
            Scope::Method(name) => format!("`{name}`"),
            Scope::Stage(number) => format!("stage {number}"),
        }
    }

    /// The figure, in the unit of the limit.
    fn measure(&self, m: &MethodSummary) -> Result<f64, String> {
        // Calls and rate are honestly zero without calls; every other
        // figure would pass vacuously.
        if m.calls == 0 && !matches!(self.metric, Metric::Calls | Metric::Rate) {
            let none = match &self.scope {
                // A flow's row counts flows, those that ended.
                Scope::Method(name) if name.starts_with("flow:") => "had no flow that ended",
                _ => "made no calls",
            };
            return Err(format!("{} {none}", self.scope_name()));
        }
        let count = match self.metric {
            Metric::Latency(stat) => {
                // Connect failures and notifications record no latency
                // (stats::MethodStats::record).
                if m.outcome(OutcomeKind::Connect) == m.calls {
                    return Err(format!(
                        "none of {}'s {} calls reached the server (all `connect`), so it has no latency",
                        self.scope_name(),
                        m.calls
                    ));
                }
                if m.latency.timed == 0 {
                    return Err(format!(
                        "{}'s {} calls have no latency (notifications: nothing answers them)",
                        self.scope_name(),
                        m.calls
                    ));
                }
                return Ok(stat.of(&m.latency));
            }
            Metric::Rate => return Ok(m.rps),
            Metric::ErrorRate if matches!(self.limit, Limit::Fraction(_)) => return Ok(m.error_rate),
            Metric::Calls => m.calls,
            Metric::Ok => m.ok,
            Metric::Errors | Metric::ErrorRate => m.errors,
            Metric::Outcome(kind) => m.outcome(kind),
            Metric::RpcErrorCode(code) => m.rpc_error_codes.get(&code).copied().unwrap_or(0),
            Metric::HttpStatus(status) => m.http_statuses.get(&status).copied().unwrap_or(0),
            Metric::ProtocolRule(rule) => m.protocol_errors.get(rule.name()).copied().unwrap_or(0),
            // Only the schedule knows them: judged at the end (`unsent_in`).
            Metric::Unsent => return Err("requests never sent are judged at the end".into()),
        };
        Ok(match self.limit {
            Limit::Percent(_) => count as f64 * 100.0 / m.calls as f64,
            Limit::Fraction(_) => count as f64 / m.calls as f64,
            _ => count as f64,
        })
    }

    fn compare(&self, measured: f64) -> Ordering {
        match self.limit {
            Limit::Nanos(limit) => ((measured * 1e6).round() as u64).cmp(&limit),
            Limit::Count(limit) => (measured as u64).cmp(&limit),
            Limit::PerSecond(limit) | Limit::Percent(limit) | Limit::Fraction(limit) => {
                measured.partial_cmp(&limit).unwrap_or(Ordering::Greater)
            }
        }
    }

    fn show(&self, measured: f64) -> String {
        match self.limit {
            Limit::Nanos(_) => format!("{} ms", significant(measured)),
            Limit::PerSecond(_) => format!("{} calls/s", significant(measured)),
            Limit::Count(_) if self.metric == Metric::Unsent => {
                format!("{} never sent", crate::stats::count(measured as u64, "request"))
            }
            Limit::Count(_) if measured == 1.0 => "1 call".into(),
            Limit::Count(_) => format!("{measured} calls"),
            Limit::Percent(_) => format!("{}%", significant(measured)),
            Limit::Fraction(_) => format!("{}%", significant(measured * 100.0)),
        }
    }
}

/// Four significant digits, trailing zeros dropped: `212.4`, `0.37`, `1043`.
fn significant(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).clamp(0, 6) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Judges every threshold, in the order given.
pub fn evaluate_all(thresholds: &[Threshold], summary: &RunSummary) -> Vec<ThresholdResult> {
    thresholds.iter().map(|t| t.evaluate(summary)).collect()
}

/// Refuses, before the run, thresholds on a method not in the mix or a
/// stage the load does not have, naming each and what would be right.
/// `(stages, open)`: the load's stages, and whether it is the open model
/// (only a schedule leaves requests unsent).
pub fn check_methods(
    thresholds: &[Threshold],
    methods: &[&str],
    (stages, open): (usize, bool),
) -> Result<(), String> {
    let problems: Vec<String> = thresholds
        .iter()
        .filter_map(|t| match &t.scope {
            _ if t.metric == Metric::Unsent && !open => Some(format!(
                "threshold `{}`: the closed model has no schedule, so no request goes unsent; `unsent` needs a rate (--rate, or `rate` in [load])",
                t.text
            )),
            Scope::Method(name) if !methods.contains(&name.as_str()) => Some(format!(
                "threshold `{}`: no method `{name}` in this run; its methods are {}",
                t.text,
                methods
                    .iter()
                    .map(|m| format!("`{m}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Scope::Stage(number) if *number > stages => Some(match stages {
                0 => format!("threshold `{}`: the load has no stages", t.text),
                1 => format!("threshold `{}`: the load has 1 stage, `stage[1]`", t.text),
                n => format!(
                    "threshold `{}`: the load has {n} stages, `stage[1]` to `stage[{n}]`",
                    t.text
                ),
            }),
            _ => None,
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests;
