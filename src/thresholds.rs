//! Thresholds: pass/fail limits on a finished run's figures.
//!
//! Written `[SCOPE.]FIGURE[KEY] OP LIMIT`: `p99 < 200ms`, `eth_call.p50 < 20ms`,
//! `error_rate < 0.1%`, `stage[2].rps > 1000`, `rpc_error[-32005] < 1%`. They
//! are parsed (and their methods and stages checked) before anything is sent,
//! so a typo costs nothing, and judged on the [`RunSummary`] at the end.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::stats::{LatencySummary, MethodSummary, RunSummary};
use crate::stats::{OutcomeKind, ProtocolKind};

/// What a threshold looks at: the whole run, one method, or one stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Total,
    Method(String),
    /// Numbered from 1, as written and as every report shows stages.
    Stage(usize),
}

/// One of the latency figures of [`LatencySummary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    Mean,
    P50,
    P90,
    P99,
    P999,
    Max,
}

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

impl Limit {
    /// The unit of a measured value compared with this limit.
    fn unit(self) -> &'static str {
        match self {
            Limit::Nanos(_) => "ms",
            Limit::PerSecond(_) => "calls/s",
            Limit::Count(_) => "calls",
            Limit::Percent(_) => "%",
            Limit::Fraction(_) => "fraction",
        }
    }
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

/// A unit read back, as [`Limit::unit`] names it.
fn unit_named<'de, D: Deserializer<'de>>(from: D) -> Result<&'static str, D::Error> {
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

impl fmt::Display for ThresholdResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed { "pass" } else { "FAIL" };
        match &self.note {
            Some(note) => write!(f, "{verdict}  {}  ({}: {note})", self.expression, self.shown),
            None => write!(f, "{verdict}  {}  ({})", self.expression, self.shown),
        }
    }
}

const OPERATOR_CHARS: &[char] = &['<', '>', '=', '!'];
const FIGURES: &str =
    "p50 p90 p99 p999 max mean (latency), rps or calls_per_s, calls ok errors, error_rate, \
     rpc_error invalid_json protocol timeout connect io http_status assertion, \
     rpc_error[CODE], http_status[STATUS], protocol[RULE]";

/// Parses `[SCOPE.]FIGURE[KEY] OP LIMIT`. The error quotes the expression,
/// says what is wrong and what would be right.
pub fn parse(text: &str) -> Result<Threshold, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("an empty threshold: write one as `p99 < 200ms`".into());
    }
    let refuse = |problem: String| format!("threshold `{text}`: {problem}");
    let (subject, op, value) = split_operator(text).map_err(refuse)?;
    let (scope, figure, key) = split_subject(subject).map_err(refuse)?;
    let scope = parse_scope(scope).map_err(refuse)?;
    let metric = parse_metric(figure, key).map_err(refuse)?;
    let limit = parse_limit(metric, value).map_err(refuse)?;
    Ok(Threshold {
        text: text.to_string(),
        scope,
        metric,
        op,
        limit,
    })
}

/// Splits at the comparison, the first run of `<>=!`: no figure, method
/// name or limit holds one of those.
fn split_operator(text: &str) -> Result<(&str, Op, &str), String> {
    let Some(at) = text.find(OPERATOR_CHARS) else {
        return Err(
            "no comparison: put one of < <= > >= == != between the figure and its limit, as in `p99 < 200ms`"
                .into(),
        );
    };
    let rest = &text[at..];
    let length = rest.find(|c| !OPERATOR_CHARS.contains(&c)).unwrap_or(rest.len());
    let written = &rest[..length];
    let op = match written {
        "<" => Op::Lt,
        "<=" => Op::Le,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        "==" => Op::Eq,
        "!=" => Op::Ne,
        _ => {
            let hint = match written {
                "=" => " (`=` alone compares nothing: write `==`)",
                "=<" => " (write `<=`)",
                "=>" => " (write `>=`)",
                "<>" => " (write `!=`)",
                _ => "",
            };
            return Err(format!(
                "`{written}` is not a comparison: use one of < <= > >= == !={hint}"
            ));
        }
    };
    let (subject, value) = (text[..at].trim(), rest[length..].trim());
    if subject.is_empty() {
        return Err(format!(
            "nothing before `{written}`: name a figure, as in `p99 {written} 200ms`"
        ));
    }
    if value.is_empty() {
        return Err(format!(
            "nothing after `{written}`: give a limit, as in `p99 {written} 200ms`"
        ));
    }
    Ok((subject, op, value))
}

