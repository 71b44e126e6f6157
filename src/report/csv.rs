//! `summary.csv` (a row per method and a TOTAL row) and `timeseries.csv`
//! (a row per second).
//!
//! Both end with a `partial` column, `true` on every row of a run stopped
//! early: a CSV has no room for a note outside its rows, and a reader that
//! loads one row, or one file without `summary.json`, must still see it.

use super::RunReport;
use crate::stats::MethodSummary;
use crate::stats::OutcomeKind;

pub fn summary(report: &RunReport) -> Vec<u8> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<&str> = vec![
        "method",
        "calls",
        "ok",
        "errors",
        "error_rate",
        "calls_per_s",
        "mean_ms",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
    ];
    header.extend(OutcomeKind::ALL.iter().skip(1).map(|k| k.name()));
    header.extend([
        "service_p50_ms",
        "service_p99_ms",
        "answer_bytes_mean",
        "answer_bytes_max",
        "partial",
    ]);
    out.write_record(&header).expect("writing to memory");
    let summary = &report.summary;
    for method in summary.methods.iter().chain(std::iter::once(&summary.total)) {
        let mut fields = row(method);
        fields.push(summary.partial.to_string());
        out.write_record(fields).expect("writing to memory");
    }
    out.into_inner().expect("writing to memory")
}

fn row(m: &MethodSummary) -> Vec<String> {
    // Empty, not 0.000, where no call was timed (notifications only, or
    // every call failed to connect): no latency, not an instant one.
    let ms = |value: f64| match m.latency.timed {
        0 => String::new(),
        _ => ms(value),
    };
    let mut fields = vec![
        m.method.clone(),
        m.calls.to_string(),
        m.ok.to_string(),
        m.errors.to_string(),
        format!("{:.6}", m.error_rate),
        format!("{:.2}", m.rps),
        ms(m.latency.mean_ms),
        ms(m.latency.p50_ms),
        ms(m.latency.p90_ms),
        ms(m.latency.p99_ms),
        ms(m.latency.p999_ms),
        ms(m.latency.max_ms),
    ];
    fields.extend(OutcomeKind::ALL.iter().skip(1).map(|k| m.outcome(*k).to_string()));
    fields.extend([
        ms(m.service.p50_ms),
        ms(m.service.p99_ms),
        format!("{:.1}", m.answer_bytes_mean),
        m.answer_bytes_max.to_string(),
    ]);
    fields
}

fn ms(value: f64) -> String {
    format!("{value:.3}")
}

/// `samples.csv`: each method's figures (and the total's) per quarter
/// second, a row each, written and read back as `stats::Sample`.
pub fn samples(report: &RunReport) -> Vec<u8> {
    let mut out = csv::Writer::from_writer(Vec::new());
    for sample in &report.summary.samples {
        out.serialize(sample).expect("writing to memory");
    }
    if report.summary.samples.is_empty() {
        // The header alone: a run with no calls has no samples.
        out.write_record(crate::stats::SAMPLE_COLUMNS)
            .expect("writing to memory");
    }
    out.into_inner().expect("writing to memory")
}

/// `connections.csv`: one row, how the run's connections opened.
pub fn connections(report: &RunReport) -> Vec<u8> {
    let c = &report.summary.connections;
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record([
        "planned",
        "opened",
        "reopened",
        "opened_in_all",
        "recycled",
        "failed",
        "connect_p50_ms",
        "connect_p99_ms",
        "connect_max_ms",
        "error",
        "backoff_waits",
        "backoff_s",
    ])
    .expect("writing to memory");
    out.write_record([
        c.planned.to_string(),
        c.opened.to_string(),
        c.reopened.to_string(),
        c.opened_in_all.to_string(),
        c.recycled.to_string(),
        c.failed.to_string(),
        ms(c.time.p50_ms),
        ms(c.time.p99_ms),
        ms(c.time.max_ms),
        c.error.clone().unwrap_or_default(),
        c.backoff_waits.to_string(),
        format!("{:.6}", c.backoff_s),
    ])
    .expect("writing to memory");
    out.into_inner().expect("writing to memory")
}

/// `timeseries.csv`, in the format `series` writes as the run goes.
pub fn timeseries(report: &RunReport) -> Vec<u8> {
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(super::series::timeseries_columns())
        .expect("writing to memory");
    for row in &report.summary.timeseries {
        out.write_record(super::series::timeseries_row(row, report.summary.partial))
            .expect("writing to memory");
    }
    out.into_inner().expect("writing to memory")
}
