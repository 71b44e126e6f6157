//! `report.html`: one self-contained page (no script, no network) with the
//! run's table, verdict and thresholds, and lean SVG plots: the latency
//! percentile spectrum per method on a log-scaled percentile axis, calls/s,
//! p50/p99 and errors over time with stage boundaries and dashboard events.
//!
//! It reads what `summary.json` and `latency.hlog` hold, so `volley report
//! DIR` renders the same page from a result directory.

use std::collections::BTreeMap;
use std::fmt::Write;

use hdrhistogram::Histogram;

use super::RunReport;
use crate::stats::{RunSummary, SecondRow};

/// Each tag's (method's, and `TOTAL`'s) latencies over the whole run, µs.
pub type Spectra = BTreeMap<String, Histogram<u64>>;

/// What the page plots of the latencies: each tag's whole run, and its p99
/// second by second.
#[derive(Default)]
pub struct Latencies {
    pub spectra: Spectra,
    /// Per tag: (second of the measured run, p99 in ms).
    pub p99_by_second: BTreeMap<String, Vec<(u32, f64)>>,
}

impl Latencies {
    /// Adds one second's histogram of `tag`.
    pub fn add(&mut self, tag: &str, second: u32, histogram: &Histogram<u64>) {
        // Auto-resizing: each second's histogram was sized to its own values.
        let merged = self
            .spectra
            .entry(tag.to_string())
            .or_insert_with(|| Histogram::new(3).expect("3 significant figures"));
        let _ = merged.add(histogram);
        self.p99_by_second
            .entry(tag.to_string())
            .or_default()
            .push((second, histogram.value_at_quantile(0.99) as f64 / 1000.0));
    }
}

/// The plots' line colours, in order (the live web page's too).
pub const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The page for `report` (what `summary.json` holds) and its spectra.
pub fn render(report: &RunReport, latencies: &Latencies) -> String {
    let (meta, summary) = (&report.meta, &report.summary);
    let mut out = String::new();
    let title = format!("volley · {}", meta.scenario);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", esc(&title));
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} ({}) · {} model · {} measured · started {}</p>",
        esc(&meta.target),
        esc(&meta.transport_shown()),
        esc(meta.load.model),
        super::measured_time(summary.measured_seconds),
        esc(&meta.started_at)
    );
    verdict(&mut out, report);
    table(&mut out, summary);
    let _ = writeln!(out, "<div class=\"charts\">");
    out.push_str(&spectrum_chart(&latencies.spectra));
    out.push_str(&per_method_chart(&latencies.p99_by_second));
    for chart in time_charts(summary, meta.load.warmup_s) {
        out.push_str(&chart);
    }
    let _ = writeln!(out, "</div>");
    for warning in &summary.warnings {
        let _ = writeln!(out, "<p class=\"warning\">warning: {}</p>", esc(&warning.message));
    }
    out.push_str("</body></html>\n");
    out
}

