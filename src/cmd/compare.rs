//! `volley compare BASELINE CURRENT`: the table, the CI files asked for,
//! the HTML page; exit 2 on a regression or runs that cannot be compared.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::CompareArgs;
use crate::compare::{compare, html_page, junit, markdown, render};
use crate::results::SavedRun;

/// `volley compare`: prints the table; exit 2 on a regression, on runs
/// that cannot be compared, or on an inconclusive result (unless allowed).
pub fn command(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let (current, baselines) = args.runs.split_last().expect("clap asks for two runs at least");
    let tolerances = args.max_regression.clone().unwrap_or_default();
    let comparison = compare(baselines, current, &tolerances)?;
    // The table first: a file that cannot be written must not hide the verdict.
    let table = render(&comparison, baselines, current);
    crate::output::print(&table);
    crate::output::write_ci_files(
        args.summary_md.as_deref(),
        args.junit.as_deref(),
        || markdown(&comparison),
        || junit(&comparison),
    )?;
    if let Some(path) = &args.html {
        // The spectra are the first baseline's against the current run's.
        let first = crate::compare::expand(baselines)?;
        let (base, cur) = (SavedRun::read(&first[0])?, SavedRun::read(current)?);
        let page = html_page(&comparison, &base, &cur);
        std::fs::write(path, page).with_context(|| format!("--html {}", path.display()))?;
    }
    Ok(ExitCode::from(if comparison.failed(args.allow_inconclusive) {
        2
    } else {
        0
    }))
}
