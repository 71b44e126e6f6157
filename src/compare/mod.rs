//! `volley compare BASELINE... CURRENT`: result directories side by side,
//! per method. A change is a regression only when it passes its limit, is
//! outside what the baseline runs differ by among themselves, and the
//! runs' own quarter-second samples say it is not chance (a rank test; a
//! two-proportion test for error rates). A change past its limit that the
//! samples cannot tell from chance is `inconclusive`, never "ok".

mod limits;
mod render;
mod significance;

use std::path::{Path, PathBuf};

use crate::stats::MethodSummary;

pub use limits::{ComparedFigure, Tolerance, Tolerances, DEFAULT_LIMITS};
pub use render::{html_page, junit, markdown, render};
pub use significance::{rank_test_p, MIN_SAMPLES, SIGNIFICANCE};

/// A run shorter than this gives too few samples for the rank test to
/// tell any but a huge change from chance: `volley run` warns of it.
pub use crate::stats::JUDGED_SECONDS;
const JUDGED_SAMPLES: usize = (JUDGED_SECONDS * crate::stats::SAMPLES_PER_SECOND) as usize;

/// One result directory, as compare reads it.
pub(crate) use crate::results::SavedRun;

/// A run read, and where from (every error names the file).
struct Read {
    dir: PathBuf,
    run: SavedRun,
}

/// What a row concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Ok,
    Improved,
    Regression,
    /// Past its limit, but the samples cannot tell it from chance.
    Inconclusive,
    /// Not judged: a run's own verdict is invalid.
    NotJudged,
}

impl Change {
    pub fn name(self) -> &'static str {
        match self {
            Change::Ok => "ok",
            Change::Improved => "improved",
            Change::Regression => "REGRESSION",
            Change::Inconclusive => "inconclusive",
            Change::NotJudged => "-",
        }
    }
}

/// One metric of one method, compared.
#[derive(Debug)]
pub struct Row {
    pub method: String,
    pub metric: ComparedFigure,
    /// The baselines' median.
    pub baseline: f64,
    pub current: f64,
    /// Relative change (error rate: the difference, as a fraction).
    pub change: f64,
    pub limit: Tolerance,
    /// How far the baselines lie from their median, at most (0 with one).
    pub spread: f64,
    /// The probability of a difference this large by chance; `None` when
    /// too few samples to tell.
    pub p_value: Option<f64>,
    pub verdict: Change,
}

pub struct Comparison {
    pub baselines: usize,
    pub rows: Vec<Row>,
    /// Differences between the runs that make a comparison doubtful.
    pub notes: Vec<String>,
    /// Why a run's figures cannot be compared at all: its verdict was
    /// invalid (a server that answered nothing is no baseline, and no
    /// "no regression" either).
    pub invalid: Vec<String>,
    /// The shortest run's samples, for what would settle an inconclusive row.
    pub fewest_samples: usize,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Change::Regression)
    }

    pub fn inconclusive(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Change::Inconclusive)
    }

    /// A regression, a run that cannot be compared, or (unless allowed) a
    /// change the runs cannot judge: CI must go red.
    pub fn failed(&self, allow_inconclusive: bool) -> bool {
        self.regressed() || !self.invalid.is_empty() || (self.inconclusive() && !allow_inconclusive)
    }

    /// What would let the test tell an inconclusive change from chance.
    pub fn what_would_settle_it(&self) -> String {
        if self.fewest_samples < JUDGED_SAMPLES {
            return format!(
                "runs of at least {} s each (the shortest has {} quarter-second samples)",
                JUDGED_SECONDS, self.fewest_samples
            );
        }
        "longer runs, or more baseline runs (volley compare BASE1 BASE2 ... CURRENT)".into()
    }
}

/// The result directories `paths` name: each one itself, or, for a
/// directory holding runs (no summary.json of its own), each run in it.
pub fn expand(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut runs = Vec::new();
    for path in paths {
        if path.join("summary.json").is_file() || !path.is_dir() {
            runs.push(path.clone());
            continue;
        }
        let mut inside: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("summary.json").is_file())
            .collect();
        if inside.is_empty() {
            anyhow::bail!(
                "{}: no summary.json, and no run directories in it",
                path.display()
            );
        }
        inside.sort();
        runs.extend(inside);
    }
    Ok(runs)
}

