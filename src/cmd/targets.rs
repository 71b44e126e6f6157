//! `volley run` over several targets: the scenario with one seed, so each
//! target receives the identical sequence of requests, against each in
//! turn (its dashboard or progress lines as for one target), or against
//! all at once with `--parallel-targets`; each target's own files in a
//! directory named after it, then the side-by-side files and table.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::execute::{execute, RunError};
use super::process::{dir_stamp, ensure_descriptors, runtime_with_signals, EXIT_BUG, EXIT_FAILED_CHECK};
use crate::cli::RunArgs;
use crate::engine::Control;
use crate::equality::TargetAnswers;
use crate::output::OutputDir;
use crate::report::targets::TargetRun;
use crate::report::{self, RunReport};
use crate::scenario::Scenario;

pub fn command(args: &RunArgs, mut scenario: Scenario) -> anyhow::Result<ExitCode> {
    // One seed for every target: the same calls, the same params, in order.
    scenario.pin_seed();
    let pinned = match scenario.equality.as_ref().is_some_and(|e| e.pin_block) {
        true => Some(pin_block(&mut scenario)?),
        false => None,
    };
    let runs: Vec<Scenario> = scenario
        .targets
        .iter()
        .map(|target| {
            let mut one = scenario.clone();
            one.target = target.spec.clone();
            one.targets.clear();
            one
        })
        .collect();
    reach_all(&scenario)?;
    let connections = scenario.compile().plan.connections;
    let total = match args.parallel_targets {
        true => connections.saturating_mul(runs.len()),
        false => connections,
    };
    ensure_descriptors(total, super::process::descriptors_each(&scenario.target))?;
    let out = OutputDir::claim(args.out.as_deref(), &dir_stamp(), &scenario.name)?;
    let names: Vec<&str> = scenario.targets.iter().map(|t| t.name.as_str()).collect();
    let done = match args.parallel_targets {
        true => all_at_once(args, &runs, &names),
        false => in_turn(args, &runs, &names),
    };
    let (reports, signal) = match done {
        Ok(done) => done,
        Err(error) => {
            out.release();
            return Err(error);
        }
    };
    for (name, report) in names.iter().zip(&reports) {
        report::write_files(&out.path.join(name), report)?;
    }
    let side_by_side: Vec<TargetRun> = names
        .iter()
        .zip(&reports)
        .map(|(name, report)| TargetRun { name, report })
        .collect();
    let equality = scenario
        .equality
        .as_ref()
        .map(|e| (compare_answers(&side_by_side, e), e.sample));
    let compared = equality
        .as_ref()
        .map(|(report, sample)| (report, *sample, pinned.as_deref()));
    report::targets::write_files(&out.path, &side_by_side, args.parallel_targets, compared)?;
    crate::output::print(&report::targets::table(&side_by_side, args.parallel_targets));
    if let Some((report, sample, pinned)) = compared {
        crate::output::print(&report::targets::equality_table(report, sample, pinned));
    }
    crate::output::print(&format!(
        "\nresults: {} (each target's own in a directory named after it)\n",
        out.path.display()
    ));
    if reports.iter().any(|r| r.summary.panicked_connections > 0) {
        return Ok(ExitCode::from(EXIT_BUG));
    }
    let require_valid = args.require_valid || !scenario.thresholds.is_empty();
    let failed = reports
        .iter()
        .any(|r| !r.thresholds_passed() || (require_valid && !r.summary.verdict.valid));
    let differ = args.fail_on_diff && equality.as_ref().is_some_and(|(e, _)| !e.passed());
    let failed = failed || differ;
    Ok(match (signal, failed) {
        (0, true) => ExitCode::from(EXIT_FAILED_CHECK),
        (signal, _) => ExitCode::from(signal),
    })
}

/// The targets' kept answers set against the first's, by the rules.
fn compare_answers(
    runs: &[TargetRun],
    equality: &crate::scenario::Equality,
) -> crate::equality::EqualityReport {
    let answers: Vec<TargetAnswers> = runs
        .iter()
        .map(|run| TargetAnswers {
            name: run.name,
            url: &run.report.meta.target,
            header_names: &run.report.meta.header_names,
            captured: &run.report.captured,
        })
        .collect();
    crate::equality::compare(&answers, &equality.rules)
}

