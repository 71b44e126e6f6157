//! `latency.hlog`: HdrHistogram's interval log, one histogram a second per
//! method and one for every call (`TOTAL`), in microseconds, so
//! HdrHistogram's own tools, or a later volley command, can rebuild every
//! latency figure exactly (histograms add; percentiles do not).

use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

use super::{RunMeta, RunReport};

/// The log's text. Interval start times are seconds since the measured
/// part of the run began (the log's `BaseTime`).
pub fn render(report: &RunReport) -> Vec<u8> {
    let mut out = begin(&report.meta);
    out.extend(intervals(None, report));
    out
}

/// The log's first lines, before any interval: what a run writes as it
/// begins, then a second's [`lines`] as each closes.
pub fn begin(meta: &RunMeta) -> Vec<u8> {
    let header = format!(
        "volley {}: scenario {}, target {}; latency in microseconds from the intended send; one tag per method, {} for every call",
        meta.version,
        meta.scenario,
        meta.target,
        crate::stats::TOTAL_TAG
    );
    header_lines(meta, &header)
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
    let mut out = header_lines(&first.meta, &header);
    for run in runs {
        out.extend(intervals(Some(run.name), run.report));
    }
    out
}

fn header_lines(meta: &RunMeta, header: &str) -> Vec<u8> {
    let started = humantime::parse_rfc3339(&meta.started_at).unwrap_or(SystemTime::UNIX_EPOCH);
    let measured_from = started + Duration::from_secs_f64(meta.load.warmup_s);
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    // The version line HdrHistogram's Java tools write first (tags need 1.3).
    let _ = IntervalLogWriterBuilder::new()
        .add_comment("[Histogram log format version 1.3]")
        .add_comment(header)
        .with_start_time(started)
        .with_base_time(measured_from)
        .begin_log_with(&mut out, &mut serializer);
    out
}

/// A run's intervals as log lines, each tag prefixed with `target/` when
/// given (target names hold no `/`: the first one splits the tag).
fn intervals(target: Option<&str>, report: &RunReport) -> Vec<u8> {
    let log = &report.summary.latency_log.intervals;
    let decoded: Vec<(String, Histogram<u64>, u32, Duration)> = log
        .iter()
        .map(|i| {
            let tag = match target {
                Some(target) => format!("{target}/{}", i.tag),
                None => i.tag.clone(),
            };
            (tag, i.histogram(), i.second, i.length)
        })
        .collect();
    lines(
        decoded
            .iter()
            .map(|(tag, h, second, length)| (tag.as_str(), h, *second, *length)),
    )
}

/// Interval lines, one per tagged histogram of a second: `(tag,
/// histogram, second, length)`, the second counted from the measured
/// start.
pub fn lines<'a>(tagged: impl IntoIterator<Item = (&'a str, &'a Histogram<u64>, u32, Duration)>) -> Vec<u8> {
    let mut out = Vec::new();
    lines_into(&mut out, &mut V2DeflateSerializer::new(), tagged);
    out
}

/// As [`lines`], into `out` with `serializer`: a run writing its seconds
/// as they close keeps both, so no second allocates them anew.
pub fn lines_into<'a>(
    out: &mut Vec<u8>,
    serializer: &mut V2DeflateSerializer,
    tagged: impl IntoIterator<Item = (&'a str, &'a Histogram<u64>, u32, Duration)>,
) {
    // With no comment and no times, the builder writes nothing of its own.
    let Ok(mut log) = IntervalLogWriterBuilder::new().begin_log_with(out, serializer) else {
        return;
    };
    for (tag, histogram, second, length) in tagged {
        let start = Duration::from_secs(u64::from(second));
        // Writing into memory fails only on a histogram that cannot
        // encode; volley's own can.
        let _ = log.write_histogram(histogram, start, length, Tag::new(tag));
    }
}

/// One interval read back: its tag, histogram, start (seconds since the
/// measured start) and length (seconds).
pub struct ReadInterval {
    pub tag: String,
    pub histogram: Histogram<u64>,
    pub start: f64,
    pub length: f64,
}

/// The intervals of a log, read back as [`lines`] wrote them. A line that
/// does not read is skipped: a log may come from outside, or end in a line
/// cut short by a kill.
pub fn read(log: &[u8]) -> Vec<ReadInterval> {
    use base64::Engine;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let mut deserializer = hdrhistogram::serialization::Deserializer::new();
    let mut read = Vec::new();
    for entry in IntervalLogIterator::new(log) {
        let Ok(LogEntry::Interval(interval)) = entry else {
            continue;
        };
        let Some(tag) = interval.tag() else { continue };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(interval.encoded_histogram()) else {
            continue;
        };
        let Ok(histogram) = deserializer.deserialize::<u64, _>(&mut &bytes[..]) else {
            continue;
        };
        read.push(ReadInterval {
            tag: tag.as_str().to_string(),
            histogram,
            start: interval.start_timestamp().as_secs_f64(),
            length: interval.duration().as_secs_f64(),
        });
    }
    read
}
