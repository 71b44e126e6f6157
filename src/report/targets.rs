//! Several targets' runs of one scenario side by side, each figure with
//! its ratio to the first target's: the table, `summary.csv` and
//! `timeseries.csv` with a `target` column, `summary.json`, a
//! `latency.hlog` whose tags name the target, and `report.html`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::equality::Compared;
use super::{csv, hlog, html, ReportError, RunReport};
use crate::equality::EqualityReport;
use crate::stats::race::RaceFigures;
use crate::stats::MethodSummary;

/// A ratio of one run each carries no measure of chance: said, with what
/// gives one.
const NO_INTERVAL: &str =
    "ratios of one run each: no interval (--rounds N runs A/B rounds and gives each ratio its 99% interval)";

#[derive(Serialize)]
struct EqualityDocument<'a> {
    sample: f64,
    pinned_block: Option<&'a str>,
    #[serde(flatten)]
    report: &'a EqualityReport,
}

/// One target's run, by the name its reports use.
pub struct TargetRun<'a> {
    pub name: &'a str,
    pub report: &'a RunReport,
    /// Its place in the head race, when the scenario asks for one.
    pub race: Option<&'a RaceFigures>,
}

/// A figure of a target against the first target's same figure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratios {
    pub calls_per_s: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

impl Ratios {
    pub fn of(m: &MethodSummary, first: &MethodSummary) -> Ratios {
        let ratio = |a: f64, b: f64| (b > 0.0 && a.is_finite()).then(|| a / b);
        Ratios {
            calls_per_s: ratio(m.rps, first.rps),
            p50: ratio(m.latency.p50_ms, first.latency.p50_ms),
            p99: ratio(m.latency.p99_ms, first.latency.p99_ms),
        }
    }
}

/// In one row of `rows`, the figures of target `name` against `first`'s
/// (none for `first` itself, or where either made no such calls).
fn ratios_in(cells: &[(&str, &MethodSummary)], name: &str, first: &str) -> Option<Ratios> {
    let of = |target: &str| cells.iter().find(|(n, _)| *n == target).map(|(_, m)| *m);
    match (of(name), of(first)) {
        (Some(m), Some(base)) if name != first => Some(Ratios::of(m, base)),
        _ => None,
    }
}

/// A method's (or `TOTAL`'s) figures in each target's run, first first.
fn rows<'a>(runs: &[TargetRun<'a>]) -> Vec<(String, Vec<(&'a str, &'a MethodSummary)>)> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let mut methods: Vec<&str> = first
        .report
        .summary
        .methods
        .iter()
        .map(|m| m.method.as_str())
        .collect();
    for run in &runs[1..] {
        for m in &run.report.summary.methods {
            if !methods.contains(&m.method.as_str()) {
                methods.push(&m.method);
            }
        }
    }
    let pick = |method: &str| -> Vec<(&'a str, &'a MethodSummary)> {
        runs.iter()
            .filter_map(|r| {
                let s = &r.report.summary;
                let m = match method {
                    "TOTAL" => Some(&s.total),
                    _ => s.methods.iter().find(|m| m.method == method),
                };
                m.map(|m| (r.name, m))
            })
            .collect()
    };
    methods
        .iter()
        .copied()
        .chain(["TOTAL"])
        .map(|method| (method.to_string(), pick(method)))
        .collect()
}

fn times(ratio: Option<f64>) -> String {
    ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
}

