//! `volley sweep`: the highest rate a target sustains within an SLO. The
//! search doubles the rate from a start until a step fails, then bisects
//! between the last pass and the first failure to a precision; each step
//! is a run of its own, with a warmup, judged by the SLO's thresholds. One
//! noisy step must not decide the result: a failure below a rate that
//! already held is run once more before it counts, and the rate found is
//! run once more before it is reported. Per method, the lowest rate at
//! which that method broke the SLO (its knee).

mod step;

pub use step::{broke_so_far, knees, per_method, Judging, Lateness, Step};

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// Where the search stands: every step's rate and verdict so far, from
/// which the next rate and the result follow.
#[derive(Clone, Debug)]
pub struct Search {
    from: f64,
    /// Bisect until the gap is at most this share of the rate that held.
    precision: f64,
    max_rate: f64,
    runs: Vec<Run>,
}

/// One step the search was told of.
#[derive(Clone, Copy, Debug)]
struct Run {
    rate: f64,
    passed: bool,
    purpose: Purpose,
}

/// Why a step is run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// The search's next rate: doubling, or bisecting.
    #[default]
    Search,
    /// A failure below a rate that already held, run once more before it
    /// counts.
    Retry,
    /// The rate about to be reported, run once more to confirm it.
    Repeat,
}

/// The step the search asks for next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Next {
    pub rate: f64,
    pub purpose: Purpose,
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
    /// volley could not drive `undriven_at` on this machine: the rate that
    /// held below it, if any, is a floor, not the server's limit.
    Floor { held: Option<f64>, undriven_at: f64 },
}

impl Search {
    pub fn new(from: f64, precision: f64, max_rate: f64) -> Search {
        Search {
            from,
            precision,
            max_rate: max_rate.max(from),
            runs: Vec::new(),
        }
    }

    /// The next step to run (its rate in whole requests a second), or
    /// `None` when done.
    pub fn next(&self) -> Option<Next> {
        if let Some(rate) = self.to_retry() {
            return Some(Next {
                rate,
                purpose: Purpose::Retry,
            });
        }
        let (held, failed) = self.bounds();
        let searched = match (held, failed) {
            (None, None) => Some(self.from),
            (Some(held), None) => (held < self.max_rate).then(|| (held * 2.0).min(self.max_rate)),
            (None, Some(_)) => None,
            (Some(held), Some(failed)) => {
                let mid = ((held + failed) / 2.0).round();
                let close = (failed - held) / held <= self.precision;
                (!close && mid > held && mid < failed).then_some(mid)
            }
        };
        match (searched, held) {
            (Some(rate), _) => Some(Next {
                rate,
                purpose: Purpose::Search,
            }),
            (None, Some(held)) if !self.confirmed(held) => Some(Next {
                rate: held,
                purpose: Purpose::Repeat,
            }),
            (None, _) => None,
        }
    }

    /// Tells the search how the step it asked for went.
    pub fn record(&mut self, rate: f64, passed: bool) {
        let purpose = self
            .next()
            .filter(|next| next.rate == rate)
            .map_or(Purpose::Search, |next| next.purpose);
        self.runs.push(Run {
            rate,
            passed,
            purpose,
        });
    }

    /// The highest rate that held so far, below any that failed.
    pub fn held(&self) -> Option<f64> {
        self.bounds().0
    }

    pub fn found(&self) -> Found {
        match self.bounds() {
            (Some(rate), Some(failed_at)) => Found::Rate { rate, failed_at },
            (Some(rate), None) => Found::AtCeiling { rate },
            (None, _) => Found::BelowStart { start: self.from },
        }
    }

    /// The last step's rate, when the search's own step failed there while
    /// a higher rate held in an earlier step: that failure stands alone.
    fn to_retry(&self) -> Option<f64> {
        let last = self
            .runs
            .last()
            .filter(|run| !run.passed && run.purpose == Purpose::Search)?;
        let held_above = self.runs.iter().any(|run| run.passed && run.rate > last.rate);
        held_above.then_some(last.rate)
    }

