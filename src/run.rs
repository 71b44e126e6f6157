//! The `run` and `serve` commands: scenario to plan, the run itself, and
//! what is printed and written around it.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::cli::{InitArgs, RunArgs, ServeArgs, ValidateArgs};
use crate::engine::{self, Control, Pacing, RunSpec};
use crate::metrics::{self, Metrics};
use crate::report::{self, LoadMeta, RunMeta, RunReport};
use crate::scenario::{Compiled, Scenario, TargetSpec};
use crate::serve::{self, ServeConfig, ServerStats};
use crate::stats::Snapshot;
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
    let target = match &scenario.target {
        TargetSpec::Command { argv, framing } => Target::Stream(crate::transport::StreamTarget::command(
            argv.clone(),
            *framing == crate::scenario::Framing::ContentLength,
            &options,
        )),
        _ => Target::resolve(&url, &options).await?,
    };
    let tls = target.check_reachable().await?;

    let load = LoadMeta {
        model: if matches!(plan.pacing, Pacing::Open { .. }) {
            "open"
        } else {
            "closed"
        },
        rate: match plan.pacing {
            Pacing::Open { rate } => Some(rate),
            Pacing::Closed => None,
        },
        connections: plan.connections,
        duration_s: plan.duration.map(|d| d.as_secs_f64()),
        requests: plan.requests,
        warmup_s: plan.warmup.as_secs_f64(),
        timeout_s: plan.timeout.as_secs_f64(),
        threads: plan.threads_used(),
        stages: plan.stages.len(),
    };
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
    for poll in &polls {
        poll.first(&target, plan.timeout).await.map_err(RunError::Poll)?;
    }
    let summary = engine::run(
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
            "{} connection tasks panicked (a bug in volley: please report it); the calls they made are counted",
            summary.panicked_connections
        ));
    }
    if let Some(schedule) = summary.schedule.as_ref().filter(|s| s.behind) {
        meta.warnings.push(format!(
            "the generator fell behind schedule: {} calls left more than {} ms late (start delay p99 {:.1} ms) and {} were never sent; the latency figures include this wait. Add connections or lower the rate to measure the server alone",
            schedule.late_calls,
            crate::stats::LATE_THRESHOLD.as_millis(),
            schedule.start_delay.p99_ms,
            schedule.unsent
        ));
    }
    drop(server);
    Ok(RunReport { meta, summary })
}

fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

/// Exit codes of a run stopped by a signal, as shells report them.
const EXIT_SIGINT: u8 = 130;
const EXIT_SIGTERM: u8 = 143;
/// The run completed but its files went elsewhere (see the error).
const EXIT_RESULTS_ELSEWHERE: u8 = 3;
/// A connection task panicked (a bug in volley); the figures are complete otherwise.
const EXIT_BUG: u8 = 70;

