//! `volley run`: the scenario with the flags applied, the run with its
//! dashboard or progress lines, then the files, the table and the exit code.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::execute::{execute, is_insecure, RunError};
use super::process::{
    descriptors_each, dir_stamp, ensure_descriptors, runtime_with_signals, EXIT_BUG, EXIT_FAILED_CHECK,
    EXIT_RESULTS_ELSEWHERE, EXIT_SIGINT,
};
use crate::cli::RunArgs;
use crate::engine::Control;
use crate::metrics::{self, Metrics};
use crate::output::OutputDir;
use crate::plan::Shard;
use crate::report::{self, RunReport};
use crate::scenario::{Overrides, Scenario, ScenarioError};
use crate::stats::INSECURE;
use crate::tui::{Dashboard, Tui};

pub fn command(args: RunArgs) -> anyhow::Result<ExitCode> {
    let scenario = scenario(&args)?;
    if scenario.targets.len() > 1 {
        return super::targets::command(&args, scenario);
    }
    ensure_descriptors(
        scenario.compile().plan.connections,
        descriptors_each(&scenario.target),
    )?;
    // Claimed before anything is sent: a directory in the way, unwritable
    // or taken by another run is an error now, not after the run.
    let out = OutputDir::claim(args.out.as_deref(), &dir_stamp(), &scenario.name)?;
    let (report, signal) = match run_to_report(&args, &scenario) {
        Ok(done) => done,
        Err(error) => {
            out.release();
            if let Some(RunError::StoppedBeforeStart(signal)) = error.downcast_ref::<RunError>() {
                crate::note!("volley: {error}");
                return Ok(ExitCode::from(*signal));
            }
            return Err(error);
        }
    };
    // Files first: a closed stdout (`| head`) must not lose the run.
    let written = match report::write_files(&out.path, &report) {
        Ok(written) => written,
        Err(error) => {
            // The claim goes too: no empty summary.json is left to misread.
            out.release();
            return Ok(write_elsewhere(&report, &error));
        }
    };
    let ci_files = crate::output::write_ci_files(
        args.summary_md.as_deref(),
        args.junit.as_deref(),
        || report::markdown(&report),
        || report::junit(&report),
    );
    if let Err(error) = ci_files {
        crate::output::print(&report::render_table(&report));
        crate::note!("error: {error:#}\nthe result files are in {}", out.path.display());
        return Ok(ExitCode::from(EXIT_RESULTS_ELSEWHERE));
    }
    let printed = crate::output::print(&report::render_table(&report))
        && crate::output::print(&format!("\nresults: {}\n", out.path.display()));
    if printed && !args.quiet && std::io::stderr().is_terminal() {
        for path in written {
            crate::note!("  {}", path.display());
        }
    }
    if report.summary.panicked_connections > 0 {
        return Ok(ExitCode::from(EXIT_BUG));
    }
    // A shard's figures are its share: its thresholds are shown, and
    // judged on the whole by `volley merge`.
    if scenario.shard.is_some() {
        return Ok(ExitCode::from(signal));
    }
    // Thresholds are a CI gate: figures that cannot be trusted pass none.
    let require_valid = args.require_valid || !scenario.thresholds.is_empty();
    // A run where no call succeeded fails, whatever else held.
    let failed_check = !report.thresholds_passed()
        || (require_valid && !report.summary.verdict.valid)
        || crate::stats::none_succeeded(&report.summary).is_some();
    if signal == 0 && failed_check {
        return Ok(ExitCode::from(EXIT_FAILED_CHECK));
    }
    Ok(ExitCode::from(signal))
}

