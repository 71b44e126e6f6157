//! `latency.hlog`: HdrHistogram's interval log, one histogram a second per
//! method and one for every call (`TOTAL`), in microseconds, so
//! HdrHistogram's own tools, or a later volley command, can rebuild every
//! latency figure exactly (histograms add; percentiles do not).

use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use super::RunReport;

/// The log's text. Interval start times are seconds since the measured
/// part of the run began (the log's `BaseTime`).
pub fn render(report: &RunReport) -> Vec<u8> {
    let meta = &report.meta;
    let header = format!(
        "volley {}: scenario {}, target {}; latency in microseconds from the intended send; one tag per method, {} for every call",
        meta.version,
        meta.scenario,
        meta.target,
        crate::stats::TOTAL_TAG
    );
    write_log(report, &header, &[(None, report)])
}

/// Several targets' runs in one log, each tag `TARGET/METHOD` (and
/// `TARGET/TOTAL`); each run's intervals count from its own measured start.
pub fn render_targets(runs: &[super::targets::TargetRun]) -> Vec<u8> {
    let first = runs[0].report;
    let names: Vec<&str> = runs.iter().map(|r| r.name).collect();
    let header = format!(
        "volley {}: scenario {}, targets {}; latency in microseconds from the intended send; one tag per target and method, TARGET/{} for every call",
        first.meta.version,
        first.meta.scenario,
        names.join(" "),
        crate::stats::TOTAL_TAG
    );
    let tagged: Vec<(Option<&str>, &RunReport)> = runs.iter().map(|r| (Some(r.name), r.report)).collect();
    write_log(first, &header, &tagged)
}

fn write_log(first: &RunReport, header: &str, runs: &[(Option<&str>, &RunReport)]) -> Vec<u8> {
    let meta = &first.meta;
    let started = humantime::parse_rfc3339(&meta.started_at).unwrap_or(SystemTime::UNIX_EPOCH);
    let measured_from = started + Duration::from_secs_f64(meta.load.warmup_s);
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    // The version line HdrHistogram's Java tools write first (tags need 1.3).
    let Ok(mut log) = IntervalLogWriterBuilder::new()
        .add_comment("[Histogram log format version 1.3]")
        .add_comment(header)
        .with_start_time(started)
        .with_base_time(measured_from)
        .begin_log_with(&mut out, &mut serializer)
    else {
        return out;
    };
    for (target, report) in runs {
        for interval in &report.summary.latency_log.intervals {
            let tag = match target {
                // Target names hold no `/`: the first one splits the tag.
                Some(target) => format!("{target}/{}", interval.tag),
                None => interval.tag.clone(),
            };
            let start = Duration::from_secs(u64::from(interval.second));
            // Writing into memory fails only on a histogram that cannot
            // encode; volley's own can.
            let _ = log.write_histogram(&interval.histogram(), start, interval.length, Tag::new(&tag));
        }
    }
    out
}
