//! `volley compare BASELINE CURRENT`: two result directories side by side,
//! per method, with a change counted as a regression only when it passes
//! its tolerance **and** the runs' own second-by-second spread says it is
//! not noise (a Mann-Whitney rank test over the per-second figures from
//! `latency.hlog`; a two-proportion test for error rates).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

/// A change is told from noise at this significance (two-sided): strict, so
/// that two runs of one server at one load do not cry wolf.
pub const SIGNIFICANCE: f64 = 0.01;

/// The figures compared, and whether more is worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    P50,
    P99,
    Rps,
    ErrorRate,
}

impl Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::Rps => "rps",
            Metric::ErrorRate => "error_rate",
        }
    }

    fn parse(name: &str) -> Option<Metric> {
        [Metric::P50, Metric::P99, Metric::Rps, Metric::ErrorRate]
            .into_iter()
            .find(|m| m.name() == name || (name == "calls_per_s" && *m == Metric::Rps))
    }

    fn higher_is_worse(self) -> bool {
        self != Metric::Rps
    }
}

/// How far each metric may move the wrong way: a share of the baseline, or
/// percentage points for the error rate.
#[derive(Clone, Debug)]
pub struct Tolerances(BTreeMap<Metric, f64>);

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances(BTreeMap::from([
            (Metric::P50, 0.10),
            (Metric::P99, 0.10),
            (Metric::Rps, 0.05),
            (Metric::ErrorRate, 0.001),
        ]))
    }
}

impl std::str::FromStr for Tolerances {
    type Err = String;

    /// `p99=10%,rps=5%,error_rate=0.1pp`: the metrics named replace the
    /// defaults; the others keep theirs.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut tolerances = Tolerances::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected METRIC=LIMIT, e.g. p99=10%"))?;
            let metric = Metric::parse(name.trim())
                .ok_or_else(|| format!("`{name}`: unknown metric (p50, p99, rps, error_rate)"))?;
            let value = value.trim();
            let (number, scale) = match (value.strip_suffix('%'), value.strip_suffix("pp")) {
                (Some(n), _) if metric != Metric::ErrorRate => (n, 0.01),
                (_, Some(n)) if metric == Metric::ErrorRate => (n, 0.01),
                _ => {
                    return Err(format!(
                        "`{part}`: give a percentage ({}=10%) or, for error_rate, percentage points (error_rate=0.1pp)",
                        metric.name()
                    ))
                }
            };
            let number: f64 = number
                .trim()
                .parse()
                .ok()
                .filter(|n: &f64| n.is_finite() && *n >= 0.0)
                .ok_or_else(|| format!("`{part}`: `{number}` is not a number"))?;
            tolerances.0.insert(metric, number * scale);
        }
        Ok(tolerances)
    }
}

/// One result directory, as compare reads it.
pub(crate) type Run = crate::results::ResultDir;

impl Run {
    fn figures(&self, method: &str) -> Option<&Value> {
        let summary = &self.summary["summary"];
        if method == crate::stats::TOTAL_TAG {
            return Some(&summary["total"]);
        }
        summary["methods"]
            .as_array()?
            .iter()
            .find(|m| m["method"] == method)
    }

    /// Each full second's value of `metric` for `method`: the samples the
    /// rank test compares.
    fn per_second(&self, method: &str, metric: Metric) -> Vec<f64> {
        let tag = crate::stats::tag_for(method);
        let Some(seconds) = self.seconds.get(&tag) else {
            return Vec::new();
        };
        seconds
            .iter()
            .filter(|(_, length, _)| *length >= 0.999)
            .map(|(h, length, _)| match metric {
                Metric::P50 => h.value_at_quantile(0.5) as f64 / 1000.0,
                Metric::P99 => h.value_at_quantile(0.99) as f64 / 1000.0,
                Metric::Rps => h.len() as f64 / length,
                Metric::ErrorRate => 0.0,
            })
            .collect()
    }
}

