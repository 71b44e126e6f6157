//! `summary.json` while the run goes: rewritten whole each second with the
//! figures so far and marked unfinished, so a run killed before its end
//! (SIGKILL, the OOM killer, a CI timeout) leaves a summary that says what
//! it is. The run's end writes the real one over it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{RunMeta, FORMAT};
use crate::stats::{MethodSummary, Snapshot};

/// Where `summary.json` is written before it is renamed into place.
pub const TEMPORARY: &str = ".summary.json.partial";

/// What a reader is told of an unfinished summary.
pub const UNFINISHED: &str = "the run did not finish: volley was stopped before it could write its figures (killed, or out of memory); these are its figures up to `measured_seconds`, and timeseries.csv, samples.csv and latency.hlog hold its seconds so far";

#[derive(Serialize)]
struct Unfinished<'a> {
    format: u32,
    /// Always false: the mark readers check before anything else.
    finished: bool,
    note: &'static str,
    meta: &'a RunMeta,
    summary: SoFar<'a>,
}

#[derive(Serialize)]
struct SoFar<'a> {
    partial: bool,
    measured_seconds: f64,
    methods: &'a [MethodSummary],
    total: &'a MethodSummary,
    in_flight: u64,
}

/// The top of a result directory of several targets' runs, until the
/// comparison's own files are written at its end: each target's directory
/// holds its run's files as they go.
pub fn begin_comparison(dir: &Path) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct Begun {
        format: u32,
        finished: bool,
        note: &'static str,
    }
    let begun = Begun {
        format: FORMAT,
        finished: false,
        note: "the comparison of targets did not finish: each target's directory holds what its run wrote so far",
    };
    let mut bytes = serde_json::to_vec_pretty(&begun).expect("plain data");
    bytes.push(b'\n');
    let (temporary, path) = (dir.join(TEMPORARY), dir.join("summary.json"));
    std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, &path))
}

/// Writes the unfinished summary into a result directory as seconds close.
pub struct Checkpoint {
    dir: PathBuf,
    /// A write failed once: said, and not tried again.
    failed: bool,
    /// Written once: the run's first snapshot writes it, so a run killed
    /// in its first second leaves no empty `summary.json`.
    written: bool,
}

impl Checkpoint {
    pub fn new(dir: &Path) -> Checkpoint {
        Checkpoint {
            dir: dir.to_path_buf(),
            failed: false,
            written: false,
        }
    }

    /// Takes a snapshot: when a second closed in it (and the run goes on),
    /// `summary.json` is written again, under a temporary name first so a
    /// kill midway leaves the previous one whole.
    pub fn offer(&mut self, meta: &RunMeta, snapshot: &Snapshot) {
        if self.failed || snapshot.finished || (self.written && snapshot.new_rows.is_empty()) {
            return;
        }
        self.written = true;
        let measured = snapshot.elapsed.saturating_sub(snapshot.warmup);
        let document = Unfinished {
            format: FORMAT,
            finished: false,
            note: UNFINISHED,
            meta,
            summary: SoFar {
                partial: true,
                measured_seconds: measured.as_secs_f64(),
                methods: &snapshot.methods,
                total: &snapshot.total,
                in_flight: snapshot.in_flight,
            },
        };
        let mut bytes = serde_json::to_vec_pretty(&document).expect("plain data");
        bytes.push(b'\n');
        let (temporary, path) = (self.dir.join(TEMPORARY), self.dir.join("summary.json"));
        let written = std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            self.failed = true;
            crate::note!(
                "volley: cannot write {} as the run goes ({error}); it is written at the end",
                path.display()
            );
        }
    }
}