/// Compares `current` with the runs in `baselines` (each a result
/// directory, or a directory of them).
pub fn compare(baselines: &[PathBuf], current: &Path, tolerances: &Tolerances) -> anyhow::Result<Comparison> {
    let read = |dir: &Path| -> anyhow::Result<Read> {
        let run = SavedRun::read(dir)?;
        if run.samples.is_none() {
            anyhow::bail!(
                "{}: no samples.csv, which compare tests: run it again with this volley",
                dir.display()
            );
        }
        Ok(Read {
            dir: dir.to_path_buf(),
            run,
        })
    };
    let base: Vec<Read> = (expand(baselines)?.iter())
        .map(|d| read(d))
        .collect::<anyhow::Result<_>>()?;
    let cur = read(current)?;
    let mut notes = differences(&base, &cur);
    let methods = common_methods(&base, &cur, &mut notes);
    // Each method's share of a mix is drawn from the seed: with other seeds,
    // its rate differs by the draw, not by the server.
    let seeds: std::collections::BTreeSet<u64> = (base.iter().chain([&cur]))
        .map(|r| r.run.report.meta.seed)
        .collect();
    let one_seed = seeds.len() == 1;
    if !one_seed && methods.len() > 2 {
        notes.push(
            "the runs have different seeds: each method's share of the calls is another draw, so only the total's rate is compared (give the scenario a `seed`)".into(),
        );
    }
    let mut rows = Vec::new();
    for method in &methods {
        let total = method == crate::stats::TOTAL_TAG;
        for (&metric, limit) in &tolerances.0 {
            if metric == ComparedFigure::Rps && !total && !one_seed && methods.len() > 2 {
                continue;
            }
            rows.push(row(&base, &cur, method, metric, *limit)?);
        }
    }
    if base.len() > 1 {
        notes.push(format!(
            "{} baseline runs: each baseline figure is their median, and a change must also pass what they differ by",
            base.len()
        ));
    }
    let invalid: Vec<String> = (base.iter().map(|b| ("baseline", b)))
        .chain([("current", &cur)])
        .filter_map(|(which, read)| invalid_reason(which, read))
        .collect();
    if !invalid.is_empty() {
        // Figures that cannot be trusted are not judged row by row.
        rows.iter_mut().for_each(|r| r.verdict = Change::NotJudged);
    }
    let fewest_samples = (base.iter().chain([&cur]))
        .map(|r| whole_samples(&r.run, crate::stats::TOTAL_TAG))
        .min()
        .unwrap_or(0);
    if fewest_samples < MIN_SAMPLES {
        notes.push(format!(
            "a run with {fewest_samples} quarter-second samples is too short to tell a change from chance (at least {MIN_SAMPLES} a side)"
        ));
    }
    Ok(Comparison {
        baselines: base.len(),
        rows,
        notes,
        invalid,
        fewest_samples,
    })
}

/// Notes where the runs differ in scenario or target.
fn differences(base: &[Read], cur: &Read) -> Vec<String> {
    let mut notes = Vec::new();
    let (b, c) = (&base[0].run.report.meta, &cur.run.report.meta);
    for (key, b, c) in [
        ("scenario", &b.scenario, &c.scenario),
        ("target", &b.target, &c.target),
    ] {
        if !same_place(b, c) {
            notes.push(format!(
                "the runs differ in {key}: {b:?} against {c:?}; the comparison may not mean much"
            ));
        }
    }
    notes
}

/// The methods every run called (and the total), with a note for those
/// that only some did.
fn common_methods(base: &[Read], cur: &Read, notes: &mut Vec<String>) -> Vec<String> {
    let names = |run: &SavedRun| -> Vec<String> {
        (run.report.summary.methods.iter())
            .map(|m| m.method.clone())
            .collect()
    };
    let current = names(&cur.run);
    let every_base = |m: &String| base.iter().all(|b| names(&b.run).contains(m));
    let mut methods: Vec<String> = current.iter().filter(|m| every_base(m)).cloned().collect();
    let alone: Vec<&str> = (current.iter().filter(|m| !methods.contains(m)))
        .map(String::as_str)
        .collect();
    if !alone.is_empty() {
        notes.push(format!(
            "only the current run called {}: not compared",
            alone.join(", ")
        ));
    }
    let missing: Vec<String> = (base.iter().flat_map(|b| names(&b.run)))
        .filter(|m| !current.contains(m))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !missing.is_empty() {
        notes.push(format!(
            "only the baseline called {}: not compared",
            missing.join(", ")
        ));
    }
    methods.push(crate::stats::TOTAL_TAG.to_string());
    methods
}

/// Why `read` (named `which`) cannot be compared, from its own verdict.
fn invalid_reason(which: &str, read: &Read) -> Option<String> {
    let verdict = &read.run.report.summary.verdict;
    (!verdict.valid).then(|| {
        format!(
            "the {which} run's verdict is invalid: {}",
            verdict.reasons.join("; ")
        )
    })
}

/// Two runs on the built-in server are on the same server, whatever free
/// port each was given (`builtin (http://127.0.0.1:PORT)`).
fn same_place(a: &str, b: &str) -> bool {
    let place = |text: &str| match text.strip_prefix("builtin (") {
        Some(_) => "builtin".to_string(),
        None => text.to_string(),
    };
    place(a) == place(b)
}

