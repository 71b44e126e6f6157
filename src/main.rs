use std::process::ExitCode;

use clap::Parser;
use volley::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => volley::run_command(*args),
        Command::Serve(args) => volley::serve_command(*args),
        Command::Validate(args) => volley::validate_command(args),
        Command::Init(args) => volley::init_command(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}
