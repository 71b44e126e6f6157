//! `volley run --target A --target B --rounds N`: A/B rounds. The targets
//! run in turn, N rounds each, in a balanced order (AB, BA, AB, ...: what
//! drifts over the run falls on both alike), every round the same requests
//! (one seed); `-d` is each target's measured time in all, split evenly
//! over its rounds, and the warmup comes once, before a target's first
//! round. Each target is then judged against the first, round by round
//! (`compare::rounds`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::execute::RunError;
use super::live::Live;
use super::process::{EXIT_BUG, EXIT_FAILED_CHECK};
use crate::cli::RunArgs;
use crate::compare::rounds::{self, AbReport};
use crate::report::{self, RunReport};
use crate::scenario::Scenario;
use crate::stats::MethodSummary;

/// Refuses what rounds cannot be made of, before anything is sent.
pub(super) fn check(args: &RunArgs, scenario: &Scenario) -> anyhow::Result<()> {
    let Some(rounds) = args.rounds else {
        if args.max_regression.is_some() {
            anyhow::bail!("--max-regression judges A/B rounds: give --rounds N too");
        }
        return Ok(());
    };
    if scenario.targets.len() < 2 {
        anyhow::bail!("--rounds alternates targets: give two or more (--target A --target B)");
    }
    if rounds < 2 {
        anyhow::bail!("--rounds {rounds}: two rounds at least, so the rounds can tell a change from chance");
    }
    if args.parallel_targets {
        anyhow::bail!("--rounds runs the targets in turn: it cannot be given with --parallel-targets");
    }
    let load = &scenario.load;
    if !load.stages.is_empty() || load.requests.is_some() {
        anyhow::bail!("--rounds splits a measured duration (-d) over the rounds: a load of stages or of requests cannot be split");
    }
    let duration = load.duration.context("--rounds needs a measured duration (-d)")?;
    if let Some(few) = rounds::few_rounds(rounds as usize).filter(|_| !args.quiet) {
        crate::note!("--rounds {few}");
    }
    if duration / rounds < Duration::from_secs(1) {
        anyhow::bail!(
            "--rounds {rounds} with -d {}: each round would measure under 1 s; give -d {rounds}s or more",
            humantime::format_duration(duration)
        );
    }
    Ok(())
}

/// The order of round `round`: forward on even rounds, backward on odd.
fn order(round: usize, targets: usize) -> Vec<usize> {
    match round % 2 {
        0 => (0..targets).collect(),
        _ => (0..targets).rev().collect(),
    }
}

/// Two targets at one URL or command: a URL copied into both places
/// compares a server with itself, and passes whatever changed.
fn one_endpoint(runs: &[Scenario], names: &[&str]) -> Option<String> {
    for (i, a) in runs.iter().enumerate() {
        // Each builtin is a server of its own.
        let builtin = a.target == crate::scenario::TargetSpec::Builtin;
        let same = runs
            .iter()
            .enumerate()
            .skip(i + 1)
            .find(|(_, b)| !builtin && a.target == b.target);
        if let Some((j, _)) = same {
            return Some(format!(
                "{} and {} are one endpoint: the rounds compare it with itself (one URL given twice?)",
                names[i], names[j]
            ));
        }
    }
    None
}