    /// The highest rate that held, below the lowest that failed; each rate
    /// counted by its latest step (a retry or a repeat replaces the one
    /// before).
    fn bounds(&self) -> (Option<f64>, Option<f64>) {
        let mut latest: Vec<(f64, bool)> = Vec::new();
        for run in &self.runs {
            match latest.iter_mut().find(|(rate, _)| *rate == run.rate) {
                Some(verdict) => verdict.1 = run.passed,
                None => latest.push((run.rate, run.passed)),
            }
        }
        let failed = latest
            .iter()
            .filter(|(_, passed)| !passed)
            .map(|(rate, _)| *rate)
            .reduce(f64::min);
        let held = latest
            .iter()
            .filter(|(rate, passed)| *passed && !failed.is_some_and(|f| *rate >= f))
            .map(|(rate, _)| *rate)
            .reduce(f64::max);
        (held, failed)
    }

    /// Whether `rate`'s latest step was its repeat, and held.
    fn confirmed(&self, rate: f64) -> bool {
        self.runs
            .iter()
            .rev()
            .find(|run| run.rate == rate)
            .is_some_and(|run| run.passed && run.purpose == Purpose::Repeat)
    }
}

/// What the search found, in a sentence; `rate_alone`: the rate above
/// the one found failed on the rate alone, its SLO holding
/// ([`rate_alone_failed`]).
pub fn said(found: Found, rate_alone: bool) -> String {
    match found {
        Found::Rate { rate, failed_at } => match rate_alone {
            true => format!(
                "maximum sustainable rate: {rate:.0} requests/s (at {failed_at:.0}/s the SLO held but the rate was not kept)"
            ),
            false => format!(
                "maximum sustainable rate: {rate:.0} requests/s (the SLO held at {rate:.0}/s and failed at {failed_at:.0}/s)"
            ),
        },
        Found::BelowStart { start } => {
            format!("the SLO failed at the first rate tried, {start:.0}/s: start lower with --from")
        }
        Found::AtCeiling { rate } => {
            format!("the SLO held at every rate tried, up to the ceiling of {rate:.0}/s (raise --max-rate)")
        }
        Found::Floor {
            held: Some(held),
            undriven_at,
        } => format!(
            "at least {held:.0} requests/s: the SLO held at {held:.0}/s, and volley could not drive {undriven_at:.0}/s on this machine (add --threads or machines)"
        ),
        Found::Floor { held: None, undriven_at } => format!(
            "no rate found: volley could not drive {undriven_at:.0}/s, the first rate tried, on this machine (start lower with --from, add --threads or machines)"
        ),
    }
}

/// Whether `rate`'s latest step failed on the rate alone: the SLO held
/// there, and the schedule was not kept.
pub fn rate_alone_failed(steps: &[Step], rate: f64) -> bool {
    let latest = steps.iter().rev().find(|s| s.rate == rate);
    latest.is_some_and(|s| !s.rate_kept && s.broken.iter().all(|b| b == step::RATE_NOT_KEPT))
}