/// One metric of one method, compared.
#[derive(Debug)]
pub struct Row {
    pub method: String,
    pub metric: &'static str,
    pub baseline: f64,
    pub current: f64,
    /// Relative change (error rate: the difference, in points).
    pub change: f64,
    pub tolerance: f64,
    /// The probability of a difference this large between the runs by
    /// chance; `None` when too few seconds to tell.
    pub p_value: Option<f64>,
    pub verdict: &'static str,
}

pub struct Comparison {
    pub rows: Vec<Row>,
    /// Differences between the runs that make a comparison doubtful.
    pub notes: Vec<String>,
    /// Why a run's figures cannot be compared at all: its verdict was
    /// invalid (a server that answered nothing is no baseline, and no
    /// "no regression" either).
    pub invalid: Vec<String>,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == "REGRESSION")
    }

    /// A regression, or a run that cannot be compared: CI must go red.
    pub fn failed(&self) -> bool {
        self.regressed() || !self.invalid.is_empty()
    }
}

/// Fewer seconds than this a side, and the rank test cannot reach its
/// significance (two runs of 4 s: p ≥ 0.029 at best).
const MIN_SECONDS: usize = 5;

/// Why `run` (named `which`) cannot be compared, from its own verdict.
fn invalid_reason(which: &str, run: &Run) -> Option<String> {
    let verdict = &run.summary["summary"]["verdict"];
    (verdict["valid"] == Value::Bool(false)).then(|| {
        let reasons: Vec<&str> = verdict["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        format!("the {which} run's verdict is invalid: {}", reasons.join("; "))
    })
}

/// Two runs on the built-in server are on the same server, whatever free
/// port each was given (`builtin (http://127.0.0.1:PORT)`).
fn same_place(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let place = |v: &serde_json::Value| {
        let text = v.as_str().unwrap_or_default().to_string();
        match text.strip_prefix("builtin (") {
            Some(_) => "builtin".to_string(),
            None => text,
        }
    };
    a == b || (a.is_string() && b.is_string() && place(a) == place(b))
}

pub fn compare(baseline: &Path, current: &Path, tolerances: &Tolerances) -> anyhow::Result<Comparison> {
    let (base, cur) = (Run::read(baseline)?, Run::read(current)?);
    let mut notes = Vec::new();
    for key in ["scenario", "target"] {
        let (a, b) = (&base.summary["meta"][key], &cur.summary["meta"][key]);
        if same_place(a, b) {
            continue;
        }
        {
            notes.push(format!(
                "the runs differ in {key}: {a} against {b}; the comparison may not mean much"
            ));
        }
    }
    let names = |run: &Run| -> Vec<String> {
        run.summary["summary"]["methods"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["method"].as_str().map(str::to_string))
            .collect()
    };
    let (base_methods, cur_methods) = (names(&base), names(&cur));
    for (which, mine, theirs) in [
        ("baseline", &base_methods, &cur_methods),
        ("current", &cur_methods, &base_methods),
    ] {
        let alone: Vec<&str> = mine
            .iter()
            .filter(|m| !theirs.contains(m))
            .map(String::as_str)
            .collect();
        if !alone.is_empty() {
            notes.push(format!(
                "only the {which} run called {}: not compared",
                alone.join(", ")
            ));
        }
    }
    let mut methods: Vec<String> = base_methods
        .into_iter()
        .filter(|m| cur_methods.contains(m))
        .collect();
    methods.push(crate::stats::TOTAL_TAG.to_string());
    let mut rows = Vec::new();
    for method in &methods {
        for (&metric, &tolerance) in &tolerances.0 {
            rows.push(row(&base, &cur, method, metric, tolerance));
        }
    }
    let seconds = |run: &Run| {
        run.summary["summary"]["timeseries"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let shortest = seconds(&base).min(seconds(&cur));
    if shortest < MIN_SECONDS {
        notes.push(format!(
            "a run of {shortest} s is too short to tell a change from noise (at least {MIN_SECONDS} s each): latency and rate changes are called noise"
        ));
        // One long run can carry the rank test below 1% alone: the rule is
        // both sides, as the note says.
        for row in rows.iter_mut().filter(|r| r.metric != "error_rate") {
            if matches!(row.verdict, "REGRESSION" | "improved") {
                row.verdict = "noise";
            }
        }
    }
    let invalid: Vec<String> = [("baseline", &base), ("current", &cur)]
        .into_iter()
        .filter_map(|(which, run)| invalid_reason(which, run))
        .collect();
    if !invalid.is_empty() {
        // Figures that cannot be trusted are not judged row by row.
        rows.iter_mut().for_each(|r| r.verdict = "-");
    }
    Ok(Comparison { rows, notes, invalid })
}

fn row(base: &Run, cur: &Run, method: &str, metric: Metric, tolerance: f64) -> Row {
    let figure = |run: &Run| {
        let figures = run.figures(method).cloned().unwrap_or(Value::Null);
        match metric {
            Metric::P50 => figures["latency"]["p50_ms"].as_f64(),
            Metric::P99 => figures["latency"]["p99_ms"].as_f64(),
            Metric::Rps => figures["calls_per_s"].as_f64(),
            Metric::ErrorRate => figures["error_rate"].as_f64(),
        }
        .unwrap_or(0.0)
    };
    let (baseline, current) = (figure(base), figure(cur));
    let change = match metric {
        Metric::ErrorRate => current - baseline,
        _ if baseline > 0.0 => (current - baseline) / baseline,
        _ => 0.0,
    };
    let p_value = match metric {
        Metric::ErrorRate => {
            let counts = |run: &Run| {
                let f = run.figures(method).cloned().unwrap_or(Value::Null);
                (
                    f["errors"].as_f64().unwrap_or(0.0),
                    f["calls"].as_f64().unwrap_or(0.0),
                )
            };
            two_proportion_p(counts(base), counts(cur))
        }
        _ => rank_test_p(&base.per_second(method, metric), &cur.per_second(method, metric)),
    };
    let worse = if metric.higher_is_worse() { change } else { -change };
    let significant = p_value.is_some_and(|p| p < SIGNIFICANCE);
    let verdict = match (worse > tolerance, worse < -tolerance, significant) {
        (true, _, true) => "REGRESSION",
        (_, true, true) => "improved",
        (true, _, false) | (_, true, false) => "noise",
        _ => "ok",
    };
    Row {
        method: method.to_string(),
        metric: metric.name(),
        baseline,
        current,
        change,
        tolerance,
        p_value,
        verdict,
    }
}

/// Two-sided p-value of the Mann-Whitney U test (normal approximation, ties
/// averaged); `None` with fewer than 3 seconds a side.
pub fn rank_test_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.len() < 3 || b.len() < 3 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|v| (*v, true))
        .chain(b.iter().map(|v| (*v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut rank_sum_a, mut i, mut tie_term) = (0.0, 0, 0.0);
    while i < all.len() {
        let j = (i..all.len())
            .find(|&j| all[j].0 != all[i].0)
            .unwrap_or(all.len());
        let average_rank = (i + j + 1) as f64 / 2.0;
        rank_sum_a += average_rank * all[i..j].iter().filter(|x| x.1).count() as f64;
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let n = n1 + n2;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance <= 0.0 {
        // Every second identical on both sides: no evidence of a change.
        return Some(1.0);
    }
    let z = (u - n1 * n2 / 2.0).abs() / variance.sqrt();
    Some(2.0 * normal_tail(z))
}

/// Two-sided p-value that two error rates (errors, calls) differ.
fn two_proportion_p((e1, n1): (f64, f64), (e2, n2): (f64, f64)) -> Option<f64> {
    if n1 < 1.0 || n2 < 1.0 {
        return None;
    }
    let pooled = (e1 + e2) / (n1 + n2);
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)).sqrt();
    if se == 0.0 {
        return Some(1.0);
    }
    Some(2.0 * normal_tail(((e1 / n1) - (e2 / n2)).abs() / se))
}

/// P(Z > z) for a standard normal Z (Abramowitz and Stegun 7.1.26, error
/// under 1.5e-7: plenty for a 1% threshold).
fn normal_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
}

/// The verdict line every format ends with.
fn result_line(comparison: &Comparison) -> String {
    match (comparison.invalid.is_empty(), comparison.regressed()) {
        (false, _) => format!("result: CANNOT COMPARE: {}", comparison.invalid.join("; ")),
        (true, true) => {
            "result: REGRESSION (a change past its limit that the runs' spread says is not noise)".into()
        }
        (true, false) => "result: no regression".into(),
    }
}

/// A row's figure with its unit: ms, calls/s, or an error rate in percent.
fn figure(r: &Row, value: f64) -> String {
    match r.metric {
        "error_rate" => format!("{:.2}%", value * 100.0),
        "rps" => format!("{value:.1}/s"),
        _ => format!("{value:.3} ms"),
    }
}

/// How a row's change and limit read: percent, or points for error rates.
/// A change that rounds to nothing reads as `+0.0%`, never `-0.0%`.
fn change_and_limit(r: &Row) -> (String, String) {
    let change = if (r.change * 1e4).round() == 0.0 {
        0.0
    } else {
        r.change
    };
    match r.metric {
        "error_rate" => (
            format!("{:+.2}pp", change * 100.0),
            format!("{:.2}pp", r.tolerance * 100.0),
        ),
        _ => (
            format!("{:+.1}%", change * 100.0),
            format!("{:.0}%", r.tolerance * 100.0),
        ),
    }
}

/// `--html`: the table, coloured by verdict, and the spectra overlaid.
pub fn html_page(comparison: &Comparison, base: &Run, cur: &Run) -> String {
    use crate::report::html::{compare_page, CompareRow};
    let rows: Vec<CompareRow> = comparison
        .rows
        .iter()
        .map(|r| {
            let (change, limit) = change_and_limit(r);
            let p = r.p_value.map_or("-".to_string(), |p| format!("{p:.3}"));
            CompareRow {
                cells: vec![
                    r.method.clone(),
                    r.metric.to_string(),
                    figure(r, r.baseline),
                    figure(r, r.current),
                    change,
                    limit,
                    p,
                    r.verdict.to_string(),
                ],
                verdict: r.verdict.to_string(),
            }
        })
        .collect();
    let mut lines: Vec<String> = comparison.notes.iter().map(|n| format!("note: {n}")).collect();
    lines.push(result_line(comparison));
    let head = [
        "method", "metric", "baseline", "current", "change", "limit", "p", "verdict",
    ];
    compare_page(
        &head,
        &rows,
        &lines,
        &base.latencies().spectra,
        &cur.latencies().spectra,
    )
}

/// The comparison as GitHub-flavoured Markdown.
pub fn markdown(comparison: &Comparison) -> String {
    use crate::report::cell;
    let mut out = String::new();
    let mark = if comparison.failed() { "❌" } else { "✅" };
    let _ = writeln!(out, "### volley compare {mark}\n");
    out.push_str("| method | metric | baseline | current | change | limit | p | verdict |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|---|\n");
    for r in &comparison.rows {
        let (change, limit) = change_and_limit(r);
        let p = r.p_value.map_or("-".to_string(), |p| format!("{p:.3}"));
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {change} | {limit} | {p} | {} |",
            cell(&r.method),
            r.metric,
            figure(r, r.baseline),
            figure(r, r.current),
            r.verdict
        );
    }
    for note in &comparison.notes {
        let _ = writeln!(out, "\n> note: {}", cell(note));
    }
    let _ = writeln!(out, "\n**{}**", cell(&result_line(comparison)));
    out
}

