//! The `run` and `serve` commands: scenario to plan, the run itself, and
//! what is printed and written around it.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::cli::{InitArgs, RunArgs, ServeArgs, ValidateArgs};
use crate::engine::{self, Control, RunSpec};
use crate::metrics::{self, Metrics};
use crate::output::ResultDir;
use crate::report::{self, LoadMeta, RunMeta, RunReport};
use crate::scenario::{Compiled, Scenario, TargetSpec};
use crate::serve::{self, ServeConfig, ServerStats};
use crate::stats::{RunSummary, Snapshot};
use crate::transport::{Target, TargetError, TransportError};
use crate::tui::{Dashboard, Tui};

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

const INSECURE: &str = "INSECURE: --insecure is on, the server's TLS certificate was not verified: these figures may come from a server other than the one named";

/// Whether the run talks TLS without verifying the server: said at the
/// start, on the dashboard and in every report.
fn is_insecure(scenario: &Scenario) -> bool {
    let secure = matches!(&scenario.target, TargetSpec::Url(url) if url.starts_with("https://") || url.starts_with("wss://"));
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
    let server = match scenario.target {
        TargetSpec::Builtin => Some(
            serve::spawn(ServeConfig {
                listen: "127.0.0.1:0".parse().expect("a valid loopback address"),
                ..ServeConfig::default()
            })
            .map_err(RunError::BuiltinServer)?,
        ),
        TargetSpec::Url(_) => None,
        TargetSpec::Command { .. } => None,
    };
    let url = match (&scenario.target, &server) {
        (TargetSpec::Url(url), _) => url.clone(),
        (TargetSpec::Builtin, Some(server)) => server.url(),
        (TargetSpec::Command { .. }, _) => scenario.target.to_string(),
        (TargetSpec::Builtin, None) => unreachable!("builtin started a server above"),
    };
    let options = crate::transport::Options {
        headers: scenario.headers.clone(),
        max_response: scenario.max_response_bytes,
        http2: scenario.http2,
        tls: scenario.tls.clone(),
        server_answers: scenario.server_answers.clone(),
    };
    // Nothing before the run may outlast a Ctrl-C: a target that accepts
    // and never answers is bounded by the timeout, and a stop ends the wait.
    let prepare = async {
        let target = match &scenario.target {
            TargetSpec::Command { argv, framing } => Target::Stream(crate::transport::StreamTarget::command(
                argv.clone(),
                *framing == crate::scenario::Framing::ContentLength,
                &options,
            )),
            _ => Target::resolve(&url, &options).await?,
        };
        let tls = target.check_reachable(plan.timeout).await?;
        for poll in &polls {
            engine::first_poll(poll, &target, plan.timeout)
                .await
                .map_err(RunError::Poll)?;
        }
        Ok::<_, RunError>((target, tls))
    };
    let (target, tls) = tokio::select! {
        prepared = prepare => prepared?,
        _ = cancel.cancelled() => return Err(RunError::StoppedBeforeStart(EXIT_SIGINT)),
    };

    let load = LoadMeta::new(&plan);
    let mut meta = RunMeta {
        tool: "volley",
        version: env!("CARGO_PKG_VERSION"),
        scenario: scenario.name.clone(),
        scenario_file: scenario_file.map(|p| p.display().to_string()),
        target: if server.is_some() {
            format!("builtin ({url})")
        } else {
            url.clone()
        },
        transport: target.transport_name(),
        tls,
        load,
        seed: plan.seed,
        started_at: timestamp(SystemTime::now()),
        ended_at: String::new(),
        header_names: scenario.headers.iter().map(|(name, _)| name.clone()).collect(),
        warnings,
    };
    let (capacity, timeout) = (plan.connections * plan.per_connection.max(1), plan.timeout);
    let mut summary = engine::run(
        RunSpec {
            plan,
            mix,
            target,
            setup,
            polls,
        },
        cancel,
        control,
        observe,
    )
    .await;
    meta.ended_at = timestamp(SystemTime::now());
    if summary.panicked_connections > 0 {
        meta.warnings.push(format!(
            "{} panicked (a bug in volley: please report it); the calls they made are counted",
            crate::report::count(summary.panicked_connections, "connection task")
        ));
    }
    meta.warnings.extend(run_warnings(&summary, capacity, timeout));
    crate::stats::weigh_answers(&mut summary);
    drop(server);
    let thresholds = crate::thresholds::evaluate_all(&scenario.thresholds, &summary);
    Ok(RunReport {
        meta,
        summary,
        thresholds,
    })
}

