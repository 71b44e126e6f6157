//! `volley serve`: the built-in server on its listeners (or stdio), with
//! TLS when asked for, until a signal; then what it served.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::process::runtime_with_signals;
use crate::cli::ServeArgs;
use crate::rpc::wire::Framing;
use crate::serve::{self, ServeConfig, ServerStats};

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
            let path = match &args.tls_ca_out {
                Some(path) => {
                    std::fs::write(path, ca.pem())
                        .with_context(|| format!("--tls-ca-out: cannot write {}", path.display()))?;
                    path.clone()
                }
                None => write_private_ca(ca.pem().as_bytes())?,
            };
            (ca.issue(LOOPBACK_NAMES).map_err(anyhow::Error::msg)?, Some(path))
        }
    };
    let config = server_config(identity, client_ca.as_deref()).map_err(anyhow::Error::msg)?;
    Ok(Some((config, written)))
}

/// Writes the CA made at start as `ca.pem` in a directory made for it in
/// the temporary directory (see `private_temp_dir`: never through a name
/// planted there), created new; the directory is kept, for clients'
/// `--cacert`.
fn write_private_ca(pem: &[u8]) -> anyhow::Result<std::path::PathBuf> {
    use std::io::Write;
    let dir = super::process::private_temp_dir("volley-serve-")
        .context("cannot make a directory for the CA in the temporary directory")?;
    let path = dir.join("ca.pem");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut file| file.write_all(pem))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