/// The page's look, shared with the live web page.
pub const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\
h1{font-size:20px;margin:0 0 4px}.meta{color:#555;margin:0 0 12px}\
table{border-collapse:collapse;margin:8px 0 16px}th,td{padding:3px 10px;text-align:right;border-bottom:1px solid #ddd}\
th:first-child,td:first-child{text-align:left}tr.total td{font-weight:600}\
.valid{color:#1a7f37}.invalid,.fail{color:#cf222e}.pass{color:#1a7f37}\
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(540px,1fr));gap:16px}\
svg{background:#fff;border:1px solid #e5e5e5}.warning{color:#9a6700}\
svg text{font:12px system-ui,sans-serif;fill:#333}";

/// Text safe in HTML and SVG.
pub(super) fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn verdict(out: &mut String, report: &RunReport) {
    let verdict = &report.summary.verdict;
    let did =
        crate::stats::server_did(&report.summary.total).map_or(String::new(), |d| format!(" · {}", esc(&d)));
    let _ = match verdict.valid {
        false => writeln!(
            out,
            "<p class=\"invalid\"><b>verdict: invalid</b>: {}{did}</p>",
            esc(&verdict.reasons.join("; "))
        ),
        true => writeln!(out, "<p class=\"valid\"><b>verdict: valid</b>{did}</p>"),
    };
    if report.thresholds.is_empty() {
        return;
    }
    out.push_str("<table><tr><th>threshold</th><th>measured</th><th></th></tr>\n");
    for t in &report.thresholds {
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td class=\"{}\">{}</td></tr>",
            esc(&t.expression),
            esc(&t.shown),
            if t.passed { "pass" } else { "fail" },
            if t.passed { "pass" } else { "FAIL" }
        );
    }
    out.push_str("</table>\n");
}

fn table(out: &mut String, summary: &RunSummary) {
    out.push_str("<table><tr><th>method</th><th>calls</th><th>ok</th><th>errors</th><th>calls/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th></tr>\n");
    let rows = (summary.methods.iter().map(|m| (m, ""))).chain([(&summary.total, " class=\"total\"")]);
    for (m, class) in rows {
        let l = &m.latency;
        let _ = writeln!(
            out,
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            esc(&m.method),
            m.calls,
            m.ok,
            m.errors,
            m.rps,
            l.p50_ms,
            l.p90_ms,
            l.p99_ms,
            l.p999_ms,
            l.max_ms
        );
    }
    out.push_str("</table>\n");
}

/// A line of points in data coordinates.
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

/// How the x axis reads: plain numbers from 0 (seconds, rates), or
/// percentiles placed by log10(1/(1-q)).
#[derive(Clone, Copy)]
enum XAxis {
    Linear,
    Percentile,
}

/// Quantiles of the spectrum: each decade of "nines" and its halves.
const QUANTILES: [f64; 13] = [
    0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 0.999999,
];

/// A histogram's percentile spectrum as a line.
fn spectrum(name: &str, h: &Histogram<u64>) -> Series {
    Series {
        name: name.to_string(),
        points: QUANTILES
            .iter()
            // No quantile finer than the calls recorded can resolve.
            .filter(|q| (1.0 - **q) * h.len() as f64 >= 1.0 || **q == 0.0)
            .map(|q| ((1.0 / (1.0 - q)).log10(), h.value_at_quantile(*q) as f64 / 1000.0))
            .collect(),
    }
}

/// One row of the comparison's table: its cells, and its verdict (which
/// colours the row).
pub struct CompareRow {
    pub cells: Vec<String>,
    pub verdict: String,
}

/// `volley compare --html`: the comparison's table (`head` its column
/// names; `lines` the notes and the result), and for each method both
/// runs' percentile spectra on one plot.
pub fn compare_page(
    head: &[&str],
    rows: &[CompareRow],
    lines: &[String],
    baseline: &Spectra,
    current: &Spectra,
) -> String {
    let runs = [("baseline", baseline), ("current", current)];
    side_by_side_page("volley compare", head, rows, (lines, ""), &runs)
}

/// A page of runs side by side: a table (`head` its column names; a row's
/// verdict colours it), notes, and for each tag every run's percentile
/// spectrum on one plot (a tag only some runs have is plotted for those).
pub fn side_by_side_page(
    title: &str,
    head: &[&str],
    rows: &[CompareRow],
    (lines, section): (&[String], &str),
    runs: &[(&str, &Spectra)],
) -> String {
    let title = esc(title);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{STYLE}</style></head><body>\n<h1>{title}</h1>\n<table><tr>"
    );
    for name in head {
        let _ = write!(out, "<th>{}</th>", esc(name));
    }
    out.push_str("</tr>\n");
    for row in rows {
        let class = match row.verdict.as_str() {
            "REGRESSION" | "fail" => " class=\"fail\"",
            "improved" => " class=\"pass\"",
            _ => "",
        };
        let _ = write!(out, "<tr{class}>");
        for cell in &row.cells {
            let _ = write!(out, "<td>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    for line in lines {
        let _ = writeln!(out, "<p>{}</p>", esc(line));
    }
    // A section of its own, already HTML (the answers compared).
    out.push_str(section);
    out.push_str("<div class=\"charts\">\n");
    let tags: std::collections::BTreeSet<&String> = runs.iter().flat_map(|(_, s)| s.keys()).collect();
    for tag in tags {
        let series: Vec<Series> = runs
            .iter()
            .filter_map(|(name, spectra)| Some(spectrum(name, spectra.get(tag).filter(|h| !h.is_empty())?)))
            .collect();
        if series.len() < 2 {
            continue;
        }
        out.push_str(&chart(
            &format!("{tag}: latency by percentile"),
            "percentile (log scale)",
            "latency ms",
            &series,
            XAxis::Percentile,
            &[],
        ));
    }
    out.push_str("</div></body></html>\n");
    out
}

/// Each method's p99 second by second, from the latency log (with
/// `TOTAL`, so each line has the colour it has in the spectrum).
fn per_method_chart(p99: &BTreeMap<String, Vec<(u32, f64)>>) -> String {
    let series: Vec<Series> = p99
        .iter()
        .map(|(tag, seconds)| Series {
            name: tag.clone(),
            points: seconds.iter().map(|(s, ms)| (f64::from(*s) + 1.0, *ms)).collect(),
        })
        .collect();
    chart(
        "p99 by method over time",
        "second of the run",
        "p99 ms",
        &series,
        XAxis::Linear,
        &[],
    )
}

fn spectrum_chart(spectra: &Spectra) -> String {
    let series: Vec<Series> = spectra
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(tag, h)| spectrum(tag, h))
        .collect();
    chart(
        "Latency by percentile",
        "percentile (log scale)",
        "latency ms",
        &series,
        XAxis::Percentile,
        &[],
    )
}

/// `warmup`: events are timed from the run's start, the rows from the
/// measured part's.
fn time_charts(summary: &RunSummary, warmup: f64) -> Vec<String> {
    let rows = &summary.timeseries;
    let series = |name: &str, figure: fn(&SecondRow) -> f64| Series {
        name: name.to_string(),
        points: rows
            .iter()
            .map(|r| (f64::from(r.second) + 1.0, figure(r)))
            .collect(),
    };
    let mut markers: Vec<(f64, String)> = (summary.stages.iter().skip(1))
        .map(|s| (s.start_s, format!("stage {}", s.number())))
        .collect();
    markers.extend((summary.events.iter()).map(|e| (e.at_s - warmup, e.what.clone())));
    vec![
        chart(
            "Calls per second",
            "second of the run",
            "calls/s",
            &[series("calls/s", |r| r.rps)],
            XAxis::Linear,
            &markers,
        ),
        chart(
            "Latency over time",
            "second of the run",
            "latency ms",
            &[series("p50", |r| r.p50_ms), series("p99", |r| r.p99_ms)],
            XAxis::Linear,
            &markers,
        ),
        chart(
            "Errors per second, by outcome",
            "second of the run",
            "errors",
            &error_series(rows),
            XAxis::Linear,
            &markers,
        ),
    ]
}

/// One line per error outcome that happened (or one of all errors, at
/// zero, when none did).
fn error_series(rows: &[SecondRow]) -> Vec<Series> {
    let mut outcomes: Vec<&str> = rows
        .iter()
        .flat_map(|r| r.error_outcomes.keys().copied())
        .collect();
    outcomes.sort();
    outcomes.dedup();
    if outcomes.is_empty() {
        outcomes.push("errors");
    }
    outcomes
        .into_iter()
        .map(|outcome| Series {
            points: rows
                .iter()
                .map(|r| {
                    let errors = r.error_outcomes.get(outcome).copied().unwrap_or(0);
                    (f64::from(r.second) + 1.0, errors as f64)
                })
                .collect(),
            name: outcome.to_string(),
        })
        .collect()
}

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 48.0;

/// One target's sweep: its name, and per valid step the rate achieved,
/// p50 and p99 (ms).
pub type SweepLine<'a> = (&'a str, Vec<(f64, f64, f64)>);

/// Latency against throughput, a point per sweep step: p50 and p99 (ms)
/// over the rate achieved (requests/s), a line each per target, as a
/// standalone SVG.
pub fn sweep_chart(targets: &[SweepLine]) -> String {
    let several = targets.len() > 1;
    let mut series = Vec::new();
    for (target, points) in targets {
        let mut sorted = points.clone();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let name = |p: &str| {
            if several {
                format!("{target} {p}")
            } else {
                p.to_string()
            }
        };
        series.push(Series {
            name: name("p50"),
            points: sorted.iter().map(|p| (p.0, p.1)).collect(),
        });
        series.push(Series {
            name: name("p99"),
            points: sorted.iter().map(|p| (p.0, p.2)).collect(),
        });
    }
    let names: Vec<&str> = targets.iter().map(|t| t.0).collect();
    let title = format!("Latency against throughput · {}", names.join(", "));
    chart(
        &title,
        "requests/s achieved",
        "latency (ms)",
        &series,
        XAxis::Linear,
        &[],
    )
}

/// A line chart in SVG, axes labelled, with vertical markers (stage
/// boundaries, events) and a legend.
fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_axis: XAxis,
    markers: &[(f64, String)],
) -> String {
    let scale = Scale::new(series);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{}\">",
        esc(title)
    );
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"20\" style=\"font-weight:600;font-size:14px\">{}</text>",
        esc(title)
    );
    axes(&mut svg, &scale, x_axis, x_label, y_label);
    chart_markers(&mut svg, &scale, markers);
    lines_and_legend(&mut svg, &scale, series);
    svg.push_str("</svg>\n");
    svg
}

