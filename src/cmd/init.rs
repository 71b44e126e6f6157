//! `volley init`: a starter scenario, or one written from an OpenRPC
//! document, to a file or stdout.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::InitArgs;

pub fn command(args: InitArgs) -> anyhow::Result<ExitCode> {
    let text = match &args.from_openrpc {
        Some(path) => {
            let document =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            crate::init::from_openrpc_with(&document, args.target.as_deref())
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        None => crate::init::STARTER.to_string(),
    };
    if args.path.as_os_str() == "-" {
        crate::output::print(&text);
        return Ok(ExitCode::SUCCESS);
    }
    if args.path.exists() && !args.force {
        anyhow::bail!(
            "{} already exists; pass --force to overwrite it",
            args.path.display()
        );
    }
    std::fs::write(&args.path, text).with_context(|| format!("cannot write {}", args.path.display()))?;
    crate::output::print(&format!(
        "wrote {}; check it with `volley validate {}`\n",
        args.path.display(),
        args.path.display()
    ));
    Ok(ExitCode::SUCCESS)
}
