//! `volley compare BASELINE CURRENT`: the table, the CI files asked for,
//! the HTML page; exit 2 on a regression or runs that cannot be compared.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::CompareArgs;
use crate::compare::{compare, html_page, junit, markdown, render};
use crate::results::ResultDir as Run;

/// `volley compare`: prints the table; exit 2 on a regression.
pub fn command(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let comparison = compare(&args.baseline, &args.current, &args.max_regression)?;
    // The table first: a file that cannot be written must not hide the verdict.
    let table = render(&comparison, &args.baseline, &args.current);
    crate::output::print(&table);
    crate::output::write_ci_files(
        args.summary_md.as_deref(),
        args.junit.as_deref(),
        || markdown(&comparison),
        || junit(&comparison),
    )?;
    if let Some(path) = &args.html {
        let (base, cur) = (Run::read(&args.baseline)?, Run::read(&args.current)?);
        let page = html_page(&comparison, &base, &cur);
        std::fs::write(path, page).with_context(|| format!("--html {}", path.display()))?;
    }
    Ok(ExitCode::from(if comparison.failed() { 2 } else { 0 }))
}
