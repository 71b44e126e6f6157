//! `volley validate`: each scenario file checked and described, or its
//! error named; nothing is sent.

use std::process::ExitCode;

use crate::cli::ValidateArgs;
use crate::scenario::Scenario;

pub fn command(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    for path in &args.scenarios {
        match Scenario::load(path) {
            Ok(scenario) => {
                let description = crate::validate::describe(&scenario, &path.display().to_string());
                // A closed stdout (`| head -3`) has read all it wants; the
                // files are still checked, so the exit code stays true.
                crate::output::print(&format!("{description}\n"));
            }
            Err(error) => {
                crate::note!("error: {error}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
