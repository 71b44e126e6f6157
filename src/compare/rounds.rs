//! A/B rounds: each target against the first, figure by figure, over the
//! rounds they ran in turn. Each round's B is set against the same round's
//! A, so what drifts between rounds (the machine warming, a neighbour
//! starting) cancels; the ratio's interval comes from how the rounds'
//! ratios differ, and a verdict needs both the limit passed and the
//! interval clear of no change.

use serde::Serialize;

use super::{limits, significance, Change, ComparedFigure, Tolerance, Tolerances};
use crate::report::RunReport;
use crate::stats::{MethodSummary, TOTAL_TAG};

/// One figure of one method of one target, against the first target's.
#[derive(Clone, Debug, Serialize)]
pub struct AbRow {
    pub target: String,
    pub method: String,
    #[serde(serialize_with = "figure_name")]
    pub metric: ComparedFigure,
    /// The median over the rounds, the first target's and this one's.
    pub first: f64,
    pub this: f64,
    /// B / A (for the error rate, B − A), with its 99% interval; `None`
    /// where a round has no such figure.
    pub ratio: Option<(f64, f64, f64)>,
    #[serde(skip)]
    pub limit: Tolerance,
    pub limit_shown: String,
    #[serde(serialize_with = "change_name")]
    pub verdict: Change,
}

fn figure_name<S: serde::Serializer>(f: &ComparedFigure, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.name())
}

fn change_name<S: serde::Serializer>(c: &Change, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.name())
}

/// A threshold, judged on each round of one target (a round is a run of
/// its own): it holds only if it held in every one.
#[derive(Clone, Debug, Serialize)]
pub struct RoundsThreshold {
    pub expression: String,
    pub target: String,
    /// Rounds it failed in, of `rounds`.
    pub failed: usize,
    pub rounds: usize,
    /// The failing rounds' figures, lowest to highest (`8.1 ms to
    /// 8.4 ms`), or the one figure.
    pub failing: Option<String>,
}

/// The rounds judged.
#[derive(Debug, Serialize)]
pub struct AbReport {
    pub rounds: usize,
    pub rows: Vec<AbRow>,
    /// Every threshold asked for, per target.
    pub thresholds: Vec<RoundsThreshold>,
    /// Why the rounds cannot be judged: a round whose verdict is invalid.
    pub invalid: Vec<String>,
    /// What the reader must know to read the rows: so few rounds that
    /// only a change of several times shows.
    pub notes: Vec<String>,
}

impl AbReport {
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Change::Regression)
    }

    fn marked(&self, change: Change) -> Vec<String> {
        (self.rows.iter())
            .filter(|r| r.verdict == change)
            .map(|r| format!("{} {} {}", r.target, r.method, r.metric.name()))
            .collect()
    }

    fn thresholds_failed(&self) -> Vec<String> {
        (self.thresholds.iter())
            .filter(|t| t.failed > 0)
            .map(|t| format!("{} on {}", t.expression, t.target))
            .collect()
    }

    /// A regression, a change the rounds cannot tell from chance, a
    /// threshold broken, or rounds that cannot be judged: CI goes red.
    pub fn failed(&self) -> bool {
        self.regressed()
            || !self.marked(Change::Inconclusive).is_empty()
            || !self.thresholds_failed().is_empty()
            || !self.invalid.is_empty()
    }

    /// The table's last line: `result: ` and [`Self::result`].
    pub fn result_line(&self) -> String {
        format!("result: {}", self.result())
    }

    /// `no regression`, or each kind of failure with what failed.
    pub fn result(&self) -> String {
        if !self.invalid.is_empty() {
            return format!("CANNOT COMPARE: {}", self.invalid.join("; "));
        }
        let (regressed, unclear) = (self.marked(Change::Regression), self.marked(Change::Inconclusive));
        let broken = self.thresholds_failed();
        let mut said = Vec::new();
        if !regressed.is_empty() {
            said.push(format!(
                "REGRESSION ({}: past its limit, and the rounds' interval rules out no change)",
                regressed.join(", ")
            ));
        }
        if !unclear.is_empty() {
            said.push(format!(
                "INCONCLUSIVE ({}: past its limit, but the rounds' interval does not rule out no change: more rounds, or longer ones, would tell)",
                unclear.join(", ")
            ));
        }
        if !broken.is_empty() {
            said.push(format!("THRESHOLD FAILED ({})", broken.join(", ")));
        }
        match said.is_empty() {
            true => "no regression".into(),
            false => said.join("; "),
        }
    }
}

