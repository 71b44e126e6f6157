//! `volley sweep`: the highest rate a target sustains within an SLO. The
//! search doubles the rate from a start until a step fails, then bisects
//! between the last pass and the first failure to a precision; each step
//! is a run of its own, with a warmup, judged by the SLO's thresholds. Per
//! method, the lowest rate at which that method broke the SLO (its knee).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::stats::RunSummary;
use crate::thresholds::{Scope, Threshold};

/// Where the search stands: the highest rate that held and the lowest
/// that failed so far.
#[derive(Clone, Debug)]
pub struct Search {
    from: f64,
    /// Bisect until the gap is at most this share of the rate that held.
    precision: f64,
    max_rate: f64,
    held: Option<f64>,
    failed: Option<f64>,
}

/// What the search found.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "found", rename_all = "snake_case")]
pub enum Found {
    /// The highest rate that held, below one that failed.
    Rate { rate: f64, failed_at: f64 },
    /// Even the start failed.
    BelowStart { start: f64 },
    /// Every rate up to the ceiling held.
    AtCeiling { rate: f64 },
}

impl Search {
    pub fn new(from: f64, precision: f64, max_rate: f64) -> Search {
        Search {
            from,
            precision,
            max_rate: max_rate.max(from),
            held: None,
            failed: None,
        }
    }

    /// The next rate to try (whole requests a second), or `None` when done.
    pub fn next(&self) -> Option<f64> {
        match (self.held, self.failed) {
            (None, None) => Some(self.from),
            (Some(held), None) => (held < self.max_rate).then(|| (held * 2.0).min(self.max_rate)),
            (None, Some(_)) => None,
            (Some(held), Some(failed)) => {
                let mid = ((held + failed) / 2.0).round();
                let close = (failed - held) / held <= self.precision;
                (!close && mid > held && mid < failed).then_some(mid)
            }
        }
    }

    pub fn record(&mut self, rate: f64, held: bool) {
        if held {
            self.held = Some(self.held.map_or(rate, |h| h.max(rate)));
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
        }
    }

    pub fn found(&self) -> Found {
        match (self.held, self.failed) {
            (Some(rate), Some(failed_at)) => Found::Rate { rate, failed_at },
            (Some(rate), None) => Found::AtCeiling { rate },
            (None, _) => Found::BelowStart { start: self.from },
        }
    }
}

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
    /// The SLO's thresholds that failed, as `text (figure)`.
    pub broken: Vec<String>,
    /// Methods that broke the SLO at this rate.
    pub methods_broken: Vec<String>,
}

impl Step {
    /// Judges a step's run by the SLO, overall and method by method. A
    /// schedule that fell behind while volley had CPU to spare is the
    /// server's doing (every connection held waiting on it): a failure.
    pub fn judge(target: &str, rate: f64, summary: &RunSummary, slo: &[Threshold]) -> Step {
        let mut broken: Vec<String> = slo
            .iter()
            .map(|t| t.evaluate(summary))
            .filter(|r| !r.passed)
            .map(|r| format!("{} ({})", r.expression, r.shown))
            .collect();
        if summary.schedule.as_ref().is_some_and(|s| s.behind) {
            broken.push("the rate was not kept: the server held every connection too long".into());
        }
        let client_limited = summary.client_cpu.busy_share >= crate::stats::SATURATED_SHARE
            || summary.panicked_connections > 0;
        let methods_broken = summary
            .methods
            .iter()
            .filter(|m| {
                per_method(slo, &m.method)
                    .iter()
                    .any(|t| !t.evaluate(summary).passed)
            })
            .map(|m| m.method.clone())
            .collect();
        let verdict = match (client_limited, broken.is_empty()) {
            (true, _) => "invalid",
            (false, true) => "pass",
            (false, false) => "fail",
        };
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
            broken,
            methods_broken,
        }
    }

    /// Whether the server clearly broke: most calls failed, or it answered
    /// at most half the rate asked. No rate above this one is worth trying.
    pub fn clearly_broke(&self) -> bool {
        self.verdict == "fail" && (self.error_rate >= 0.5 || self.achieved <= self.rate / 2.0)
    }
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
/// broke the SLO, over every step.
pub fn knees(steps: &[Step], methods: &[String]) -> BTreeMap<String, (Option<f64>, Option<f64>)> {
    methods
        .iter()
        .map(|method| {
            let (broke, held): (Vec<&Step>, Vec<&Step>) = steps
                .iter()
                .filter(|s| s.verdict != "invalid")
                .partition(|s| s.methods_broken.contains(method));
            let held_at = held
                .iter()
                .map(|s| s.rate)
                .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
            let broke_at = broke
                .iter()
                .map(|s| s.rate)
                .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
            (method.clone(), (held_at, broke_at))
        })
        .collect()
}

