//! `volley sweep`: one run per step at the rate the search asks for, each
//! judged by the SLO; the steps' files kept, the search's CSV, plot and
//! summary written, the table printed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::execute::execute;
use super::process::{dir_stamp, runtime_with_signals, EXIT_FAILED_CHECK};
use crate::cli::SweepArgs;
use crate::engine::Control;
use crate::output::OutputDir;
use crate::report;
use crate::scenario::{Overrides, Scenario};
use crate::stats::Capacity;
use crate::sweep::{self, Found, Judging, Next, Purpose, Search, Step};
use crate::thresholds::Threshold;

/// One target's sweep.
#[derive(Serialize)]
struct TargetSweep {
    target: String,
    result: Found,
    /// Per method: the highest rate it held and the lowest it broke at.
    knees: BTreeMap<String, (Option<f64>, Option<f64>)>,
    steps: Vec<Step>,
    /// Why the sweep ended before the search did, if it did.
    stopped: Option<String>,
}

#[derive(Serialize)]
struct Summary<'a> {
    scenario: &'a str,
    slo: Vec<&'a str>,
    precision: f64,
    targets: &'a [TargetSweep],
}

/// What every step needs: the flags, the SLO, where the files go, and the
/// runtime with its stop.
struct Sweeper<'a> {
    args: &'a SweepArgs,
    slo: &'a [Threshold],
    runtime: &'a tokio::runtime::Runtime,
    cancel: &'a CancellationToken,
}

pub fn command(mut args: SweepArgs) -> anyhow::Result<ExitCode> {
    let slo = parse_slo(&args.slo)?;
    if !(args.from > 0.0 && args.from.is_finite() && args.max_rate >= args.from) {
        anyhow::bail!("--from must be a rate above 0, and --max-rate at least --from");
    }
    // Checked before anything is sent: each target's first step.
    // The flags' targets, else the file's `targets`, else its one target.
    let file_targets = match args.target.is_empty() {
        true => step_scenario(&args, &slo, args.from, None)?.targets,
        false => crate::scenario::NamedTarget::from_urls(&args.target),
    };
    let urls: Vec<String> = file_targets.iter().map(|t| t.spec.as_given()).collect();
    let targets: Vec<Option<&str>> = match urls.is_empty() {
        true => vec![None],
        false => urls.iter().map(|t| Some(t.as_str())).collect(),
    };
    // One seed for every step: each sends the same calls, whatever its rate.
    args.seed = Some(step_scenario(&args, &slo, args.from, targets[0])?.pin_seed());
    let mut firsts = Vec::new();
    for target in &targets {
        firsts.push(step_scenario(&args, &slo, args.from, *target)?);
    }
    let name = firsts[0].name.clone();
    // Several targets' steps go in a directory each, named as `run` names them.
    let dirs = file_targets;
    let out = OutputDir::claim(args.out.as_deref(), &dir_stamp(), &format!("sweep-{name}"))?;
    let (runtime, mut signals) = runtime_with_signals()?;
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    runtime.spawn(async move {
        signals.recv().await;
        crate::note!("stopping: the steps so far are written");
        stop.cancel();
    });
    let sweeper = Sweeper {
        args: &args,
        slo: &slo,
        runtime: &runtime,
        cancel: &cancel,
    };
    let several = targets.len() > 1;
    let mut sweeps = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        let dir = match several {
            true => out.path.join(&dirs[i].name),
            false => out.path.clone(),
        };
        sweeps.push(sweeper.sweep(*target, &dir)?);
        if cancel.is_cancelled() {
            break;
        }
    }
    let summary = Summary {
        scenario: &name,
        slo: slo.iter().map(Threshold::text).collect(),
        precision: args.precision,
        targets: &sweeps,
    };
    write_results(&out, &summary)?;
    let mut shown = String::new();
    for sweep in &sweeps {
        if several {
            shown.push_str(&format!("\n{}\n", sweep.target));
        }
        shown.push_str(&sweep::table(&sweep.steps, sweep.result, &sweep.knees));
        if let Some(reason) = &sweep.stopped {
            shown.push_str(&format!("\n{reason}\n"));
        }
    }
    crate::output::print(&format!("{shown}\nresults: {}\n", out.path.display()));
    let found = |s: &TargetSweep| {
        matches!(s.result, Found::Rate { .. } | Found::AtCeiling { .. }) && s.stopped.is_none()
    };
    Ok(match sweeps.iter().all(found) && sweeps.len() == targets.len() {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(EXIT_FAILED_CHECK),
    })
}