/// Each threshold of each target over its rounds.
fn thresholds(names: &[&str], runs: &[Vec<&RunReport>]) -> Vec<RoundsThreshold> {
    let mut judged = Vec::new();
    for (name, rounds) in names.iter().zip(runs) {
        let asked = rounds.first().map_or(0, |r| r.thresholds.len());
        for i in 0..asked {
            let each: Vec<_> = rounds.iter().filter_map(|r| r.thresholds.get(i)).collect();
            let failing: Vec<_> = each.iter().filter(|t| !t.passed).collect();
            // The failing rounds' figures, lowest to highest: a result
            // does not say which way its threshold points.
            let mut figures: Vec<_> = failing.iter().collect();
            figures.sort_by(|a, b| match (a.measured, b.measured) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            });
            let shown = match (figures.first(), figures.last()) {
                (Some(low), Some(high)) if low.shown != high.shown => {
                    Some(format!("{} to {}", low.shown, high.shown))
                }
                (Some(one), _) => Some(one.shown.clone()),
                _ => None,
            };
            judged.push(RoundsThreshold {
                expression: each.first().map_or_else(String::new, |t| t.expression.clone()),
                target: name.to_string(),
                failed: failing.len(),
                rounds: rounds.len(),
                failing: shown,
            });
        }
    }
    judged
}

/// Judges every target after the first against it: `runs[t][r]` is target
/// `t`'s round `r`.
pub fn judge(names: &[&str], runs: &[Vec<&RunReport>], tolerances: &Tolerances) -> AbReport {
    let mut invalid = Vec::new();
    for (name, rounds) in names.iter().zip(runs) {
        for (r, run) in rounds.iter().enumerate() {
            let verdict = &run.summary.verdict;
            if !verdict.valid {
                invalid.push(format!(
                    "{name}'s round {} is invalid: {}",
                    r + 1,
                    verdict.reasons.join("; ")
                ));
            }
        }
    }
    let mut rows = Vec::new();
    let first = &runs[0];
    for (name, rounds) in names.iter().zip(runs).skip(1) {
        for method in methods(first) {
            for (&metric, limit) in &tolerances.0 {
                let each = first.iter().chain(rounds).map(|run| figures(run, &method));
                if super::no_latency_to_compare(metric, each) {
                    continue;
                }
                rows.push(row(name, &method, (first, rounds), metric, *limit));
            }
        }
    }
    if !invalid.is_empty() {
        rows.iter_mut().for_each(|r| r.verdict = Change::NotJudged);
    }
    AbReport {
        rounds: first.len(),
        rows,
        thresholds: thresholds(names, runs),
        invalid,
        notes: few_rounds(first.len()).into_iter().collect(),
    }
}

/// Under 4 rounds, the interval is so wide that an `ok` says little.
pub fn few_rounds(rounds: usize) -> Option<String> {
    let t = match rounds {
        2 => "63.7",
        3 => "9.9",
        _ => return None,
    };
    Some(format!(
        "{rounds} rounds: an interval over so few is wide (Student's t at 99% is {t}), so only a change of several times shows, and `ok` says little; 8 rounds or more tell far smaller ones"
    ))
}

/// The first target's methods (each round has the same), then the total.
fn methods(rounds: &[&RunReport]) -> Vec<String> {
    let mut names: Vec<String> = (rounds.first().iter())
        .flat_map(|r| r.summary.methods.iter().map(|m| m.method.clone()))
        .collect();
    names.push(TOTAL_TAG.into());
    names
}

fn figures<'r>(run: &'r RunReport, method: &str) -> Option<&'r MethodSummary> {
    match method == TOTAL_TAG {
        true => Some(&run.summary.total),
        false => run.summary.methods.iter().find(|m| m.method == method),
    }
}

