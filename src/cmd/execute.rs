//! A run from start to report: the built-in server when asked for, the
//! target resolved and reached, the first polls, the engine (whose summary
//! comes with its verdict and warnings whole, from the facts handed to it
//! here), then the thresholds. What `volley run` and the tests call.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::process::EXIT_SIGINT;
use crate::engine::{self, Control, RunSpec};
use crate::plan::{Poll, Shard};
use crate::report::checkpoint::Checkpoint;
use crate::report::series::FileSpool;
use crate::report::shard::{ShardClock, ShardRecord};
use crate::report::{LoadMeta, RunMeta, RunReport};
use crate::scenario::{Compiled, Scenario, TargetSpec};
use crate::serve::{self, ServeConfig};
use crate::stats::{Facts, RunSummary, SavedRecorder, Series, Snapshot};
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

/// Whether the run talks TLS without verifying the server: said at the
/// start, on the dashboard and in every report.
pub(super) fn is_insecure(scenario: &Scenario) -> bool {
    let secure =
        matches!(&scenario.target, TargetSpec::Url(url) if Scheme::of(url).is_some_and(Scheme::is_tls));
    secure && scenario.tls.insecure
}

/// Runs `scenario` to its end (or until `cancel`), starting the built-in
/// server first when the target is `builtin`; its series are kept in
/// memory.
pub async fn execute(
    scenario: &Scenario,
    scenario_file: Option<&Path>,
    cancel: CancellationToken,
    control: Arc<Control>,
    publish: impl FnMut(&Snapshot),
) -> Result<RunReport, RunError> {
    execute_into(scenario, scenario_file, None, cancel, control, publish).await
}

/// As [`execute`], writing each second into the directory `results` as it
/// closes (`timeseries.csv`, `latency.hlog`, `samples.csv`), so a long run
/// holds none of them and a killed one leaves them.
pub async fn execute_into(
    scenario: &Scenario,
    scenario_file: Option<&Path>,
    results: Option<&Path>,
    cancel: CancellationToken,
    control: Arc<Control>,
    publish: impl FnMut(&Snapshot),
) -> Result<RunReport, RunError> {
    let Compiled {
        plan,
        mix,
        setup,
        polls,
        warnings,
    } = scenario.compile();
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
        scenario_file: scenario_file.map(|p| p.display().to_string()),
        target: match server {
            Some(_) => format!("builtin ({url})"),
            None => crate::redact::url(&url),
        },
        transport: match &target {
            Target::Http(_) => crate::transport::describe(&url, scenario.http2, scenario.pipeline),
            _ => target.transport_name().to_string(),
        },
        tls,
        ..run_meta(scenario, &plan)
    };
    let facts = facts(scenario, warnings, late);
    let warmup = plan.warmup;
    let whole_rate = plan.constant_rate();
    let capture = (scenario.equality.as_ref()).map(|e| Arc::new(engine::Capture::new(e.sample)));
    let race = (scenario.race.as_ref()).map(|r| Arc::new(engine::RaceLog::new(r)));
    let spec = RunSpec {
        plan,
        mix,
        target,
        setup,
        polls,
        capture: capture.clone(),
        race: race.clone(),
        observe: scenario.observe.clone(),
        facts,
        spool: spool(results, &meta),
    };
    let mut checkpoint = results.map(Checkpoint::new);
    let mut publish = publish;
    let publish = |snapshot: &Snapshot| {
        if let Some(checkpoint) = &mut checkpoint {
            checkpoint.offer(&meta, snapshot);
        }
        publish(snapshot);
    };
    let summary = engine::run(spec, cancel, control, publish).await;
    meta.ended_at = timestamp(SystemTime::now());
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
        format: crate::report::FORMAT,
        meta,
        summary,
        thresholds,
        captured: capture.map_or_else(Vec::new, |c| c.take()),
        race: race.and_then(|r| r.arrivals()),
        shard,
    })
}

/// Where the run's seconds go: the results directory, or memory when
/// there is none or it cannot be written (said).
fn spool(results: Option<&Path>, meta: &RunMeta) -> Box<dyn crate::stats::Spool> {
    let Some(dir) = results else {
        return Box::new(Series::default());
    };
    match FileSpool::create(dir, meta) {
        Ok(spool) => Box::new(spool),
        Err(error) => {
            crate::note!(
                "volley: cannot write the run's seconds into {} as it goes ({error}); keeping them in memory until the end",
                dir.display()
            );
            Box::new(Series::default())
        }
    }
}

/// What `summary.json` says of the run that the scenario and plan tell,
/// as it begins.
fn run_meta(scenario: &Scenario, plan: &crate::plan::LoadPlan) -> RunMeta {
    RunMeta {
        tool: "volley".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        scenario: scenario.name.clone(),
        scenario_file: None,
        target: String::new(),
        transport: String::new(),
        jsonrpc: scenario.version.to_string(),
        tls: None,
        load: LoadMeta {
            pipeline: scenario.pipeline,
            ..LoadMeta::new(plan)
        },
        seed: plan.seed,
        started_at: timestamp(SystemTime::now()),
        ended_at: String::new(),
        header_names: scenario.header_names(),
    }
}

/// What the run's warnings weigh that only this command knows: the
/// scenario's own warnings, TLS unverified, a late start, a shard's
/// thresholds judged elsewhere.
fn facts(scenario: &Scenario, warnings: Vec<String>, late: Option<Duration>) -> Facts {
    Facts {
        scenario: warnings,
        insecure: is_insecure(scenario),
        late_start: late,
        shard_with_thresholds: (scenario.shard)
            .filter(|_| !scenario.thresholds.is_empty())
            .map(|shard| shard.to_string()),
        ..Facts::default()
    }
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
    let recorded = &summary.gathered;
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
pub(super) async fn prepare(
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
pub(super) fn builtin_server(scenario: &Scenario) -> Result<Option<serve::ServerHandle>, RunError> {
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
    let made = (scenario.made_headers.iter()).map(|(name, template)| crate::transport::MadeHeader {
        name: name.clone(),
        value: template.clone(),
    });
    let jwt = (scenario.jwt_secret.as_ref()).map(|jwt| crate::transport::bearer(jwt.secret.clone()));
    crate::transport::Options {
        headers: scenario.headers.clone(),
        made_headers: made.chain(jwt).collect(),
        max_response: scenario.max_response_bytes,
        http2: scenario.http2,
        pipeline: scenario.pipeline,
        tls: scenario.tls.clone(),
        server_answers: scenario.server_answers.clone(),
        ready: scenario.ready.clone(),
    }
}

pub(super) fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}