/// The side-by-side table printed after the runs.
pub fn table(runs: &[TargetRun], parallel: bool) -> String {
    let mut out = String::new();
    let Some(first) = runs.first() else {
        return out;
    };
    let meta = &first.report.meta;
    let _ = writeln!(
        out,
        "\n{} · {} targets, the same requests (seed {}), {} · ratios to {}\n",
        meta.scenario,
        runs.len(),
        meta.seed,
        if parallel {
            "all at once"
        } else {
            "one after another"
        },
        first.name
    );
    let width = runs.iter().map(|r| r.name.len()).max().unwrap_or(6).max(6);
    let table = rows(runs);
    let method_width = table
        .iter()
        .map(|(m, _)| m.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        out,
        "{:<method_width$} {:<width$} {:>9} {:>10} {:>9} {:>9} {:>8} {:>9} {:>8}",
        "method", "target", "calls", "calls/s", "p50 ms", "p99 ms", "errors", "calls/s×", "p99×"
    );
    for (method, cells) in table {
        for (name, m) in &cells {
            let ratios = ratios_in(&cells, name, first.name);
            let _ = writeln!(
                out,
                "{:<method_width$} {:<width$} {:>9} {:>10.1} {:>9} {:>9} {:>7.2}% {:>9} {:>8}",
                method,
                name,
                m.calls,
                m.rps,
                super::table::latency_cell(m.latency.timed, m.latency.p50_ms),
                super::table::latency_cell(m.latency.timed, m.latency.p99_ms),
                m.error_rate * 100.0,
                ratios.map_or(String::new(), |r| times(r.calls_per_s)),
                ratios.map_or(String::new(), |r| times(r.p99)),
            );
        }
    }
    let _ = writeln!(out, "{NO_INTERVAL}");
    out.push_str(&super::race::table(runs));
    for run in runs {
        for usage in &run.report.summary.server {
            let _ = writeln!(out, "{}: {}", run.name, super::table::server_usage_line(usage));
        }
        if let Some(ready) = &run.report.summary.ready {
            let _ = writeln!(out, "{}: {}", run.name, super::ready::ready_line(ready));
        }
    }
    // Each target's verdict and warnings beside its figures: a reader
    // should not have to open each summary.json to learn them.
    out.push('\n');
    for run in runs {
        let v = &run.report.summary.verdict;
        let did = (crate::stats::server_did(&run.report.summary.total))
            .map_or(String::new(), |d| format!(" · {d}"));
        let _ = match v.valid {
            true => writeln!(out, "{}: verdict: valid{did}", run.name),
            false => writeln!(
                out,
                "{}: verdict: invalid: {}{did}",
                run.name,
                v.reasons.join("; ")
            ),
        };
        for warning in &run.report.summary.warnings {
            let _ = writeln!(out, "{}: warning: {}", run.name, warning.message);
        }
        for t in run.report.thresholds.iter().filter(|t| !t.passed) {
            let _ = writeln!(out, "{}: threshold failed: {t}", run.name);
        }
    }
    out
}

/// `summary.csv` of every target: `target` first, then each target's own
/// columns, then its calls/s, p50 and p99 against the first target's.
fn summary_csv(runs: &[TargetRun]) -> Vec<u8> {
    let table = rows(runs);
    let first = runs[0].name;
    let mut out = ::csv::Writer::from_writer(Vec::new());
    for (i, run) in runs.iter().enumerate() {
        let own = csv::summary(run.report);
        let mut reader = ::csv::ReaderBuilder::new().from_reader(own.as_slice());
        if i == 0 {
            let mut head = vec!["target".to_string()];
            head.extend(reader.headers().into_iter().flatten().map(str::to_string));
            head.extend(["calls_per_s_ratio", "p50_ratio", "p99_ratio"].map(String::from));
            out.write_record(&head).expect("writing to memory");
        }
        for record in reader.records().flatten() {
            let method = record.get(0).unwrap_or_default();
            let ratios = table
                .iter()
                .find(|(m, _)| m == method)
                .and_then(|(_, cells)| ratios_in(cells, run.name, first));
            let shown = |r: Option<f64>| r.map_or(String::new(), |r| format!("{r:.4}"));
            let mut fields = vec![run.name.to_string()];
            fields.extend(record.iter().map(str::to_string));
            fields.extend([
                shown(ratios.and_then(|r| r.calls_per_s)),
                shown(ratios.and_then(|r| r.p50)),
                shown(ratios.and_then(|r| r.p99)),
            ]);
            out.write_record(&fields).expect("writing to memory");
        }
    }
    out.into_inner().expect("writing to memory")
}

/// A CSV of each target's rows, `target` the first column.
fn with_target_column(runs: &[TargetRun], render: fn(&RunReport) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let text = render(run.report);
        for (line_no, line) in String::from_utf8_lossy(&text).lines().enumerate() {
            match line_no {
                0 if i == 0 => out.extend_from_slice(format!("target,{line}\n").as_bytes()),
                0 => {}
                _ => out.extend_from_slice(format!("{},{line}\n", run.name).as_bytes()),
            }
        }
    }
    out
}

#[derive(Serialize)]
struct TargetEntry<'a> {
    name: &'a str,
    url: &'a str,
    /// Where this target's own files are, below the comparison's.
    dir: &'a str,
    /// Per method, then `TOTAL`: the figures against the first target's.
    ratios: Vec<(String, Option<Ratios>)>,
    /// Its place in the head race (`race = "POINTER"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    race: Option<&'a RaceFigures>,
    report: &'a RunReport,
}

#[derive(Serialize)]
struct Document<'a> {
    tool: &'static str,
    version: &'static str,
    scenario: &'a str,
    seed: u64,
    /// "sequential" or "parallel".
    order: &'static str,
    targets: Vec<TargetEntry<'a>>,
    /// The targets' answers compared (`--check-equal`, `[equality]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    equality: Option<EqualityDocument<'a>>,
}