/// Splits `SCOPE.FIGURE[KEY]` into its three parts. The key comes off first
/// (`stage[2].rpc_error[-32005]`), then the scope at the last `.`, since
/// method names may hold dots of their own (`rpc.discover.p99`).
fn split_subject(subject: &str) -> Result<(&str, &str, Option<&str>), String> {
    let (head, key) = match subject.strip_suffix(']').and_then(|s| s.rsplit_once('[')) {
        Some((head, key)) => (head, Some(key.trim())),
        None => (subject, None),
    };
    // `p99.9`, as the table heads its column, holds a dot of its own.
    let (scope, figure) = if head == "p99.9" {
        ("", head)
    } else if let Some(scope) = head.strip_suffix(".p99.9") {
        (scope, "p99.9")
    } else {
        head.rsplit_once('.').unwrap_or(("", head))
    };
    if figure.is_empty() {
        return Err(format!(
            "no figure after `{scope}.`: name one, as in `{scope}.p99`"
        ));
    }
    if scope.is_empty() && head.len() > figure.len() {
        return Err(format!(
            "nothing before `.{figure}`: name a method or `stage[N]`, or drop the `.` for the whole run"
        ));
    }
    Ok((scope, figure, key))
}

fn parse_scope(scope: &str) -> Result<Scope, String> {
    if scope.is_empty() {
        return Ok(Scope::Total);
    }
    let Some(rest) = scope.strip_prefix("stage[") else {
        return Ok(Scope::Method(scope.to_string()));
    };
    let Some((number, after)) = rest.split_once(']') else {
        return Err(format!(
            "`{scope}` is missing its `]`: a stage is written `stage[2]`"
        ));
    };
    if !after.is_empty() {
        // StageSummary keeps one total per stage, not one per method.
        return Err(format!("a stage's figures are kept for all its methods together: write `{}` or a method's over the whole run, as in `eth_call.p99`", &scope[..scope.len() - after.len()]));
    }
    match number.trim().parse::<usize>() {
        Ok(0) => Err("stages are numbered from 1: the first is `stage[1]`".into()),
        Ok(n) => Ok(Scope::Stage(n)),
        Err(_) => Err(format!(
            "`{number}` is not a stage number: stages are numbered from 1, as in `stage[2].p99`"
        )),
    }
}

fn parse_metric(figure: &str, key: Option<&str>) -> Result<Metric, String> {
    let Some(key) = key else {
        return plain_metric(figure).ok_or_else(|| unknown_figure(figure));
    };
    match figure {
        "rpc_error" => key.parse().map(Metric::RpcErrorCode).map_err(|_| {
            format!("`{key}` is not an error code: a code is a whole number, as in `rpc_error[-32005]`")
        }),
        "http_status" => parse_status(key).map(Metric::HttpStatus),
        "protocol" => ProtocolKind::ALL
            .into_iter()
            .find(|rule| rule.name() == key)
            .map(Metric::ProtocolRule)
            .ok_or_else(|| {
                let rules: Vec<&str> = ProtocolKind::ALL.iter().map(|r| r.name()).collect();
                format!("`{key}` is not a protocol rule: one of {}", rules.join(" "))
            }),
        _ if plain_metric(figure).is_some() => Err(format!(
            "`{figure}` takes no [key]: only rpc_error[CODE], http_status[STATUS] and protocol[RULE] do"
        )),
        _ => Err(unknown_figure(figure)),
    }
}

fn plain_metric(figure: &str) -> Option<Metric> {
    Some(match figure {
        "p50" => Metric::Latency(Stat::P50),
        "p90" => Metric::Latency(Stat::P90),
        "p99" => Metric::Latency(Stat::P99),
        "p999" | "p99.9" => Metric::Latency(Stat::P999),
        "max" => Metric::Latency(Stat::Max),
        "mean" => Metric::Latency(Stat::Mean),
        "rps" | "calls_per_s" => Metric::Rate,
        "calls" => Metric::Calls,
        "ok" => Metric::Ok,
        "errors" => Metric::Errors,
        "error_rate" => Metric::ErrorRate,
        _ => Metric::Outcome(
            OutcomeKind::ALL
                .into_iter()
                .find(|kind| *kind != OutcomeKind::Ok && kind.name() == figure)?,
        ),
    })
}

fn unknown_figure(figure: &str) -> String {
    format!("unknown figure `{figure}`: one of {FIGURES}; a method's figures are written `eth_call.p99`, a stage's `stage[2].p99`")
}

