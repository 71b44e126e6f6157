//! Turning a finished run into output: one file per format.

pub mod checkpoint;
mod ci;
mod csv;
pub mod equality;
pub mod hlog;
pub mod html;
mod json;
pub mod race;
mod ready;
pub mod series;
pub mod shard;
mod table;
pub mod targets;

pub use crate::stats::count;
pub(crate) use ci::{cell, xml};
pub use ci::{junit, junit_of, markdown};
pub use table::{latency_cell, progress_line, render_table, verdict_line};

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::plan::LoadPlan;
use crate::stats::read;
use crate::stats::RunSummary;

/// The layout of `summary.json`, its first field. A later volley may add
/// fields and keep it; one that renames or removes any raises it, and a
/// reader refuses a layout it does not know.
pub const FORMAT: u32 = 1;

/// How long the measured part ran, as the reports' headers say it:
/// `12.00 s`, or in milliseconds under a second (a run of 100 calls
/// reading `0.00 s` said it measured nothing).
pub fn measured_time(seconds: f64) -> String {
    match seconds >= 1.0 {
        true => format!("{seconds:.2} s"),
        false => format!("{:.1} ms", seconds * 1000.0),
    }
}

/// A run's figures and what is needed to read them: `summary.json`, as
/// written and as read back.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReport {
    /// [`FORMAT`].
    pub format: u32,
    pub meta: RunMeta,
    pub summary: RunSummary,
    /// Each threshold asked for, judged on the summary, in order.
    pub thresholds: Vec<crate::thresholds::ThresholdResult>,
    /// The requests kept to compare targets' answers, and their answers.
    #[serde(skip)]
    pub captured: Vec<crate::engine::Captured>,
    /// The head race's arrivals, tallied across targets after the runs.
    #[serde(skip)]
    pub race: Option<crate::stats::race::Arrivals>,
    /// A shard's record (`--shard`), written as `shard.json`.
    #[serde(skip)]
    pub shard: Option<shard::ShardRecord>,
}

impl RunMeta {
    /// The transport as reports show it, with `JSON-RPC 1.0` where spoken.
    pub fn transport_shown(&self) -> String {
        transport_shown(&self.transport, &self.jsonrpc)
    }
}

/// `http/1.1`, or `http/1.1, JSON-RPC 1.0`: one wording for every report.
fn transport_shown(transport: &str, jsonrpc: &str) -> String {
    match jsonrpc {
        "1.0" => format!("{transport}, JSON-RPC 1.0"),
        _ => transport.to_string(),
    }
}

impl RunReport {
    /// Whether every threshold held (true when none was asked for).
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|t| t.passed)
    }
}

/// What was run, where and when.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunMeta {
    pub tool: String,
    /// The volley that ran it.
    pub version: String,
    pub scenario: String,
    #[serde(deserialize_with = "read::required")]
    pub scenario_file: Option<String>,
    pub target: String,
    pub transport: String,
    /// The JSON-RPC spoken: "2.0", or "1.0" where the scenario says.
    pub jsonrpc: String,
    /// What TLS agreed on: version, cipher suite, ALPN.
    #[serde(deserialize_with = "read::required")]
    pub tls: Option<String>,
    pub load: LoadMeta,
    pub seed: u64,
    pub started_at: String,
    pub ended_at: String,
    /// Header names only: their values may be secrets.
    pub header_names: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadMeta {
    /// "closed" or "open".
    #[serde(deserialize_with = "read::model")]
    pub model: read::Name,
    /// Requests/s of a constant open-model load. A staged load has no one
    /// rate: null, and each stage's figures are in `summary.stages`.
    #[serde(deserialize_with = "read::required")]
    pub rate: Option<f64>,
    /// Calls in flight of a constant closed-model load (null otherwise).
    #[serde(deserialize_with = "read::required")]
    pub concurrency: Option<usize>,
    pub connections: usize,
    #[serde(deserialize_with = "read::required")]
    pub duration_s: Option<f64>,
    #[serde(deserialize_with = "read::required")]
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    /// How long calls in flight at the schedule's end could still take;
    /// absent from files of a volley before the grace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_s: Option<f64>,
    pub threads: usize,
    /// Stages of a staged load (0: constant).
    pub stages: usize,
    /// `I/N` when this run was shard I of N: the figures above are its share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// A replay sent at its recorded times (`timing = "recorded"`).
    pub recorded_pace: bool,
    /// HTTP/1.1 requests in flight on each connection (`--pipeline`); 1
    /// waits for each answer, as a file from before pipelining did.
    #[serde(default = "no_pipelining")]
    pub pipeline: usize,
}

