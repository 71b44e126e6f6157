//! A result directory read back: `summary.json` through the types that
//! wrote it, `latency.hlog` and `samples.csv`, for the commands that work
//! on finished runs (`compare`, `report`, `merge`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::report::{RunReport, FORMAT};

pub struct SavedRun {
    /// `summary.json`, read back whole.
    pub report: RunReport,
    /// Per tag (method or TOTAL): each second's latency histogram, its
    /// length and its start (seconds into the measured run).
    pub seconds: BTreeMap<String, Vec<(Histogram<u64>, f64, f64)>>,
    /// `samples.csv`, read back through the type that wrote it; `None`
    /// for a directory without one (an older volley's).
    pub samples: Option<Vec<crate::stats::Sample>>,
}

impl SavedRun {
    pub fn read(dir: &Path) -> anyhow::Result<SavedRun> {
        let bytes = std::fs::read(dir.join("summary.json"))
            .with_context(|| format!("{}: no summary.json", dir.display()))?;
        let report = read_summary(dir, &bytes)?;
        let log = std::fs::read(dir.join("latency.hlog")).with_context(|| {
            format!(
                "{}: no latency.hlog (written by volley 0.1 and later)",
                dir.display()
            )
        })?;
        let mut seconds: BTreeMap<String, Vec<(Histogram<u64>, f64, f64)>> = BTreeMap::new();
        for interval in crate::report::hlog::read(&log) {
            (seconds.entry(interval.tag).or_default()).push((
                interval.histogram,
                interval.length,
                interval.start,
            ));
        }
        let samples = read_samples(dir)?;
        Ok(SavedRun {
            report,
            seconds,
            samples,
        })
    }

    /// Each tag's latencies, over the whole run and second by second.
    pub fn latencies(&self) -> crate::report::html::Latencies {
        let mut latencies = crate::report::html::Latencies::default();
        for (tag, seconds) in &self.seconds {
            for (histogram, _, start) in seconds {
                latencies.add(tag, start.round() as u32, histogram);
            }
        }
        latencies
    }
}

/// `summary.json` as the [`RunReport`] that wrote it. A comparison of
/// several targets, or a sweep, is not one run (each target's, each step's
/// own directory is), and a layout this volley does not know is not read.
fn read_summary(dir: &Path, bytes: &[u8]) -> anyhow::Result<RunReport> {
    let path = dir.join("summary.json");
    let document: Value =
        serde_json::from_slice(bytes).with_context(|| format!("{} is not JSON", path.display()))?;
    if document.get("summary").is_none() && document.get("ab").is_some() {
        // A/B rounds: each round of each target is a run, a level down.
        let firsts: Vec<String> = (document["targets"].as_array().into_iter().flatten())
            .filter_map(|t| {
                t["rounds"][0]["dir"]
                    .as_str()
                    .map(|d| dir.join(d).display().to_string())
            })
            .collect();
        anyhow::bail!(
            "{} holds A/B rounds (judged already: its table and `result`), not one run: each round of each target is a run of its own ({}, ...)",
            dir.display(),
            firsts.join(", ")
        );
    }
    if document.get("summary").is_none() && document["targets"].is_array() {
        let names: Vec<String> = (document["targets"].as_array().into_iter().flatten())
            .filter_map(|t| t["name"].as_str().map(|n| dir.join(n).display().to_string()))
            .collect();
        anyhow::bail!(
            "{} holds several targets' runs (or a sweep), not one run: give one of its run directories{}",
            dir.display(),
            if names.is_empty() {
                String::new()
            } else {
                format!(" ({})", names.join(", "))
            }
        );
    }
    if document["finished"] == Value::Bool(false) {
        anyhow::bail!(
            "{}: {}; it cannot be compared, merged or reported as a run",
            path.display(),
            match document["summary"]["measured_seconds"].as_f64() {
                Some(seconds) => format!(
                    "{} ({seconds:.1} s measured)",
                    crate::report::checkpoint::UNFINISHED
                ),
                None => "the run did not finish: volley was stopped before it could write its figures".into(),
            }
        );
    }
    check_layout(&path, &document, FORMAT)?;
    from_json(&path, bytes)
}

