//! The live views of `volley run`, over one target or several: the feed the
//! runs publish into and what reads it (the dashboard, `/metrics`, the web
//! page), on the command's one runtime with its signals caught. They start
//! before the first run and end after the last; with `--linger`, after the
//! files are written, so that a last scrape finds the final figures.

use std::future::Future;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::execute::{execute_into, is_insecure, RunError};
use super::process::{make_room_for, runtime_with_signals, EXIT_SIGINT};
use crate::cli::RunArgs;
use crate::endpoint::View;
use crate::engine::Control;
use crate::feed::{Feed, TargetInfo};
use crate::otlp::Exporter;
use crate::report::{self, RunReport};
use crate::scenario::{NamedTarget, Scenario, TargetSpec};
use crate::stats::Snapshot;
use crate::tui::{Dashboard, Tui};
use crate::web::Web;

/// How long the end waits for open pages to take the final event.
const FINAL_EVENT_WAIT: Duration = Duration::from_secs(1);

pub(super) struct Live {
    runtime: tokio::runtime::Runtime,
    /// Stops every run: a signal, or `q` or Ctrl-C on the dashboard.
    pub cancel: CancellationToken,
    stopped_by: Arc<AtomicU8>,
    /// A signal came: it ends a linger too.
    signalled: CancellationToken,
    pub feed: Arc<Feed>,
    /// Stops `/metrics` and the web page.
    servers: CancellationToken,
    serving: bool,
    web: Option<Web>,
    tui: Option<Tui>,
    /// `--otlp`: the pushes to a collector.
    otlp: Option<Exporter>,
}

impl Live {
    /// Refuses flags of the live views that cannot hold together, before
    /// anything is reached or sent.
    pub fn check_flags(args: &RunArgs) -> anyhow::Result<()> {
        let views = [
            (View::Metrics, args.metrics_listen, args.metrics_listen_public),
            (View::Page, args.web_listen, args.web_listen_public),
        ];
        for (view, addr, public) in views {
            if let Some(addr) = addr {
                view.check_address(addr, public).map_err(anyhow::Error::msg)?;
            }
        }
        if args.linger.is_some() && args.metrics_listen.is_none() && args.web_listen.is_none() {
            anyhow::bail!(
                "--linger serves the final figures after the run: give --metrics-listen or --web-listen too"
            );
        }
        Ok(())
    }

    /// Catches the signals, binds `--metrics-listen` and `--web-listen`,
    /// readies `--otlp` and takes the terminal for the dashboard: all
    /// before anything is sent.
    pub fn start(args: &RunArgs, scenario: &Scenario, targets: Vec<TargetInfo>) -> anyhow::Result<Live> {
        let otlp = Exporter::prepare(scenario)?;
        let endpoints = [args.metrics_listen, args.web_listen].iter().flatten().count();
        let serving = endpoints > 0;
        // Idle clients may fill every endpoint's slots: open files for them
        // beside the run's own connections.
        make_room_for((endpoints * crate::endpoint::MAX_CONNECTIONS) as u64);
        let (runtime, mut signals) = runtime_with_signals()?;
        let (cancel, signalled) = (CancellationToken::new(), CancellationToken::new());
        let stopped_by = Arc::new(AtomicU8::new(0));
        let (stop, stopped, said) = (cancel.clone(), stopped_by.clone(), signalled.clone());
        runtime.spawn(async move {
            stopped.store(signals.recv().await, Ordering::Relaxed);
            crate::transport::hurry_shutdowns();
            crate::note!("stopping: what was measured is written, marked partial");
            said.cancel();
            stop.cancel();
        });
        let shard = scenario.shard.map(|s| s.index);
        let feed = Arc::new(Feed::new(&scenario.name, shard, args.parallel_targets, targets));
        let servers = CancellationToken::new();
        let web = runtime.block_on(serve(args, &feed, &servers))?;
        let tui = match args.quiet || args.no_tui || !std::io::stdout().is_terminal() {
            true => None,
            false => Tui::start(Dashboard::new(feed.clone()), cancel.clone()).ok(),
        };
        let otlp = otlp.map(|prepared| {
            let _runtime = runtime.enter();
            Exporter::start(
                prepared,
                feed.clone(),
                crate::otlp::about(scenario),
                tui.is_some(),
            )
        });
        Ok(Live {
            runtime,
            cancel,
            stopped_by,
            signalled,
            feed,
            servers,
            serving,
            web,
            tui,
            otlp,
        })
    }