fn no_pipelining() -> usize {
    1
}

impl LoadMeta {
    /// What `plan` runs, as reports state it.
    pub fn new(plan: &LoadPlan) -> Self {
        LoadMeta {
            model: if plan.is_open() { "open" } else { "closed" },
            // The plan's own rate is where a staged load starts, not what it
            // ran: stating it as the run's rate misled.
            // A shard's own share of the run's rate and calls in flight.
            // A recorded pace has no one rate either.
            rate: (plan.constant_rate())
                .filter(|_| plan.recorded.is_none())
                .map(|rate| rate / f64::from(plan.shard.count)),
            concurrency: (!plan.is_open() && plan.stages.is_empty()).then(|| plan.closed_concurrency()),
            connections: plan.connections,
            duration_s: plan.duration.map(|d| d.as_secs_f64()),
            requests: plan.requests,
            warmup_s: plan.warmup.as_secs_f64(),
            timeout_s: plan.timeout.as_secs_f64(),
            grace_s: Some(plan.grace.as_secs_f64()),
            threads: plan.threads_used(),
            stages: plan.stages.len(),
            shard: (!plan.shard.is_whole()).then(|| plan.shard.to_string()),
            recorded_pace: plan.recorded.is_some(),
            pipeline: 1,
        }
    }
}

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("cannot create result directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// Writes `summary.csv`, `timeseries.csv`, `samples.csv`, `connections.csv`, `latency.hlog`, the two
/// github-action-benchmark files, `report.html`, a shard's `shard.json` and, last, `summary.json`
/// into `dir`,
/// returning the paths written.
pub fn write_files(dir: &Path, report: &RunReport) -> Result<Vec<PathBuf>, ReportError> {
    type Render = fn(&RunReport) -> Vec<u8>;
    let files: [(&str, Render); 9] = [
        ("summary.csv", csv::summary),
        ("timeseries.csv", csv::timeseries),
        ("samples.csv", csv::samples),
        ("connections.csv", csv::connections),
        ("latency.hlog", hlog::render),
        ("benchmark-latency.json", ci::benchmark_latency),
        ("benchmark-rate.json", ci::benchmark_rate),
        ("report.html", page),
        ("summary.json", json::summary),
    ];
    let mut rendered: Vec<(&str, Vec<u8>)> = files
        .iter()
        .map(|(name, render)| (*name, render(report)))
        .collect();
    if let Some(record) = shard::render(report) {
        // Before summary.json, which is written last.
        rendered.insert(rendered.len() - 1, ("shard.json", record));
    }
    write_whole(
        dir,
        rendered.iter().map(|(name, bytes)| (*name, bytes.as_slice())),
    )
}

/// Writes each file whole under a temporary name, then renames them all
/// in order: a full disk leaves no truncated file behind for a later
/// `compare` to misread, only the error.
fn write_whole<'a>(
    dir: &Path,
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut pending: Vec<(PathBuf, PathBuf)> = Vec::new();
    for (name, bytes) in files {
        let (temporary, path) = (dir.join(format!(".{name}.partial")), dir.join(name));
        if let Err(source) = std::fs::write(&temporary, bytes) {
            let _ = std::fs::remove_file(&temporary);
            pending.iter().for_each(|(t, _)| drop(std::fs::remove_file(t)));
            return Err(ReportError::Write { path, source });
        }
        pending.push((temporary, path));
    }
    let mut written = Vec::new();
    for (temporary, path) in pending {
        std::fs::rename(&temporary, &path).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// `report.html`, from the run's report and its latencies per tag.
fn page(report: &RunReport) -> Vec<u8> {
    html::render(report, &latencies(report)).into_bytes()
}

/// The run's latencies per tag, as the pages plot them.
fn latencies(report: &RunReport) -> html::Latencies {
    let mut latencies = html::Latencies::default();
    for interval in &report.summary.latency_log.intervals {
        latencies.add(&interval.tag, interval.second, &interval.histogram());
    }
    latencies
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_under_a_second_says_its_length_in_milliseconds() {
        assert_eq!(super::measured_time(12.0), "12.00 s");
        assert_eq!(super::measured_time(1.0), "1.00 s");
        assert_eq!(super::measured_time(0.0023), "2.3 ms");
        assert_eq!(super::measured_time(0.0), "0.0 ms");
    }
}