fn summary_json(runs: &[TargetRun], parallel: bool, compared: Option<Compared>) -> Vec<u8> {
    let first = &runs[0];
    let table = rows(runs);
    let targets = runs
        .iter()
        .map(|run| TargetEntry {
            name: run.name,
            url: &run.report.meta.target,
            dir: run.name,
            ratios: table
                .iter()
                .map(|(method, cells)| (method.clone(), ratios_in(cells, run.name, first.name)))
                .collect(),
            race: run.race,
            report: run.report,
        })
        .collect();
    let document = Document {
        tool: "volley",
        version: env!("CARGO_PKG_VERSION"),
        scenario: &first.report.meta.scenario,
        seed: first.report.meta.seed,
        order: if parallel { "parallel" } else { "sequential" },
        targets,
        equality: compared.map(|(report, sample, pinned_block)| EqualityDocument {
            sample,
            pinned_block,
            report,
        }),
    };
    let mut out = serde_json::to_vec_pretty(&document).expect("the reports are plain data");
    out.push(b'\n');
    out
}

fn page(runs: &[TargetRun], compared: Option<Compared>) -> Vec<u8> {
    let head = [
        "method",
        "target",
        "calls",
        "calls/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "calls/s ×",
        "p99 ×",
    ];
    let first = runs[0].name;
    let rows: Vec<html::CompareRow> = rows(runs)
        .into_iter()
        .flat_map(|(method, cells)| {
            cells
                .iter()
                .map(|(name, m)| {
                    let ratios = ratios_in(&cells, name, first);
                    html::CompareRow {
                        cells: vec![
                            method.clone(),
                            name.to_string(),
                            m.calls.to_string(),
                            format!("{:.1}", m.rps),
                            format!("{:.3}", m.latency.p50_ms),
                            format!("{:.3}", m.latency.p99_ms),
                            format!("{:.2}%", m.error_rate * 100.0),
                            ratios.map_or(String::new(), |r| times(r.calls_per_s)),
                            ratios.map_or(String::new(), |r| times(r.p99)),
                        ],
                        verdict: String::new(),
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let spectra: Vec<html::Spectra> = runs.iter().map(|r| super::latencies(r.report).spectra).collect();
    let named: Vec<(&str, &html::Spectra)> = runs.iter().map(|r| r.name).zip(&spectra).collect();
    let mut lines = vec![
        format!("Ratios are to {first}; each target's own report is in its directory."),
        NO_INTERVAL.to_string(),
    ];
    for run in runs {
        let verdict = &run.report.summary.verdict;
        lines.push(match verdict.valid {
            true => format!("{}: verdict: valid", run.name),
            false => format!("{}: verdict: invalid: {}", run.name, verdict.reasons.join("; ")),
        });
    }
    let answers = super::race::html(runs) + &compared.map_or(String::new(), super::equality::html);
    let title = "volley: targets side by side";
    html::side_by_side_page(title, &head, &rows, (&lines, &answers), &named).into_bytes()
}

/// Writes the side-by-side files into `dir` (each target's own are in
/// `dir/NAME/`), `summary.json` last, each written whole then renamed.
pub fn write_files(
    dir: &Path,
    runs: &[TargetRun],
    parallel: bool,
    compared: Option<Compared>,
) -> Result<Vec<PathBuf>, ReportError> {
    let files: [(&str, Vec<u8>); 5] = [
        ("summary.csv", summary_csv(runs)),
        ("timeseries.csv", with_target_column(runs, csv::timeseries)),
        ("latency.hlog", hlog::render_targets(runs)),
        ("report.html", page(runs, compared)),
        ("summary.json", summary_json(runs, parallel, compared)),
    ];
    super::write_whole(dir, files.iter().map(|(name, bytes)| (*name, bytes.as_slice())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(rps: f64, p50_ms: f64, p99_ms: f64) -> MethodSummary {
        let mut m = MethodSummary {
            rps,
            ..Default::default()
        };
        (m.latency.p50_ms, m.latency.p99_ms) = (p50_ms, p99_ms);
        m
    }

    #[test]
    fn a_ratio_is_to_the_first_targets_figure_and_none_where_it_had_none() {
        let first = summary(200.0, 2.0, 8.0);
        let ratios = Ratios::of(&summary(300.0, 1.0, 8.0), &first);
        assert_eq!(
            ratios,
            Ratios {
                calls_per_s: Some(1.5),
                p50: Some(0.5),
                p99: Some(1.0)
            }
        );
        // The first made no such calls (a zero rate, no latency): no ratio,
        // never an infinity.
        let none = Ratios::of(&summary(300.0, 1.0, 8.0), &summary(0.0, 0.0, 0.0));
        assert_eq!((none.calls_per_s, none.p50, none.p99), (None, None, None));
        let infinite = Ratios::of(&summary(f64::INFINITY, 1.0, 8.0), &first);
        assert_eq!(infinite.calls_per_s, None);
    }
}
