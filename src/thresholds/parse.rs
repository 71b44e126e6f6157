//! Text → [`Threshold`]: `[SCOPE.]FIGURE[KEY] OP LIMIT`, refused with a
//! message that quotes the expression and says what would be right.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Limit, Metric, Op, Scope, Stat, Threshold};
use crate::stats::{OutcomeKind, ProtocolKind};

const OPERATOR_CHARS: &[char] = &['<', '>', '=', '!'];
const FIGURES: &str =
    "p50 p90 p99 p999 max mean (latency), rps or calls_per_s, calls ok errors, error_rate, \
     rpc_error invalid_json protocol timeout connect io http_status assertion, \
     rpc_error[CODE], http_status[STATUS], protocol[RULE], unsent";

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
    if metric == Metric::Unsent && scope != Scope::Total {
        return Err(refuse(
            "`unsent` is the run's: a request never sent was no method's call and in no stage's figures; write it alone, as in `unsent == 0`".into(),
        ));
    }
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
        return Metric::named(figure).ok_or_else(|| unknown_figure(figure));
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
        _ if Metric::named(figure).is_some() => Err(format!(
            "`{figure}` takes no [key]: only rpc_error[CODE], http_status[STATUS] and protocol[RULE] do"
        )),
        _ => Err(unknown_figure(figure)),
    }
}

/// Every figure written without a `[key]` by each of its spellings, the
/// outcomes' counts aside (their names are [`OutcomeKind::name`]).
const SPELLINGS: [(&str, Metric); 14] = [
    ("p50", Metric::Latency(Stat::P50)),
    ("p90", Metric::Latency(Stat::P90)),
    ("p99", Metric::Latency(Stat::P99)),
    ("p999", Metric::Latency(Stat::P999)),
    // As the table heads its column.
    ("p99.9", Metric::Latency(Stat::P999)),
    ("max", Metric::Latency(Stat::Max)),
    ("mean", Metric::Latency(Stat::Mean)),
    ("rps", Metric::Rate),
    // As `summary.json` names the field.
    ("calls_per_s", Metric::Rate),
    ("calls", Metric::Calls),
    ("ok", Metric::Ok),
    ("errors", Metric::Errors),
    ("error_rate", Metric::ErrorRate),
    ("unsent", Metric::Unsent),
];

impl Metric {
    /// The figure a name without a `[key]` means. The one reading of a
    /// figure's name: `volley compare`'s limits read theirs here too, so the
    /// two cannot come to accept different spellings.
    pub fn named(name: &str) -> Option<Metric> {
        match SPELLINGS.iter().find(|(spelling, _)| *spelling == name) {
            Some((_, metric)) => Some(*metric),
            None => OutcomeKind::ALL
                .into_iter()
                .find(|kind| *kind != OutcomeKind::Ok && kind.name() == name)
                .map(Metric::Outcome),
        }
    }

    /// The name the figure is written by, without its `[key]`: `rps`, not
    /// `calls_per_s`; `rpc_error` for `rpc_error[-32005]`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Latency(Stat::P50) => "p50",
            Metric::Latency(Stat::P90) => "p90",
            Metric::Latency(Stat::P99) => "p99",
            Metric::Latency(Stat::P999) => "p999",
            Metric::Latency(Stat::Max) => "max",
            Metric::Latency(Stat::Mean) => "mean",
            Metric::Rate => "rps",
            Metric::Calls => "calls",
            Metric::Ok => "ok",
            Metric::Errors => "errors",
            Metric::ErrorRate => "error_rate",
            Metric::Outcome(kind) => kind.name(),
            Metric::RpcErrorCode(_) => "rpc_error",
            Metric::HttpStatus(_) => "http_status",
            Metric::ProtocolRule(_) => "protocol",
            Metric::Unsent => "unsent",
        }
    }
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
    use super::super::each;
    use super::*;

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
    fn every_figure_named_in_the_errors_is_read_and_goes_by_its_name() {
        let names = FIGURES.split([' ', ',']).filter(|n| !n.is_empty());
        let plain = names.filter(|n| !n.contains(['[', '(']) && *n != "or");
        let spellings = SPELLINGS.iter().map(|(spelling, _)| *spelling);
        for spelling in plain.chain(spellings) {
            let metric = Metric::named(spelling).unwrap_or_else(|| panic!("`{spelling}` is not read"));
            assert_eq!(Metric::named(metric.name()), Some(metric), "{spelling}");
        }
        assert_eq!(Metric::named("calls_per_s").map(Metric::name), Some("rps"));
        assert_eq!(Metric::named("ok"), Some(Metric::Ok));
        assert_eq!(
            Metric::named("timeout"),
            Some(Metric::Outcome(OutcomeKind::Timeout))
        );
        assert_eq!(Metric::named("rpc_error[-32005]"), None);
        let keyed = parse("stage[1].rpc_error[-32005] <= 5").unwrap();
        assert_eq!(keyed.metric().name(), "rpc_error");
    }

    #[test]
    fn thresholds_are_read_and_written_as_their_text() {
        let written: Vec<Threshold> =
            serde_json::from_str(r#"["p99 < 200ms", " eth_call.p50 < 20ms "]"#).unwrap();
        assert_eq!(written[1].scope(), &Scope::Method("eth_call".into()));
        let back = serde_json::to_string(&written).unwrap();
        assert_eq!(back, r#"["p99 < 200ms","eth_call.p50 < 20ms"]"#);
        let bad = serde_json::from_str::<Vec<Threshold>>(r#"["p99 < 200"]"#).unwrap_err();
        assert!(bad.to_string().contains("a latency needs a unit"), "{bad}");
        assert_eq!("rps > 1".parse::<Threshold>().unwrap().to_string(), "rps > 1");
    }
}
