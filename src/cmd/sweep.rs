//! `volley sweep`: one run per step at the rate the search asks for, each
//! judged by the SLO; the steps' files kept, the search's CSV, plot and
//! summary written, the table printed.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::execute::execute;
use super::process::{dir_stamp, runtime_with_signals, EXIT_FAILED_CHECK};
use crate::cli::SweepArgs;
use crate::engine::Control;
use crate::output::ResultDir;
use crate::report;
use crate::scenario::{Overrides, Scenario};
use crate::sweep::{self, Found, Search, Step};
use crate::thresholds::Threshold;

#[derive(Serialize)]
struct Summary<'a> {
    scenario: &'a str,
    target: &'a str,
    slo: Vec<&'a str>,
    precision: f64,
    result: Found,
    /// Per method: the highest rate it held and the lowest it broke at.
    knees: &'a std::collections::BTreeMap<String, (Option<f64>, Option<f64>)>,
    steps: &'a [Step],
    /// Why the sweep ended before the search did, if it did.
    stopped: Option<String>,
}

pub fn command(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let slo = parse_slo(&args.slo)?;
    if !(args.from > 0.0 && args.from.is_finite() && args.max_rate >= args.from) {
        anyhow::bail!("--from must be a rate above 0, and --max-rate at least --from");
    }
    // Checked once, before anything is sent: the first step's scenario.
    let first = step_scenario(&args, &slo, args.from)?;
    let out = ResultDir::claim(
        args.out.as_deref(),
        &dir_stamp(),
        &format!("sweep-{}", first.name),
    )?;
    let (runtime, mut signals) = runtime_with_signals()?;
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    runtime.spawn(async move {
        signals.recv().await;
        crate::note!("stopping: the steps so far are written");
        stop.cancel();
    });
    let mut search = Search::new(args.from, args.precision, args.max_rate);
    let mut steps: Vec<Step> = Vec::new();
    let mut methods = Vec::new();
    let mut stopped = None;
    while let Some(rate) = search.next() {
        let scenario = step_scenario(&args, &slo, rate)?;
        crate::note!(
            "step {}: {rate:.0} requests/s for {}",
            steps.len() + 1,
            humantime::format_duration(args.step)
        );
        let run = runtime.block_on(execute(
            &scenario,
            args.scenario.as_deref(),
            cancel.child_token(),
            Arc::new(Control::new()),
            |_| {},
        ));
        let report = run.context("a step could not run")?;
        report::write_files(&out.path.join(format!("step-{:02}", steps.len() + 1)), &report)?;
        let step = Step::judge(&report.meta.target, rate, &report.summary, &slo);
        crate::note!(
            "  {} · achieved {:.1}/s · p99 {:.3} ms · errors {:.2}%",
            step.verdict,
            step.achieved,
            step.p99_ms,
            step.error_rate * 100.0
        );
        methods = report.summary.methods.iter().map(|m| m.method.clone()).collect();
        stopped = match (cancel.is_cancelled(), step.verdict) {
            (true, _) => Some("stopped by a signal: the search is unfinished".to_string()),
            (_, "invalid") => Some(format!(
                "volley itself was the limit at {rate:.0}/s (its engine threads saturated): what it found is a floor; add --threads or machines"
            )),
            _ => None,
        };
        search.record(rate, step.verdict == "pass");
        if step.clearly_broke() {
            crate::note!("  the server clearly broke at {rate:.0}/s");
        }
        steps.push(step);
        if stopped.is_some() {
            break;
        }
    }
    let found = search.found();
    let knees = sweep::knees(&steps, &methods);
    let target = steps.first().map_or(String::new(), |s| s.target.clone());
    let summary = Summary {
        scenario: &first.name,
        target: &target,
        slo: slo.iter().map(Threshold::text).collect(),
        precision: args.precision,
        result: found,
        knees: &knees,
        steps: &steps,
        stopped: stopped.clone(),
    };
    write_results(&out, &summary)?;
    let mut table = sweep::table(&steps, found, &knees);
    if let Some(reason) = &stopped {
        table.push_str(&format!("\n{reason}\n"));
    }
    crate::output::print(&format!("{table}\nresults: {}\n", out.path.display()));
    Ok(match found {
        Found::Rate { .. } | Found::AtCeiling { .. } if stopped.is_none() => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_FAILED_CHECK),
    })
}

/// `p99<100ms,error_rate<0.1%` as thresholds, each checked now.
fn parse_slo(text: &str) -> anyhow::Result<Vec<Threshold>> {
    let slo = text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| crate::thresholds::parse(t).map_err(|m| anyhow::anyhow!("--slo `{t}`: {m}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if slo.is_empty() {
        anyhow::bail!("--slo: give at least one limit, such as 'p99<100ms'");
    }
    Ok(slo)
}

/// The scenario of one step: the file's (or the one-liner's), at `rate`
/// for the step's time after its warmup, judged by the SLO.
fn step_scenario(args: &SweepArgs, slo: &[Threshold], rate: f64) -> anyhow::Result<Scenario> {
    let flags = Overrides {
        target: args.target.clone(),
        method: args.method.clone(),
        params: args.params.clone(),
        rate: Some(rate),
        duration: Some(args.step),
        warmup: Some(args.step_warmup),
        connections: args.connections,
        timeout: args.timeout,
        seed: args.seed,
        http2: args.http2,
        cacert: args.cacert.clone(),
        insecure: args.insecure,
        headers: args.headers.clone(),
        thresholds: slo.to_vec(),
        ..Overrides::default()
    };
    Ok(Scenario::with_flags(args.scenario.as_deref(), &flags)?)
}

/// The sweep's files: a CSV row per step, the latency-versus-throughput
/// plot, and `summary.json` last (it held the directory's claim).
fn write_results(out: &ResultDir, summary: &Summary) -> anyhow::Result<()> {
    let write = |name: &str, bytes: &[u8]| {
        let path = out.path.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    write("sweep.csv", sweep::csv(summary.steps).as_bytes())?;
    let points: Vec<(f64, f64, f64)> = summary
        .steps
        .iter()
        .filter(|s| s.verdict != "invalid")
        .map(|s| (s.achieved, s.p50_ms, s.p99_ms))
        .collect();
    write(
        "sweep.svg",
        report::html::sweep_chart(summary.target, &points).as_bytes(),
    )?;
    let mut json = serde_json::to_vec_pretty(summary).expect("the sweep is plain data");
    json.push(b'\n');
    write("summary.json", &json)
}