/// JUnit XML: each metric of each method a test case; a regression (or a
/// run that cannot be compared) a failure.
pub fn junit(comparison: &Comparison) -> String {
    use crate::report::xml;
    let mut cases = Vec::new();
    for r in &comparison.rows {
        let (change, limit) = change_and_limit(r);
        let failure = (r.verdict == "REGRESSION").then(|| {
            format!(
                "{} {} → {} ({change}, limit {limit})",
                r.metric,
                figure(r, r.baseline),
                figure(r, r.current)
            )
        });
        cases.push((format!("{} {}", r.method, r.metric), failure));
    }
    if !comparison.invalid.is_empty() {
        cases.push((
            "the runs can be compared".into(),
            Some(comparison.invalid.join("; ")),
        ));
    }
    let failures = cases.iter().filter(|(_, f)| f.is_some()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"volley compare\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"compare\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        cases.len()
    );
    for (name, failure) in &cases {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"volley.compare\"",
            xml(name)
        );
        match failure {
            None => out.push_str("/>\n"),
            Some(message) => {
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{0}\" type=\"regression\">{0}</failure>\n    </testcase>",
                    xml(message)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

pub fn render(comparison: &Comparison, baseline: &Path, current: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "baseline {} · current {}\n",
        baseline.display(),
        current.display()
    );
    let _ = writeln!(
        out,
        "{:<24} {:<10} {:>14} {:>14} {:>9} {:>9} {:>8}  verdict",
        "method", "metric", "baseline", "current", "change", "limit", "p"
    );
    for r in &comparison.rows {
        let (change, limit) = change_and_limit(r);
        let p = r.p_value.map_or("-".to_string(), |p| format!("{p:.3}"));
        let _ = writeln!(
            out,
            "{:<24} {:<10} {:>14} {:>14} {:>9} {:>9} {:>8}  {}",
            r.method,
            r.metric,
            figure(r, r.baseline),
            figure(r, r.current),
            change,
            limit,
            p,
            r.verdict
        );
    }
    for note in &comparison.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(out, "\n{}", result_line(comparison));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_parse_and_refuse_by_name() {
        let t: Tolerances = "p99=20%, error_rate=0.5pp".parse().unwrap();
        assert_eq!(t.0[&Metric::P99], 0.2);
        assert!((t.0[&Metric::ErrorRate] - 0.005).abs() < 1e-12);
        assert_eq!(t.0[&Metric::Rps], 0.05, "the others keep their defaults");
        for bad in ["p98=10%", "p99=10", "error_rate=1%", "rps=x%", "p99"] {
            assert!(bad.parse::<Tolerances>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_built_in_server_on_two_ports_is_one_place() {
        let json = serde_json::Value::from;
        assert!(same_place(
            &json("builtin (http://127.0.0.1:38969)"),
            &json("builtin (http://127.0.0.1:41001)")
        ));
        assert!(!same_place(
            &json("http://127.0.0.1:38969"),
            &json("http://127.0.0.1:41001")
        ));
        assert!(!same_place(
            &json("builtin (http://127.0.0.1:1)"),
            &json("http://127.0.0.1:1")
        ));
    }

    #[test]
    fn the_rank_test_tells_a_shift_from_noise() {
        let base = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.3, 10.1];
        let same = [10.1, 9.9, 10.0, 10.2, 9.9, 10.1, 10.0, 9.8];
        let slower = [13.0, 13.2, 12.9, 13.1, 13.0, 12.8, 13.3, 13.1];
        assert!(rank_test_p(&base, &same).unwrap() > 0.3);
        assert!(rank_test_p(&base, &slower).unwrap() < 0.001);
        assert_eq!(rank_test_p(&base[..2], &slower), None, "too few seconds to tell");
        assert_eq!(rank_test_p(&[1.0; 4], &[1.0; 4]), Some(1.0));
    }

    #[test]
    fn error_rates_differ_only_past_chance() {
        assert!(two_proportion_p((10.0, 10_000.0), (12.0, 10_000.0)).unwrap() > 0.5);
        assert!(two_proportion_p((10.0, 10_000.0), (100.0, 10_000.0)).unwrap() < 1e-6);
        assert!((normal_tail(1.959_964) - 0.025).abs() < 1e-4);
    }
}