/// The latency-versus-throughput curve of one target's steps: each rate by
/// its latest valid step (as the search counts it), in the order of the
/// rates, so the line never doubles back on the retries and repeats.
pub fn curve(steps: &[Step]) -> Vec<(f64, f64, f64)> {
    let mut latest: Vec<&Step> = Vec::new();
    for step in steps.iter().filter(|s| s.verdict != "invalid") {
        match latest.iter_mut().find(|s| s.rate == step.rate) {
            Some(kept) => *kept = step,
            None => latest.push(step),
        }
    }
    latest.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    latest.iter().map(|s| (s.achieved, s.p50_ms, s.p99_ms)).collect()
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
        "reason",
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
            s.reason.clone(),
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
        let purpose = match s.purpose {
            Purpose::Search => "",
            Purpose::Retry => " (retry)",
            Purpose::Repeat => " (repeat)",
        };
        let _ = writeln!(
            out,
            "{:>4} {:>10.0} {:>11.1} {:>9.3} {:>9.3} {:>9.3} {:>7.2}%  {}{purpose}{}",
            i + 1,
            s.rate,
            s.achieved,
            s.p50_ms,
            s.p90_ms,
            s.p99_ms,
            s.error_rate * 100.0,
            s.verdict,
            match s.reason.is_empty() {
                true => String::new(),
                false => format!(": {}", s.reason),
            }
        );
    }
    let rate_alone = matches!(found, Found::Rate { failed_at, .. } if rate_alone_failed(steps, failed_at));
    let _ = writeln!(out, "\n{}", said(found, rate_alone));
    // A method whose SLO held at every rate: the rate the run failed at on
    // the rate alone is said beside it, as in the headline.
    let not_kept = match found {
        Found::Rate { failed_at, .. } if rate_alone => {
            format!(", though the rate was not kept at {failed_at:.0}/s")
        }
        _ => String::new(),
    };
    for (method, (held, broke)) in knees {
        let _ = match (held, broke) {
            (_, Some(broke)) => writeln!(
                out,
                "  {method}: broke the SLO at {broke:.0}/s{}",
                held.filter(|h| h < broke)
                    .map_or(String::new(), |h| format!(", held at {h:.0}/s"))
            ),
            (Some(held), None) => writeln!(
                out,
                "  {method}: its SLO held at every rate tried, up to {held:.0}/s{not_kept}"
            ),
            (None, None) => writeln!(out, "  {method}: no valid step"),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::step::tests::step;
    use super::*;
    use Purpose::{Repeat, Retry, Search as Searched};

    /// Runs a search against a server that holds up to `capacity`, except
    /// that the steps numbered (from 1) in `noisy` fail whatever their
    /// rate; returns each step as (rate, why run, held).
    fn sweep_noisy(
        capacity: f64,
        noisy: &[usize],
        (from, precision, max): (f64, f64, f64),
    ) -> (Vec<(f64, Purpose, bool)>, Found) {
        let mut search = Search::new(from, precision, max);
        let mut steps = Vec::new();
        while let Some(Next { rate, purpose }) = search.next() {
            let held = rate <= capacity && !noisy.contains(&(steps.len() + 1));
            steps.push((rate, purpose, held));
            search.record(rate, held);
            assert!(steps.len() < 100, "the search ends");
        }
        (steps, search.found())
    }

    fn sweep(capacity: f64, from: f64, precision: f64, max: f64) -> (Vec<f64>, Found) {
        let (steps, found) = sweep_noisy(capacity, &[], (from, precision, max));
        (steps.iter().map(|s| s.0).collect(), found)
    }

    const FROM_100: (f64, f64, f64) = (100.0, 0.05, 1e9);

    #[test]
    fn the_curve_takes_each_rate_once_by_its_latest_step_in_the_order_of_the_rates() {
        let at = |rate: f64, verdict: &'static str, p99_ms: f64| {
            let mut s = step(rate, verdict, &[]);
            s.achieved = rate;
            s.p99_ms = p99_ms;
            s
        };
        let steps = [
            at(100.0, "pass", 1.0),
            at(400.0, "fail", 9.0),
            at(200.0, "pass", 2.0),
            at(300.0, "invalid", 50.0),
            at(200.0, "pass", 3.0),
        ];
        let rates: Vec<(f64, f64)> = curve(&steps).iter().map(|(r, _, p99)| (*r, *p99)).collect();
        assert_eq!(rates, [(100.0, 1.0), (200.0, 3.0), (400.0, 9.0)]);
    }

    /// The step above the rate found failed only because the server did
    /// not keep up with the rate, its SLO held: the headline, each
    /// method's line and the table say that one thing.
    #[test]
    fn a_rate_not_kept_is_said_as_such_by_the_headline_and_each_method() {
        let mut late = step(3100.0, "fail", &[]);
        (late.rate_kept, late.broken) = (false, vec![step::RATE_NOT_KEPT.into()]);
        late.reason =
            "100.0% of requests sent over 10 ms late: every connection busy waiting on the server".into();
        let steps = [step(3000.0, "pass", &[]), late.clone(), step(3000.0, "pass", &[])];
        let found = Found::Rate {
            rate: 3000.0,
            failed_at: 3100.0,
        };
        let knees = BTreeMap::from([("eth_chainId".to_string(), (Some(3100.0), None))]);
        let shown = table(&steps, found, &knees);
        assert!(
            shown.contains("maximum sustainable rate: 3000 requests/s (at 3100/s the SLO held but the rate was not kept)"),
            "{shown}"
        );
        assert!(
            shown.contains("eth_chainId: its SLO held at every rate tried, up to 3100/s, though the rate was not kept at 3100/s"),
            "{shown}"
        );
        assert!(!shown.contains("failed at 3100/s"), "{shown}");
        // The SLO broken there too: it failed, as before.
        late.broken.push("p99 < 50ms (61 ms)".into());
        let steps = [step(3000.0, "pass", &[]), late];
        let said = said(found, rate_alone_failed(&steps, 3100.0));
        assert!(
            said.ends_with("(the SLO held at 3000/s and failed at 3100/s)"),
            "{said}"
        );
    }

    #[test]
    fn a_floor_says_volley_was_the_limit_not_the_server() {
        let said = said(
            Found::Floor {
                held: Some(3100.0),
                undriven_at: 3200.0,
            },
            false,
        );
        assert!(said.starts_with("at least 3100 requests/s"), "{said}");
        assert!(said.contains("volley could not drive 3200/s"), "{said}");
        assert!(!said.contains("maximum sustainable"), "{said}");
        let none = super::said(
            Found::Floor {
                held: None,
                undriven_at: 100.0,
            },
            false,
        );
        assert!(none.starts_with("no rate found"), "{none}");
    }

    #[test]
    fn the_search_doubles_then_bisects_to_the_precision_then_repeats_the_rate_found() {
        let (steps, found) = sweep_noisy(3000.0, &[], FROM_100);
        let rates: Vec<f64> = steps.iter().map(|s| s.0).collect();
        assert_eq!(
            rates,
            [100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0, 2400.0, 2800.0, 3000.0, 3100.0, 3000.0]
        );
        assert_eq!(
            steps[10],
            (3000.0, Repeat, true),
            "the last step repeats the rate found"
        );
        assert!(steps[..10].iter().all(|s| s.1 == Searched));
        assert_eq!(
            found,
            Found::Rate {
                rate: 3000.0,
                failed_at: 3100.0
            }
        );
    }

    #[test]
    fn a_repeat_that_fails_counts_as_a_failure_and_the_search_goes_below() {
        // Step 11 repeats 3000/s and fails: 3000 is now the failure, 2800
        // the rate that held, and the search bisects between them.
        let (steps, found) = sweep_noisy(3000.0, &[11], FROM_100);
        assert_eq!(
            steps[10..],
            [
                (3000.0, Repeat, false),
                (2900.0, Searched, true),
                (2900.0, Repeat, true)
            ]
        );
        assert_eq!(
            found,
            Found::Rate {
                rate: 2900.0,
                failed_at: 3000.0
            }
        );
    }

    #[test]
    fn a_failure_below_a_rate_that_held_is_retried_once_before_it_counts() {
        // 2900/s fails below 3000/s, which held once: it runs again, holds,
        // and is the rate found once its repeat holds too.
        let (steps, found) = sweep_noisy(3000.0, &[11, 12], FROM_100);
        assert_eq!(
            steps[10..],
            [
                (3000.0, Repeat, false),
                (2900.0, Searched, false),
                (2900.0, Retry, true),
                (2900.0, Repeat, true)
            ]
        );
        assert_eq!(
            found,
            Found::Rate {
                rate: 2900.0,
                failed_at: 3000.0
            }
        );
        // Failing its retry too, it counts: 2800/s is then found.
        let (steps, found) = sweep_noisy(3000.0, &[11, 12, 13], FROM_100);
        assert_eq!(
            steps[10..],
            [
                (3000.0, Repeat, false),
                (2900.0, Searched, false),
                (2900.0, Retry, false),
                (2800.0, Repeat, true)
            ]
        );
        assert_eq!(
            found,
            Found::Rate {
                rate: 2800.0,
                failed_at: 2900.0
            }
        );
    }

    #[test]
    fn a_failure_above_every_rate_that_held_is_not_retried() {
        // 400/s fails while doubling: nothing above it held, so it counts.
        let (steps, found) = sweep_noisy(3000.0, &[3], FROM_100);
        let rates: Vec<f64> = steps.iter().map(|s| s.0).collect();
        assert_eq!(rates, [100.0, 200.0, 400.0, 300.0, 350.0, 375.0, 388.0, 388.0]);
        assert!(!steps.iter().any(|s| s.1 == Retry));
        assert_eq!(
            found,
            Found::Rate {
                rate: 388.0,
                failed_at: 400.0
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
            (vec![100.0], Found::BelowStart { start: 100.0 }),
            "nothing held: nothing to repeat"
        );
        let (tried, found) = sweep(1e9, 100.0, 0.05, 500.0);
        assert_eq!(tried, [100.0, 200.0, 400.0, 500.0, 500.0]);
        assert_eq!(found, Found::AtCeiling { rate: 500.0 });
        // The ceiling's repeat fails: the search bisects below it.
        let (steps, found) = sweep_noisy(1e9, &[5], (100.0, 0.05, 500.0));
        let rates: Vec<f64> = steps.iter().map(|s| s.0).collect();
        assert_eq!(
            rates,
            [100.0, 200.0, 400.0, 500.0, 500.0, 450.0, 475.0, 488.0, 488.0]
        );
        assert_eq!(
            found,
            Found::Rate {
                rate: 488.0,
                failed_at: 500.0
            }
        );
        // The start held once and failed its repeat: even the start failed.
        let (steps, found) = sweep_noisy(1e9, &[2], (100.0, 0.05, 100.0));
        assert_eq!(steps, [(100.0, Searched, true), (100.0, Repeat, false)]);
        assert_eq!(found, Found::BelowStart { start: 100.0 });
    }

    #[test]
    fn whatever_steps_fail_the_search_ends_on_a_repeat_that_held() {
        // Every pair of noisy steps among the first twenty.
        for first in 1..=20 {
            for second in first..=20 {
                let (steps, found) = sweep_noisy(3000.0, &[first, second], FROM_100);
                let retries: Vec<f64> = steps.iter().filter(|s| s.1 == Retry).map(|s| s.0).collect();
                let mut once = retries.clone();
                once.sort_by(f64::total_cmp);
                once.dedup();
                assert_eq!(
                    once.len(),
                    retries.len(),
                    "{first} {second}: a rate is retried once"
                );
                let last = *steps.last().unwrap();
                match found {
                    Found::Rate { rate, failed_at } => {
                        assert_eq!(last, (rate, Repeat, true), "{first} {second}: {steps:?}");
                        assert!(rate < failed_at);
                    }
                    Found::BelowStart { .. } => assert!(!last.2),
                    Found::AtCeiling { .. } | Found::Floor { .. } => {
                        panic!("{first} {second}: no ceiling or floor here")
                    }
                }
            }
        }
    }

    #[test]
    fn the_csv_has_a_row_per_step_with_its_verdict_and_reason() {
        let mut failed = step(200.0, "fail", &["m"]);
        failed.broken = vec!["p99 < 1ms (2 ms)".into()];
        failed.reason = "p99 < 1ms failed: 2 ms measured".into();
        let csv = csv(&[step(100.0, "pass", &[]), failed]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "target,step,target_rate,achieved_rate,p50_ms,p90_ms,p99_ms,error_rate,verdict,broken,reason"
        );
        assert_eq!(lines[1], "t,1,100,100.0,1.000,1.000,1.000,0.000000,pass,,");
        assert_eq!(
            lines[2],
            "t,2,200,200.0,1.000,1.000,1.000,0.000000,fail,p99 < 1ms (2 ms),p99 < 1ms failed: 2 ms measured"
        );
        // A comma or a quote in a field is quoted, as CSV readers expect.
        let mut odd = step(2.0, "fail", &[]);
        odd.target = "http://h/a,b".into();
        odd.broken = vec!["a \"b\"".into()];
        odd.reason = "x, y".into();
        let quoted = super::csv(&[odd]);
        assert!(
            quoted.ends_with(
                "\"http://h/a,b\",1,2,2.0,1.000,1.000,1.000,0.000000,fail,\"a \"\"b\"\"\",\"x, y\"\n"
            ),
            "{quoted}"
        );
    }

    #[test]
    fn a_failed_step_line_says_why_and_a_repeat_is_marked() {
        let mut failed = step(400.0, "fail", &[]);
        failed.reason =
            "2.6% of requests sent over 10 ms late: every connection busy, add --connections".into();
        let mut repeat = step(200.0, "pass", &[]);
        repeat.purpose = Purpose::Repeat;
        let found = Found::Rate {
            rate: 200.0,
            failed_at: 400.0,
        };
        let shown = table(
            &[step(200.0, "pass", &[]), failed, repeat],
            found,
            &BTreeMap::new(),
        );
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines[1].ends_with("  pass"), "{shown}");
        assert!(
            lines[2].ends_with(
                "  fail: 2.6% of requests sent over 10 ms late: every connection busy, add --connections"
            ),
            "{shown}"
        );
        assert!(lines[3].ends_with("  pass (repeat)"), "{shown}");
    }
}