/// `method`'s figures (the total's for `TOTAL`) in the run read.
fn figures<'r>(read: &'r Read, method: &str) -> anyhow::Result<&'r MethodSummary> {
    let summary = &read.run.report.summary;
    match method == crate::stats::TOTAL_TAG {
        true => Ok(&summary.total),
        false => (summary.methods.iter())
            .find(|m| m.method == method)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no figures for {method}: cannot compare",
                    read.dir.join("summary.json").display()
                )
            }),
    }
}

/// The figure `summary.json` holds for `method`'s `metric`.
fn figure(read: &Read, method: &str, metric: ComparedFigure) -> anyhow::Result<f64> {
    let figures = figures(read, method)?;
    Ok(match metric {
        ComparedFigure::P50 => figures.latency.p50_ms,
        ComparedFigure::P99 => figures.latency.p99_ms,
        ComparedFigure::Rps => figures.rps,
        ComparedFigure::ErrorRate => figures.error_rate,
    })
}

/// Errors and calls of `method` over the run, from `summary.json`.
fn counts(read: &Read, method: &str) -> anyhow::Result<(f64, f64)> {
    let figures = figures(read, method)?;
    Ok((figures.errors as f64, figures.calls as f64))
}

/// The run's quarter-second samples of the very figure compared.
fn samples(run: &SavedRun, method: &str, metric: ComparedFigure) -> Vec<f64> {
    let of_method = (run.samples.iter().flatten()).filter(|s| s.method == method);
    match metric {
        ComparedFigure::P50 => of_method.filter_map(|s| s.p50_ms).collect(),
        ComparedFigure::P99 => of_method.filter_map(|s| s.p99_ms).collect(),
        ComparedFigure::Rps => of_method
            .filter(|s| s.is_whole())
            .map(|s| s.calls_per_s())
            .collect(),
        ComparedFigure::ErrorRate => Vec::new(),
    }
}

fn whole_samples(run: &SavedRun, method: &str) -> usize {
    (run.samples.iter().flatten())
        .filter(|s| s.method == method && s.is_whole())
        .count()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn row(
    base: &[Read],
    cur: &Read,
    method: &str,
    metric: ComparedFigure,
    limit: Tolerance,
) -> anyhow::Result<Row> {
    let mut figures: Vec<f64> = base
        .iter()
        .map(|b| figure(b, method, metric))
        .collect::<anyhow::Result<_>>()?;
    let baseline = median(&mut figures);
    let spread = figures.iter().map(|f| (f - baseline).abs()).fold(0.0, f64::max);
    let current = figure(cur, method, metric)?;
    let p_value = match metric {
        ComparedFigure::ErrorRate => {
            let mut pooled = (0.0, 0.0);
            for b in base {
                let (errors, calls) = counts(b, method)?;
                pooled = (pooled.0 + errors, pooled.1 + calls);
            }
            significance::two_proportion_p(pooled, counts(cur, method)?)
        }
        _ => {
            let pooled: Vec<f64> = base
                .iter()
                .flat_map(|b| samples(&b.run, method, metric))
                .collect();
            rank_test_p(&pooled, &samples(&cur.run, method, metric))
        }
    };
    let difference = current - baseline;
    let change = match metric {
        ComparedFigure::ErrorRate => difference,
        _ if baseline > 0.0 => difference / baseline,
        _ => 0.0,
    };
    let worse = if metric.higher_is_worse() {
        difference
    } else {
        -difference
    };
    // Past its limit, and outside what the baselines differ by.
    let room = limit.allowed(baseline).max(spread);
    let significant = p_value.is_some_and(|p| p < SIGNIFICANCE);
    let verdict = match (worse > room, worse < -room, significant) {
        (true, _, true) => Change::Regression,
        (true, _, false) => Change::Inconclusive,
        (_, true, true) => Change::Improved,
        _ => Change::Ok,
    };
    Ok(Row {
        method: method.to_string(),
        metric,
        baseline,
        current,
        change,
        limit,
        spread,
        p_value,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_server_on_two_ports_is_one_place() {
        assert!(same_place(
            "builtin (http://127.0.0.1:38969)",
            "builtin (http://127.0.0.1:41001)"
        ));
        assert!(!same_place("http://127.0.0.1:38969", "http://127.0.0.1:41001"));
        assert!(!same_place("builtin (http://127.0.0.1:1)", "http://127.0.0.1:1"));
        assert!(same_place("demo", "demo") && !same_place("demo", "other"));
    }

    #[test]
    fn a_median_of_any_count() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut [7.0]), 7.0);
    }
}