fn parse_status(key: &str) -> Result<u16, String> {
    match key.parse::<u16>() {
        Ok(status) if (200..300).contains(&status) => Err(format!(
            "a {status} is a success, never an `http_status` outcome (that is a non-2xx answer without a JSON-RPC body): limit a non-2xx status, as in `http_status[429]`"
        )),
        Ok(status) if (100..600).contains(&status) => Ok(status),
        _ => Err(format!("`{key}` is not an HTTP status: one from 100 to 599, as in `http_status[429]`")),
    }
}

/// The limit, checked against what the figure measures: a latency needs a
/// unit, a rate or a count is a plain number, a share ends with `%`.
fn parse_limit(metric: Metric, value: &str) -> Result<Limit, String> {
    let (number, unit) = split_number(value)?;
    match metric {
        Metric::Latency(_) => latency_limit(number, unit),
        Metric::Rate if matches!(unit, "" | "/s") => Ok(Limit::PerSecond(number)),
        Metric::Rate => Err(format!(
            "rps is calls a second, a plain number, as in `rps > 1000`, not `{value}`"
        )),
        Metric::ErrorRate => match unit {
            "%" => percent(number),
            // `error_rate < 1` reads as 1% to many and passes every run as a
            // fraction: a bare share of 1 or more is refused as ambiguous.
            "" if number < 1.0 => Ok(Limit::Fraction(number)),
            "" => Err(format!(
                "error_rate `{number}` is ambiguous: a bare number is a fraction below 1 (`0.01`); for a percent write `{number}%`"
            )),
            _ => Err(format!("`{unit}` is not a unit here: error_rate is a percent, as in `0.1%`, or a fraction, as in `0.001`")),
        },
        Metric::Calls if unit == "%" => {
            Err("`calls` counts calls, it is not a share of them: give a whole number".into())
        }
        _ => match unit {
            "%" => percent(number),
            "" if number.fract() == 0.0 => Ok(Limit::Count(number as u64)),
            "" => Err(format!("a count is a whole number, not `{number}` (or a share of the calls, as in `{number}%`)")),
            _ => Err(format!("`{unit}` is not a unit here: give a count, as in `10`, or a share of the calls, as in `1%`")),
        },
    }
}

fn latency_limit(number: f64, unit: &str) -> Result<Limit, String> {
    let nanos_per_unit = match unit {
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" => return Err(format!("a latency needs a unit: `{number}ms` (us, ms or s)")),
        "%" => return Err("a latency is a time, not a percent: give it with a unit, as in `200ms`".into()),
        _ => {
            return Err(format!(
                "`{unit}` is not a unit of time: a latency takes us, ms or s, as in `200ms`"
            ))
        }
    };
    Ok(Limit::Nanos((number * nanos_per_unit).round() as u64))
}

fn percent(number: f64) -> Result<Limit, String> {
    if number > 100.0 {
        return Err(format!(
            "`{number}%` is more than all the calls: a share is from 0% to 100%"
        ));
    }
    Ok(Limit::Percent(number))
}