/// What a reader must know to trust the figures: calls left unanswered
/// at the end, and a schedule that was not kept, said with its cause.
fn run_warnings(summary: &RunSummary, capacity: usize, timeout: Duration) -> Vec<String> {
    use crate::report::count;
    use crate::stats::Unanswered;
    let mut warnings = Vec::new();
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
        Some(silence) if timeout > run => warnings.push(format!(
            "{silence}; {} still waiting for an answer when the run ended, in no figure: the timeout ({}) is longer than the run ({run_shown}), so none could count as a timeout. Give --timeout shorter than the run to count them",
            count(in_flight, "call"),
            humantime::format_duration(timeout),
        )),
        Some(silence) => warnings.push(format!("{silence}")),
        None => {}
    }
    if let Some(schedule) = summary.schedule.as_ref().filter(|s| s.behind) {
        // Every connection busy at the end: requests waited for the server,
        // not for volley.
        let cause = if in_flight as usize >= capacity {
            format!(
                "every connection was waiting for an answer ({} in flight at the end): the server was too slow for this rate on {}",
                count(in_flight, "call"),
                count(capacity as u64, "connection")
            )
        } else {
            "the generator fell behind schedule".to_string()
        };
        warnings.push(format!(
            "{cause}: {} left more than {} ms late (start delay p99 {:.1} ms) and {} never sent; the latency figures include this wait. Add connections or lower the rate to measure the server alone",
            count(schedule.late_requests, "request"),
            crate::stats::LATE_THRESHOLD.as_millis(),
            schedule.start_delay.p99_ms,
            count(schedule.unsent, "request")
        ));
    }
    warnings
}

fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

/// Exit codes of a run stopped by a signal, as shells report them.
const EXIT_SIGINT: u8 = 130;
const EXIT_SIGTERM: u8 = 143;
/// The run completed but its files went elsewhere (see the error).
const EXIT_RESULTS_ELSEWHERE: u8 = 3;
/// The run completed, but a check asked for failed (`--require-valid`).
const EXIT_FAILED_CHECK: u8 = 2;
/// A connection task panicked (a bug in volley); the figures are complete otherwise.
const EXIT_BUG: u8 = 70;

pub fn run_command(args: RunArgs) -> anyhow::Result<ExitCode> {
    let scenario = args.scenario()?;
    ensure_descriptors(scenario.compile().plan.connections)?;
    // Claimed before anything is sent: a directory in the way, unwritable
    // or taken by another run is an error now, not after the run.
    let out = ResultDir::claim(args.out.as_deref(), &dir_stamp(), &scenario.name)?;
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
    // Thresholds are a CI gate: figures that cannot be trusted pass none.
    let require_valid = args.require_valid || !scenario.thresholds.is_empty();
    let failed_check = !report.thresholds_passed() || (require_valid && !report.summary.verdict.valid);
    if signal == 0 && failed_check {
        return Ok(ExitCode::from(EXIT_FAILED_CHECK));
    }
    Ok(ExitCode::from(signal))
}