/// Each target in turn, as a run of one; a stop ends the sequence there,
/// with the targets run so far.
fn in_turn(args: &RunArgs, runs: &[Scenario], names: &[&str]) -> anyhow::Result<(Vec<RunReport>, u8)> {
    let mut reports = Vec::new();
    for (i, (run, name)) in runs.iter().zip(names).enumerate() {
        crate::note!("target {}/{}: {name} ({})", i + 1, runs.len(), run.target);
        let (report, signal) = super::run::run_to_report(args, run)?;
        reports.push(report);
        if signal != 0 {
            return Ok((reports, signal));
        }
    }
    Ok((reports, 0))
}

/// Every target at once, each with the full load, on one runtime; progress
/// lines name their target (one dashboard cannot show them all).
fn all_at_once(args: &RunArgs, runs: &[Scenario], names: &[&str]) -> anyhow::Result<(Vec<RunReport>, u8)> {
    let (runtime, mut signals) = runtime_with_signals()?;
    let cancel = CancellationToken::new();
    let stopped_by = Arc::new(AtomicU8::new(0));
    let (stop, stopped) = (cancel.clone(), stopped_by.clone());
    runtime.spawn(async move {
        stopped.store(signals.recv().await, Ordering::Relaxed);
        crate::transport::hurry_shutdowns();
        crate::note!("stopping: what was measured is written, marked partial");
        stop.cancel();
    });
    let quiet = args.quiet;
    let each = runs.iter().zip(names).map(|(run, name)| {
        execute(
            run,
            args.scenario.as_deref(),
            cancel.child_token(),
            Arc::new(Control::new()),
            move |snapshot| {
                if !quiet {
                    for row in &snapshot.new_rows {
                        crate::note!("[{name}] {}", report::progress_line(row));
                    }
                }
            },
        )
    });
    let results = runtime.block_on(futures_util::future::join_all(each));
    let reports = results
        .into_iter()
        .zip(names)
        .map(|(result, name)| result.map_err(|e: RunError| anyhow::anyhow!("target {name}: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((reports, stopped_by.load(Ordering::Relaxed)))
}

/// Reads the head block from the first target once and sends it wherever
/// a call's param says `"latest"`, so every target answers about the same
/// block; returns the block.
fn pin_block(scenario: &mut Scenario) -> anyhow::Result<String> {
    use crate::transport::{Connection, Target};
    let first = &scenario.targets[0];
    let url = first.spec.to_string();
    let options = super::execute::transport_options(scenario);
    let timeout = scenario.timeout;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let head = local.block_on(&runtime, async {
        let target = Target::resolve(&url, &options).await?;
        let mut connection = Connection::open(&target, timeout).await?;
        let body = br#"{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}"#;
        let reply = connection.probe(bytes::Bytes::from_static(body), timeout).await?;
        let answer: serde_json::Value =
            reply.map_or(Ok(serde_json::Value::Null), |r| serde_json::from_slice(&r.body))?;
        anyhow::Ok(answer["result"].as_str().map(String::from))
    });
    let head = head
        .map_err(|e| anyhow::anyhow!("pin_block: cannot read the head from {}: {e:#}", first.name))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "pin_block: {} answered eth_blockNumber without a block number",
                first.name
            )
        })?;
    scenario
        .pin_latest(&head)
        .map_err(|m| anyhow::anyhow!("pin_block: {m}"))?;
    Ok(head)
}

/// Every URL target resolved and reached once before anything is run: a
/// mistake in the third target must not cost the first two their runs.
fn reach_all(scenario: &Scenario) -> anyhow::Result<()> {
    use crate::scenario::TargetSpec;
    let options = super::execute::transport_options(scenario);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for target in &scenario.targets {
        let TargetSpec::Url(url) = &target.spec else {
            continue;
        };
        runtime
            .block_on(async {
                let resolved = crate::transport::Target::resolve(url, &options).await?;
                resolved.check_reachable(scenario.timeout).await?;
                anyhow::Ok(())
            })
            .map_err(|e| anyhow::anyhow!("target {}: {e:#}", target.name))?;
    }
    Ok(())
}
