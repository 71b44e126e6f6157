//! A run from start to report: the built-in server when asked for, the
//! target resolved and reached, the first polls, the engine, then the
//! warnings, verdict and thresholds every report carries. What `volley run`
//! and the tests call.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::process::EXIT_SIGINT;
use crate::engine::{self, Control, RunSpec};
use crate::plan::Poll;
use crate::plan::Shard;
use crate::report::shard::{ShardClock, ShardRecord};
use crate::report::{LoadMeta, RunMeta, RunReport};
use crate::scenario::{Compiled, Scenario, TargetSpec};
use crate::serve::{self, ServeConfig};
use crate::stats::{RunSummary, SavedRecorder, Snapshot};
use crate::transport::{Scheme, StreamTarget, Target, TargetError, TransportError};

#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Unreachable(#[from] TransportError),
    #[error("cannot start the built-in server: {0}")]
    BuiltinServer(std::io::Error),
    #[error("{0}")]
    Poll(String),
    /// With the exit code of the signal that stopped it.
    #[error("stopped before the run began: nothing was sent, no result written")]
    StoppedBeforeStart(u8),
}

pub(super) const INSECURE: &str = "INSECURE: --insecure is on, the server's TLS certificate was not verified: these figures may come from a server other than the one named";

/// Whether the run talks TLS without verifying the server: said at the
/// start, on the dashboard and in every report.
pub(super) fn is_insecure(scenario: &Scenario) -> bool {
    let secure =
        matches!(&scenario.target, TargetSpec::Url(url) if Scheme::of(url).is_some_and(Scheme::is_tls));
    secure && scenario.tls.insecure
}

/// Runs `scenario` to its end (or until `cancel`), starting the built-in
/// server first when the target is `builtin`.
pub async fn execute(
    scenario: &Scenario,
    scenario_file: Option<&Path>,
    cancel: CancellationToken,
    control: Arc<Control>,
    observe: impl FnMut(&Snapshot),
) -> Result<RunReport, RunError> {
    let Compiled {
        plan,
        mix,
        setup,
        polls,
        mut warnings,
    } = scenario.compile();
    if is_insecure(scenario) {
        warnings.push(INSECURE.to_string());
    }
    let server = builtin_server(scenario)?;
    let url = match (&scenario.target, &server) {
        (TargetSpec::Url(url), _) => url.clone(),
        (TargetSpec::Builtin, Some(server)) => server.url(),
        (TargetSpec::Command { .. }, _) => scenario.target.to_string(),
        (TargetSpec::Builtin, None) => unreachable!("builtin started a server above"),
    };
    // Nothing before the run may outlast a Ctrl-C: a target that accepts
    // and never answers is bounded by the timeout, and a stop ends the wait.
    let (target, tls) = tokio::select! {
        prepared = prepare(scenario, &url, &polls, plan.timeout) => prepared?,
        _ = cancel.cancelled() => return Err(RunError::StoppedBeforeStart(EXIT_SIGINT)),
    };
    // Connected: now wait for the shards' common start, if asked.
    let late = match scenario.start_at {
        Some(at) => Some(wait_until(at, &cancel).await?),
        None => None,
    };
    let started = SystemTime::now();
    let mut meta = RunMeta {
        tool: "volley",
        version: env!("CARGO_PKG_VERSION"),
        scenario: scenario.name.clone(),
        scenario_file: scenario_file.map(|p| p.display().to_string()),
        target: match server {
            Some(_) => format!("builtin ({url})"),
            None => url.clone(),
        },
        transport: target.transport_name().to_string(),
        jsonrpc: scenario.version.to_string(),
        tls,
        load: LoadMeta::new(&plan),
        seed: plan.seed,
        started_at: timestamp(SystemTime::now()),
        ended_at: String::new(),
        header_names: scenario.headers.iter().map(|(name, _)| name.clone()).collect(),
        warnings,
    };
    let capacity = Capacity {
        connections: plan.connections,
        callers: plan.callers(),
    };
    let timeout = plan.timeout;
    let warmup = plan.warmup;
    let whole_rate = plan.constant_rate();
    let capture = (scenario.equality.as_ref()).map(|e| Arc::new(engine::Capture::new(e.sample)));
    let spec = RunSpec {
        plan,
        mix,
        target,
        setup,
        polls,
        capture: capture.clone(),
        observe: scenario.observe.clone(),
    };
    let mut summary = engine::run(spec, cancel, control, observe).await;
    meta.ended_at = timestamp(SystemTime::now());
    meta.warnings.extend(run_warnings(&summary, capacity, timeout));
    meta.warnings.extend(shard_warnings(scenario, late));
    crate::stats::weigh_answers(&mut summary);
    drop(server);
    let thresholds = crate::thresholds::evaluate_all(&scenario.thresholds, &summary);
    let shard = scenario.shard.map(|shard| {
        let clock = ShardClock {
            start_at: scenario.start_at.map(unix_seconds),
            started: unix_seconds(started),
            late_s: late.map(|l| l.as_secs_f64()),
            measure_start: unix_seconds(started + warmup),
        };
        shard_record(scenario, shard, &meta, &summary, (clock, whole_rate))
    });
    Ok(RunReport {
        meta,
        summary,
        thresholds,
        captured: capture.map_or_else(Vec::new, |c| c.take()),
        shard,
    })
}