/// A CSV row per step, in the order run; steps are numbered per target,
/// as their directories are.
pub fn csv(steps: &[Step]) -> String {
    let mut out = ::csv::Writer::from_writer(Vec::new());
    let head = [
        "target",
        "step",
        "target_rate",
        "achieved_rate",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "error_rate",
        "verdict",
        "broken",
    ];
    out.write_record(head).expect("writing to memory");
    for (i, s) in steps.iter().enumerate() {
        let number = steps[..=i].iter().filter(|t| t.target == s.target).count();
        out.write_record([
            s.target.clone(),
            number.to_string(),
            s.rate.to_string(),
            format!("{:.1}", s.achieved),
            format!("{:.3}", s.p50_ms),
            format!("{:.3}", s.p90_ms),
            format!("{:.3}", s.p99_ms),
            format!("{:.6}", s.error_rate),
            s.verdict.to_string(),
            s.broken.join("; "),
        ])
        .expect("writing to memory");
    }
    String::from_utf8(out.into_inner().expect("writing to memory")).expect("the fields are text")
}

/// The steps, the rate found and each method's knee, as a table.
pub fn table(steps: &[Step], found: Found, knees: &BTreeMap<String, (Option<f64>, Option<f64>)>) -> String {
    let mut out = format!(
        "{:>4} {:>10} {:>11} {:>9} {:>9} {:>9} {:>8}  verdict\n",
        "step", "target/s", "achieved/s", "p50 ms", "p90 ms", "p99 ms", "errors"
    );
    for (i, s) in steps.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>4} {:>10.0} {:>11.1} {:>9.3} {:>9.3} {:>9.3} {:>7.2}%  {}{}",
            i + 1,
            s.rate,
            s.achieved,
            s.p50_ms,
            s.p90_ms,
            s.p99_ms,
            s.error_rate * 100.0,
            s.verdict,
            match s.broken.is_empty() {
                true => String::new(),
                false => format!(": {}", s.broken.join(", ")),
            }
        );
    }
    let _ = writeln!(out, "\n{}", said(found));
    for (method, (held, broke)) in knees {
        let _ = match (held, broke) {
            (_, Some(broke)) => writeln!(
                out,
                "  {method}: broke the SLO at {broke:.0}/s{}",
                held.filter(|h| h < broke)
                    .map_or(String::new(), |h| format!(", held at {h:.0}/s"))
            ),
            (Some(held), None) => writeln!(out, "  {method}: held at every rate tried, up to {held:.0}/s"),
            (None, None) => writeln!(out, "  {method}: no valid step"),
        };
    }
    out
}

