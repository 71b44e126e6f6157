//! The run's series written as it goes: `timeseries.csv`, `latency.hlog`
//! and `samples.csv` in the results directory, a second's rows appended
//! and flushed as the second closes, so a run killed by SIGKILL, the OOM
//! killer or a CI timeout leaves its seconds so far, and a long run holds
//! none of them in memory. At the end they are read back (through the
//! writers' own formats, here) for the summary, and every file is written
//! whole again with what only the end knows.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{hlog, RunMeta};
use crate::stats::{ClosedSecond, OutcomeKind, Sample, SecondRow, Series, Spool, SAMPLE_COLUMNS};

/// `timeseries.csv`'s columns: the figures, a column per error outcome,
/// the watched server's, then `partial` last.
pub fn timeseries_columns() -> Vec<&'static str> {
    let mut columns = vec![
        "second",
        "calls",
        "ok",
        "errors",
        "calls_per_s",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "flows",
        "flow_errors",
    ];
    columns.extend(OutcomeKind::ALL.iter().skip(1).map(|k| k.name()));
    columns.extend(["server_cpu_cores", "server_rss_mb", "partial"]);
    columns
}

/// One row of `timeseries.csv`.
pub fn timeseries_row(s: &SecondRow, partial: bool) -> Vec<String> {
    // Empty where no server process was watched.
    let cores = s.server_cpu_cores.map_or(String::new(), |c| format!("{c:.3}"));
    let mb = s
        .server_rss_bytes
        .map_or(String::new(), |b| format!("{:.1}", b as f64 / 1e6));
    let mut fields = vec![
        s.second.to_string(),
        s.calls.to_string(),
        s.ok.to_string(),
        s.errors.to_string(),
        format!("{:.2}", s.rps),
        format!("{:.3}", s.p50_ms),
        format!("{:.3}", s.p99_ms),
        format!("{:.3}", s.max_ms),
        s.flows.to_string(),
        s.flow_errors.to_string(),
    ];
    let outcome = |kind: &OutcomeKind| s.error_outcomes.get(kind.name()).copied().unwrap_or(0);
    fields.extend(OutcomeKind::ALL.iter().skip(1).map(|k| outcome(k).to_string()));
    fields.extend([cores, mb, partial.to_string()]);
    fields
}

/// `timeseries.csv` read back as the rows that wrote it (the server
/// columns, which the file keeps in MB, are not read: a streamed file has
/// none). A row cut short by a kill ends the reading.
pub fn read_timeseries(bytes: &[u8]) -> anyhow::Result<Vec<SecondRow>> {
    let mut reader = csv::Reader::from_reader(bytes);
    let header = reader.headers().context("its header does not read")?.clone();
    let columns = timeseries_columns();
    if header.iter().ne(columns.iter().copied()) {
        anyhow::bail!("its columns are not {}", columns.join(","));
    }
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let Ok(record) = record else { break };
        if record.len() != columns.len() {
            break;
        }
        rows.push(row_of(&record).with_context(|| format!("row {} does not read", i + 2))?);
    }
    Ok(rows)
}

fn row_of(record: &csv::StringRecord) -> anyhow::Result<SecondRow> {
    let field = |i: usize| record.get(i).unwrap_or_default();
    let int = |i: usize| {
        field(i)
            .parse::<u64>()
            .with_context(|| format!("`{}` is no count", field(i)))
    };
    let real = |i: usize| {
        field(i)
            .parse::<f64>()
            .with_context(|| format!("`{}` is no number", field(i)))
    };
    let mut error_outcomes = std::collections::BTreeMap::new();
    for (i, kind) in OutcomeKind::ALL.iter().skip(1).enumerate() {
        let n = int(10 + i)?;
        if n > 0 {
            error_outcomes.insert(kind.name(), n);
        }
    }
    Ok(SecondRow {
        second: u32::try_from(int(0)?).context("a second past u32")?,
        calls: int(1)?,
        ok: int(2)?,
        errors: int(3)?,
        rps: real(4)?,
        p50_ms: real(5)?,
        p99_ms: real(6)?,
        max_ms: real(7)?,
        error_outcomes,
        flows: int(8)?,
        flow_errors: int(9)?,
        server_cpu_cores: None,
        server_rss_bytes: None,
    })
}