fn value(m: &MethodSummary, metric: ComparedFigure) -> f64 {
    match metric {
        ComparedFigure::P50 => m.latency.p50_ms,
        ComparedFigure::P99 => m.latency.p99_ms,
        ComparedFigure::Rps => m.rps,
        ComparedFigure::ErrorRate => m.error_rate,
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    super::median(&mut sorted)
}

fn row(
    target: &str,
    method: &str,
    (first, this): (&[&RunReport], &[&RunReport]),
    metric: ComparedFigure,
    limit: Tolerance,
) -> AbRow {
    let of = |runs: &[&RunReport]| -> Option<Vec<f64>> {
        runs.iter()
            .map(|r| figures(r, method).map(|m| value(m, metric)))
            .collect()
    };
    let (a, b) = (of(first).unwrap_or_default(), of(this).unwrap_or_default());
    let ratio = match metric {
        ComparedFigure::ErrorRate => significance::paired_difference(&a, &b),
        _ => significance::paired_ratio(&a, &b),
    };
    let (first_median, this_median) = (median(&a), median(&b));
    let verdict = match ratio {
        None => Change::NotJudged,
        Some(ratio) => verdict(metric, limit, first_median, ratio),
    };
    AbRow {
        target: target.to_string(),
        method: method.to_string(),
        metric,
        first: first_median,
        this: this_median,
        ratio,
        limit,
        limit_shown: limits::shown(metric, &limit),
        verdict,
    }
}

/// Past the limit (as a ratio of A's median, or a difference for the error
/// rate) and the interval clear of no change: a regression, or an
/// improvement the other way. Past the limit the worse way with the
/// interval still holding no change: inconclusive, never `ok` (one round
/// far out widens the interval; it must not hide the change).
fn verdict(metric: ComparedFigure, limit: Tolerance, a: f64, (ratio, low, high): (f64, f64, f64)) -> Change {
    // (past the limit the worse way, clear of no change), then the better way.
    let (worse, better) = if metric == ComparedFigure::ErrorRate {
        let allowed = limit.allowed(a);
        ((ratio > allowed, low > 0.0), (ratio < -allowed, high < 0.0))
    } else {
        let allowed = if a > 0.0 {
            limit.allowed(a) / a
        } else {
            limit.relative
        };
        let up = (ratio > 1.0 + allowed, low > 1.0);
        let down = (ratio < 1.0 - allowed, high < 1.0);
        match metric.higher_is_worse() {
            true => (up, down),
            false => (down, up),
        }
    };
    match (worse, better) {
        ((true, true), _) => Change::Regression,
        ((true, false), _) => Change::Inconclusive,
        (_, (true, true)) => Change::Improved,
        _ => Change::Ok,
    }
}

/// The rows as the table shows them, after the rounds' own lines.
pub fn render(report: &AbReport, order: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nA/B over {} rounds each, in the order {order}; each target against the first, round by round",
        report.rounds
    );
    let _ = writeln!(
        out,
        "(first, this: each target's median over its rounds; ratio: the mean of the rounds' own ratios, on a log scale)"
    );
    let _ = writeln!(
        out,
        "{:<16} {:<20} {:<10} {:>12} {:>12} {:>9} {:>19} {:>10}  verdict",
        "target", "method", "metric", "first", "this", "ratio", "99% interval", "limit"
    );
    for r in &report.rows {
        let (ratio, interval) = shown_ratio(r);
        let _ = writeln!(
            out,
            "{:<16} {:<20} {:<10} {:>12} {:>12} {:>9} {:>19} {:>10}  {}",
            r.target,
            r.method,
            r.metric.name(),
            shown_figure(r.metric, r.first),
            shown_figure(r.metric, r.this),
            ratio,
            interval,
            r.limit_shown,
            r.verdict.name()
        );
    }
    if !report.thresholds.is_empty() {
        out.push('\n');
    }
    for threshold in &report.thresholds {
        let _ = writeln!(out, "{}", threshold_line(threshold));
    }
    for note in &report.notes {
        let _ = writeln!(out, "\nnote: {note}");
    }
    let _ = writeln!(out, "\n{}", report.result_line());
    out
}

/// A threshold over a target's rounds, as a line: `FAIL p99 < 1ms on B:
/// failed in 8 of 8 rounds (8.1 ms to 8.4 ms)`.
pub fn threshold_line(t: &RoundsThreshold) -> String {
    match (t.failed, &t.failing) {
        (0, _) => format!(
            "PASS {} on {}: held in all {} rounds",
            t.expression, t.target, t.rounds
        ),
        (n, figures) => format!(
            "FAIL {} on {}: failed in {n} of {} rounds{}",
            t.expression,
            t.target,
            t.rounds,
            figures.as_ref().map_or_else(String::new, |w| format!(" ({w})"))
        ),
    }
}

