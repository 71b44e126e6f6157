//! `volley compare BASELINE... CURRENT`: result directories side by side,
//! per method. The run is the unit of chance: with several baselines, a
//! change is a regression only when it passes its limit and the current
//! run lies outside the interval the baseline runs say a further run falls
//! in (`significance.rs`); past its limit but inside, it is
//! `inconclusive`, never "ok". With one baseline nothing measures how runs
//! differ: the limits alone judge, and the result says so. Runs of
//! different loads are not compared at all.

mod limits;
mod mix;
mod render;
pub mod rounds;
mod significance;

use std::path::{Path, PathBuf};

use crate::stats::MethodSummary;

pub use limits::{ComparedFigure, Tolerance, Tolerances, DEFAULT_LIMITS};
pub use render::{html_page, junit, markdown, render};
pub use significance::{prediction_interval, SIGNIFICANCE};

/// A run shorter than this gives too few samples for the rank test to
/// tell any but a huge change from chance: `volley run` warns of it.
pub use crate::stats::JUDGED_SECONDS;

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
    /// What says whether the change is more than chance.
    pub evidence: Evidence,
    pub verdict: Change,
}

/// What tells a row's change from chance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Evidence {
    /// One baseline (or a figure of zero): nothing measures how runs
    /// differ, and the limit alone judges.
    LimitOnly,
    /// Where a further baseline run's figure falls (99%), from the
    /// baselines.
    Interval(f64, f64),
    /// An error rate: the two-proportion p over the calls; `None` without calls.
    P(Option<f64>),
    /// A run too short for its figures to be judged.
    TooShort,
}