pub fn command(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.stdio {
        // stdout carries the protocol: say nothing on it.
        let framing = match args.framing.as_str() {
            "content-length" => Framing::ContentLength,
            _ => Framing::Ndjson,
        };
        let config = config(&args).map_err(anyhow::Error::msg)?;
        let (stats, end) = serve::serve_stdio(config, framing).context("cannot serve on stdio")?;
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
    let mut config = config(&args).map_err(anyhow::Error::msg)?;
    let ca_written = tls.as_ref().and_then(|(_, ca)| ca.clone());
    config.tls = tls.map(|(config, _)| config);
    let server = serve::spawn(config.clone())?;
    // Signals are caught before the readiness lines: whoever reads them may
    // stop us at once.
    let (runtime, mut signals) = runtime_with_signals()?;
    say_listening(&server, &config, ca_written.as_deref());
    runtime.block_on(signals.recv());
    say_served(&server.stats, &config);
    // Let the last answers leave before the runtime goes.
    std::thread::sleep(Duration::from_millis(10));
    server.stop();
    Ok(ExitCode::SUCCESS)
}

/// The server's config from its flags, checked.
fn config(args: &ServeArgs) -> Result<ServeConfig, String> {
    if !(0.0..=1.0).contains(&args.error_rate) {
        return Err(format!(
            "--error-rate: {} is not between 0 and 1",
            args.error_rate
        ));
    }
    if args.heads_every.is_zero() {
        return Err("--heads-every must be above zero".into());
    }
    if args.ready_after.is_some() && !(args.stdio && args.framing == "content-length") {
        return Err("--ready-after is LSP's $/progress: it needs --stdio --framing content-length".into());
    }
    let capacity = match args.capacity {
        None => None,
        Some(rate) => Some(std::sync::Arc::new(
            serve::Capacity::new(rate)
                .ok_or_else(|| format!("--capacity: {rate} is not a rate above zero"))?,
        )),
    };
    if args.block_transactions > serve::MAX_BLOCK_TRANSACTIONS {
        return Err(format!(
            "--block-transactions: {} is more than {} a block",
            args.block_transactions,
            serve::MAX_BLOCK_TRANSACTIONS
        ));
    }
    if args.receipts_after > serve::MAX_RECEIPTS_AFTER {
        return Err(format!(
            "--receipts-after: {} is more than {}",
            args.receipts_after,
            serve::MAX_RECEIPTS_AFTER
        ));
    }
    let defaults = ServeConfig::default();
    Ok(ServeConfig {
        listen: args.listen,
        latency: args.latency,
        error_rate: args.error_rate,
        seed: args.seed,
        shuffle_batches: args.shuffle_batches,
        threads: args.threads.unwrap_or(defaults.threads),
        chaos: args.chaos.clone(),
        tcp: args.tcp,
        unix: args.unix.clone(),
        ws: args.ws,
        tls: None,
        mcp: args.mcp,
        heads_every: args.heads_every,
        ready_after: args.ready_after,
        capacity,
        differ: args.differ.clone(),
        count_duplicate_ids: args.count_duplicate_ids,
        block_transactions: args.block_transactions,
        receipts_after: args.receipts_after,
        jwt_secret: match &args.jwt_secret {
            Some(path) => Some(std::sync::Arc::new(
                crate::jwt::JwtSecret::read(path).map_err(|m| format!("--jwt-secret: {m}"))?,
            )),
            None => None,
        },
        count_header: match &args.count_header {
            Some(name) => {
                crate::transport::check_header(name, "").map_err(|m| format!("--count-header: {m}"))?;
                Some(name.to_ascii_lowercase())
            }
            None => None,
        },
    })
}

/// The readiness lines: what the server speaks, where, and how to trust it.
fn say_listening(server: &serve::ServerHandle, config: &ServeConfig, ca_written: Option<&std::path::Path>) {
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
        "volley serve: {speaks} over {protocols} on {} (latency {}, error rate {}, seed {}, chaos {}{})\n",
        server.url(),
        config.latency,
        config.error_rate,
        config.seed,
        config.chaos,
        match &config.capacity {
            Some(capacity) => format!(", capacity {} calls/s", capacity.calls_per_s()),
            None => String::new(),
        }
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
}

/// What the server found in requests' headers: MCP sessions, JWTs, the
/// counted header's values (never a value itself).
fn say_headers(stats: &ServerStats, config: &ServeConfig) {
    let get = ServerStats::get;
    let at_least = |(n, floor): (usize, bool)| {
        if floor {
            format!("at least {n}")
        } else {
            n.to_string()
        }
    };
    if config.mcp {
        crate::output::print(&format!(
            "MCP sessions opened: {} ({} requests refused for want of one)\n",
            get(&stats.mcp_sessions),
            get(&stats.mcp_refused)
        ));
    }
    if config.jwt_secret.is_some() {
        crate::output::print(&format!(
            "JWT: {} taken, {} refused (401); {} distinct iat values\n",
            get(&stats.jwt_accepted),
            get(&stats.jwt_refused),
            at_least(stats.jwt_iats.count())
        ));
    }
    if let Some(name) = &config.count_header {
        crate::output::print(&format!(
            "header {name}: on {} requests, {} distinct values\n",
            get(&stats.header_seen),
            at_least(stats.header_values.count())
        ));
    }
}

/// What the server did, once stopped.
fn say_served(stats: &ServerStats, config: &ServeConfig) {
    let get = ServerStats::get;
    crate::output::print(&format!(
        "served {} requests ({} batches) on {} connections: {} calls, {} notifications, {} error answers ({} injected)\n",
        get(&stats.requests),
        get(&stats.batches),
        get(&stats.connections_served),
        get(&stats.calls),
        get(&stats.notifications),
        get(&stats.error_answers),
        get(&stats.injected_errors)
    ));
    say_headers(stats, config);
    if config.count_duplicate_ids {
        crate::output::print(&format!(
            "calls whose id was used before: {}\n",
            get(&stats.duplicate_ids)
        ));
    }
    let handed_out = get(&stats.transactions_handed_out);
    if handed_out > 0 {
        crate::output::print(&format!(
            "transactions handed out: {handed_out}; receipts asked for {} times, {} found ({} asks of unknown hashes)\n",
            get(&stats.receipts_asked),
            get(&stats.receipts_found),
            get(&stats.receipts_unknown)
        ));
    }
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
}
