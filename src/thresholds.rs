//! Thresholds: pass/fail limits on a finished run's figures.
//!
//! Written `[SCOPE.]FIGURE[KEY] OP LIMIT`: `p99 < 200ms`, `eth_call.p50 < 20ms`,
//! `error_rate < 0.1%`, `stage[2].rps > 1000`, `rpc_error[-32005] < 1%`. They
//! are parsed (and their methods and stages checked) before anything is sent,
//! so a typo costs nothing, and judged on the [`RunSummary`] at the end.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rpc::{OutcomeKind, ProtocolKind};
use crate::stats::{LatencySummary, MethodSummary, RunSummary};

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

/// A threshold judged on a run, for the table and `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThresholdResult {
    pub expression: String,
    /// In `unit`; `None` when the figure does not exist in this run (a
    /// method that made no calls, a stage never reached): a failure.
    pub measured: Option<f64>,
    /// `ms`, `calls/s`, `calls`, `%` or `fraction`.
    pub unit: &'static str,
    pub passed: bool,
    /// The measured value as people read it: `212.4 ms`, `0.37%`.
    pub shown: String,
    /// Why nothing was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
    if scope.is_empty() && head.contains('.') {
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
            "" if number <= 1.0 => Ok(Limit::Fraction(number)),
            "" => Err(format!(
                "error_rate is a fraction from 0 to 1 or a percent: did you mean `{number}%`?"
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
