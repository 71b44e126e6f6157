//! `volley merge DIR... --out DIR`: the shards of one run read, checked and
//! added up; the merged run's files written as a single run's are, its
//! table printed, and the exit code a single run would give.

use std::process::ExitCode;

use super::process::{dir_stamp, EXIT_BUG, EXIT_FAILED_CHECK};
use crate::cli::MergeArgs;
use crate::merge::{self, ShardRun};
use crate::output::OutputDir;
use crate::report;

pub fn command(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let shards = (args.dirs.iter())
        .map(|dir| ShardRun::read(dir))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let report = merge::merge(&shards)?;
    let out = OutputDir::claim(
        args.out.as_deref(),
        &dir_stamp(),
        &format!("{}-merged", report.meta.scenario),
    )?;
    if let Err(error) = report::write_files(&out.path, &report) {
        out.release();
        return Err(error.into());
    }
    let _ = crate::output::print(&report::render_table(&report))
        && crate::output::print(&format!("\nresults: {}\n", out.path.display()));
    if report.summary.panicked_connections > 0 {
        return Ok(ExitCode::from(EXIT_BUG));
    }
    // As for a run: thresholds are a gate, and figures that cannot be
    // trusted pass none.
    let require_valid = args.require_valid || !report.thresholds.is_empty();
    if !report.thresholds_passed() || (require_valid && !report.summary.verdict.valid) {
        return Ok(ExitCode::from(EXIT_FAILED_CHECK));
    }
    Ok(ExitCode::SUCCESS)
}
