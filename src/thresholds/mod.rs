//! Thresholds: pass/fail limits on a finished run's figures.
//!
//! Written `[SCOPE.]FIGURE[KEY] OP LIMIT`: `p99 < 200ms`, `eth_call.p50 < 20ms`,
//! `error_rate < 0.1%`, `stage[2].rps > 1000`, `rpc_error[-32005] < 1%`. They
//! are parsed (and their methods and stages checked) before anything is sent,
//! so a typo costs nothing, and judged on the [`RunSummary`](crate::stats::RunSummary) at the end.

mod judge;
mod parse;

use serde::{Deserialize, Serialize};

use crate::stats::{OutcomeKind, ProtocolKind};

pub use judge::{check_methods, evaluate_all};
pub use parse::parse;

/// What a threshold looks at: the whole run, one method, or one stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Total,
    Method(String),
    /// Numbered from 1, as written and as every report shows stages.
    Stage(usize),
}

/// One of the latency figures of [`LatencySummary`](crate::stats::LatencySummary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    Mean,
    P50,
    P90,
    P99,
    P999,
    Max,
}

/// The figure a threshold limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// From the intended send time (the headline latency), in ms.
    Latency(Stat),
    /// Calls a second.
    Rate,
    Calls,
    Ok,
    Errors,
    /// Errors over calls.
    ErrorRate,
    /// Calls with this outcome (never `ok`: that is [`Metric::Ok`]).
    Outcome(OutcomeKind),
    RpcErrorCode(i64),
    HttpStatus(u16),
    ProtocolRule(ProtocolKind),
    /// Requests due in the open model and never sent (every connection
    /// busy): the run's, no method's. A count, or a share of those due.
    Unsent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// The limit, kept in the form it was written in: a share written `0.1%`
/// is compared as `errors × 100 / calls` against 0.1, and one written
/// `0.001` as `errors / calls` against 0.001, so a run exactly at its limit
/// is not tipped over by the rounding of a conversion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// A latency in whole nanoseconds: the histograms count whole
    /// microseconds, so comparing integers keeps `max == 1.5ms` exact.
    Nanos(u64),
    PerSecond(f64),
    Count(u64),
    /// A share of the scope's calls, in percent.
    Percent(f64),
    /// A share of the scope's calls, from 0 to 1.
    Fraction(f64),
}

/// A parsed threshold; it serializes as the text it was written as.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    text: String,
    scope: Scope,
    metric: Metric,
    op: Op,
    limit: Limit,
}

/// A threshold judged on a run, for the table and `summary.json` (and
/// read back from it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    pub expression: String,
    /// In `unit`; `None` when the figure does not exist in this run (a
    /// method that made no calls, a stage never reached): a failure.
    #[serde(deserialize_with = "crate::stats::read::required")]
    pub measured: Option<f64>,
    /// `ms`, `calls/s`, `calls`, `%` or `fraction`.
    #[serde(deserialize_with = "unit_named")]
    pub unit: crate::stats::read::Name,
    pub passed: bool,
    /// The measured value as people read it: `212.4 ms`, `0.37%`.
    pub shown: String,
    /// Why nothing was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where a threshold stands while the run goes: judged on the figures so
/// far, or waiting for what only more of the run can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Pass,
    Fail,
    /// Not judged yet: a stage's (judged at the end), a figure with no
    /// calls yet, or a count that may still pass.
    Pending,
}

impl Standing {
    pub fn name(self) -> &'static str {
        match self {
            Standing::Pass => "pass",
            Standing::Fail => "fail",
            Standing::Pending => "pending",
        }
    }
}

/// A threshold on the figures so far, for the live views.
#[derive(Clone, Debug, PartialEq)]
pub struct SoFar {
    pub expression: String,
    /// The value so far as people read it (`212.4 ms`), or why there is none.
    pub shown: String,
    pub standing: Standing,
}

impl SoFar {
    /// A finished run's judgement, as the live views show it at the end.
    pub fn of(result: &ThresholdResult) -> SoFar {
        SoFar {
            expression: result.expression.clone(),
            shown: result.shown.clone(),
            standing: if result.passed {
                Standing::Pass
            } else {
                Standing::Fail
            },
        }
    }
}

/// A unit read back, as [`Limit::unit`] names it.
fn unit_named<'de, D: serde::Deserializer<'de>>(from: D) -> Result<&'static str, D::Error> {
    let units = [
        Limit::Nanos(0),
        Limit::PerSecond(0.0),
        Limit::Count(0),
        Limit::Percent(0.0),
        Limit::Fraction(0.0),
    ]
    .map(Limit::unit);
    crate::stats::read::one_of(from, &units, "unit")
}

impl Threshold {
    /// The expression as written (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    pub fn metric(&self) -> Metric {
        self.metric
    }

    pub fn op(&self) -> Op {
        self.op
    }

    pub fn limit(&self) -> Limit {
        self.limit
    }
}

/// The thresholds in a list written one after another, split at `;`.
#[cfg(test)]
fn each(list: &str) -> impl Iterator<Item = &str> {
    list.split(';').map(str::trim).filter(|t| !t.is_empty())
}