/// A start later than this after `--start-at` is said in the results.
const LATE_START: Duration = Duration::from_millis(500);

/// What a shard's results must say: a late start, and that its thresholds
/// are judged on the whole.
fn shard_warnings(scenario: &Scenario, late: Option<Duration>) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(late) = late.filter(|l| *l >= LATE_START) {
        warnings.push(format!(
            "started {:.1} s after --start-at: its seconds do not line up with the other shards'",
            late.as_secs_f64()
        ));
    }
    if let Some(shard) = scenario.shard.filter(|_| !scenario.thresholds.is_empty()) {
        warnings.push(format!(
            "shard {shard}: these figures are this shard's share; the thresholds are judged on the whole by `volley merge` (a shard does not exit 2)"
        ));
    }
    warnings
}

/// Waits for `at` on the wall clock, or a stop; returns how late it is,
/// past it (and says so: shards that start apart do not line their
/// seconds up).
async fn wait_until(at: SystemTime, cancel: &CancellationToken) -> Result<Duration, RunError> {
    match at.duration_since(SystemTime::now()) {
        Ok(wait) => {
            crate::note!(
                "volley: the target answered; waiting {} to start at {} (--start-at)",
                humantime::format_duration(Duration::from_secs(wait.as_secs())),
                humantime::format_rfc3339_seconds(at)
            );
            tokio::select! {
                _ = tokio::time::sleep(wait) => Ok(Duration::ZERO),
                _ = cancel.cancelled() => Err(RunError::StoppedBeforeStart(EXIT_SIGINT)),
            }
        }
        Err(past) => {
            let late = past.duration();
            crate::note!(
                "volley: started {} after --start-at",
                humantime::format_duration(Duration::from_millis(late.as_millis() as u64))
            );
            Ok(late)
        }
    }
}

fn unix_seconds(time: SystemTime) -> f64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What `shard.json` keeps of a shard's run: enough to add shards up.
fn shard_record(
    scenario: &Scenario,
    shard: Shard,
    meta: &RunMeta,
    summary: &RunSummary,
    (clock, rate): (ShardClock, Option<f64>),
) -> ShardRecord {
    let recorded = &summary.recorded;
    ShardRecord {
        format: crate::report::shard::FORMAT,
        volley: env!("CARGO_PKG_VERSION").to_string(),
        index: shard.index,
        count: shard.count,
        scenario: scenario.name.clone(),
        run: scenario.run_description(),
        seed: meta.seed,
        first_id: shard.first_id(),
        id_block: shard.id_block_len(),
        clock,
        measured_seconds: summary.measured_seconds,
        methods: summary.methods.iter().map(|m| m.method.clone()).collect(),
        stage_bounds: summary.stages.iter().map(|s| (s.start_s, s.end_s)).collect(),
        thresholds: scenario.thresholds.iter().map(|t| t.text().to_string()).collect(),
        open: meta.load.model == "open",
        due: recorded.due,
        unsent: summary.schedule.as_ref().map_or(0, |s| s.unsent),
        rate,
        cpu: summary.client_cpu.clone(),
        in_flight_at_end: summary.in_flight_at_end,
        panicked_connections: summary.panicked_connections,
        partial: summary.partial,
        total: SavedRecorder::of(&recorded.total),
        stages: recorded.stages.iter().map(SavedRecorder::of).collect(),
    }
}

/// The target resolved and reached once, and the polls made a first time,
/// before anything is measured; returns what TLS agreed on, if any.
async fn prepare(
    scenario: &Scenario,
    url: &str,
    polls: &[Poll],
    timeout: Duration,
) -> Result<(Target, Option<String>), RunError> {
    let options = transport_options(scenario);
    let target = match &scenario.target {
        TargetSpec::Command { argv, framing } => {
            Target::Stream(StreamTarget::command(argv.clone(), *framing, &options))
        }
        _ => Target::resolve(url, &options).await?,
    };
    let tls = target.check_reachable(timeout).await?;
    for poll in polls {
        engine::first_poll(poll, &target, timeout)
            .await
            .map_err(RunError::Poll)?;
    }
    Ok((target, tls))
}

/// The built-in server on a free loopback port, when the target is it.
fn builtin_server(scenario: &Scenario) -> Result<Option<serve::ServerHandle>, RunError> {
    match scenario.target {
        TargetSpec::Builtin => serve::spawn(ServeConfig {
            listen: "127.0.0.1:0".parse().expect("a valid loopback address"),
            ..ServeConfig::default()
        })
        .map(Some)
        .map_err(RunError::BuiltinServer),
        TargetSpec::Url(_) | TargetSpec::Command { .. } => Ok(None),
    }
}

