//! The formats CI systems already read: a GitHub-flavoured Markdown summary,
//! JUnit XML (each threshold and the verdict a test case), and the JSON of
//! github-action-benchmark (latencies smaller-is-better, rates bigger).

use std::fmt::Write;

use serde::Serialize;

use super::RunReport;
use crate::stats::MethodSummary;

/// A Markdown summary for `$GITHUB_STEP_SUMMARY` or a pull request.
pub fn markdown(report: &RunReport) -> String {
    let (meta, summary) = (&report.meta, &report.summary);
    let mut out = String::new();
    let passed = report.thresholds_passed() && summary.verdict.valid;
    let _ = writeln!(
        out,
        "### volley: {} {}\n",
        cell(&meta.scenario),
        if passed { "✅" } else { "❌" }
    );
    let _ = writeln!(
        out,
        "`{}` · {} · {} measured\n",
        cell(&meta.target),
        meta.transport_shown(),
        super::measured_time(summary.measured_seconds)
    );
    out.push_str("| method | calls | errors | calls/s | p50 ms | p90 ms | p99 ms | max ms |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for method in summary.methods.iter().chain(std::iter::once(&summary.total)) {
        let _ = writeln!(out, "{}", markdown_row(method));
    }
    let verdict = &summary.verdict;
    let did = crate::stats::server_did(&summary.total).map_or(String::new(), |d| format!(" · {}", cell(&d)));
    let _ = match verdict.valid {
        true => writeln!(out, "\n**verdict:** valid{did}"),
        false => writeln!(
            out,
            "\n**verdict:** invalid: {}{did}",
            cell(&verdict.reasons.join("; "))
        ),
    };
    if !report.thresholds.is_empty() {
        out.push_str("\n| threshold | measured | |\n|---|---:|---|\n");
        for t in &report.thresholds {
            let mark = if t.passed { "✅ pass" } else { "❌ FAIL" };
            let _ = writeln!(out, "| `{}` | {} | {mark} |", cell(&t.expression), cell(&t.shown));
        }
    }
    for warning in &report.summary.warnings {
        let _ = writeln!(out, "\n> ⚠️ {}", cell(&warning.message));
    }
    out
}

fn markdown_row(m: &MethodSummary) -> String {
    let name = if m.method == crate::stats::TOTAL_TAG {
        "**TOTAL**".to_string()
    } else {
        format!("`{}`", cell(&m.method))
    };
    format!(
        "| {name} | {} | {} | {:.1} | {:.3} | {:.3} | {:.3} | {:.3} |",
        m.calls, m.errors, m.rps, m.latency.p50_ms, m.latency.p90_ms, m.latency.p99_ms, m.latency.max_ms
    )
}

/// Text safe inside a Markdown table cell: a pipe or a line break from a
/// method name or a server's reason would break the table.
pub(crate) fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// JUnit XML: the verdict and each threshold a test case, so every CI shows
/// them as tests. Suites as the common schema (Jenkins, GitLab) has them.
pub fn junit(report: &RunReport) -> String {
    junit_of(&[(report.meta.scenario.as_str(), report)])
}

/// JUnit XML of several runs (the targets of a comparison): a suite each,
/// under its name.
pub fn junit_of(runs: &[(&str, &RunReport)]) -> String {
    let suites: Vec<(&str, &RunReport, Vec<Case>)> = (runs.iter())
        .map(|(name, report)| (*name, *report, cases(report)))
        .collect();
    let count = |cases: &[Case]| (cases.len(), cases.iter().filter(|c| c.failure.is_some()).count());
    let (tests, failures) = (suites.iter()).fold((0, 0), |(t, f), (_, _, cases)| {
        let (tests, failures) = count(cases);
        (t + tests, f + failures)
    });
    let time: f64 = runs.iter().map(|(_, r)| r.summary.measured_seconds).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"volley\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">"
    );
    for (name, report, cases) in &suites {
        let seconds = report.summary.measured_seconds;
        let (tests, failures) = count(cases);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{seconds:.3}\" timestamp=\"{}\">",
            xml(name),
            xml(&report.meta.started_at)
        );
        for case in cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{seconds:.3}\"",
                xml(&case.name),
                case.classname,
            );
            match &case.failure {
                None => out.push_str("/>\n"),
                Some(message) => {
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{0}\" type=\"volley\">{0}</failure>\n    </testcase>",
                        xml(message)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// The verdict and each threshold, as test cases.
fn cases(report: &RunReport) -> Vec<Case> {
    let summary = &report.summary;
    let mut cases = vec![Case {
        name: "verdict: the figures measure the server".into(),
        classname: "volley.verdict",
        failure: (!summary.verdict.valid).then(|| summary.verdict.reasons.join("; ")),
    }];
    cases.extend(report.thresholds.iter().map(|t| Case {
        name: t.expression.clone(),
        classname: "volley.thresholds",
        failure: (!t.passed).then(|| match &t.note {
            Some(note) => format!("measured {} ({note})", t.shown),
            None => format!("measured {}", t.shown),
        }),
    }));
    cases
}

struct Case {
    name: String,
    classname: &'static str,
    failure: Option<String>,
}

/// Text safe in an XML attribute or element; characters XML 1.0 cannot
/// hold at all (most control characters) are dropped.
pub(crate) fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

/// One entry of github-action-benchmark's `customSmallerIsBetter` or
/// `customBiggerIsBetter` JSON.
#[derive(Serialize)]
struct Benchmark {
    name: String,
    unit: &'static str,
    value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra: Option<String>,
}

/// Latencies per method and in total (`customSmallerIsBetter`).
pub fn benchmark_latency(report: &RunReport) -> Vec<u8> {
    let mut entries = Vec::new();
    // A row with no timed call has no latency to chart (a 0 ms point would
    // read as an instant answer).
    for m in methods(report).filter(|m| m.latency.timed > 0) {
        for (stat, value) in [("p50", m.latency.p50_ms), ("p99", m.latency.p99_ms)] {
            entries.push(Benchmark {
                name: format!("{} {stat}", m.method),
                unit: "ms",
                value,
                extra: Some(format!("{} calls", m.calls)),
            });
        }
    }
    to_json(&entries)
}

/// Calls a second per method and in total (`customBiggerIsBetter`).
pub fn benchmark_rate(report: &RunReport) -> Vec<u8> {
    let entries: Vec<Benchmark> = methods(report)
        .map(|m| Benchmark {
            name: format!("{} calls/s", m.method),
            unit: "calls/s",
            value: m.rps,
            extra: Some(format!("{} errors of {} calls", m.errors, m.calls)),
        })
        .collect();
    to_json(&entries)
}

fn methods(report: &RunReport) -> impl Iterator<Item = &MethodSummary> {
    let summary = &report.summary;
    summary.methods.iter().chain(std::iter::once(&summary.total))
}

fn to_json(entries: &[Benchmark]) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(entries).expect("plain data");
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_and_markdown_cells_hold_any_text() {
        assert_eq!(
            xml("a<b & \"c\" 'd'>\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"
        );
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}