/// Splits `200ms` into 200 and `ms`. Only digits and `.` make the number:
/// no sign (a limit is never negative) and no `inf` or `NaN`.
fn split_number(value: &str) -> Result<(f64, &str), String> {
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    match value[..end].parse::<f64>() {
        Ok(number) => Ok((number, value[end..].trim())),
        Err(_) if value.starts_with('-') => Err(format!("`{value}` is negative: a limit is 0 or more")),
        Err(_) => Err(format!(
            "`{value}` is not a limit: give a number and its unit, as in `200ms`, `1000`, `0.1%`"
        )),
    }
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

    /// Judges the threshold on a finished run. A figure the run does not
    /// have fails: a limit on a method that made no calls is not kept by
    /// making none.
    pub fn evaluate(&self, summary: &RunSummary) -> ThresholdResult {
        match self.figures_in(summary).and_then(|m| self.measure(m)) {
            Ok(measured) => ThresholdResult {
                expression: self.text.clone(),
                measured: Some(measured),
                unit: self.limit.unit(),
                passed: self.op.holds(self.compare(measured)),
                shown: self.show(measured),
                note: None,
            },
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
            return Err(format!("{} made no calls", self.scope_name()));
        }
        let count = match self.metric {
            Metric::Latency(stat) => {
                // Connect failures record no latency (stats::MethodStats::record).
                if m.outcome(OutcomeKind::Connect) == m.calls {
                    return Err(format!(
                        "none of {}'s {} calls reached the server (all `connect`), so it has no latency",
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
pub fn check_methods(thresholds: &[Threshold], methods: &[&str], stages: usize) -> Result<(), String> {
    let problems: Vec<String> = thresholds
        .iter()
        .filter_map(|t| match &t.scope {
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

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        parse(text)
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Threshold {
    fn serialize<S: Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(&self.text)
    }
}

/// From its text, so a scenario's list of thresholds is refused at load
/// time with the same message as a `--threshold` flag.
impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
        let text = String::deserialize(from)?;
        parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stats::Outcome;
    use crate::stats::{Recorder, StageSummary};

    const METHODS: [&str; 4] = ["eth_call", "tools/call", "rpc.discover", "eth_getLogs"];
    const SECONDS: f64 = 10.0;

    /// A two-stage run of 10 s, made as the engine makes one: recorders
    /// per stage, merged into the run's, summed up by `MethodSummary::new`.
    /// Stage 1 (5 s): `eth_call`, 1000 calls: 990 ok at 1..=100 ms, 5
    /// rpc_error -32005, 3 http_status 429, 1 id_mismatch, 1 timeout at 2 s.
    /// Stage 2 (5 s): `tools/call`, 100 ok at exactly 1.5 ms (exact in the
    /// histograms below 2048 µs); `rpc.discover`, 10 connect failures.
    /// `eth_getLogs` is in the mix and never called.
    fn summary() -> RunSummary {
        let ms = Duration::from_millis;
        let mut first = Recorder::new(METHODS.len());
        let eth_call = &mut first.methods[0];
        for i in 0..990 {
            eth_call.record(Outcome::Ok, ms(1 + i % 100), ms(1), 100);
        }
        for _ in 0..5 {
            eth_call.record(Outcome::RpcError(-32005), ms(3), ms(3), 80);
        }
        for _ in 0..3 {
            eth_call.record(Outcome::HttpStatus(429), ms(1), ms(1), 20);
        }
        let id_mismatch = Outcome::Protocol(ProtocolKind::IdMismatch);
        eth_call.record(id_mismatch, ms(4), ms(4), 50);
        eth_call.record(Outcome::Timeout, ms(2000), ms(2000), 0);
        let mut second = Recorder::new(METHODS.len());
        for _ in 0..100 {
            let exact = Duration::from_micros(1500);
            second.methods[1].record(Outcome::Ok, exact, exact, 60);
        }
        for _ in 0..10 {
            second.methods[2].record(Outcome::Connect, ms(5), ms(5), 0);
        }
        let stages = [(&first, 0.0, 5.0), (&second, 5.0, 10.0)]
            .iter()
            .enumerate()
            .map(|(stage, (recorder, start_s, end_s))| StageSummary {
                stage,
                start_s: *start_s,
                end_s: *end_s,
                total: MethodSummary::new("TOTAL", &recorder.total(), end_s - start_s),
            })
            .collect();
        let mut run = first.clone();
        run.merge(&second);
        RunSummary {
            requests: run.calls(),
            stages,
            ..RunSummary::of_methods(
                (METHODS.iter().zip(&run.methods))
                    .map(|(name, stats)| MethodSummary::new(name, stats, SECONDS))
                    .collect(),
                MethodSummary::new("TOTAL", &run.total(), SECONDS),
                SECONDS,
            )
        }
    }

    fn judge(text: &str, summary: &RunSummary) -> ThresholdResult {
        parse(text)
            .unwrap_or_else(|e| panic!("{text} should parse: {e}"))
            .evaluate(summary)
    }

    /// The thresholds in a list written one after another, split at `;`.
    fn each(list: &str) -> impl Iterator<Item = &str> {
        list.split(';').map(str::trim).filter(|t| !t.is_empty())
    }

    /// Asserts that each of `passing` passes and each of `failing` fails,
    /// measured (a failure for want of a figure is tested apart).
    fn passes_and_fails(summary: &RunSummary, passing: &str, failing: &str) {
        for text in each(passing) {
            let result = judge(text, summary);
            assert!(result.passed, "{text} should pass: {result}");
        }
        for text in each(failing) {
            let result = judge(text, summary);
            assert!(!result.passed, "{text} should fail: {result}");
            assert!(result.measured.is_some(), "{text}: {result}");
        }
    }

    #[test]
    fn every_form_parses_into_its_scope_figure_and_limit() {
        // The expression, then what it means: scope, figure, comparison, limit.
        let cases = "
            p99 < 200ms => Total Latency(P99) Lt Nanos(200000000);
            eth_call.p50 <= 20ms => Method(\"eth_call\") Latency(P50) Le Nanos(20000000);
            p90>=1.5s => Total Latency(P90) Ge Nanos(1500000000);
            p999 < 250us => Total Latency(P999) Lt Nanos(250000);
            p99.9 < 250 µs => Total Latency(P999) Lt Nanos(250000);
            eth_call.p99.9 < 1ms => Method(\"eth_call\") Latency(P999) Lt Nanos(1000000);
            max != 0ms => Total Latency(Max) Ne Nanos(0);
            mean > .5ms => Total Latency(Mean) Gt Nanos(500000);
            rps > 1000 => Total Rate Gt PerSecond(1000.0);
            calls_per_s > 99.5/s => Total Rate Gt PerSecond(99.5);
            calls == 1110 => Total Calls Eq Count(1110);
            ok > 99% => Total Ok Gt Percent(99.0);
            errors < 20 => Total Errors Lt Count(20);
            error_rate < 0.1% => Total ErrorRate Lt Percent(0.1);
            error_rate < 0.001 => Total ErrorRate Lt Fraction(0.001);
            protocol == 0 => Total Outcome(Protocol) Eq Count(0);
            rpc_error < 1% => Total Outcome(RpcError) Lt Percent(1.0);
            invalid_json == 0 => Total Outcome(InvalidJson) Eq Count(0);
            timeout == 0 => Total Outcome(Timeout) Eq Count(0);
            connect == 0 => Total Outcome(Connect) Eq Count(0);
            io == 0 => Total Outcome(Io) Eq Count(0);
            http_status < 5 => Total Outcome(HttpStatus) Lt Count(5);
            assertion == 0 => Total Outcome(Assertion) Eq Count(0);
            rpc_error[-32005] < 1% => Total RpcErrorCode(-32005) Lt Percent(1.0);
            http_status[429] == 0 => Total HttpStatus(429) Eq Count(0);
            protocol[id_mismatch] == 0 => Total ProtocolRule(IdMismatch) Eq Count(0);
            tools/call.timeout == 0 => Method(\"tools/call\") Outcome(Timeout) Eq Count(0);
            rpc.discover.connect < 5 => Method(\"rpc.discover\") Outcome(Connect) Lt Count(5);
            stage[2].rps > 10 => Stage(2) Rate Gt PerSecond(10.0);
            stage[1].rpc_error[-32005] <= 5 => Stage(1) RpcErrorCode(-32005) Le Count(5)";
        for case in each(cases) {
            let (text, meaning) = case.split_once(" => ").unwrap();
            let parsed = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let parts = (parsed.scope(), parsed.metric(), parsed.op(), parsed.limit());
            assert_eq!(
                format!("{:?} {:?} {:?} {:?}", parts.0, parts.1, parts.2, parts.3),
                meaning
            );
            assert_eq!(parsed.text(), text);
        }
    }

    #[test]
    fn each_comparison_passes_on_one_side_and_fails_on_the_other() {
        let s = summary();
        // eth_call made 1000 calls with 10 errors.
        passes_and_fails(
            &s,
            "eth_call.errors < 11; eth_call.errors <= 10; eth_call.errors > 9;
             eth_call.errors >= 10; eth_call.errors == 10; eth_call.errors != 9",
            "eth_call.errors < 10; eth_call.errors <= 9; eth_call.errors > 10;
             eth_call.errors >= 11; eth_call.errors == 9; eth_call.errors != 10",
        );
    }

    #[test]
    fn latency_is_judged_in_ms_from_the_intended_send_time() {
        let s = summary();
        let total = &s.total.latency;
        // 1.5 ms is exact in the histograms: every unit lands on it.
        passes_and_fails(
            &s,
            "tools/call.p50 == 1.5ms; tools/call.p99 == 1500us; tools/call.max == 0.0015s;
             tools/call.mean <= 1.5ms; tools/call.p90 >= 1500µs; tools/call.p999 < 2ms;
             p99 < 200ms; p50 > 20ms; max >= 1.9s; p999 < 3s",
            "tools/call.p50 < 1.5ms; tools/call.max > 1500us; p99 < 50ms; max < 1s",
        );
        let p99 = judge("p99 < 200ms", &s);
        assert_eq!((p99.measured, p99.unit), (Some(total.p99_ms), "ms"));
        // A figure written back at its own value holds `==` exactly.
        for (figure, value) in [
            ("max", total.max_ms),
            ("mean", total.mean_ms),
            ("p90", total.p90_ms),
        ] {
            let result = judge(&format!("{figure} == {value}ms"), &s);
            assert!(result.passed, "{result}");
        }
        assert_eq!(judge("tools/call.p99 < 2ms", &s).shown, "1.5 ms");
    }

    #[test]
    fn rate_is_calls_a_second_of_the_scope() {
        let s = summary();
        // 1110 calls in 10 s; 1000 of them eth_call; stage 2 had 110 in 5 s.
        passes_and_fails(
            &s,
            "rps == 111; calls_per_s > 100; eth_call.rps >= 100; stage[2].rps == 22;
             stage[1].rps > 199.9/s",
            "rps > 1000; eth_call.calls_per_s < 100; stage[2].rps != 22",
        );
        assert_eq!(judge("rps > 1000", &s).shown, "111 calls/s");
    }

    #[test]
    fn counts_and_their_shares_of_the_calls() {
        let s = summary();
        passes_and_fails(
            &s,
            "calls == 1110; eth_call.calls == 1000; ok == 1090; eth_call.ok >= 99%; errors == 20;
             protocol == 1; protocol <= 0.1%; eth_call.timeout == 1; rpc_error == 5;
             http_status == 3; invalid_json == 0; io == 0; assertion == 0; connect == 10;
             rpc.discover.connect == 100%; eth_call.rpc_error == 0.5%",
            "calls < 1000; ok == 100%; protocol == 0; eth_call.protocol < 0.1%; connect == 0;
             eth_call.rpc_error > 0.5%",
        );
        let protocol = judge("protocol == 0", &s);
        assert_eq!(
            (protocol.measured, protocol.shown.as_str()),
            (Some(1.0), "1 call")
        );
        assert_eq!(judge("errors < 5", &s).shown, "20 calls");
    }

    #[test]
    fn a_run_still_going_stops_only_on_a_count_that_can_no_longer_pass() {
        let s = summary();
        let so_far = |text: &str| parse(text).unwrap().evaluate_so_far(&s.methods, &s.total);
        // 1,110 calls and 20 errors so far.
        for may_yet_pass in ["calls > 5000", "calls >= 5000", "errors == 30", "protocol != 1"] {
            assert_eq!(so_far(may_yet_pass), None, "{may_yet_pass}");
        }
        for past_saving in ["errors < 5", "errors <= 19", "errors == 10"] {
            assert_eq!(
                so_far(past_saving).map(|r| r.passed),
                Some(false),
                "{past_saving}"
            );
        }
        // Shares and latencies are judged as they stand; stages at the end.
        assert_eq!(so_far("error_rate < 0.1%").map(|r| r.passed), Some(false));
        assert_eq!(so_far("calls > 10").map(|r| r.passed), Some(true));
        assert_eq!(so_far("stage[1].p99 < 1ms"), None);
    }

    #[test]
    fn error_rate_holds_exactly_at_its_limit_as_a_percent_or_a_fraction() {
        let s = summary();
        // eth_call: 10 errors in 1000 calls, exactly 1%.
        passes_and_fails(
            &s,
            "eth_call.error_rate <= 1%; eth_call.error_rate == 1%; eth_call.error_rate >= 0.01;
             eth_call.error_rate == 0.01; tools/call.error_rate == 0; stage[2].error_rate < 10%",
            "eth_call.error_rate < 1%; eth_call.error_rate > 0.01; error_rate < 0.1%",
        );
        let rate = judge("eth_call.error_rate < 0.5%", &s);
        assert_eq!(
            (rate.measured, rate.unit, rate.shown.as_str()),
            (Some(1.0), "%", "1%")
        );
        let fraction = judge("eth_call.error_rate < 0.005", &s);
        assert_eq!(fraction.measured, Some(s.methods[0].error_rate));
        assert_eq!((fraction.unit, fraction.shown.as_str()), ("fraction", "1%"));
    }

    #[test]
    fn error_codes_statuses_and_rules_are_counted_apart() {
        let s = summary();
        passes_and_fails(
            &s,
            "rpc_error[-32005] == 5; eth_call.rpc_error[-32005] == 0.5%; rpc_error[-32000] == 0;
             http_status[429] == 3; eth_call.http_status[429] <= 0.3%; http_status[503] == 0;
             protocol[id_mismatch] == 1; protocol[wrong_version] == 0;
             stage[1].rpc_error[-32005] == 5; stage[2].http_status[429] == 0",
            "rpc_error[-32005] < 1; eth_call.rpc_error[-32005] < 0.5%; http_status[429] == 0;
             protocol[id_mismatch] == 0",
        );
        let share = judge("tools/call.http_status[429] < 1%", &s);
        assert_eq!((share.measured, share.shown.as_str()), (Some(0.0), "0%"));
        assert_eq!(judge("eth_call.http_status[429] < 1%", &s).shown, "0.3%");
    }

    #[test]
    fn method_names_keep_their_dots_and_slashes() {
        passes_and_fails(
            &summary(),
            "tools/call.calls == 100; rpc.discover.calls == 10; rpc.discover.errors == 100%",
            "tools/call.ok < 100; rpc.discover.ok > 0",
        );
    }

    #[test]
    fn a_figure_the_run_does_not_have_fails_and_says_why() {
        let s = summary();
        let cases = [
            ("eth_getLogs.p99 < 1s", "`eth_getLogs` made no calls"),
            ("eth_getLogs.errors == 0", "`eth_getLogs` made no calls"),
            ("eth_getLogs.error_rate < 1%", "`eth_getLogs` made no calls"),
            (
                "net_version.p99 < 1s",
                "`net_version` is not among the run's methods",
            ),
            ("stage[3].p99 < 1s", "the run had 2 stages, not 3"),
            (
                "rpc.discover.p50 < 1s",
                "none of `rpc.discover`'s 10 calls reached the server",
            ),
        ];
        for (text, note) in cases {
            let result = judge(text, &s);
            assert_eq!((result.passed, result.measured), (false, None), "{result}");
            assert_eq!(result.shown, "not measured");
            let written = result.note.clone().unwrap_or_default();
            assert!(written.contains(note), "{text}: {written}");
            assert!(result
                .to_string()
                .starts_with(&format!("FAIL  {text}  (not measured: ")));
        }
        // Calls and rate are honestly zero without calls.
        passes_and_fails(
            &s,
            "eth_getLogs.calls == 0; eth_getLogs.rps == 0",
            "eth_getLogs.calls > 0",
        );
        let mut unstaged = s.clone();
        unstaged.stages.clear();
        let note = judge("stage[1].rps > 1", &unstaged).note;
        assert_eq!(note.as_deref(), Some("the run had no stages"));
    }

    #[test]
    fn malformed_thresholds_are_refused_naming_them_and_what_would_be_right() {
        // The expression, then parts of its error, `|` between them.
        let cases = [
            (
                "p99 < 200",
                "threshold `p99 < 200`: a latency needs a unit: `200ms` (us, ms or s)",
            ),
            ("", "an empty threshold | `p99 < 200ms`"),
            ("   ", "an empty threshold"),
            (
                "p98 < 200ms",
                "threshold `p98 < 200ms`: unknown figure `p98` | p50 p90 p99",
            ),
            ("eth_call < 20ms", "unknown figure `eth_call` | `eth_call.p99`"),
            ("p99 = 200ms", "`=` is not a comparison | write `==`"),
            ("p99 => 200ms", "`=>` is not a comparison | write `>=`"),
            ("p99 <> 200ms", "`<>` is not a comparison | write `!=`"),
            ("p99 200ms", "no comparison | < <= > >= == !="),
            ("p99 <", "nothing after `<`"),
            ("< 200ms", "nothing before `<`"),
            (
                "rpc_error[abc] < 1%",
                "`rpc_error[abc] < 1%`: `abc` is not an error code | [-32005]",
            ),
            ("rpc_error[] < 1%", "`` is not an error code"),
            ("http_status[abc] == 0", "`abc` is not an HTTP status"),
            ("http_status[200] == 0", "a 200 is a success | http_status[429]"),
            ("http_status[42] == 0", "`42` is not an HTTP status"),
            (
                "protocol[bogus] == 0",
                "`bogus` is not a protocol rule | id_mismatch",
            ),
            ("p99[1] < 2ms", "`p99` takes no [key]"),
            ("p99 < 1%", "a latency is a time, not a percent"),
            ("p99 < 200mss", "`mss` is not a unit of time"),
            ("p99 < -1ms", "is negative"),
            ("p99 < fast", "`fast` is not a limit"),
            ("rps > 10%", "rps is calls a second"),
            ("rps > 10ms", "rps is calls a second"),
            ("calls > 10%", "`calls` counts calls"),
            ("errors < 2.5", "a count is a whole number"),
            ("errors < 5ms", "`ms` is not a unit here"),
            ("error_rate < 5", "for a percent write `5%`"),
            ("error_rate < 1", "`1` is ambiguous | for a percent write `1%`"),
            ("eth_call.error_rate <= 1.0", "is ambiguous"),
            ("error_rate < 1ms", "error_rate is a percent"),
            ("ok > 101%", "more than all the calls"),
            ("stage[0].p99 < 1s", "numbered from 1"),
            ("stage[two].p99 < 1s", "`two` is not a stage number"),
            ("stage[2.p99 < 1s", "missing its `]`"),
            (
                "stage[2].eth_call.p99 < 1s",
                "kept for all its methods together | `stage[2]`",
            ),
            ("eth_call. < 1s", "no figure after `eth_call.`"),
            (".p99 < 1s", "nothing before `.p99`"),
        ];
        for (text, parts) in cases {
            let error = parse(text).expect_err(text);
            for part in parts.split(" | ") {
                assert!(error.contains(part), "{text:?}: {error:?} lacks {part:?}");
            }
        }
    }

    #[test]
    fn unknown_methods_and_stages_are_refused_before_the_run() {
        let all = |texts: &str| -> Vec<Threshold> { each(texts).map(|t| parse(t).unwrap()).collect() };
        let known = all("p99 < 1s; eth_call.p50 < 20ms; rpc.discover.ok > 0; stage[2].rps > 1");
        assert_eq!(check_methods(&known, &METHODS, 2), Ok(()));
        let error = check_methods(&all("eth_cal.p99 < 1s"), &METHODS, 0).unwrap_err();
        assert!(
            error.contains("threshold `eth_cal.p99 < 1s`: no method `eth_cal`"),
            "{error}"
        );
        assert!(
            error.contains("`eth_call`, `tools/call`, `rpc.discover`, `eth_getLogs`"),
            "{error}"
        );
        let error = check_methods(&all("stage[3].p99 < 1s"), &METHODS, 2).unwrap_err();
        assert!(
            error.contains("the load has 2 stages, `stage[1]` to `stage[2]`"),
            "{error}"
        );
        let error = check_methods(&all("stage[1].p99 < 1s"), &METHODS, 0).unwrap_err();
        assert!(error.contains("the load has no stages"), "{error}");
        // Every problem at once, so one fix-and-retry is enough.
        let error = check_methods(&all("a.p99 < 1s; p99 < 1s; b.ok > 0"), &METHODS, 0).unwrap_err();
        assert_eq!(error.lines().count(), 2, "{error}");
    }

    #[test]
    fn results_and_thresholds_serialize_for_summary_json() {
        let s = summary();
        let thresholds = [
            parse("p99 < 200ms").unwrap(),
            parse("eth_getLogs.p99 < 1s").unwrap(),
        ];
        let json = serde_json::to_value(evaluate_all(&thresholds, &s)).unwrap();
        assert_eq!(json[0]["expression"], "p99 < 200ms");
        assert_eq!(json[0]["measured"], s.total.latency.p99_ms);
        assert_eq!(
            (&json[0]["unit"], &json[0]["passed"]),
            (&"ms".into(), &true.into())
        );
        assert!(json[0].get("note").is_none());
        assert_eq!(json[1]["measured"], serde_json::Value::Null);
        assert_eq!(json[1]["passed"], false);
        assert_eq!(json[1]["note"], "`eth_getLogs` made no calls");

        let written: Vec<Threshold> =
            serde_json::from_str(r#"["p99 < 200ms", " eth_call.p50 < 20ms "]"#).unwrap();
        assert_eq!(written[1].scope(), &Scope::Method("eth_call".into()));
        let back = serde_json::to_string(&written).unwrap();
        assert_eq!(back, r#"["p99 < 200ms","eth_call.p50 < 20ms"]"#);
        let bad = serde_json::from_str::<Vec<Threshold>>(r#"["p99 < 200"]"#).unwrap_err();
        assert!(bad.to_string().contains("a latency needs a unit"), "{bad}");
        assert_eq!("rps > 1".parse::<Threshold>().unwrap().to_string(), "rps > 1");
    }

    #[test]
    fn measured_values_are_shown_with_four_significant_digits() {
        let cases = [
            (212.4, "212.4"),
            (0.37, "0.37"),
            (1043.21, "1043"),
            (99.0071, "99.01"),
            (0.0, "0"),
        ];
        for (value, shown) in cases {
            assert_eq!(significant(value), shown);
        }
    }
}