/// `report.html` of the rounds: the table, coloured by verdict, and each
/// method's percentile spectrum of every target (all its rounds) on one
/// plot.
pub fn html_page(
    report: &AbReport,
    order: &str,
    targets: &[(&str, &crate::report::html::Spectra)],
) -> String {
    use crate::report::html::{side_by_side_page, CompareRow};
    let rows: Vec<CompareRow> = (report.rows.iter())
        .map(|r| {
            let (ratio, interval) = shown_ratio(r);
            CompareRow {
                cells: vec![
                    r.target.clone(),
                    r.method.clone(),
                    r.metric.name().to_string(),
                    shown_figure(r.metric, r.first),
                    shown_figure(r.metric, r.this),
                    ratio,
                    interval,
                    r.limit_shown.clone(),
                    r.verdict.name().to_string(),
                ],
                verdict: r.verdict.name().to_string(),
            }
        })
        .collect();
    let head = [
        "target",
        "method",
        "metric",
        "first",
        "this",
        "ratio",
        "99% interval",
        "limit",
        "verdict",
    ];
    let mut lines = vec![format!(
        "{} rounds each, in the order {order}; each target against the first, round by round",
        report.rounds
    )];
    lines.extend(report.thresholds.iter().map(threshold_line));
    lines.extend(report.notes.iter().map(|note| format!("note: {note}")));
    lines.push(report.result_line());
    side_by_side_page("volley A/B rounds", &head, &rows, (&lines, ""), targets)
}

/// The rounds as GitHub-flavoured Markdown.
pub fn markdown(report: &AbReport, order: &str) -> String {
    use crate::report::cell;
    use std::fmt::Write as _;
    let mark = if report.failed() { "❌" } else { "✅" };
    let mut out = format!(
        "### volley A/B rounds {mark}\n\n{} rounds each, in the order {order}; each target against the first, round by round.\n\n",
        report.rounds
    );
    out.push_str("| target | method | metric | first | this | ratio | 99% interval | limit | verdict |\n");
    out.push_str("|---|---|---|---:|---:|---:|---:|---:|---|\n");
    for r in &report.rows {
        let (ratio, interval) = shown_ratio(r);
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {ratio} | {interval} | {} | {} |",
            cell(&r.target),
            cell(&r.method),
            r.metric.name(),
            shown_figure(r.metric, r.first),
            shown_figure(r.metric, r.this),
            r.limit_shown,
            r.verdict.name()
        );
    }
    for threshold in &report.thresholds {
        let _ = writeln!(out, "\n{}", cell(&threshold_line(threshold)));
    }
    for note in &report.notes {
        let _ = writeln!(out, "\n> {}", cell(note));
    }
    let _ = writeln!(out, "\n**{}**", cell(&report.result_line()));
    out
}

/// JUnit XML: each figure of each method of each target a test case, a
/// regression (or rounds that cannot be judged) a failure.
pub fn junit(report: &AbReport) -> String {
    use super::render::{failure_kind, Case, OTHER_FAILURE};
    let mut cases: Vec<Case> = (report.rows.iter())
        .map(|r| {
            let (ratio, interval) = shown_ratio(r);
            let failure = failure_kind(r.verdict).map(|kind| {
                let message = format!(
                    "{} {} {ratio} ({interval}, limit {})",
                    r.verdict.name(),
                    r.metric.name(),
                    r.limit_shown
                );
                (kind, message)
            });
            (format!("{} {} {}", r.target, r.method, r.metric.name()), failure)
        })
        .collect();
    for t in &report.thresholds {
        let failure = (t.failed > 0).then(|| (OTHER_FAILURE, threshold_line(t)));
        cases.push((format!("threshold {} on {}", t.expression, t.target), failure));
    }
    if !report.invalid.is_empty() {
        cases.push((
            "the rounds can be judged".into(),
            Some((OTHER_FAILURE, report.invalid.join("; "))),
        ));
    }
    super::render::junit_of("rounds", &cases)
}

/// A ratio `1.234x` and its interval `1.100x..1.380x`; a difference in
/// percentage points for the error rate; `-` without one.
pub fn shown_ratio(r: &AbRow) -> (String, String) {
    match (r.metric, r.ratio) {
        (_, None) => ("-".into(), "-".into()),
        (ComparedFigure::ErrorRate, Some((d, low, high))) => (
            format!("{:+.2}pp", d * 100.0),
            format!("{:+.2}..{:+.2}pp", low * 100.0, high * 100.0),
        ),
        (_, Some((ratio, low, high))) => (times(ratio), format!("{}..{}", times(low), times(high))),
    }
}

/// A ratio to three places; past what three places can say, its bound
/// (an interval over two rounds can reach 10^11).
fn times(ratio: f64) -> String {
    match ratio {
        r if r >= 1000.0 => ">999x".into(),
        r if r < 0.001 => "<0.001x".into(),
        r => format!("{r:.3}x"),
    }
}

