//! `volley run` over several targets: the scenario with one seed, so each
//! target receives the identical sequence of requests, against each in
//! turn, or against all at once with `--parallel-targets`; the live views
//! (the dashboard, `/metrics`, the web page) show every target; each
//! target's own files in a directory named after it, then the side-by-side
//! files and table.

use std::path::Path;
use std::process::ExitCode;

use super::execute::{is_insecure, RunError};
use super::live::{target_info, Live};
use super::process::{dir_stamp, ensure_descriptors, EXIT_BUG, EXIT_FAILED_CHECK};
use crate::cli::RunArgs;
use crate::equality::TargetAnswers;
use crate::output::OutputDir;
use crate::report::targets::TargetRun;
use crate::report::{self, RunReport};
use crate::scenario::Scenario;
use crate::stats::race::{tally, Arrivals, RaceFigures};

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
        .enumerate()
        .map(|(lane, target)| {
            let mut one = scenario.clone();
            one.target = target.spec.clone();
            one.targets.clear();
            if let Some(race) = &mut one.race {
                race.lane = lane;
            }
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
    let names: Vec<&str> = scenario.targets.iter().map(|t| t.name.as_str()).collect();
    let mut live = start_live(args, &scenario, &runs, &names)?;
    let out = OutputDir::claim(args.out.as_deref(), &dir_stamp(), &scenario.name)?;
    // Never an empty summary.json, should the comparison be killed.
    if let Err(error) = crate::report::checkpoint::begin_comparison(&out.path) {
        crate::note!(
            "volley: cannot write {}: {error}",
            out.path.join("summary.json").display()
        );
    }
    if args.rounds.is_some() {
        let code = super::rounds::run(&live, args, (&runs, &names), &out.path);
        let signal = live.end_runs();
        live.finish(args.linger, args.quiet);
        return match (signal, code) {
            (0, code) => code,
            (signal, Ok(_)) => Ok(ExitCode::from(signal)),
            (_, Err(error)) => Err(error),
        };
    }
    let done = match args.parallel_targets {
        true => all_at_once(&live, args, &runs, (&names, &out.path)),
        false => in_turn(&live, args, &runs, (&names, &out.path)),
    };
    let signal = live.end_runs();
    let reports = match done {
        Ok(done) => done,
        Err(error) => {
            out.release();
            return Err(error);
        }
    };
    for (name, report) in names.iter().zip(&reports) {
        report::write_files(&out.path.join(name), report)?;
    }
    let race = race_figures(scenario.race.as_ref(), &reports);
    let side_by_side: Vec<TargetRun> = (names.iter().zip(&reports).enumerate())
        .map(|(i, (name, report))| TargetRun {
            name,
            report,
            race: race.as_ref().map(|figures| &figures[i]),
        })
        .collect();
    let equality = scenario
        .equality
        .as_ref()
        .map(|e| (compare_answers(&side_by_side, e), e.sample));
    let compared = equality
        .as_ref()
        .map(|(report, sample)| (report, *sample, pinned.as_deref()));
    report::targets::write_files(&out.path, &side_by_side, args.parallel_targets, compared)?;
    // The CI files hold every target: its Markdown summary, its JUnit suite.
    let named: Vec<(&str, &RunReport)> = names.iter().copied().zip(&reports).collect();
    crate::output::write_ci_files(
        args.summary_md.as_deref(),
        args.junit.as_deref(),
        || {
            named
                .iter()
                .map(|(_, report)| report::markdown(report))
                .collect::<Vec<_>>()
                .join("\n")
        },
        || report::junit_of(&named),
    )?;
    crate::output::print(&report::targets::table(&side_by_side, args.parallel_targets));
    if let Some((report, sample, pinned)) = compared {
        crate::output::print(&report::equality::table((report, sample, pinned)));
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
    live.finish(args.linger, args.quiet);
    Ok(match (signal, failed) {
        (0, true) => ExitCode::from(EXIT_FAILED_CHECK),
        (signal, _) => ExitCode::from(signal),
    })
}

/// A race needs several targets listening at once: said before anything
/// is sent, naming the key.
pub fn check_race(args: &RunArgs, scenario: &Scenario) -> anyhow::Result<()> {
    let Some(race) = &scenario.race else {
        return Ok(());
    };
    let key = format!("{}.race", race.source);
    if scenario.targets.len() < 2 {
        anyhow::bail!("`{key}` races targets against each other: give two or more (`targets` in the file, or --target A --target B) and --parallel-targets");
    }
    if !args.parallel_targets || args.rounds.is_some() {
        anyhow::bail!("`{key}` races targets listening at the same time: run with --parallel-targets (and without --rounds)");
    }
    Ok(())
}

/// The head race tallied across the targets' runs, each target's figures
/// in order; `None` without a race (or a run that kept no arrivals).
fn race_figures(race: Option<&crate::plan::Race>, reports: &[RunReport]) -> Option<Vec<RaceFigures>> {
    let race = race?;
    let arrivals: Vec<Arrivals> = reports.iter().map(|r| r.race.clone()).collect::<Option<_>>()?;
    let figures = tally(&arrivals)
        .into_iter()
        .zip(&arrivals)
        .map(|(tally, arrivals)| RaceFigures {
            source: race.source.clone(),
            pointer: race.pointer.as_str().to_string(),
            resolution_ms: race.every.map(|every| every.as_secs_f64() * 1000.0),
            tally,
            capped: arrivals.capped,
            unreadable: arrivals.unreadable,
        });
    Some(figures.collect())
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
    crate::equality::compare(&answers, equality)
}

/// The live views over every target, said insecure first where they are.
fn start_live(
    args: &RunArgs,
    scenario: &Scenario,
    runs: &[Scenario],
    names: &[&str],
) -> anyhow::Result<Live> {
    for (run, name) in runs.iter().zip(names) {
        if is_insecure(run) {
            crate::note!("volley: {name}: {}", crate::stats::INSECURE);
        }
    }
    let infos = runs
        .iter()
        .zip(names)
        .map(|(run, name)| target_info(run, Some(name)));
    Live::start(args, scenario, infos.collect())
}

/// Each target in turn, as a run of one; a stop (a signal, `q`) ends the
/// sequence there, with the targets run so far.
fn in_turn(
    live: &Live,
    args: &RunArgs,
    runs: &[Scenario],
    (names, out): (&[&str], &Path),
) -> anyhow::Result<Vec<RunReport>> {
    let mut reports = Vec::new();
    for (i, (run, name)) in runs.iter().zip(names).enumerate() {
        if live.cancel.is_cancelled() {
            break;
        }
        // The dashboard's header names the target; a line would only scribble
        // over it. --quiet prints nothing but the final summary.
        if !live.has_dashboard() && !args.quiet {
            crate::note!("target {}/{}: {name} ({})", i + 1, runs.len(), run.target);
        }
        match live.block_on(live.run(i, args, run, &out.join(name))) {
            Ok(report) => reports.push(report),
            Err(RunError::StoppedBeforeStart(_)) if !reports.is_empty() => break,
            Err(error) => return Err(anyhow::anyhow!("target {name}: {error}")),
        }
    }
    Ok(reports)
}

/// Every target at once, each with the full load, on one runtime.
fn all_at_once(
    live: &Live,
    args: &RunArgs,
    runs: &[Scenario],
    (names, out): (&[&str], &Path),
) -> anyhow::Result<Vec<RunReport>> {
    let dirs: Vec<std::path::PathBuf> = names.iter().map(|name| out.join(name)).collect();
    let each = (runs.iter().zip(&dirs).enumerate()).map(|(i, (run, dir))| live.run(i, args, run, dir));
    let results = live.block_on(futures_util::future::join_all(each));
    results
        .into_iter()
        .zip(names)
        .map(|(result, name)| result.map_err(|e: RunError| anyhow::anyhow!("target {name}: {e}")))
        .collect()
}

/// Reads the head block from the first target once and sends it wherever
/// a call's param says `"latest"`, so every target answers about the same
/// block; returns the block.
fn pin_block(scenario: &mut Scenario) -> anyhow::Result<String> {
    use crate::transport::{Connection, Target};
    let first = &scenario.targets[0];
    let url = first.spec.as_given();
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