/// Where a chart's values land: the ranges its axes cover (both from 0:
/// seconds, rates, latencies and nines of a percentile are never below
/// it), and the plot's size inside the margins.
struct Scale {
    x_max: f64,
    y_max: f64,
    plot_w: f64,
    plot_h: f64,
}

impl Scale {
    fn new(series: &[Series]) -> Scale {
        let all = || series.iter().flat_map(|s| s.points.iter());
        let x_max = all().map(|p| p.0).fold(f64::NAN, f64::max);
        let x_max = if x_max.is_finite() && x_max > 0.0 {
            x_max
        } else {
            1.0
        };
        let y_max = nice(all().map(|p| p.1).fold(0.0, f64::max));
        let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
        Scale {
            x_max,
            y_max,
            plot_w,
            plot_h,
        }
    }

    fn x(&self, v: f64) -> f64 {
        LEFT + v / self.x_max * self.plot_w
    }

    fn y(&self, v: f64) -> f64 {
        TOP + self.plot_h - v / self.y_max * self.plot_h
    }
}

/// The grid, the ticks on both axes, the axes and their labels.
fn axes(svg: &mut String, scale: &Scale, x_axis: XAxis, x_label: &str, y_label: &str) {
    let Scale {
        x_max,
        y_max,
        plot_w,
        plot_h,
    } = *scale;
    // Grid and y ticks.
    for i in 0..=4 {
        let v = y_max * i as f64 / 4.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{0}\" y1=\"{1:.1}\" y2=\"{1:.1}\" stroke=\"#eee\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\">{4}</text>",
            WIDTH - RIGHT,
            scale.y(v),
            LEFT - 6.0,
            scale.y(v) + 4.0,
            tick(v)
        );
    }
    for (value, label) in x_ticks(x_axis, x_max) {
        let _ = writeln!(
            svg,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1}\" stroke=\"#f3f3f3\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
            scale.x(value),
            TOP + plot_h,
            TOP + plot_h + 16.0,
            esc(&label)
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{0}\" stroke=\"#999\"/><line x1=\"{LEFT}\" x2=\"{1}\" y1=\"{0}\" y2=\"{0}\" stroke=\"#999\"/>",
        TOP + plot_h,
        WIDTH - RIGHT
    );
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        LEFT + plot_w / 2.0,
        HEIGHT - 10.0,
        esc(x_label),
        TOP + plot_h / 2.0,
        esc(y_label)
    );
}