pub fn run_command(args: RunArgs) -> anyhow::Result<ExitCode> {
    let scenario = args.scenario()?;
    let out_dir = result_dir(args.out.as_deref(), &scenario.name)?;
    ensure_descriptors(scenario.compile().plan.connections)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(async {
        let cancel = CancellationToken::new();
        let control = Arc::new(Control::new());
        let stopped_by = Arc::new(AtomicU8::new(0));
        let (stop, stopped) = (cancel.clone(), stopped_by.clone());
        tokio::spawn(async move {
            stopped.store(wait_for_signal().await, Ordering::Relaxed);
            eprintln!("stopping: the results so far will be written, marked partial");
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
        if is_insecure(&scenario) {
            eprintln!("volley: {INSECURE}");
        }
        let mut tui = if !args.quiet && !args.no_tui && std::io::stdout().is_terminal() {
            let target = scenario.target.to_string();
            let mut transport = crate::transport::transport_label(&target, scenario.http2).to_string();
            if is_insecure(&scenario) {
                transport.push_str(" · INSECURE: certificate not verified");
            }
            let dashboard = Dashboard::new(&scenario.name, &target, &transport);
            Tui::start(dashboard, control.clone(), cancel.clone()).ok()
        } else {
            None
        };
        let quiet = args.quiet;
        let report = execute(&scenario, args.scenario.as_deref(), cancel, control, |snapshot| {
            if let Some(metrics) = &metrics {
                metrics.publish(snapshot);
            }
            match tui.as_mut() {
                Some(tui) => tui.show(snapshot),
                None if !quiet => {
                    for row in &snapshot.new_rows {
                        eprintln!("{}", report::progress_line(row));
                    }
                }
                None => {}
            }
        })
        .await;
        drop(tui);
        anyhow::Ok(report.map(|r| (r, stopped_by.load(Ordering::Relaxed))))
    });
    let (report, signal) = report??;
    print!("{}", report::render_table(&report));
    let written = match report::write_files(&out_dir, &report) {
        Ok(written) => written,
        Err(error) => return Ok(write_elsewhere(&report, &error)),
    };
    println!("\nresults: {}", out_dir.display());
    if !args.quiet && std::io::stderr().is_terminal() {
        for path in written {
            eprintln!("  {}", path.display());
        }
    }
    if report.summary.panicked_connections > 0 {
        return Ok(ExitCode::from(EXIT_BUG));
    }
    Ok(ExitCode::from(signal))
}

/// The results could not be written where asked: they go to the temporary
/// directory instead, or as JSON on stdout, and the error says which.
fn write_elsewhere(report: &RunReport, error: &report::ReportError) -> ExitCode {
    let stamp: String = timestamp(SystemTime::now())
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let fallback = std::env::temp_dir().join(format!("volley-{stamp}-{}", std::process::id()));
    match report::write_files(&fallback, report) {
        Ok(_) => eprintln!(
            "error: {error}\nthe results were written to {} instead",
            fallback.display()
        ),
        Err(second) => {
            eprintln!("error: {error}\nerror: {second}\nthe results follow on stdout as JSON");
            println!("{}", serde_json::to_string_pretty(report).unwrap_or_default());
        }
    }
    ExitCode::from(EXIT_RESULTS_ELSEWHERE)
}

/// Makes room for `connections` sockets under the open-files limit, raising
/// the soft limit up to the hard one when needed.
fn ensure_descriptors(connections: usize) -> anyhow::Result<()> {
    // A few for the runtime, the listener of an in-process server, files.
    let needed = connections as u64 * 2 + 64;
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
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    if raised.rlim_cur < needed {
        anyhow::bail!(
            "{connections} connections need about {needed} open files, but the limit is {}: raise it with `ulimit -n {needed}`",
            raised.rlim_cur
        );
    }
    Ok(())
}

/// Waits for Ctrl-C or SIGTERM; returns the exit code that reports it.
async fn wait_for_signal() -> u8 {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => EXIT_SIGINT,
        _ = terminate => EXIT_SIGTERM,
    }
}

/// Where results go. A directory given with `--out` must be new or empty;
/// the default one is made unique, so no result is ever overwritten.
fn result_dir(out: Option<&Path>, scenario: &str) -> anyhow::Result<PathBuf> {
    if let Some(dir) = out {
        let occupied = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        if occupied {
            anyhow::bail!(
                "--out {}: the directory already holds files; choose a new one so no result is overwritten",
                dir.display()
            );
        }
        return Ok(dir.to_path_buf());
    }
    let stamp: String = timestamp(SystemTime::now())
        .chars()
        .filter(|c| *c != ':' && *c != '-')
        .collect();
    let name: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = PathBuf::from("results").join(format!("{stamp}-{name}"));
    let mut dir = base.clone();
    let mut n = 2;
    while dir.exists() {
        dir = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    Ok(dir)
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
        eprintln!(
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
    let listen = config.listen;
    let server = serve::spawn(config.clone()).with_context(|| format!("cannot listen on {listen}"))?;
    let protocols = if config.tls.is_some() {
        "HTTP/2 or HTTP/1.1 over TLS (ALPN)"
    } else {
        "HTTP/1.1 (or h2c)"
    };
    println!(
        "volley serve: JSON-RPC 2.0 over {protocols} on {} (latency {}, error rate {}, seed {}, chaos {})",
        server.url(),
        config.latency,
        config.error_rate,
        config.seed,
        config.chaos
    );
    if let Some(path) = ca_written {
        println!(
            "volley serve: certificate signed by a CA made at start; trust it with --cacert {}",
            path.display()
        );
    }
    if let Some(tcp) = server.tcp_addr {
        println!("volley serve: newline-delimited JSON-RPC on tcp://{tcp}");
    }
    if let Some(ws) = server.ws_url() {
        println!("volley serve: JSON-RPC over WebSocket on {ws}");
    }
    if let Some(path) = &server.unix_path {
        println!(
            "volley serve: newline-delimited JSON-RPC on unix://{}",
            path.display()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(wait_for_signal());
    let stats: &ServerStats = &server.stats;
    let get = ServerStats::get;
    println!(
        "served {} requests ({} batches): {} calls, {} notifications, {} error answers ({} injected)",
        get(&stats.requests),
        get(&stats.batches),
        get(&stats.calls),
        get(&stats.notifications),
        get(&stats.error_answers),
        get(&stats.injected_errors)
    );
    let faults = stats.chaos.summary();
    if !faults.is_empty() {
        println!("chaos applied: {faults}");
    }
    if let Some(hold) = stats.median_hold() {
        println!(
            "median hold really applied: {:.3} ms",
            hold.as_secs_f64() * 1000.0
        );
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
            Ok(scenario) => println!(
                "{}",
                crate::validate::describe(&scenario, &path.display().to_string())
            ),
            Err(error) => {
                eprintln!("error: {error}");
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
            crate::init::from_openrpc(&document, &args.target)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        None => crate::init::STARTER.to_string(),
    };
    if args.path.as_os_str() == "-" {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    if args.path.exists() && !args.force {
        anyhow::bail!(
            "{} already exists; pass --force to overwrite it",
            args.path.display()
        );
    }
    std::fs::write(&args.path, text).with_context(|| format!("cannot write {}", args.path.display()))?;
    println!(
        "wrote {}; check it with `volley validate {}`",
        args.path.display(),
        args.path.display()
    );
    Ok(ExitCode::SUCCESS)
}
