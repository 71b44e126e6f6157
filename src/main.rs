use std::process::ExitCode;

use clap::Parser as _;
use volley::cli::{Cli, Command};
use volley::cmd;

fn main() -> ExitCode {
    // A usage error exits 1 ("could not run"), as every other bad flag
    // does: clap's own 2 is volley's "a check failed".
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(u8::from(error.use_stderr()));
        }
    };
    let result = match cli.command {
        Command::Run(args) => cmd::run::command(*args),
        Command::Serve(args) => cmd::serve::command(*args),
        Command::Validate(args) => cmd::validate::command(args),
        Command::Init(args) => cmd::init::command(args),
        Command::Compare(args) => cmd::compare::command(args),
        Command::Report(args) => cmd::report::command(args),
        Command::Check(args) => cmd::check::command(args),
        Command::Sweep(args) => cmd::sweep::command(*args),
        Command::Merge(args) => cmd::merge::command(args),
        Command::Record(args) => cmd::record::command(args),
        Command::Call(args) => cmd::call::command(args),
        Command::Completions(args) => cmd::completions::command(args),
        Command::Man(args) => cmd::man::command(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            volley::output::note(&format!("error: {error:#}"));
            ExitCode::from(1)
        }
    }
}
