//! The comparison as people and CI read it: the table, Markdown for a
//! step summary, JUnit, and an HTML page with both runs' spectra.

use std::fmt::Write as _;
use std::path::Path;

use super::{limits, Change, ComparedFigure, Comparison, Evidence, Row, SavedRun};

/// The verdict line every format ends with.
pub(super) fn result_line(comparison: &Comparison) -> String {
    if !comparison.invalid.is_empty() {
        return format!("result: CANNOT COMPARE: {}", comparison.invalid.join("; "));
    }
    if comparison.regressed() {
        return "result: REGRESSION (a change past its limit, and beyond what runs of the baseline differ by where several tell it)"
            .into();
    }
    if comparison.inconclusive() {
        let past = comparison
            .rows
            .iter()
            .filter(|r| r.verdict == Change::Inconclusive)
            .count();
        if past == 0 {
            return format!(
                "result: INCONCLUSIVE: the runs are too short to judge any change, so none passes; what would settle it: {}",
                comparison.what_would_settle_it()
            );
        }
        return format!(
            "result: INCONCLUSIVE: {past} change{} past {} limit{} that the runs cannot tell from chance; what would settle it: {}",
            if past == 1 { "" } else { "s" },
            if past == 1 { "its" } else { "their" },
            if past == 1 { "" } else { "s" },
            comparison.what_would_settle_it()
        );
    }
    "result: no regression".into()
}

/// A row's figure with its unit: ms, calls/s, or an error rate in percent.
fn figure(r: &Row, value: f64) -> String {
    match r.metric {
        ComparedFigure::ErrorRate => format!("{:.2}%", value * 100.0),
        ComparedFigure::Rps => format!("{value:.1}/s"),
        _ => format!("{value:.3} ms"),
    }
}

/// What tells the row's change from chance, as a cell: the range a
/// further baseline run falls in, a p-value, or why there is none.
fn evidence(r: &Row) -> String {
    let plain = |v: f64| match r.metric {
        ComparedFigure::ErrorRate => format!("{:.2}", v * 100.0),
        ComparedFigure::Rps => format!("{v:.1}"),
        _ => format!("{v:.3}"),
    };
    match r.evidence {
        Evidence::LimitOnly => "limit only".into(),
        Evidence::TooShort => "too short".into(),
        Evidence::P(None) => "-".into(),
        Evidence::P(Some(p)) => format!("p {p:.3}"),
        Evidence::Interval(low, high) => format!("{}..{}", plain(low), plain(high)),
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
    let limit = limits::shown(r.metric, &r.limit);
    match r.metric {
        ComparedFigure::ErrorRate => (format!("{:+.2}pp", change * 100.0), limit),
        _ => (format!("{:+.1}%", change * 100.0), limit),
    }
}

/// `--html`: the table, coloured by verdict, and the spectra overlaid.
pub fn html_page(comparison: &Comparison, base: &SavedRun, cur: &SavedRun) -> String {
    use crate::report::html::{compare_page, CompareRow};
    let rows: Vec<CompareRow> = comparison
        .rows
        .iter()
        .map(|r| {
            let (change, limit) = change_and_limit(r);
            let p = evidence(r);
            CompareRow {
                cells: vec![
                    r.method.clone(),
                    r.metric.name().to_string(),
                    figure(r, r.baseline),
                    figure(r, r.current),
                    change,
                    limit,
                    p,
                    r.verdict.name().to_string(),
                ],
                verdict: r.verdict.name().to_string(),
            }
        })
        .collect();
    let mut lines: Vec<String> = comparison.notes.iter().map(|n| format!("note: {n}")).collect();
    lines.push(result_line(comparison));
    let head = [
        "method", "metric", "baseline", "current", "change", "limit", "expected", "verdict",
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
    let mark = if comparison.failed(false) { "❌" } else { "✅" };
    let _ = writeln!(out, "### volley compare {mark}\n");
    out.push_str("| method | metric | baseline | current | change | limit | expected | verdict |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|---|\n");
    for r in &comparison.rows {
        let (change, limit) = change_and_limit(r);
        let p = evidence(r);
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {change} | {limit} | {p} | {} |",
            cell(&r.method),
            r.metric.name(),
            figure(r, r.baseline),
            figure(r, r.current),
            r.verdict.name()
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
    let mut cases = Vec::new();
    for r in &comparison.rows {
        let (change, limit) = change_and_limit(r);
        let failure = failure_kind(r.verdict).map(|kind| {
            let message = format!(
                "{} {} {} → {} ({change}, limit {limit})",
                r.verdict.name(),
                r.metric.name(),
                figure(r, r.baseline),
                figure(r, r.current)
            );
            (kind, message)
        });
        cases.push((format!("{} {}", r.method, r.metric.name()), failure));
    }
    if !comparison.invalid.is_empty() {
        cases.push((
            "the runs can be compared".into(),
            Some((OTHER_FAILURE, comparison.invalid.join("; "))),
        ));
    } else if comparison.too_short() {
        let message = format!("too short: {}", comparison.what_would_settle_it());
        cases.push((
            "the runs are long enough to judge".into(),
            Some((OTHER_FAILURE, message)),
        ));
    }
    junit_of("compare", &cases)
}

/// A JUnit case: its name and, when it failed, the failure's kind and
/// message.
pub(super) type Case = (String, Option<(&'static str, String)>);

/// The kind of failure runs that cannot be compared, or a threshold, are.
pub(super) const OTHER_FAILURE: &str = "volley";

/// A row's failure kind, where its verdict fails CI.
pub(super) fn failure_kind(verdict: Change) -> Option<&'static str> {
    match verdict {
        Change::Regression => Some("regression"),
        Change::Inconclusive => Some("inconclusive"),
        _ => None,
    }
}

/// JUnit XML of one suite, `volley NAME`: each case a name and, when it
/// failed, its kind (a regression, an inconclusive change, or another
/// failure) and message. Compare's and the rounds' files.
pub(super) fn junit_of(name: &str, cases: &[Case]) -> String {
    use crate::report::xml;
    let failures = cases.iter().filter(|(_, f)| f.is_some()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"volley {name}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        cases.len()
    );
    for (case, failure) in cases {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"volley.{name}\"",
            xml(case)
        );
        match failure {
            None => out.push_str("/>\n"),
            Some((kind, message)) => {
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{0}\" type=\"{kind}\">{0}</failure>\n    </testcase>",
                    xml(message)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

pub fn render(comparison: &Comparison, baselines: &[std::path::PathBuf], current: &Path) -> String {
    let mut out = String::new();
    let shown: Vec<String> = baselines.iter().map(|b| b.display().to_string()).collect();
    let _ = writeln!(
        out,
        "baseline {} · current {}\n",
        shown.join(", "),
        current.display()
    );
    let _ = writeln!(
        out,
        "{:<24} {:<10} {:>14} {:>14} {:>9} {:>12} {:>17}  verdict",
        "method", "metric", "baseline", "current", "change", "limit", "expected"
    );
    for r in &comparison.rows {
        let (change, limit) = change_and_limit(r);
        let p = evidence(r);
        let _ = writeln!(
            out,
            "{:<24} {:<10} {:>14} {:>14} {:>9} {:>12} {:>17}  {}",
            r.method,
            r.metric.name(),
            figure(r, r.baseline),
            figure(r, r.current),
            change,
            limit,
            p,
            r.verdict.name()
        );
    }
    for note in &comparison.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(out, "\n{}", result_line(comparison));
    out
}