/// The three files, appended to as the run goes.
struct Files {
    timeseries: csv::Writer<BufWriter<File>>,
    hlog: BufWriter<File>,
    samples: csv::Writer<BufWriter<File>>,
}

/// Writes each closed second into the results directory; if a write
/// fails (a full disk), says so once and keeps the rest in memory.
pub struct FileSpool {
    dir: PathBuf,
    files: Option<Files>,
    /// The same three files, to cut them back after a failed write and to
    /// read them back at the end, wherever their directory went meanwhile.
    handles: [File; 3],
    /// What was kept in memory after a write failed.
    kept: Series,
    /// Samples written since the last flush: kept again if it fails.
    pending: Vec<Sample>,
    /// Kept from second to second, so that none allocates them anew.
    serializer: hdrhistogram::serialization::V2DeflateSerializer,
    lines: Vec<u8>,
    /// Each file's length after the last second written whole: a failed
    /// write is cut back to it, so the file reads back whole.
    whole: [u64; 3],
}

/// The files written as the run goes, beside `summary.json`.
pub const FILES: [&str; 3] = ["timeseries.csv", "latency.hlog", "samples.csv"];
const NAMES: [&str; 3] = FILES;

impl FileSpool {
    /// Creates the three files in `dir` (made if missing, in a parent that
    /// must be there: a results directory removed meanwhile is not made
    /// again), never through an existing path, with their headers.
    pub fn create(dir: &Path, meta: &RunMeta) -> io::Result<FileSpool> {
        match std::fs::create_dir(dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let open = |name: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(dir.join(name))
        };
        let opened = [open(NAMES[0])?, open(NAMES[1])?, open(NAMES[2])?];
        let handles = [
            opened[0].try_clone()?,
            opened[1].try_clone()?,
            opened[2].try_clone()?,
        ];
        let [timeseries, hlog, samples] = opened;
        let mut timeseries = csv::Writer::from_writer(BufWriter::new(timeseries));
        timeseries.write_record(timeseries_columns())?;
        let mut hlog = BufWriter::new(hlog);
        hlog.write_all(&hlog::begin(meta))?;
        // The header written here, not by the first sample: a run killed
        // before its first quarter second still leaves one.
        let mut samples = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(BufWriter::new(samples));
        samples.write_record(SAMPLE_COLUMNS)?;
        let mut spool = FileSpool {
            dir: dir.to_path_buf(),
            files: Some(Files {
                timeseries,
                hlog,
                samples,
            }),
            handles,
            kept: Series::default(),
            pending: Vec::new(),
            serializer: hdrhistogram::serialization::V2DeflateSerializer::new(),
            lines: Vec::new(),
            whole: [0; 3],
        };
        spool.flush()?;
        Ok(spool)
    }

    fn flush(&mut self) -> io::Result<()> {
        let Some(files) = &mut self.files else {
            return Ok(());
        };
        files.timeseries.flush()?;
        files.hlog.flush()?;
        files.samples.flush()?;
        let [a, b, c] = &self.handles;
        self.whole = [a.metadata()?.len(), b.metadata()?.len(), c.metadata()?.len()];
        self.pending.clear();
        Ok(())
    }

    /// A write failed: said once; the files are cut back to their last
    /// whole second and the rest of the run is kept in memory.
    fn failed(&mut self, error: &io::Error) {
        let Some(files) = self.files.take() else {
            return;
        };
        crate::note!(
            "volley: cannot write the run's seconds into {} as it goes ({error}); keeping them in memory until the end",
            self.dir.display()
        );
        // The writers go first: dropping one may still flush a part.
        drop(files);
        for (file, length) in self.handles.iter().zip(self.whole) {
            let _ = file.set_len(length);
        }
        self.kept.quarter(&std::mem::take(&mut self.pending));
    }

    fn write_second(&mut self, closed: &ClosedSecond<'_>) -> io::Result<()> {
        let Some(files) = &mut self.files else {
            return Ok(());
        };
        // Marked partial until the end writes the file whole: a run killed
        // now was stopped early.
        files.timeseries.write_record(timeseries_row(closed.row, true))?;
        let second = closed.row.second;
        let tagged = (closed.histograms.iter()).map(|(tag, h)| (tag.as_str(), *h, second, closed.length));
        self.lines.clear();
        hlog::lines_into(&mut self.lines, &mut self.serializer, tagged);
        files.hlog.write_all(&self.lines)?;
        self.flush()
    }

