//! `volley completions SHELL`: the shell's completion script, made from
//! the same clap definitions that parse the flags, so it never lags them.

use std::process::ExitCode;

use clap::CommandFactory as _;

use crate::cli::{Cli, CompletionsArgs};

/// Prints the script for `args.shell` on stdout.
pub fn command(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    crate::output::print(&script(args.shell));
    Ok(ExitCode::SUCCESS)
}

/// The completion script, whole. Made in memory first: clap_complete
/// panics on a failed write, and a closed stdout (`| head`) is no reason
/// to panic.
pub fn script(shell: clap_complete::Shell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "volley", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}