    pub fn has_dashboard(&self) -> bool {
        self.tui.is_some()
    }

    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Runs target `target`'s scenario to its report, publishing into the
    /// feed and writing its seconds into `results` as they close; its
    /// thresholds, judged at the end, go to the feed too.
    pub async fn run(
        &self,
        target: usize,
        args: &RunArgs,
        scenario: &Scenario,
        results: &Path,
    ) -> Result<RunReport, RunError> {
        let control = self.feed.info(target).control.clone();
        let stop = self.cancel.child_token();
        let publish = self.publisher(target, args.quiet, scenario, (stop.clone(), control.clone()));
        let file = args.scenario.as_deref();
        let report = execute_into(scenario, file, Some(results), stop, control, publish).await?;
        self.feed.judged(target, &report.thresholds);
        if let Some(web) = &self.web {
            web.ended(target, &report, results);
        }
        Ok(report)
    }

    /// What target `target`'s run hands each snapshot to: the feed, the
    /// progress lines (without a dashboard), and `abort_on_fail`'s check,
    /// which stops this target's run alone.
    fn publisher<'a>(
        &'a self,
        target: usize,
        quiet: bool,
        scenario: &'a Scenario,
        (stop, control): (CancellationToken, Arc<Control>),
    ) -> impl FnMut(&Snapshot) + 'a {
        let lines = !quiet && self.tui.is_none();
        let several = self.feed.parallel && self.feed.len() > 1;
        let name = &self.feed.info(target).name;
        let mut warming = !scenario.load.warmup.is_zero();
        let mut in_grace = false;
        let grace = scenario.load.grace.unwrap_or(scenario.timeout);
        let mut aborted = false;
        move |snapshot| {
            self.feed.publish(target, snapshot);
            if !aborted {
                if let Some(why) = failed_so_far(scenario, snapshot) {
                    aborted = true;
                    control.stop_because(why);
                    stop.cancel();
                }
            }
            if !lines {
                return;
            }
            if std::mem::take(&mut warming) {
                // Said as the run begins: a long warmup is otherwise a silent wait.
                crate::note!(
                    "[warmup] {}: calls are sent, and left out of every figure",
                    humantime::format_duration(snapshot.warmup)
                );
            }
            let over = snapshot.planned.is_some_and(|planned| snapshot.elapsed > planned);
            if over && snapshot.in_flight > 0 && !snapshot.finished && !std::mem::replace(&mut in_grace, true)
            {
                // Said once: the wait that follows is otherwise silent.
                crate::note!(
                    "[grace] the schedule is over: {} in flight may take up to {} more to be answered and counted (--grace; Ctrl-C cuts them)",
                    crate::stats::count(snapshot.in_flight, "call"),
                    humantime::format_duration(grace)
                );
            }
            for row in &snapshot.new_rows {
                match several {
                    true => crate::note!("[{name}] {}", report::progress_line(row)),
                    false => crate::note!("{}", report::progress_line(row)),
                }
            }
        }
    }

    /// The runs are over: the dashboard gives the terminal back. Returns
    /// the exit code a stop asked for: a signal's, 130 for Ctrl-C on the
    /// dashboard, 0 for none (or `q`).
    pub fn end_runs(&mut self) -> u8 {
        let interrupted = self.tui.take().is_some_and(|tui| tui.interrupted());
        match self.stopped_by.load(Ordering::Relaxed) {
            0 if interrupted => EXIT_SIGINT,
            signal => signal,
        }
    }

    /// The end, once the files are written: the last push to the OTLP
    /// collector (within its timeout), the final event to every open
    /// page (waiting a second at most for them to take it) with links to
    /// the result files, the page saved beside them, then `linger`
    /// of serving the final figures unless a signal came (said unless
    /// `quiet`); then every server stops, and connections still open are
    /// dropped with the runtime.
    pub fn finish(mut self, linger: Option<Duration>, quiet: bool) {
        self.end_runs();
        self.feed.close();
        let (web, servers, signalled) = (self.web.take(), self.servers.clone(), self.signalled.clone());
        let serving = self.serving;
        let otlp = self.otlp.take();
        self.runtime.block_on(async move {
            if let Some(otlp) = otlp {
                otlp.finish().await;
            }
            if let Some(web) = &web {
                web.finish(FINAL_EVENT_WAIT).await;
            }
            if let Some(linger) = linger.filter(|_| serving && !signalled.is_cancelled()) {
                if !quiet {
                    crate::note!(
                        "volley: serving the final figures for {} (--linger); Ctrl-C ends it",
                        humantime::format_duration(linger)
                    );
                }
                tokio::select! {
                    _ = tokio::time::sleep(linger) => {}
                    _ = signalled.cancelled() => {}
                }
            }
            servers.cancel();
        });
    }
}