pub struct Comparison {
    pub baselines: usize,
    pub rows: Vec<Row>,
    /// Differences between the runs that make a comparison doubtful.
    pub notes: Vec<String>,
    /// Why the runs cannot be compared at all: a verdict invalid (a server
    /// that answered nothing is no baseline, and no "no regression"
    /// either), or loads that differ.
    pub invalid: Vec<String>,
    /// The shortest run's measured seconds, for what would settle an
    /// inconclusive row.
    pub shortest_s: f64,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Change::Regression)
    }

    /// A change past its limit the runs cannot tell from chance, or runs
    /// too short to judge any change: within the limits there, `ok` would
    /// pass what was never tested.
    pub fn inconclusive(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Change::Inconclusive) || self.too_short()
    }

    /// A run measured under [`JUDGED_SECONDS`].
    pub fn too_short(&self) -> bool {
        self.shortest_s < JUDGED_SECONDS as f64
    }

    /// A regression, a run that cannot be compared, or (unless allowed) a
    /// change the runs cannot judge: CI must go red.
    pub fn failed(&self, allow_inconclusive: bool) -> bool {
        self.regressed() || !self.invalid.is_empty() || (self.inconclusive() && !allow_inconclusive)
    }

    /// What would let the comparison tell an inconclusive change from chance.
    pub fn what_would_settle_it(&self) -> String {
        if self.too_short() {
            return format!(
                "runs of at least {} s each (the shortest measured {:.3} s)",
                JUDGED_SECONDS, self.shortest_s
            );
        }
        "more baseline runs (volley compare BASE1 BASE2 ... CURRENT): the interval narrows as they add up"
            .into()
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
    let mut invalid = loads_differ(&base, &cur);
    let methods = mix::common_methods(&base, &cur, &mut invalid);
    invalid.extend(mix::shares_differ(&base, &cur));
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
    let shortest_s = (base.iter().chain([&cur]))
        .map(|r| r.run.report.summary.measured_seconds)
        .fold(f64::INFINITY, f64::min);
    let too_short = shortest_s < JUDGED_SECONDS as f64;
    let mut rows = Vec::new();
    for method in &methods {
        let total = method == crate::stats::TOTAL_TAG;
        for (&metric, limit) in &tolerances.0 {
            if metric == ComparedFigure::Rps && !total && !one_seed && methods.len() > 2 {
                continue;
            }
            let each = base.iter().chain([&cur]).map(|read| figures(read, method).ok());
            if no_latency_to_compare(metric, each) {
                continue;
            }
            rows.push(row(&base, &cur, (method, metric, *limit), too_short)?);
        }
    }
    match base.len() {
        1 => notes.push(
            "one baseline run: nothing measures how runs of the baseline differ, so the limits alone judge (give several: volley compare BASE1 BASE2 BASE3 CURRENT)".into(),
        ),
        n => notes.push(format!(
            "{n} baseline runs: each baseline figure is their median; a change is told from chance when the current run lies outside the interval where 99% of further baseline runs would{}",
            match n {
                2 => " (two make that interval so wide that little lies outside it: five or more tell far more)",
                _ => "",
            }
        )),
    }
    if too_short {
        notes.push(format!(
            "a run measured {shortest_s:.3} s: too short to judge a change (at least {JUDGED_SECONDS} s)"
        ));
    }
    invalid.extend(
        (base.iter().map(|b| match base.len() {
            1 => ("the baseline run".to_string(), b),
            _ => (format!("baseline {}", b.dir.display()), b),
        }))
        .chain([("the current run".to_string(), &cur)])
        .filter_map(|(which, read)| invalid_reason(&which, read)),
    );
    if !invalid.is_empty() {
        // Figures that cannot be trusted, or loads that differ, are not
        // judged row by row.
        rows.iter_mut().for_each(|r| r.verdict = Change::NotJudged);
    }
    Ok(Comparison {
        baselines: base.len(),
        rows,
        notes,
        invalid,
        shortest_s,
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

/// Where the runs' loads differ, a line for each key: such runs are not
/// compared (a run at 20/s against a baseline at 100/s is no regression).
fn loads_differ(base: &[Read], cur: &Read) -> Vec<String> {
    let c = &cur.run.report.meta.load;
    let shown = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v}"));
    let seconds = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v} s"));
    // Each key's values, and the baselines that had the one that differs.
    let mut differ: Vec<(&str, String, String, Vec<String>)> = Vec::new();
    for b in base {
        let l = &b.run.report.meta.load;
        let keys: [(&str, String, String); 9] = [
            ("model", l.model.to_string(), c.model.to_string()),
            ("rate", shown(l.rate), shown(c.rate)),
            (
                "concurrency",
                shown(l.concurrency.map(|n| n as f64)),
                shown(c.concurrency.map(|n| n as f64)),
            ),
            (
                "connections",
                l.connections.to_string(),
                c.connections.to_string(),
            ),
            ("duration", seconds(l.duration_s), seconds(c.duration_s)),
            (
                "requests",
                shown(l.requests.map(|n| n as f64)),
                shown(c.requests.map(|n| n as f64)),
            ),
            ("stages", l.stages.to_string(), c.stages.to_string()),
            ("pipeline", l.pipeline.to_string(), c.pipeline.to_string()),
            (
                "shard",
                l.shard.clone().unwrap_or_default(),
                c.shard.clone().unwrap_or_default(),
            ),
        ];
        for (key, was, is) in keys {
            if was == is {
                continue;
            }
            let dir = b.dir.display().to_string();
            match differ
                .iter_mut()
                .find(|(k, w, i, _)| *k == key && *w == was && *i == is)
            {
                Some((.., dirs)) => dirs.push(dir),
                None => differ.push((key, was, is, vec![dir])),
            }
        }
    }
    (differ.into_iter())
        .map(|(key, was, is, dirs)| {
            format!(
                "the loads differ in {key}: {was} in {} against {is}",
                dirs.join(", ")
            )
        })
        .collect()
}

/// Why `read` (named `which`: one of several baselines by its directory)
/// cannot be compared, from its own verdict.
fn invalid_reason(which: &str, read: &Read) -> Option<String> {
    let verdict = &read.run.report.summary.verdict;
    (!verdict.valid).then(|| format!("{which}'s verdict is invalid: {}", verdict.reasons.join("; ")))
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

/// A latency figure of a method no run has latency for (notifications:
/// nothing answers them): no row, as `0.000 ms ok` would say something
/// was compared. Compare's rule and the rounds'.
pub(crate) fn no_latency_to_compare<'m>(
    metric: ComparedFigure,
    mut each: impl Iterator<Item = Option<&'m MethodSummary>>,
) -> bool {
    metric.is_latency() && each.all(|m| m.is_none_or(|m| !m.latency.any()))
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

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// One figure of one method judged: `(method, metric, limit)`; a run too
/// short has its changes past their limits inconclusive.
fn row(
    base: &[Read],
    cur: &Read,
    (method, metric, limit): (&str, ComparedFigure, Tolerance),
    too_short: bool,
) -> anyhow::Result<Row> {
    let figures: Vec<f64> = base
        .iter()
        .map(|b| figure(b, method, metric))
        .collect::<anyhow::Result<_>>()?;
    let baseline = median(&mut figures.clone());
    let current = figure(cur, method, metric)?;
    let evidence = match metric {
        _ if too_short => Evidence::TooShort,
        ComparedFigure::ErrorRate => {
            let mut pooled = (0.0, 0.0);
            for b in base {
                let (errors, calls) = counts(b, method)?;
                pooled = (pooled.0 + errors, pooled.1 + calls);
            }
            Evidence::P(significance::two_proportion_p(pooled, counts(cur, method)?))
        }
        _ => match significance::prediction_interval(&figures) {
            Some((low, high)) => Evidence::Interval(low, high),
            None => Evidence::LimitOnly,
        },
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
    let room = limit.allowed(baseline);
    // Whether the current run is, on the side it moved to, beyond chance.
    let beyond_chance = match evidence {
        Evidence::LimitOnly => true,
        Evidence::TooShort => false,
        Evidence::P(p) => p.is_some_and(|p| p < SIGNIFICANCE),
        Evidence::Interval(low, high) => current < low || current > high,
    };
    let verdict = match (worse > room, worse < -room, beyond_chance) {
        (true, _, true) => Change::Regression,
        (true, _, false) => Change::Inconclusive,
        (_, true, true) => Change::Improved,
        // Within its limit on runs too short to judge: not tested, not ok.
        _ if too_short => Change::NotJudged,
        _ => Change::Ok,
    };
    Ok(Row {
        method: method.to_string(),
        metric,
        baseline,
        current,
        change,
        limit,
        evidence,
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
