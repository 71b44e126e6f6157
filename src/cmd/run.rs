//! `volley run`: the scenario with the flags applied, the run with its
//! live views (`live.rs`), then the files, the table and the exit code.

use std::io::IsTerminal;
use std::process::ExitCode;

use super::execute::{is_insecure, RunError};
use super::live::{target_info, Live};
use super::process::{
    descriptors_each, dir_stamp, ensure_descriptors, private_temp_dir, EXIT_BUG, EXIT_FAILED_CHECK,
    EXIT_RESULTS_ELSEWHERE,
};
use crate::cli::RunArgs;
use crate::output::OutputDir;
use crate::plan::Shard;
use crate::report::{self, RunReport};
use crate::scenario::{Overrides, Scenario, ScenarioError};
use crate::stats::INSECURE;

pub fn command(args: RunArgs) -> anyhow::Result<ExitCode> {
    Live::check_flags(&args)?;
    let scenario = scenario(&args)?;
    super::rounds::check(&args, &scenario)?;
    super::targets::check_race(&args, &scenario)?;
    if scenario.targets.len() > 1 {
        return super::targets::command(&args, scenario);
    }
    ensure_descriptors(
        scenario.compile().plan.connections,
        descriptors_each(&scenario.target),
    )?;
    if is_insecure(&scenario) {
        crate::note!("volley: {INSECURE}");
    }
    let name = scenario.targets.first().map(|t| t.name.as_str());
    let mut live = Live::start(&args, &scenario, vec![target_info(&scenario, name)])?;
    // Claimed before anything is sent: a directory in the way, unwritable
    // or taken by another run is an error now, not after the run.
    let out = OutputDir::claim(args.out.as_deref(), &dir_stamp(), &scenario.name)?;
    let report = live.block_on(live.run(0, &args, &scenario, &out.path));
    let signal = live.end_runs();
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            out.release();
            if let RunError::StoppedBeforeStart(_) = error {
                crate::note!("volley: {}", RunError::StoppedBeforeStart(signal));
                return Ok(ExitCode::from(signal));
            }
            return Err(error.into());
        }
    };
    let code = conclude(&args, &scenario, out, &report, signal);
    live.finish(args.linger, args.quiet);
    Ok(code)
}

/// The files, the table and the exit code of a run that ended.
fn conclude(args: &RunArgs, scenario: &Scenario, out: OutputDir, report: &RunReport, signal: u8) -> ExitCode {
    // Files first: a closed stdout (`| head`) must not lose the run.
    let written = match report::write_files(&out.path, report) {
        Ok(written) => written,
        Err(error) => {
            // The claim goes too, with what the run wrote as it went: no
            // unfinished summary.json is left to misread.
            let written = report::series::FILES
                .into_iter()
                .chain([report::checkpoint::TEMPORARY]);
            out.release_written(&written.collect::<Vec<_>>());
            return write_elsewhere(report, &error);
        }
    };
    let ci_files = crate::output::write_ci_files(
        args.summary_md.as_deref(),
        args.junit.as_deref(),
        || report::markdown(report),
        || report::junit(report),
    );
    if let Err(error) = ci_files {
        crate::output::print(&report::render_table(report));
        crate::note!("error: {error:#}\nthe result files are in {}", out.path.display());
        return ExitCode::from(EXIT_RESULTS_ELSEWHERE);
    }
    let printed = crate::output::print(&report::render_table(report))
        && crate::output::print(&format!("\nresults: {}\n", out.path.display()));
    if printed && !args.quiet && std::io::stderr().is_terminal() {
        for path in written {
            crate::note!("  {}", path.display());
        }
    }
    if report.summary.panicked_connections > 0 {
        return ExitCode::from(EXIT_BUG);
    }
    // A shard's figures are its share: its thresholds are shown, and
    // judged on the whole by `volley merge`.
    if scenario.shard.is_some() {
        return ExitCode::from(signal);
    }
    // Thresholds are a CI gate: figures that cannot be trusted pass none.
    let require_valid = args.require_valid || !scenario.thresholds.is_empty();
    // A run where no call succeeded fails, whatever else held.
    let failed_check = !report.thresholds_passed()
        || (require_valid && !report.summary.verdict.valid)
        || crate::stats::none_succeeded(&report.summary).is_some();
    if signal == 0 && failed_check {
        return ExitCode::from(EXIT_FAILED_CHECK);
    }
    ExitCode::from(signal)
}

