//! `volley man`: the manual pages, rendered from the clap definitions (the
//! same text as `--help`), for `man -l -` or a release archive's `man1/`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory as _;

use crate::cli::{Cli, ManArgs};

/// Prints volley.1 on stdout, or with `--dir` writes volley.1 and a page
/// per command (volley-run.1, volley-serve.1, ...) there and names them.
pub fn command(args: ManArgs) -> anyhow::Result<ExitCode> {
    match args.dir {
        None => {
            crate::output::print(&String::from_utf8_lossy(&page(built())?));
        }
        Some(dir) => {
            for written in pages_into(&dir)? {
                crate::output::print(&format!("{}\n", written.display()));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The command tree as clap completes it: each subcommand named
/// `volley-NAME`, the name its page and its reference carry.
fn built() -> clap::Command {
    let mut cli = Cli::command().disable_help_subcommand(true);
    cli.build();
    cli
}

/// One page as roff, made in memory so that a closed stdout is not an
/// error. clap_mangen runs a command's after-help text (the flag rule
/// under `volley run`, the install lines under `volley completions`) into
/// one paragraph; here it becomes a section of its own, named by its first
/// line, with a bullet per `- ` line and every other line kept as written.
fn page(mut cmd: clap::Command) -> anyhow::Result<Vec<u8>> {
    let after = cmd.get_after_help().map(|text| text.to_string());
    cmd = cmd.after_help(None::<&'static str>);
    let mut out = Vec::new();
    // A subcommand has no version of its own: every page names volley's.
    let man = clap_mangen::Man::new(cmd).source(format!("volley {}", crate::cli::VERSION));
    let written = man.render(&mut out);
    written.context("cannot render the manual page")?;
    if let Some(text) = after {
        section(&text)
            .to_writer(&mut out)
            .context("cannot render the manual page")?;
    }
    Ok(out)
}

fn section(text: &str) -> roff::Roff {
    let mut lines = text.lines();
    let heading = lines.next().unwrap_or("").trim_end_matches(':').to_uppercase();
    let mut roff = roff::Roff::new();
    roff.control("SH", [heading.as_str()]);
    for line in lines {
        match line.strip_prefix("- ") {
            Some(item) => roff.control("IP", ["\\(bu", "2"]).text([roff::roman(item)]),
            None => roff.control("nf", []).text([roff::roman(line)]).control("fi", []),
        };
    }
    roff
}

/// Writes every page into `dir` (made if missing); returns their paths.
fn pages_into(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let shown = dir.display();
    std::fs::create_dir_all(dir).with_context(|| format!("--dir {shown}: cannot create the directory"))?;
    let cli = built();
    let mut commands: Vec<clap::Command> = cli.get_subcommands().cloned().collect();
    commands.insert(0, cli);
    let mut written = Vec::new();
    for cmd in commands {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, page(cmd)?)
            .with_context(|| format!("--dir {shown}: cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