    fn write_samples(&mut self, samples: &[Sample]) -> io::Result<()> {
        let Some(files) = &mut self.files else {
            return Ok(());
        };
        self.pending.extend_from_slice(samples);
        for sample in samples {
            files.samples.serialize(sample).map_err(io::Error::other)?;
        }
        Ok(())
    }

    /// The files read back, up to their last whole second; a file that
    /// does not read is said, and the others still count.
    fn read_back(&self) -> Series {
        let read = |i: usize| -> anyhow::Result<Vec<u8>> {
            let mut file = self.handles[i].try_clone()?;
            file.rewind()?;
            let mut bytes = Vec::new();
            file.take(self.whole[i])
                .read_to_end(&mut bytes)
                .with_context(|| format!("cannot read {}", self.dir.join(NAMES[i]).display()))?;
            Ok(bytes)
        };
        let lost = |i: usize, error: anyhow::Error| {
            crate::note!(
                "volley: {}: the run's seconds written there are lost: {error:#}",
                self.dir.join(NAMES[i]).display()
            );
        };
        let timeseries = read(0).and_then(|bytes| read_timeseries(&bytes));
        let log = read(1).map(|bytes| {
            let mut log = crate::stats::LatencyLog::default();
            for interval in hlog::read(&bytes) {
                let second = interval.start.round() as u32;
                let length = std::time::Duration::from_secs_f64(interval.length.max(0.0));
                log.push(second, length, interval.tag, &interval.histogram);
            }
            log
        });
        let samples = read(2).and_then(|bytes| {
            let rows = csv::Reader::from_reader(&bytes[..]).into_deserialize::<Sample>();
            rows.enumerate()
                .map(|(i, row)| row.with_context(|| format!("row {}", i + 2)))
                .collect::<anyhow::Result<Vec<Sample>>>()
        });
        Series {
            timeseries: timeseries.unwrap_or_else(|e| {
                lost(0, e);
                Vec::new()
            }),
            latency_log: log.unwrap_or_else(|e| {
                lost(1, e);
                Default::default()
            }),
            samples: samples.unwrap_or_else(|e| {
                lost(2, e);
                Vec::new()
            }),
        }
    }
}

impl Spool for FileSpool {
    fn second(&mut self, closed: &ClosedSecond<'_>) {
        if self.files.is_none() {
            return self.kept.second(closed);
        }
        if let Err(error) = self.write_second(closed) {
            self.failed(&error);
            self.kept.second(closed);
        }
    }

    fn quarter(&mut self, samples: &[Sample]) {
        if self.files.is_none() {
            return self.kept.quarter(samples);
        }
        if let Err(error) = self.write_samples(samples) {
            // The pending samples, these among them, go to memory.
            self.failed(&error);
        }
    }