/// Binds `--metrics-listen` and `--web-listen` and serves them from `feed`,
/// saying where (unless `--quiet`): an address with port 0 gets one at random.
async fn serve(args: &RunArgs, feed: &Arc<Feed>, stop: &CancellationToken) -> anyhow::Result<Option<Web>> {
    if let Some(addr) = args.metrics_listen {
        let listener = crate::endpoint::bind(addr)
            .await
            .with_context(|| format!("--metrics-listen {addr}: cannot listen"))?;
        if !args.quiet {
            crate::note!("volley: metrics at http://{}/metrics", listener.local_addr()?);
        }
        let metrics = crate::metrics::serve(listener, feed.clone(), args.metrics_listen_public, stop.clone());
        tokio::spawn(metrics);
    }
    let Some(addr) = args.web_listen else {
        return Ok(None);
    };
    let listener = crate::endpoint::bind(addr)
        .await
        .with_context(|| format!("--web-listen {addr}: cannot listen"))?;
    if !args.quiet {
        crate::note!("volley: live page at http://{}/", listener.local_addr()?);
    }
    let access = (args.web_listen_public, args.web_control);
    Ok(Some(Web::start(listener, feed.clone(), access, stop.clone())))
}

/// With `abort_on_fail`, past its grace: the first threshold that fails on
/// the figures so far, said as the reason the run stopped.
fn failed_so_far(scenario: &Scenario, snapshot: &Snapshot) -> Option<String> {
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

/// A target as the live views name it: `name` (a compared target's), else
/// the one target's host and port (`builtin`, or the command's program).
pub(super) fn target_info(scenario: &Scenario, name: Option<&str>) -> TargetInfo {
    let url = scenario.target.to_string();
    let mut transport = crate::transport::describe(&url, scenario.http2, scenario.pipeline);
    if is_insecure(scenario) {
        transport.push_str(" · INSECURE: certificate not verified");
    }
    let name = match (name, &scenario.target) {
        (Some(name), _) => name.to_string(),
        (None, TargetSpec::Url(url)) => NamedTarget::from_urls(std::slice::from_ref(url))[0].name.clone(),
        (None, TargetSpec::Builtin) => "builtin".to_string(),
        (None, TargetSpec::Command { argv, .. }) => (argv.first())
            .and_then(|program| Path::new(program).file_name())
            .map_or("stdio".to_string(), |p| p.to_string_lossy().into_owned()),
    };
    TargetInfo {
        name,
        url,
        transport,
        thresholds: scenario.thresholds.clone(),
        control: Arc::new(Control::new()),
    }
}