impl Sweeper<'_> {
    /// The search against one target, each step's files under `dir`.
    fn sweep(&self, target: Option<&str>, dir: &Path) -> anyhow::Result<TargetSweep> {
        let args = self.args;
        let mut search = Search::new(args.from, args.precision, args.max_rate);
        let mut steps: Vec<Step> = Vec::new();
        let mut methods = Vec::new();
        let mut stopped = None;
        let mut undriven = None;
        while let Some(next) = search.next() {
            let rate = next.rate;
            let (step, names) = self.step(target, next, dir, steps.len() + 1)?;
            methods = names;
            stopped = match (self.cancel.is_cancelled(), step.verdict) {
                (true, _) => Some("stopped by a signal: the search is unfinished".to_string()),
                (_, "invalid") => Some(format!(
                    "volley could not drive {rate:.0}/s on this machine (the step's reason says why): what it found is a floor; add --threads or machines"
                )),
                _ => None,
            };
            // A step volley could not drive says nothing of the server:
            // the search ends on a floor, never on a failure there.
            match step.verdict {
                "invalid" => undriven = Some(rate),
                verdict => search.record(rate, verdict == "pass"),
            }
            if step.clearly_broke() {
                crate::note!("  the server clearly broke at {rate:.0}/s");
            }
            steps.push(step);
            if stopped.is_some() {
                break;
            }
        }
        Ok(TargetSweep {
            target: steps.first().map_or(String::new(), |s| s.target.clone()),
            result: match undriven {
                Some(undriven_at) => Found::Floor {
                    held: search.held(),
                    undriven_at,
                },
                None => search.found(),
            },
            knees: sweep::knees(&steps, &methods),
            steps,
            stopped,
        })
    }

    /// Step `number`: a run at the rate asked for, its files written to
    /// `step-NN/` under `dir` (a retry and a repeat each have their own),
    /// judged; with the run's methods.
    fn step(
        &self,
        target: Option<&str>,
        next: Next,
        dir: &Path,
        number: usize,
    ) -> anyhow::Result<(Step, Vec<String>)> {
        let (args, rate) = (self.args, next.rate);
        let scenario = step_scenario(args, self.slo, rate, target)?;
        let why = match next.purpose {
            Purpose::Search => "",
            Purpose::Retry => " (a retry: a higher rate held)",
            Purpose::Repeat => " (a repeat of the rate found)",
        };
        crate::note!(
            "{} step {number}: {rate:.0} requests/s for {}{why}",
            scenario.target,
            humantime::format_duration(args.step)
        );
        let plan = scenario.compile().plan;
        let capacity = Capacity {
            connections: plan.connections,
            callers: plan.callers(),
        };
        // A server that clearly broke ends its step early: past a second
        // of measured time, most calls so far failed.
        let step_cancel = self.cancel.child_token();
        let mut broke = false;
        let run = self.runtime.block_on(execute(
            &scenario,
            args.scenario.as_deref(),
            step_cancel.clone(),
            Arc::new(Control::new()),
            |snapshot| {
                let measured = snapshot.elapsed.saturating_sub(snapshot.warmup);
                if !broke && measured >= Duration::from_secs(1) && sweep::broke_so_far(&snapshot.total) {
                    broke = true;
                    step_cancel.cancel();
                }
            },
        ));
        let report = run.context("a step could not run")?;
        report::write_files(&dir.join(format!("step-{number:02}")), &report)?;
        let judging = Judging {
            slo: self.slo,
            slo_only: args.slo_only,
            capacity,
        };
        let mut step = Step::judge(&report.meta.target, rate, &report.summary, &judging);
        step.purpose = next.purpose;
        if broke {
            step.stopped_early();
        }
        crate::note!(
            "  {} · achieved {:.1}/s · p99 {:.3} ms · errors {:.2}%{}",
            step.verdict,
            step.achieved,
            step.p99_ms,
            step.error_rate * 100.0,
            match step.reason.is_empty() {
                true => String::new(),
                false => format!(" · {}", step.reason),
            }
        );
        let methods = report.summary.methods.iter().map(|m| m.method.clone()).collect();
        Ok((step, methods))
    }
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
fn step_scenario(
    args: &SweepArgs,
    slo: &[Threshold],
    rate: f64,
    target: Option<&str>,
) -> anyhow::Result<Scenario> {
    let flags = Overrides {
        target: target.map(String::from),
        method: args.method.clone(),
        params: args.params.clone(),
        rate: Some(rate),
        duration: Some(args.step),
        warmup: Some(args.step_warmup),
        connections: args.connections,
        threads: args.threads,
        timeout: args.timeout,
        seed: args.seed,
        http2: args.connection.http2,
        cacert: args.connection.cacert.clone(),
        insecure: args.connection.insecure,
        headers: args.connection.headers.clone(),
        jwt_secret: args.connection.jwt_secret.clone(),
        thresholds: slo.to_vec(),
        ..Overrides::default()
    };
    // The step's own flags are the sweep's: an error names those.
    Scenario::with_flags(args.scenario.as_deref(), &flags).map_err(|e| {
        let said = e.to_string();
        let renamed = [
            ("--threshold:", "--slo:"),
            ("--duration:", "--step:"),
            ("--warmup:", "--step-warmup:"),
            ("--rate:", "--from:"),
        ]
        .iter()
        .find(|(from, _)| said.starts_with(from))
        .map_or(said.clone(), |(from, to)| said.replacen(from, to, 1));
        anyhow::anyhow!(renamed)
    })
}

/// The sweep's files: a CSV row per step (of every target), the
/// latency-versus-throughput plot (a line per target and percentile), and
/// `summary.json` last (it held the directory's claim).
fn write_results(out: &OutputDir, summary: &Summary) -> anyhow::Result<()> {
    let write = |name: &str, bytes: &[u8]| {
        let path = out.path.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    let steps: Vec<Step> = summary
        .targets
        .iter()
        .flat_map(|t| t.steps.iter().cloned())
        .collect();
    write("sweep.csv", sweep::csv(&steps).as_bytes())?;
    // Lines named by host and port: a legend has no room for whole URLs.
    let urls: Vec<String> = summary.targets.iter().map(|t| t.target.clone()).collect();
    let names = crate::scenario::NamedTarget::from_urls(&urls);
    let points: Vec<report::html::SweepLine> = summary
        .targets
        .iter()
        .zip(&names)
        .map(|(t, named)| (named.name.as_str(), sweep::curve(&t.steps)))
        .collect();
    write("sweep.svg", report::html::sweep_chart(&points).as_bytes())?;
    let mut json = serde_json::to_vec_pretty(summary).expect("the sweep is plain data");
    json.push(b'\n');
    write("summary.json", &json)
}
