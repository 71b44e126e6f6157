//! `volley record`: the recording proxy started from its flags, its
//! address said on the first line (so scripts and tests can wait for it),
//! and what it recorded said when it stops.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use super::process::runtime_with_signals;
use crate::cli::RecordArgs;
use crate::proxy::{self, RecordConfig, Upstream};

pub fn command(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let upstream = Upstream::parse(&args.upstream).map_err(|e| anyhow::anyhow!("--upstream {e}"))?;
    let config = RecordConfig {
        listen: args.listen,
        upstream,
        out: args.out.clone(),
        answers: args.answers,
        max_size: args.max_size as u64,
        duration: args.duration,
    };
    let (runtime, mut signals) = runtime_with_signals()?;
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let scheme = if config.upstream.websocket { "ws" } else { "http" };
    let recorded = runtime.block_on(async {
        tokio::spawn(async move {
            signals.recv().await;
            stop.cancel();
        });
        proxy::record(config, cancel, |addr| {
            crate::output::print(&format!(
                "volley record: listening on {scheme}://{addr}, passing on to {}, writing {}\n",
                crate::redact::url(&args.upstream),
                args.out.display()
            ));
        })
        .await
    });
    let recorded = recorded.map_err(|e| anyhow::anyhow!("volley record: {e}"))?;
    let count = crate::report::count;
    let past = match recorded.past_the_bound {
        0 => String::new(),
        n => format!(
            "; {} passed on past --max-size, not recorded",
            count(n, "request")
        ),
    };
    crate::output::print(&format!(
        "recorded {} ({} bytes) from {} into {}; {} not a JSON-RPC call, passed on unrecorded{past}; {}\n",
        count(recorded.requests, "request"),
        recorded.bytes,
        count(recorded.connections, "connection"),
        args.out.display(),
        count(recorded.not_json, "message"),
        match recorded.ended_by {
            "duration" => "stopped at --duration",
            "max-size" => "stopped at --max-size",
            _ => "stopped",
        }
    ));
    Ok(ExitCode::SUCCESS)
}