/// What the search found, in a sentence.
pub fn said(found: Found) -> String {
    match found {
        Found::Rate { rate, failed_at } => format!(
            "maximum sustainable rate: {rate:.0} requests/s (the SLO held at {rate:.0}/s and failed at {failed_at:.0}/s)"
        ),
        Found::BelowStart { start } => {
            format!("the SLO failed at the first rate tried, {start:.0}/s: start lower with --from")
        }
        Found::AtCeiling { rate } => {
            format!("the SLO held at every rate tried, up to the ceiling of {rate:.0}/s (raise --max-rate)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a server that holds up to `capacity`.
    fn sweep(capacity: f64, from: f64, precision: f64, max: f64) -> (Vec<f64>, Found) {
        let mut search = Search::new(from, precision, max);
        let mut tried = Vec::new();
        while let Some(rate) = search.next() {
            tried.push(rate);
            search.record(rate, rate <= capacity);
            assert!(tried.len() < 100, "the search ends");
        }
        (tried, search.found())
    }

    #[test]
    fn the_search_doubles_then_bisects_to_the_precision() {
        let (tried, found) = sweep(3000.0, 100.0, 0.05, 1e9);
        assert_eq!(
            tried,
            [100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0, 2400.0, 2800.0, 3000.0, 3100.0]
        );
        assert_eq!(
            found,
            Found::Rate {
                rate: 3000.0,
                failed_at: 3100.0
            }
        );
    }

    #[test]
    fn the_rate_found_is_within_the_precision_of_the_capacity() {
        for capacity in [150.0, 999.0, 3000.0, 12_345.0, 77_777.0] {
            for precision in [0.01, 0.05, 0.1] {
                let (_, found) = sweep(capacity, 100.0, precision, 1e9);
                let Found::Rate { rate, failed_at } = found else {
                    panic!("{capacity}: {found:?}");
                };
                assert!(rate <= capacity && failed_at > capacity, "{capacity}: {found:?}");
                assert!(
                    (failed_at - rate) / rate <= precision + 1.0 / rate,
                    "{capacity} {precision}: {found:?}"
                );
            }
        }
    }

    #[test]
    fn a_start_that_fails_and_a_ceiling_that_holds_are_said_so() {
        assert_eq!(
            sweep(50.0, 100.0, 0.05, 1e9),
            (vec![100.0], Found::BelowStart { start: 100.0 })
        );
        let (tried, found) = sweep(1e9, 100.0, 0.05, 500.0);
        assert_eq!(tried, [100.0, 200.0, 400.0, 500.0]);
        assert_eq!(found, Found::AtCeiling { rate: 500.0 });
    }

    fn step(rate: f64, verdict: &'static str, methods_broken: &[&str]) -> Step {
        Step {
            target: "t".into(),
            rate,
            achieved: rate,
            p50_ms: 1.0,
            p90_ms: 1.0,
            p99_ms: 1.0,
            error_rate: 0.0,
            verdict,
            broken: Vec::new(),
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
        let mut total = crate::stats::MethodSummary::new("TOTAL", &Default::default(), 1.0);
        (total.calls, total.errors) = (100, 51);
        assert!(broke_so_far(&total));
        total.errors = 50;
        assert!(!broke_so_far(&total), "half is not most");
        (total.calls, total.errors) = (99, 99);
        assert!(!broke_so_far(&total), "too few to say");
    }

    #[test]
    fn the_csv_has_a_row_per_step_with_its_verdict() {
        let mut failed = step(200.0, "fail", &["m"]);
        failed.broken = vec!["p99 < 1ms (2.000 ms)".into()];
        let csv = csv(&[step(100.0, "pass", &[]), failed]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "t,1,100,100.0,1.000,1.000,1.000,0.000000,pass,");
        assert_eq!(
            lines[2],
            "t,2,200,200.0,1.000,1.000,1.000,0.000000,fail,p99 < 1ms (2.000 ms)"
        );
        // A comma or a quote in a field is quoted, as CSV readers expect.
        let mut odd = step(2.0, "fail", &[]);
        odd.target = "http://h/a,b".into();
        odd.broken = vec!["a \"b\"".into()];
        let quoted = super::csv(&[odd]);
        assert!(
            quoted.ends_with("\"http://h/a,b\",1,2,2.0,1.000,1.000,1.000,0.000000,fail,\"a \"\"b\"\"\"\n"),
            "{quoted}"
        );
    }
}