/// Runs the scenario with the dashboard or progress lines, and returns
/// its report and the exit code a stop asked for (0 when none).
pub(super) fn run_to_report(args: &RunArgs, scenario: &Scenario) -> anyhow::Result<(RunReport, u8)> {
    // Signals are caught from here on, before anything is sent.
    let (runtime, mut signals) = runtime_with_signals()?;
    runtime.block_on(async {
        let cancel = CancellationToken::new();
        let control = Arc::new(Control::new());
        let stopped_by = Arc::new(AtomicU8::new(0));
        let (stop, stopped) = (cancel.clone(), stopped_by.clone());
        tokio::spawn(async move {
            stopped.store(signals.recv().await, Ordering::Relaxed);
            crate::transport::hurry_shutdowns();
            crate::note!("stopping: what was measured is written, marked partial");
            stop.cancel();
        });
        let metrics = match args.metrics_listen {
            Some(addr) => {
                let listener = metrics::bind(addr)
                    .await
                    .with_context(|| format!("--metrics-listen {addr}: cannot listen"))?;
                let metrics = Arc::new(Metrics::default());
                tokio::spawn(metrics::serve(listener, metrics.clone(), cancel.child_token()));
                Some(metrics)
            }
            None => None,
        };
        if is_insecure(scenario) {
            crate::note!("volley: {INSECURE}");
        }
        let mut tui = start_dashboard(args, scenario, &control, &cancel);
        let quiet = args.quiet;
        let mut warming = !scenario.load.warmup.is_zero();
        let mut aborted = false;
        let (stop_on_fail, steer) = (cancel.clone(), control.clone());
        let report = execute(scenario, args.scenario.as_deref(), cancel, control, |snapshot| {
            if let Some(metrics) = &metrics {
                metrics.publish(snapshot);
            }
            if !aborted {
                if let Some(why) = failed_so_far(scenario, snapshot) {
                    aborted = true;
                    steer.stop_because(why);
                    stop_on_fail.cancel();
                }
            }
            match tui.as_mut() {
                Some(tui) => tui.show(snapshot),
                None if !quiet => {
                    if std::mem::take(&mut warming) {
                        // Said as the run begins: a long warmup is otherwise a silent wait.
                        crate::note!(
                            "[warmup] {}: calls are sent, and left out of every figure",
                            humantime::format_duration(snapshot.warmup)
                        );
                    }
                    for row in &snapshot.new_rows {
                        crate::note!("{}", report::progress_line(row));
                    }
                }
                None => {}
            }
        })
        .await;
        // Ctrl-C in the dashboard is a key, not a signal, but means the same.
        let interrupted = tui.take().is_some_and(|tui| tui.interrupted());
        let signal = match stopped_by.load(Ordering::Relaxed) {
            0 if interrupted => EXIT_SIGINT,
            signal => signal,
        };
        match report {
            Ok(report) => Ok((report, signal)),
            Err(RunError::StoppedBeforeStart(_)) => Err(RunError::StoppedBeforeStart(signal).into()),
            Err(error) => Err(error.into()),
        }
    })
}

/// With `abort_on_fail`, past its grace: the first threshold that fails on
/// the figures so far, said as the reason the run stopped.
fn failed_so_far(scenario: &Scenario, snapshot: &crate::stats::Snapshot) -> Option<String> {
    let grace = scenario.abort_on_fail?;
    let measured = snapshot.elapsed.saturating_sub(snapshot.warmup);
    if measured < grace || snapshot.finished {
        return None;
    }
    let failed = scenario
        .thresholds
        .iter()
        .filter_map(|t| t.evaluate_so_far(&snapshot.methods, &snapshot.total))
        .find(|result| !result.passed)?;
    Some(format!(
        "stopped after {:.1} s measured: threshold `{}` failed on the figures so far ({}), and abort_on_fail stops the run",
        measured.as_secs_f64(),
        failed.expression,
        failed.shown
    ))
}

/// The live dashboard, when stdout is a terminal and it was not turned off.
fn start_dashboard(
    args: &RunArgs,
    scenario: &Scenario,
    control: &Arc<Control>,
    cancel: &CancellationToken,
) -> Option<Tui> {
    if args.quiet || args.no_tui || !std::io::stdout().is_terminal() {
        return None;
    }
    let target = scenario.target.to_string();
    let mut transport = crate::transport::transport_label(&target, scenario.http2).to_string();
    if is_insecure(scenario) {
        transport.push_str(" · INSECURE: certificate not verified");
    }
    let dashboard = Dashboard::new(&scenario.name, &target, &transport);
    Tui::start(dashboard, control.clone(), cancel.clone()).ok()
}

/// The results could not be written where asked: they go to the temporary
/// directory instead, or as JSON on stdout (and nothing else there, so a
/// reader gets one JSON document), and the error says which.
fn write_elsewhere(report: &RunReport, error: &report::ReportError) -> ExitCode {
    let fallback = std::env::temp_dir().join(format!("volley-{}-{}", dir_stamp(), std::process::id()));
    match report::write_files(&fallback, report) {
        Ok(_) => {
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
        timeout: args.timeout,
        threads: args.threads,
        max_in_flight: args.max_in_flight,
        seed: args.seed,
        max_response_size: args.max_response_size,
        http2: args.http2,
        jsonrpc: args.jsonrpc,
        cacert: args.cacert.clone(),
        system_roots: args.system_roots,
        insecure: args.insecure,
        cert: args.cert.clone(),
        key: args.key.clone(),
        headers: args.headers.clone(),
        jwt_secret: args.jwt_secret.clone(),
        reconnect_every: args.reconnect_every,
        thresholds: args.thresholds.clone(),
        abort_on_fail: args.abort_on_fail,
        shard,
        start_at: args.start_at,
        observe: args.observe_pid.clone(),
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