fn shown_figure(metric: ComparedFigure, value: f64) -> String {
    match metric {
        ComparedFigure::ErrorRate => format!("{:.2}%", value * 100.0),
        ComparedFigure::Rps => format!("{value:.1}/s"),
        _ => format!("{value:.3} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(relative: f64, absolute: f64) -> Tolerance {
        Tolerance { relative, absolute }
    }

    #[test]
    fn a_verdict_needs_the_limit_passed_and_the_interval_clear_of_no_change() {
        let p50 = ComparedFigure::P50;
        let slower = (1.6, 1.5, 1.7);
        assert_eq!(verdict(p50, limit(0.25, 0.0), 5.0, slower), Change::Regression);
        assert_eq!(
            verdict(p50, limit(0.25, 5.0), 5.0, slower),
            Change::Ok,
            "within 25% + 5 ms"
        );
        assert_eq!(
            verdict(p50, limit(0.25, 0.0), 5.0, (1.6, 0.9, 2.8)),
            Change::Inconclusive,
            "past the limit, but the interval holds 1: it cannot tell, never ok"
        );
        assert_eq!(
            verdict(p50, limit(0.25, 0.0), 5.0, (0.6, 0.3, 1.2)),
            Change::Ok,
            "better, but the interval holds 1"
        );
        assert_eq!(
            verdict(p50, limit(0.25, 0.0), 5.0, (0.5, 0.45, 0.55)),
            Change::Improved
        );
        let rps = ComparedFigure::Rps;
        assert_eq!(
            verdict(rps, limit(0.1, 0.0), 100.0, (0.5, 0.45, 0.55)),
            Change::Regression
        );
        assert_eq!(
            verdict(rps, limit(0.1, 0.0), 100.0, (1.5, 1.4, 1.6)),
            Change::Improved
        );
        let errors = ComparedFigure::ErrorRate;
        assert_eq!(
            verdict(errors, limit(0.0, 0.001), 0.0, (0.01, 0.005, 0.015)),
            Change::Regression
        );
        assert_eq!(
            verdict(errors, limit(0.0, 0.001), 0.0, (0.01, -0.005, 0.025)),
            Change::Inconclusive
        );
        assert_eq!(
            verdict(errors, limit(0.0, 0.001), 0.0, (0.0005, -0.005, 0.025)),
            Change::Ok,
            "within its limit"
        );
    }

    #[test]
    fn the_result_names_what_is_inconclusive_and_each_threshold_broken() {
        let row = |verdict| AbRow {
            target: "B".into(),
            method: TOTAL_TAG.into(),
            metric: ComparedFigure::P50,
            first: 2.7,
            this: 4.0,
            ratio: Some((3.17, 0.03, 320.0)),
            limit: limit(0.25, 0.0),
            limit_shown: "25%".into(),
            verdict,
        };
        let threshold = |failed| RoundsThreshold {
            expression: "p99 < 1ms".into(),
            target: "B".into(),
            failed,
            rounds: 8,
            failing: (failed > 0).then(|| "8.1 ms to 8.4 ms".into()),
        };
        let report = |rows, thresholds| AbReport {
            rounds: 8,
            rows,
            thresholds,
            invalid: Vec::new(),
            notes: Vec::new(),
        };
        let clean = report(vec![row(Change::Ok)], vec![threshold(0)]);
        assert!(!clean.failed());
        assert_eq!(clean.result_line(), "result: no regression");
        assert_eq!(
            threshold_line(&threshold(0)),
            "PASS p99 < 1ms on B: held in all 8 rounds"
        );
        let unclear = report(vec![row(Change::Inconclusive)], Vec::new());
        assert!(unclear.failed());
        assert!(
            unclear
                .result_line()
                .starts_with("result: INCONCLUSIVE (B TOTAL p50: "),
            "{}",
            unclear.result_line()
        );
        let broken = report(vec![row(Change::Ok)], vec![threshold(8)]);
        assert!(broken.failed());
        assert_eq!(broken.result_line(), "result: THRESHOLD FAILED (p99 < 1ms on B)");
        assert_eq!(
            threshold_line(&threshold(8)),
            "FAIL p99 < 1ms on B: failed in 8 of 8 rounds (8.1 ms to 8.4 ms)"
        );
        assert!(
            junit(&broken).contains("FAIL p99 &lt; 1ms on B"),
            "{}",
            junit(&broken)
        );
    }
}