/// The results could not be written where asked: they go to a directory
/// made for them in the temporary directory instead, or as JSON on stdout
/// (and nothing else there, so a reader gets one JSON document), and the
/// error says which.
fn write_elsewhere(report: &RunReport, error: &report::ReportError) -> ExitCode {
    // Never a name others can guess: see `private_temp_dir`.
    let fallback = private_temp_dir(&format!("volley-{}-", dir_stamp())).map_err(|source| {
        report::ReportError::CreateDir {
            path: std::env::temp_dir(),
            source,
        }
    });
    let written = fallback.and_then(|dir| match report::write_files(&dir, report) {
        Ok(_) => Ok(dir),
        Err(second) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(second)
        }
    });
    match written {
        Ok(fallback) => {
            crate::output::print(&report::render_table(report));
            crate::note!(
                "error: {error}\nthe results were written to {} instead",
                fallback.display()
            )
        }
        Err(second) => {
            crate::note!("error: {error}\nerror: {second}\nthe results follow on stdout as JSON");
            crate::output::print(&format!(
                "{}\n",
                serde_json::to_string_pretty(report).unwrap_or_default()
            ));
        }
    }
    ExitCode::from(EXIT_RESULTS_ELSEWHERE)
}

/// The scenario to run: the file's, or a one-liner's, with the flags
/// applied by the rule in `volley run --help` (the scenario's to apply).
pub fn scenario(args: &RunArgs) -> Result<Scenario, ScenarioError> {
    Scenario::with_flags(args.scenario.as_deref(), &overrides(args)?)
}

/// What the flags name, for the scenario to apply.
fn overrides(args: &RunArgs) -> Result<Overrides, ScenarioError> {
    let shard = shard(args)?;
    Ok(Overrides {
        target: args.target.first().cloned(),
        more_targets: args.target.iter().skip(1).cloned().collect(),
        check_equal: args.check_equal || args.fail_on_diff,
        check_equal_sample: args.check_equal_sample,
        method: args.method.clone(),
        params: args.params.clone(),
        rate: args.rate,
        concurrency: args.concurrency,
        duration: args.duration,
        requests: args.requests,
        connections: args.connections,
        warmup: args.warmup,
        grace: args.grace,
        timeout: args.timeout,
        threads: args.threads,
        max_in_flight: args.max_in_flight,
        seed: args.seed,
        max_response_size: args.max_response_size,
        http2: args.http2,
        pipeline: args.pipeline,
        jsonrpc: args.jsonrpc,
        cacert: args.cacert.clone(),
        system_roots: args.system_roots,
        insecure: args.insecure,
        cert: args.cert.clone(),
        key: args.key.clone(),
        headers: args.headers.clone(),
        jwt_secret: args.jwt_secret.clone(),
        reconnect_every: args.reconnect_every,
        max_flows: args.max_flows,
        thresholds: args.thresholds.clone(),
        abort_on_fail: args.abort_on_fail,
        shard,
        start_at: args.start_at,
        observe: args.observe_pid.clone(),
        otlp: args.otlp.clone(),
    })
}

/// `--shard I/N`, or `--shards N` with the index a Kubernetes Indexed Job
/// gives each pod in `$JOB_COMPLETION_INDEX`.
fn shard(args: &RunArgs) -> Result<Option<Shard>, ScenarioError> {
    let Some(count) = args.shards else {
        return Ok(args.shard);
    };
    let flag = |message: String| ScenarioError::Flag {
        flag: "--shards",
        message,
    };
    let index = std::env::var(JOB_INDEX).map_err(|_| {
        flag(format!(
            "reads this shard's index from ${JOB_INDEX}, which is not set: give --shard I/{count} instead"
        ))
    })?;
    let index = index
        .trim()
        .parse::<u32>()
        .map_err(|_| flag(format!("${JOB_INDEX} is '{index}', not a shard index")))?;
    Shard::new(index, count).map(Some).map_err(flag)
}

/// Where a Kubernetes Indexed Job puts each pod's index.
const JOB_INDEX: &str = "JOB_COMPLETION_INDEX";