    fn take(&mut self) -> Series {
        if let Err(error) = self.flush() {
            self.failed(&error);
        }
        self.files = None;
        let mut series = self.read_back();
        series.extend(self.kept.take());
        series
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{tagged, Outcome, Recorder, TOTAL_TAG};
    use std::time::Duration;

    /// A second of two methods: `calls` answered ones and a timeout.
    fn window(calls: u64) -> Recorder {
        let mut window = Recorder::new(2);
        for i in 0..calls {
            let latency = Duration::from_micros(1_000 + 137 * i);
            window.methods[(i % 2) as usize].record(Outcome::Ok, latency, latency, 10);
        }
        window.methods[1].record(Outcome::Timeout, Duration::from_secs(1), Duration::ZERO, 0);
        window
    }

    /// Hands `seconds` closed seconds (the last cut to 0.4 s) and their
    /// quarters to `spool`.
    fn hand_over(spool: &mut dyn Spool, seconds: std::ops::Range<u32>, last: u32) {
        let methods = ["a".to_string(), "b c".to_string()];
        for second in seconds {
            let window = window(10 + u64::from(second));
            let length = match second == last {
                true => Duration::from_millis(400),
                false => Duration::from_secs(1),
            };
            let row = SecondRow::new(second, &window, length);
            let total = window.total();
            for tick in 0..4 {
                let sample = Sample {
                    tick: second * 4 + tick,
                    method: TOTAL_TAG.into(),
                    length_s: 0.25,
                    calls: u64::from(tick),
                    errors: 1,
                    p50_ms: Some(1.0 / 3.0),
                    p99_ms: None,
                };
                spool.quarter(&[sample]);
            }
            spool.second(&ClosedSecond {
                row: &row,
                length,
                histograms: tagged(&methods, &window, &total),
            });
        }
    }

    fn same(a: &Series, b: &Series) {
        assert_eq!(a.timeseries, b.timeseries);
        assert_eq!(a.samples, b.samples);
        let intervals = |s: &Series| -> Vec<(u32, Duration, String, Vec<u64>)> {
            (s.latency_log.intervals.iter())
                .map(|i| {
                    let h = i.histogram();
                    let values = h.iter_recorded().map(|v| v.value_iterated_to()).collect();
                    (i.second, i.length, i.tag.clone(), values)
                })
                .collect()
        };
        assert_eq!(intervals(a), intervals(b));
    }

    #[test]
    fn the_seconds_written_as_the_run_goes_read_back_as_they_were_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = FileSpool::create(dir.path(), &crate::report::html::tests::meta()).unwrap();
        let mut memory = Series::default();
        hand_over(&mut spool, 0..3, 2);
        hand_over(&mut memory, 0..3, 2);
        // As a kill would leave them: on disk before the end, whole.
        let on_disk = std::fs::read(dir.path().join("timeseries.csv")).unwrap();
        assert_eq!(read_timeseries(&on_disk).unwrap(), memory.timeseries);
        let text = String::from_utf8(on_disk).unwrap();
        assert!(text.lines().skip(1).all(|l| l.ends_with(",true")), "{text}");
        let rows = text.lines().nth(1).unwrap();
        assert_eq!(
            rows.split(',')
                .nth(timeseries_columns().iter().position(|c| *c == "timeout").unwrap()),
            Some("1")
        );
        let log = std::fs::read(dir.path().join("latency.hlog")).unwrap();
        assert_eq!(hlog::read(&log).len(), 9, "three tags a second");
        let read = spool.take();
        assert_eq!(read.timeseries.len(), 3);
        same(&read, &memory);
    }

    #[test]
    fn after_a_failed_write_the_rest_is_kept_in_memory_and_nothing_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = FileSpool::create(dir.path(), &crate::report::html::tests::meta()).unwrap();
        let mut memory = Series::default();
        hand_over(&mut spool, 0..2, 4);
        // Two quarters written, not flushed, when the disk fills.
        spool.quarter(&memory_quarters());
        spool.failed(&io::Error::other("no space left on device"));
        hand_over(&mut spool, 2..5, 4);
        hand_over(&mut memory, 0..2, 4);
        memory.quarter(&memory_quarters());
        hand_over(&mut memory, 2..5, 4);
        same(&spool.take(), &memory);
        let kept = std::fs::read(dir.path().join("timeseries.csv")).unwrap();
        assert_eq!(
            read_timeseries(&kept).unwrap().len(),
            2,
            "cut back to the seconds whole"
        );
    }

    fn memory_quarters() -> Vec<Sample> {
        (0..2)
            .map(|tick| Sample {
                tick: 100 + tick,
                method: "a".into(),
                length_s: 0.25,
                calls: 7,
                errors: 0,
                p50_ms: None,
                p99_ms: Some(2.5),
            })
            .collect()
    }

    #[test]
    fn a_row_cut_short_by_a_kill_ends_the_reading_and_a_renamed_column_is_refused() {
        let mut memory = Series::default();
        hand_over(&mut memory, 0..2, 9);
        let mut text = timeseries_columns().join(",") + "\n";
        for row in &memory.timeseries {
            text += &(timeseries_row(row, true).join(",") + "\n");
        }
        text += "2,31,30";
        assert_eq!(read_timeseries(text.as_bytes()).unwrap(), memory.timeseries);
        let renamed = text.replacen("calls_per_s", "rps", 1);
        let error = read_timeseries(renamed.as_bytes()).unwrap_err().to_string();
        assert!(error.starts_with("its columns are not second,calls,"), "{error}");
    }
}
