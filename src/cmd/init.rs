//! `volley init`: a starter scenario, or one written from an OpenRPC
//! document, to a file or stdout.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::InitArgs;

pub fn command(args: InitArgs) -> anyhow::Result<ExitCode> {
    if let Some(capture) = &args.from_capture {
        return from_capture(&args, capture);
    }
    if let Some(url) = &args.from_node {
        return from_node(&args, url);
    }
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

/// The scenario, and its data files in `<scenario>-data/` beside it.
fn from_capture(args: &InitArgs, capture: &std::path::Path) -> anyhow::Result<ExitCode> {
    if args.path.as_os_str() == "-" {
        anyhow::bail!("--from-capture writes data files beside the scenario: give it a file name, not -");
    }
    let text =
        std::fs::read_to_string(capture).with_context(|| format!("cannot read {}", capture.display()))?;
    let stem = args
        .path
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let data_dir = format!("{stem}-data");
    let target = args.target.as_deref().unwrap_or("http://127.0.0.1:8545");
    let made = crate::init::from_capture(&text, &capture.display().to_string(), target, &data_dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", capture.display()))?;
    write_made(args, &made, &data_dir)
}

/// The scenario and its data files, none overwritten without --force.
fn write_made(args: &InitArgs, made: &crate::init::FromCapture, data_dir: &str) -> anyhow::Result<ExitCode> {
    let base = args.path.parent().unwrap_or(std::path::Path::new(""));
    let targets: Vec<std::path::PathBuf> = std::iter::once(args.path.clone())
        .chain(made.data_files.iter().map(|(file, _)| base.join(file)))
        .collect();
    if let Some(taken) = targets.iter().find(|p| p.exists()).filter(|_| !args.force) {
        anyhow::bail!("{} already exists; pass --force to overwrite it", taken.display());
    }
    for (file, lines) in &made.data_files {
        let path = base.join(file);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&path, lines).with_context(|| format!("cannot write {}", path.display()))?;
    }
    std::fs::write(&args.path, &made.scenario)
        .with_context(|| format!("cannot write {}", args.path.display()))?;
    crate::output::print(&format!(
        "wrote {} ({} data files in {}); check it with `volley validate {}`\n",
        args.path.display(),
        made.data_files.len(),
        base.join(data_dir).display(),
        args.path.display()
    ));
    Ok(ExitCode::SUCCESS)
}

/// Reads the node's last blocks and writes the scenario made of them.
fn from_node(args: &InitArgs, url: &str) -> anyhow::Result<ExitCode> {
    if args.path.as_os_str() == "-" {
        anyhow::bail!("--from-node writes data files beside the scenario: give it a file name, not -");
    }
    let stem = args
        .path
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let scenario = crate::scenario::Scenario::one_liner(url, "eth_blockNumber", None);
    let within = scenario.timeout;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Errors name the URL with its keys hidden: a CI log may be public.
    let shown = crate::redact::url(url);
    let made = runtime.block_on(tokio::task::LocalSet::new().run_until(async {
        let (target, _) = super::execute::prepare(&scenario, url, &[], within)
            .await
            .map_err(|e| anyhow::anyhow!("--from-node {shown}: {e}"))?;
        let mut session = crate::engine::Session::open(&target, within, scenario.version)
            .await
            .map_err(|e| anyhow::anyhow!("--from-node {shown}: {e}"))?;
        let harvest = crate::init::harvest(&mut session, args.blocks)
            .await
            .map_err(|e| anyhow::anyhow!("--from-node {shown}: {e}"))?;
        let made = crate::init::from_node(&mut session, &harvest, url, &stem)
            .await
            .map_err(|e| anyhow::anyhow!("--from-node {shown}: {e}"));
        session.close().await;
        made
    }))?;
    write_made(args, &made, &format!("{stem}-data"))
}