/// The markers within the x axis's range, as dashed vertical lines.
fn chart_markers(svg: &mut String, scale: &Scale, markers: &[(f64, String)]) {
    let Scale { x_max, plot_h, .. } = *scale;
    for (at, label) in markers.iter().filter(|(at, _)| *at >= 0.0 && *at <= x_max) {
        let _ = writeln!(
            svg,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1}\" stroke=\"#888\" stroke-dasharray=\"4 3\"><title>{2}</title></line><text x=\"{3:.1}\" y=\"{4:.1}\" style=\"font-size:10px;fill:#666\">{5}</text>",
            scale.x(*at),
            TOP + plot_h,
            esc(label),
            scale.x(*at) + 3.0,
            TOP + plot_h - 4.0,
            esc(&shorten(label, 24))
        );
    }
}

/// One line per series, and its entry in the legend.
fn lines_and_legend(svg: &mut String, scale: &Scale, series: &[Series]) {
    // The legend runs left to right, each entry as wide as its name.
    let (mut lx, mut ly) = (LEFT + 10.0, TOP + 14.0);
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = s
            .points
            .iter()
            .map(|(px, py)| format!("{:.1},{:.1}", scale.x(*px), scale.y(*py)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>",
            points.join(" "),
            esc(&s.name)
        );
        let name = shorten(&s.name, 20);
        let width = 24.0 + 7.0 * name.chars().count() as f64;
        if lx + width > WIDTH - RIGHT {
            (lx, ly) = (LEFT + 10.0, ly + 16.0);
        }
        let _ = writeln!(
            svg,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            ly - 9.0,
            lx + 14.0,
            esc(&name)
        );
        lx += width;
    }
}

fn shorten(name: &str, most: usize) -> String {
    match name.char_indices().nth(most) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_string(),
    }
}

/// The x axis's ticks from 0: whole seconds, or the percentiles 0, 90, 99,
/// 99.9 …
fn x_ticks(axis: XAxis, max: f64) -> Vec<(f64, String)> {
    match axis {
        XAxis::Percentile => (0..=6)
            .map(|nines| nines as f64)
            .filter(|v| *v <= max + 1e-9)
            .map(|v| {
                let label = match v as u32 {
                    0 => "0%".to_string(),
                    n => format!("{}%", 100.0 - 100.0 / 10f64.powi(n as i32)),
                };
                (v, label)
            })
            .collect(),
        XAxis::Linear => {
            let step = nice(max / 6.0).max(1.0);
            let mut ticks = Vec::new();
            let mut v = 0.0;
            while v <= max + 1e-9 {
                ticks.push((v, tick(v)));
                v += step;
            }
            ticks
        }
    }
}

/// The next round number at or above `v` (1, 2, 5 times a power of ten).
fn nice(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0]
        .iter()
        .map(|m| m * power)
        .find(|n| *n >= v)
        .unwrap_or(10.0 * power)
}

/// A tick's label: at most three decimals, none trailing.
fn tick(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
pub(crate) mod tests;
