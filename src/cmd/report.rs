//! `volley report DIR`: a result directory's pages rendered again from
//! the files it holds.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::ReportArgs;
use crate::results::SavedRun;

/// `volley report DIR`: renders `report.html` again from the directory's
/// `summary.json` and `latency.hlog`.
pub fn command(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let run = SavedRun::read(&args.dir)?;
    let page = crate::report::html::render(&run.report, &run.latencies());
    let path = args.dir.join("report.html");
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    crate::output::print(&format!("{}\n", path.display()));
    Ok(ExitCode::SUCCESS)
}