/// Whether a result file (`summary.json`, `shard.json`) is in the layout
/// `expected`, by its `format`: else an error naming the file, and saying
/// whether the number is missing, not a layout number, or another one.
pub fn check_layout(path: &Path, document: &Value, expected: u32) -> anyhow::Result<()> {
    let written_by = || {
        document["meta"]["version"]
            .as_str()
            .map_or("the volley that wrote it".into(), |v| format!("volley {v}"))
    };
    match document.get("format") {
        None => anyhow::bail!(
            "{}: no `format`: written by an older volley, whose layout this one does not read; run it again with this volley",
            path.display()
        ),
        Some(format) => match format.as_u64() {
            Some(format) if format == u64::from(expected) => Ok(()),
            Some(format) => anyhow::bail!(
                "{}: layout {format}, and this volley reads layout {expected}: read it with {}",
                path.display(),
                written_by()
            ),
            None => anyhow::bail!(
                "{}: `format` is {format}, not a layout number (this volley reads layout {expected})",
                path.display()
            ),
        },
    }
}

/// `bytes`, the file at `path`, as the `T` that wrote it: a field missing,
/// renamed or of another type is refused naming the file and the field
/// (never read as a zero).
pub fn from_json<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> anyhow::Result<T> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut reader).map_err(|e| {
        // The path of a field at the top is `.`: the file alone names it.
        let within = match e.path().to_string() {
            top if top == "." => String::new(),
            at => format!(", in `{at}`"),
        };
        anyhow::anyhow!("{}: {}{within}", path.display(), e.inner())
    })
}

/// `samples.csv` as its rows, `None` when the file is not there; a row
/// that does not read is an error naming the file and the row.
fn read_samples(dir: &Path) -> anyhow::Result<Option<Vec<crate::stats::Sample>>> {
    let path = dir.join("samples.csv");
    let Ok(file) = std::fs::File::open(&path) else {
        return Ok(None);
    };
    let mut reader = csv::Reader::from_reader(file);
    let header = reader
        .headers()
        .with_context(|| format!("{}: its header does not read", path.display()))?;
    // A renamed column must not read as a column of empty figures.
    if let Some(why) = header_mismatch(header, &crate::stats::SAMPLE_COLUMNS) {
        anyhow::bail!("{}: {why}: cannot compare", path.display());
    }
    let rows = reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.with_context(|| format!("{}: row {} does not read", path.display(), i + 2)));
    Ok(Some(rows.collect::<anyhow::Result<_>>()?))
}

/// How a CSV header differs from the columns it must have, if it does.
fn header_mismatch(header: &csv::StringRecord, columns: &[&str]) -> Option<String> {
    for (i, column) in columns.iter().enumerate() {
        match header.get(i) {
            Some(found) if found == *column => {}
            Some(found) => return Some(format!("column {} is `{found}`, expected `{column}`", i + 1)),
            None => return Some(format!("no column `{column}`")),
        }
    }
    (header.len() > columns.len()).then(|| format!("{} columns, expected {}", header.len(), columns.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_layout_is_refused_missing_mistyped_or_other_naming_the_file() {
        let path = Path::new("x/summary.json");
        let said = |document: Value| check_layout(path, &document, 1).unwrap_err().to_string();
        assert!(check_layout(path, &json!({"format": 1}), 1).is_ok());
        assert!(said(json!({})).starts_with("x/summary.json: no `format`"));
        let later = said(json!({"format": 2, "meta": {"version": "0.3.0"}}));
        assert_eq!(
            later,
            "x/summary.json: layout 2, and this volley reads layout 1: read it with volley 0.3.0"
        );
        for odd in [json!(1.1), json!("1"), json!(null)] {
            let text = said(json!({ "format": odd }));
            assert!(
                text.contains(&format!("`format` is {odd}, not a layout number")),
                "{text}"
            );
        }
    }
}