/// Runs the scenario with the dashboard or progress lines, and returns
/// its report and the exit code a stop asked for (0 when none).
fn run_to_report(args: &RunArgs, scenario: &Scenario) -> anyhow::Result<(RunReport, u8)> {
    // Signals are caught from here on, before anything is sent.
    let (runtime, mut signals) = runtime_with_signals()?;
    runtime.block_on(async {
        let cancel = CancellationToken::new();
        let control = Arc::new(Control::new());
        let stopped_by = Arc::new(AtomicU8::new(0));
        let (stop, stopped) = (cancel.clone(), stopped_by.clone());
        tokio::spawn(async move {
            stopped.store(signals.recv().await, Ordering::Relaxed);
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
        let mut aborted: Option<String> = None;
        let stop_on_fail = cancel.clone();
        let report = execute(scenario, args.scenario.as_deref(), cancel, control, |snapshot| {
            if let Some(metrics) = &metrics {
                metrics.publish(snapshot);
            }
            if aborted.is_none() {
                aborted = failed_so_far(scenario, snapshot);
                if aborted.is_some() {
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
            Ok(mut report) => {
                report.meta.warnings.extend(aborted);
                Ok((report, signal))
            }
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

/// Makes room for `connections` sockets under the open-files limit, raising
/// the soft limit up to the hard one when needed.
fn ensure_descriptors(connections: usize) -> anyhow::Result<()> {
    // A few for the runtime, the listener of an in-process server, files.
    let needed = (connections as u64).saturating_mul(2).saturating_add(64);
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= needed {
        return Ok(());
    }
    let raised = libc::rlimit {
        rlim_cur: needed.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given.
    let now = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        raised.rlim_cur
    } else {
        // Refused (macOS caps the soft limit below an infinite hard one, a
        // sandbox may forbid it): what holds is the limit as it was.
        limit.rlim_cur
    };
    if now < needed {
        anyhow::bail!(
            "{connections} connections need about {needed} open files, but the limit is {now}: raise it with `ulimit -n {needed}`"
        );
    }
    Ok(())
}

/// A runtime for a command's main thread, and its signals already caught.
fn runtime_with_signals() -> anyhow::Result<(tokio::runtime::Runtime, Signals)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let signals = {
        let _runtime = runtime.enter();
        Signals::listen().context("cannot listen for signals")?
    };
    Ok((runtime, signals))
}

/// Ctrl-C and SIGTERM, caught from the moment `listen` returns: a signal
/// sent just after a readiness line is handled, not fatal.
#[cfg(unix)]
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Must be called inside a tokio runtime.
    fn listen() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) -> u8 {
        tokio::select! {
            _ = self.interrupt.recv() => EXIT_SIGINT,
            _ = self.terminate.recv() => EXIT_SIGTERM,
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn listen() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn recv(&mut self) -> u8 {
        let _ = tokio::signal::ctrl_c().await;
        EXIT_SIGINT
    }
}

/// The run's start as a directory name: `20261130T234501Z`.
fn dir_stamp() -> String {
    timestamp(SystemTime::now())
        .chars()
        .filter(|c| *c != ':' && *c != '-')
        .collect()
}

/// The server's TLS configuration, if asked for, and where the CA made for
/// it was written.
fn serve_tls(
    args: &ServeArgs,
) -> anyhow::Result<Option<(Arc<rustls::ServerConfig>, Option<std::path::PathBuf>)>> {
    use crate::serve::tls::{read_certificates, server_config, Identity, LocalCa, LOOPBACK_NAMES};
    if !(args.tls || args.tls_cert.is_some() || args.tls_client_ca.is_some()) {
        return Ok(None);
    }
    let client_ca = args
        .tls_client_ca
        .as_deref()
        .map(|path| read_certificates(path).map_err(anyhow::Error::msg))
        .transpose()
        .context("--tls-client-ca")?;
    let (identity, written) = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => (Identity::from_files(cert, key).map_err(anyhow::Error::msg)?, None),
        _ => {
            let ca = LocalCa::new().map_err(anyhow::Error::msg)?;
            let path = args
                .tls_ca_out
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("volley-serve-ca.pem"));
            std::fs::write(&path, ca.pem()).with_context(|| format!("cannot write {}", path.display()))?;
            (ca.issue(LOOPBACK_NAMES).map_err(anyhow::Error::msg)?, Some(path))
        }
    };
    let config = server_config(identity, client_ca.as_deref()).map_err(anyhow::Error::msg)?;
    Ok(Some((config, written)))
}

pub fn serve_command(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.stdio {
        // stdout carries the protocol: say nothing on it.
        let content_length = args.framing == "content-length";
        let config = args.into_config().map_err(anyhow::Error::msg)?;
        let (stats, end) = serve::serve_stdio(config, content_length).context("cannot serve on stdio")?;
        let ending = match end {
            None => "",
            Some(serve::LspEnd::Clean) => "; ended by shutdown and exit",
            Some(serve::LspEnd::Abrupt) => "; ended without shutdown and exit (status 1, as LSP says)",
        };
        crate::note!(
            "volley serve --stdio: {} calls, {} notifications{ending}",
            ServerStats::get(&stats.calls),
            ServerStats::get(&stats.notifications)
        );
        return Ok(ExitCode::from(u8::from(end == Some(serve::LspEnd::Abrupt))));
    }
    let tls = serve_tls(&args)?;
    let mut config = args.into_config().map_err(anyhow::Error::msg)?;
    let ca_written = tls.as_ref().and_then(|(_, ca)| ca.clone());
    config.tls = tls.map(|(config, _)| config);
    let server = serve::spawn(config.clone())?;
    // Signals are caught before the readiness lines: whoever reads them may
    // stop us at once.
    let (runtime, mut signals) = runtime_with_signals()?;
    let protocols = if config.tls.is_some() {
        "HTTP/2 or HTTP/1.1 over TLS (ALPN)"
    } else {
        "HTTP/1.1 (or h2c)"
    };
    // An MCP client connects to the URL's /mcp (any path answers).
    let speaks = if config.mcp {
        "MCP (streamable HTTP, sessions) on JSON-RPC 2.0"
    } else {
        "JSON-RPC 2.0"
    };
    crate::output::print(&format!(
        "volley serve: {speaks} over {protocols} on {} (latency {}, error rate {}, seed {}, chaos {})\n",
        server.url(),
        config.latency,
        config.error_rate,
        config.seed,
        config.chaos
    ));
    if let Some(path) = ca_written {
        crate::output::print(&format!(
            "volley serve: certificate signed by a CA made at start; trust it with --cacert {}\n",
            path.display()
        ));
    }
    if let Some(tcp) = server.tcp_addr {
        crate::output::print(&format!(
            "volley serve: newline-delimited JSON-RPC on tcp://{tcp}\n"
        ));
    }
    if let Some(ws) = server.ws_url() {
        crate::output::print(&format!("volley serve: JSON-RPC over WebSocket on {ws}\n"));
    }
    if let Some(path) = &server.unix_path {
        crate::output::print(&format!(
            "volley serve: newline-delimited JSON-RPC on unix://{}\n",
            path.display()
        ));
    }
    runtime.block_on(signals.recv());
    let stats: &ServerStats = &server.stats;
    let get = ServerStats::get;
    crate::output::print(&format!(
        "served {} requests ({} batches): {} calls, {} notifications, {} error answers ({} injected)\n",
        get(&stats.requests),
        get(&stats.batches),
        get(&stats.calls),
        get(&stats.notifications),
        get(&stats.error_answers),
        get(&stats.injected_errors)
    ));
    let faults = stats.chaos.summary();
    if !faults.is_empty() {
        crate::output::print(&format!("chaos applied: {faults}\n"));
    }
    if let Some(hold) = stats.median_hold() {
        crate::output::print(&format!(
            "median hold really applied: {:.3} ms\n",
            hold.as_secs_f64() * 1000.0
        ));
    }
    // Let the last answers leave before the runtime goes.
    std::thread::sleep(Duration::from_millis(10));
    server.stop();
    Ok(ExitCode::SUCCESS)
}

pub fn validate_command(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    for path in &args.scenarios {
        match Scenario::load(path) {
            Ok(scenario) => {
                let description = crate::validate::describe(&scenario, &path.display().to_string());
                // A closed stdout (`| head -3`) has read all it wants; the
                // files are still checked, so the exit code stays true.
                crate::output::print(&format!("{description}\n"));
            }
            Err(error) => {
                crate::note!("error: {error}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn init_command(args: InitArgs) -> anyhow::Result<ExitCode> {
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