/// How to reach the scenario's target, from its settings.
pub(super) fn transport_options(scenario: &Scenario) -> crate::transport::Options {
    crate::transport::Options {
        headers: scenario.headers.clone(),
        max_response: scenario.max_response_bytes,
        http2: scenario.http2,
        tls: scenario.tls.clone(),
        server_answers: scenario.server_answers.clone(),
    }
}

/// What a reader must know to trust the figures: connection tasks that
/// panicked, calls left unanswered at the end, and a schedule that was not
/// kept, said with its cause.
fn run_warnings(summary: &RunSummary, capacity: Capacity, timeout: Duration) -> Vec<String> {
    use crate::report::count;
    use crate::stats::Unanswered;
    let mut warnings = Vec::new();
    if summary.panicked_connections > 0 {
        warnings.push(format!(
            "{} panicked (a bug in volley: please report it); the calls they made are counted",
            count(summary.panicked_connections, "connection task")
        ));
    }
    let in_flight = summary.in_flight_at_end;
    let run = Duration::from_secs_f64(summary.measured_seconds.max(0.0));
    let run_shown = humantime::format_duration(Duration::from_millis(run.as_millis() as u64));
    match crate::stats::unanswered(summary) {
        Some(Unanswered::StoppedInWarmup) => warnings.push(
            "stopped before the measured part began: nothing was measured (the warmup's calls are in no figure)".into(),
        ),
        Some(Unanswered::NothingSent) => warnings.push(format!(
            "nothing was measured: no call was sent in the measured {run_shown} (after any warmup); a replay file used up in the warmup, or a run shorter than a call, leaves every figure at zero"
        )),
        // Advice about the timeout only where calls were left waiting.
        Some(silence) if timeout > run && in_flight > 0 => warnings.push(format!(
            "{silence}; {} still waiting for an answer when the run ended, in no figure: the timeout ({}) is longer than the run ({run_shown}), so none could count as a timeout. Give --timeout shorter than the run to count them",
            count(in_flight, "call"),
            humantime::format_duration(timeout),
        )),
        Some(silence) => warnings.push(format!("{silence}")),
        None => {}
    }
    if let Some(subs) = summary.subscriptions.as_ref().filter(|s| s.notifications == 0) {
        warnings.push(format!(
            "subscriptions received nothing: {} opened, no notification came in the measured {run_shown} (are its params a topic the server sends on, and often enough for the run?)",
            count(subs.opened, "subscription")
        ));
    }
    let judged = f64::from(crate::compare::JUDGED_SECONDS);
    if summary.total.calls > 0 && summary.measured_seconds < judged {
        warnings.push(format!(
            "a measured run of {run_shown} is too short for `volley compare` to tell a change from chance: measure at least {judged} s"
        ));
    }
    if let Some(schedule) = summary.schedule.as_ref().filter(|s| s.behind) {
        warnings.push(format!(
            "{}: {} left more than {} ms late (start delay p99 {:.1} ms) and {} never sent; the latency figures include this wait",
            behind_cause(summary, capacity),
            count(schedule.late_requests, "request"),
            crate::stats::LATE_THRESHOLD.as_millis(),
            schedule.start_delay.p99_ms,
            count(schedule.unsent, "request")
        ));
    }
    warnings
}

/// Why an open-model run fell behind its schedule, with the remedy: the
/// server down (connections refused), every caller waiting on a slow
/// server, or volley itself.
fn behind_cause(summary: &RunSummary, capacity: Capacity) -> String {
    use crate::report::count;
    let outcome = |name: &str| summary.total.outcomes.get(name).copied().unwrap_or(0);
    let in_flight = summary.in_flight_at_end;
    let unreachable = outcome("connect");
    if unreachable > 0 {
        return format!(
            "the server could not be reached for part of the run ({} failed to connect): requests due then waited for it. This is the server's outage, not the generator",
            count(unreachable, "call")
        );
    }
    if in_flight as usize >= capacity.callers {
        let over = match capacity.callers == capacity.connections {
            true => count(capacity.connections as u64, "connection"),
            false => format!(
                "{} in flight at most over {}",
                count(capacity.callers as u64, "call"),
                count(capacity.connections as u64, "connection")
            ),
        };
        return format!(
            "every caller was waiting for an answer ({} in flight at the end): the server was too slow for this rate on {over}. Add connections (or --max-in-flight) or lower the rate to measure the server alone",
            count(in_flight, "call"),
        );
    }
    "the generator fell behind schedule: give it more threads (--threads) or lower the rate".into()
}

/// How many calls a run can have in flight, and over how many connections.
#[derive(Clone, Copy, Debug)]
pub(super) struct Capacity {
    pub connections: usize,
    pub callers: usize,
}

pub(super) fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}