/// Runs the rounds and judges them; the caller has claimed `out`.
pub(super) fn run(
    live: &Live,
    args: &RunArgs,
    (runs, names): (&[Scenario], &[&str]),
    out: &Path,
) -> anyhow::Result<ExitCode> {
    let rounds = args.rounds.unwrap_or(2) as usize;
    // Each target's directory first: its rounds write their seconds into
    // theirs as they go.
    for name in names {
        let dir = out.join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let ran = run_rounds(live, args, (runs, names), out, rounds)?;
    let (reports, dirs) = (&ran.reports, &ran.dirs);
    let complete = reports.iter().all(|r| r.len() == rounds);
    let each: Vec<Vec<&RunReport>> = reports.iter().map(|r| r.iter().collect()).collect();
    let tolerances = args.max_regression.clone().unwrap_or_default();
    let mut judged = rounds::judge(names, &each, &tolerances);
    judged.notes.extend(one_endpoint(runs, names));
    if !complete {
        judged
            .invalid
            .push("the rounds were stopped before they all ran".into());
    }
    let shown_order = (0..rounds)
        .map(|r| {
            order(r, names.len())
                .iter()
                .map(|&t| letter(t))
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ");
    write(out, (names, reports, dirs), (&judged, &ran.reruns), &shown_order)?;
    write_page(out, names, reports, &judged, &shown_order)?;
    crate::output::write_ci_files(
        args.summary_md.as_deref(),
        args.junit.as_deref(),
        || rounds::markdown(&judged, &shown_order),
        || rounds::junit(&judged),
    )?;
    let table = table(names, reports) + &reruns_line(&ran.reruns) + &rounds::render(&judged, &shown_order);
    crate::output::print(&table);
    crate::output::print(&format!(
        "\nresults: {} (each target's rounds in a directory named after it)\n",
        out.display()
    ));
    if reports
        .iter()
        .flatten()
        .any(|r| r.summary.panicked_connections > 0)
    {
        return Ok(ExitCode::from(EXIT_BUG));
    }
    Ok(ExitCode::from(match judged.failed() {
        true => EXIT_FAILED_CHECK,
        false => 0,
    }))
}

/// Per target, per round.
type PerTarget<T> = Vec<Vec<T>>;

/// How often one round may be run again, and how many reruns the rounds
/// may take in all (at most doubling the run).
const RERUNS_PER_ROUND: usize = 2;

/// A round run again: its verdict was invalid for one of volley's own
/// causes (the generator fell behind, the client saturated), which says
/// nothing of the servers. Its runs are kept, in directories of their own.
#[derive(Serialize)]
struct Rerun {
    round: usize,
    /// The target whose run was invalid, and why.
    target: String,
    reasons: Vec<String>,
    /// Where the discarded runs were moved, one a target.
    dirs: Vec<String>,
}

/// The rounds' runs, each target's in its order, their directories, and
/// the rounds run again.
struct Ran {
    reports: Vec<Vec<RunReport>>,
    dirs: PerTarget<PathBuf>,
    reruns: Vec<Rerun>,
}

/// Every round in its order, each target's run written into its round's
/// directory; a round the machine made invalid is run again (both sides:
/// a pair is two runs close in time); a stop ends them where they are.
fn run_rounds(
    live: &Live,
    args: &RunArgs,
    (runs, names): (&[Scenario], &[&str]),
    out: &Path,
    rounds: usize,
) -> anyhow::Result<Ran> {
    let mut ran = Ran {
        reports: names.iter().map(|_| Vec::new()).collect(),
        dirs: names.iter().map(|_| Vec::new()).collect(),
        reruns: Vec::new(),
    };
    let mut round = 0;
    let mut again = 0;
    while round < rounds {
        let Some(this) = run_round(live, args, (runs, names), out, (round, rounds))? else {
            break;
        };
        let invalid = this.iter().find(|(_, r, _)| !r.summary.verdict.valid);
        let budget = again < RERUNS_PER_ROUND && ran.reruns.len() < rounds;
        if let (Some((t, report, _)), true, false) = (invalid, budget, live.cancel.is_cancelled()) {
            again += 1;
            let mut dirs = Vec::new();
            for (_, _, dir) in &this {
                let moved = dir.with_file_name(format!("round-{:02}-discarded-{again}", round + 1));
                std::fs::rename(dir, &moved)
                    .with_context(|| format!("cannot move {} aside", dir.display()))?;
                dirs.push(moved.strip_prefix(out).unwrap_or(&moved).display().to_string());
            }
            if !args.quiet {
                crate::note!(
                    "round {}/{rounds} runs again: {}'s run is invalid ({})",
                    round + 1,
                    names[*t],
                    report.summary.verdict.reasons.join("; ")
                );
            }
            ran.reruns.push(Rerun {
                round: round + 1,
                target: names[*t].to_string(),
                reasons: report.summary.verdict.reasons.clone(),
                dirs,
            });
            continue;
        }
        for (t, report, dir) in this {
            ran.reports[t].push(report);
            ran.dirs[t].push(dir);
        }
        round += 1;
        again = 0;
    }
    Ok(ran)
}

/// One round: every target in the round's order. `None` when a stop came
/// before it was whole.
fn run_round(
    live: &Live,
    args: &RunArgs,
    (runs, names): (&[Scenario], &[&str]),
    out: &Path,
    (round, rounds): (usize, usize),
) -> anyhow::Result<Option<Vec<(usize, RunReport, PathBuf)>>> {
    let mut this = Vec::new();
    for t in order(round, names.len()) {
        if live.cancel.is_cancelled() {
            return Ok(None);
        }
        let mut scenario = runs[t].clone();
        let duration = scenario.load.duration.unwrap_or_default() / rounds as u32;
        scenario.load.duration = Some(duration);
        if round > 0 {
            scenario.load.warmup = Duration::ZERO;
        }
        if !live.has_dashboard() && !args.quiet {
            crate::note!("round {}/{rounds}: {}", round + 1, names[t]);
        }
        let dir = out.join(names[t]).join(format!("round-{:02}", round + 1));
        let report = match live.block_on(live.run(t, args, &scenario, &dir)) {
            Ok(report) => report,
            Err(RunError::StoppedBeforeStart(_)) => return Ok(None),
            Err(error) => return Err(anyhow::anyhow!("target {}: {error}", names[t])),
        };
        report::write_files(&dir, &report)?;
        this.push((t, report, dir));
    }
    Ok(Some(this))
}

/// `report.html`: the judged rounds and every target's spectra.
fn write_page(
    out: &Path,
    names: &[&str],
    reports: &[Vec<RunReport>],
    judged: &AbReport,
    shown_order: &str,
) -> anyhow::Result<()> {
    // Each target's spectra over all its rounds, for report.html (which
    // plots no second by second: a round's seconds overlap the next's).
    let spectra: Vec<crate::report::html::Latencies> = (reports.iter())
        .map(|rounds| {
            let mut latencies = crate::report::html::Latencies::default();
            for interval in rounds.iter().flat_map(|run| &run.summary.latency_log.intervals) {
                latencies.add(&interval.tag, interval.second, &interval.histogram());
            }
            latencies
        })
        .collect();
    let plotted: Vec<(&str, &crate::report::html::Spectra)> = names
        .iter()
        .copied()
        .zip(spectra.iter().map(|l| &l.spectra))
        .collect();
    let page = rounds::html_page(judged, shown_order, &plotted);
    let path = out.join("report.html");
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The rounds run again, and why, under the rounds' table.
fn reruns_line(reruns: &[Rerun]) -> String {
    let mut out = String::new();
    for rerun in reruns {
        out.push_str(&format!(
            "  round {} was run again: {}'s run was invalid ({}); kept in {}\n",
            rerun.round,
            rerun.target,
            rerun.reasons.join("; "),
            rerun.dirs.join(", ")
        ));
    }
    out
}

/// A, B, C... for the order's line.
fn letter(target: usize) -> char {
    (b'A' + (target % 26) as u8) as char
}

/// Each target's rounds, a line each: its calls, rate, p50 and p99.
fn table(names: &[&str], reports: &[Vec<RunReport>]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (t, (name, rounds)) in names.iter().zip(reports).enumerate() {
        let _ = writeln!(
            out,
            "{} = {name} ({})",
            letter(t),
            rounds.first().map_or("", |r| r.meta.target.as_str())
        );
        for (r, run) in rounds.iter().enumerate() {
            let total = &run.summary.total;
            let verdict = match run.summary.verdict.valid {
                true => "valid".to_string(),
                false => format!("invalid: {}", run.summary.verdict.reasons.join("; ")),
            };
            let _ = writeln!(
                out,
                "  round {:>2}: {:>8} calls {:>10.1}/s  p50 {:>9.3} ms  p99 {:>9.3} ms  {verdict}",
                r + 1,
                total.calls,
                total.rps,
                total.latency.p50_ms,
                total.latency.p99_ms
            );
        }
        for (warning, seen) in warnings_of(rounds) {
            let _ = writeln!(out, "  warning, in {seen} of {} rounds: {warning}", rounds.len());
        }
    }
    out
}

/// A target's warnings over its rounds, each kind once (as its first round
/// with it said it) with the rounds it came in. A round too short for
/// `volley compare` is left out: rounds are judged together.
fn warnings_of(rounds: &[RunReport]) -> Vec<(String, usize)> {
    use crate::stats::WarningCode;
    let mut kinds: Vec<(WarningCode, String, usize)> = Vec::new();
    for run in rounds {
        let mut seen_here = Vec::new();
        for warning in &run.summary.warnings {
            if warning.code == WarningCode::TooShortToCompare || seen_here.contains(&warning.code) {
                continue;
            }
            seen_here.push(warning.code);
            match kinds.iter_mut().find(|(code, ..)| *code == warning.code) {
                Some((.., count)) => *count += 1,
                None => kinds.push((warning.code, warning.message.clone(), 1)),
            }
        }
    }
    kinds
        .into_iter()
        .map(|(_, message, count)| (message, count))
        .collect()
}

#[derive(Serialize)]
struct Round<'a> {
    round: usize,
    dir: String,
    valid: bool,
    methods: &'a [MethodSummary],
    total: &'a MethodSummary,
}

#[derive(Serialize)]
struct Target<'a> {
    name: &'a str,
    url: &'a str,
    rounds: Vec<Round<'a>>,
}

#[derive(Serialize)]
struct Document<'a> {
    format: u32,
    tool: &'static str,
    version: &'static str,
    scenario: &'a str,
    /// `AB BA AB ...`: the order each round ran the targets in.
    order: &'a str,
    targets: Vec<Target<'a>>,
    /// Rounds run again because a run of theirs was invalid.
    reruns: &'a [Rerun],
    ab: &'a AbReport,
    result: String,
}

/// `summary.json` (every round's figures per target, and the judgement),
/// the Markdown summary and JUnit.
fn write(
    out: &Path,
    (names, reports, dirs): (&[&str], &[Vec<RunReport>], &[Vec<PathBuf>]),
    (judged, reruns): (&AbReport, &[Rerun]),
    order: &str,
) -> anyhow::Result<()> {
    let targets = (names.iter().zip(reports).zip(dirs))
        .map(|((name, rounds), dirs)| Target {
            name,
            url: rounds.first().map_or("", |r| r.meta.target.as_str()),
            rounds: (rounds.iter().zip(dirs).enumerate())
                .map(|(r, (run, dir))| Round {
                    round: r + 1,
                    dir: dir.strip_prefix(out).unwrap_or(dir).display().to_string(),
                    valid: run.summary.verdict.valid,
                    methods: &run.summary.methods,
                    total: &run.summary.total,
                })
                .collect(),
        })
        .collect();
    let document = Document {
        format: report::FORMAT,
        tool: "volley",
        version: env!("CARGO_PKG_VERSION"),
        scenario: reports
            .first()
            .and_then(|r| r.first())
            .map_or("", |r| r.meta.scenario.as_str()),
        order,
        targets,
        reruns,
        ab: judged,
        result: judged.result(),
    };
    let mut json = serde_json::to_vec_pretty(&document).expect("plain data");
    json.push(b'\n');
    let path = out.join("summary.json");
    std::fs::write(&path, json).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
