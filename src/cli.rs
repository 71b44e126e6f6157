//! Command-line types only. They become a validated scenario and output
//! options before anything runs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde_json::Value;

use crate::engine::Pacing;
use crate::scenario::{interpolate, parse_duration, Scenario, ScenarioError, TargetSpec};
use crate::serve::{Latency, ServeConfig};

#[derive(Parser, Debug)]
#[command(
    name = "volley",
    version,
    about = "Load testing and benchmarking for JSON-RPC 2.0 endpoints"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a load test from a scenario file, or a one-liner with --target and --method.
    Run(Box<RunArgs>),
    /// Start the built-in JSON-RPC 2.0 server.
    Serve(Box<ServeArgs>),
    /// Check a scenario without sending anything; print the plan and sample requests.
    Validate(ValidateArgs),
    /// Write a commented starter scenario (or one built from an OpenRPC document).
    Init(InitArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ValidateArgs {
    /// Scenario files to check.
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// File to write ("-" for stdout).
    #[arg(default_value = "scenario.toml")]
    pub path: PathBuf,
    /// Build the mix from an OpenRPC document (JSON), one call per method.
    #[arg(long, value_name = "FILE")]
    pub from_openrpc: Option<PathBuf>,
    /// Target URL written into the scenario built from OpenRPC.
    #[arg(long, default_value = "http://127.0.0.1:8545")]
    pub target: String,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// Scenario file (TOML). Without one, --target and --method describe the run.
    pub scenario: Option<PathBuf>,
    /// Target URL, or "builtin" for the built-in server.
    #[arg(long)]
    pub target: Option<String>,
    /// Method of a one-liner run (no scenario file).
    #[arg(long)]
    pub method: Option<String>,
    /// Params of a one-liner run, as JSON: '["0xabc", "latest"]'.
    #[arg(long)]
    pub params: Option<String>,
    /// Open model: requests per second on a fixed schedule.
    #[arg(long, conflicts_with = "concurrency")]
    pub rate: Option<f64>,
    /// Closed model: calls in flight, each sent as soon as the previous one is answered.
    #[arg(short = 'c', long)]
    pub concurrency: Option<u64>,
    /// Measured duration, e.g. 30s, 2m.
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Requests to measure (a batch counts as one); a warmup sends more before them.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Connections to open (exactly this many).
    #[arg(long)]
    pub connections: Option<u64>,
    /// Sent before the measured duration and left out of the figures.
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Time a call may take before it counts as a timeout.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Engine threads (default: one per core).
    #[arg(long)]
    pub threads: Option<u64>,
    /// HTTP/2, many calls in flight per connection: by ALPN to https://, with prior knowledge to http://.
    #[arg(long)]
    pub http2: bool,
    /// Trust this CA certificate (PEM) instead of the built-in web roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Also trust the operating system's certificate store.
    #[arg(long)]
    pub system_roots: bool,
    /// Do not verify the server's TLS certificate (stated in every report).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Client certificate chain (PEM) for mutual TLS; needs --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Calls in flight per connection on a multiplexed transport (ws://, tcp://, unix://, --http2).
    #[arg(long)]
    pub max_in_flight: Option<u64>,
    /// Seed for every random choice of the run.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Answers larger than this are cut off and counted as `io` (default 8MiB).
    #[arg(long, value_name = "SIZE", value_parser = crate::scenario::parse_size)]
    pub max_response_size: Option<usize>,
    /// Extra HTTP header, 'Name: value' (repeatable; ${VAR} is replaced from the environment).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Directory for the result files (default: results/<UTC time>-<scenario>/).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
    /// Print nothing but the final summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// No live dashboard: one progress line a second on stderr instead.
    #[arg(long)]
    pub no_tui: bool,
    /// Serve live metrics in the Prometheus text format at ADDR/metrics (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8545")]
    pub listen: std::net::SocketAddr,
    /// Added latency per request: 2ms, uniform:1ms..5ms, exp:2ms.
    #[arg(long, default_value = "0")]
    pub latency: Latency,
    /// Share of calls answered with an injected JSON-RPC error (-32000), e.g. 0.05.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// Seed for latency and error injection.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Answer batches in a random order (the spec allows any order).
    #[arg(long)]
    pub shuffle_batches: bool,
    /// Server threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Misbehave on purpose, each fault counted: e.g. wrong-id=0.1,hang=0.01,stall=200ms/2s,outage=1s/5s.
    /// Faults: wrong-id, id-type, batch-missing, batch-duplicate, batch-extra, result-and-error,
    /// wrong-version, missing-version, http-500-body, http-500, http-503-body, http-503, html,
    /// truncated, trickle, oversized, reset, hang.
    #[arg(long, default_value = "")]
    pub chaos: crate::serve::Chaos,
    /// Also serve newline-delimited JSON-RPC on this TCP address (e.g. 127.0.0.1:8546).
    #[arg(long, value_name = "ADDR")]
    pub tcp: Option<std::net::SocketAddr>,
    /// Also serve newline-delimited JSON-RPC on this Unix socket (like geth's IPC).
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,
    /// Also serve JSON-RPC over WebSocket on this address (e.g. 127.0.0.1:8547).
    #[arg(long, value_name = "ADDR")]
    pub ws: Option<std::net::SocketAddr>,
    /// TLS on the main and WebSocket listeners (https://, wss://; HTTP/2 by ALPN). Without --tls-cert,
    /// a CA is made at start and its certificate written to --tls-ca-out, for clients' --cacert.
    #[arg(long)]
    pub tls: bool,
    /// Server certificate chain (PEM); implies --tls. Needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The server certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where the CA made at start is written (default: volley-serve-ca.pem in the temp dir).
    #[arg(long, value_name = "FILE")]
    pub tls_ca_out: Option<PathBuf>,
    /// Require client certificates signed by this CA (mutual TLS); implies --tls.
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// MCP's streamable HTTP: initialize opens a session its later requests must carry, answers come as
    /// event streams (after a log message) to clients that accept them, notifications get 202.
    #[arg(long)]
    pub mcp: bool,
    /// How often an eth_subscribe("newHeads") subscription (WebSocket, TCP, Unix) gets a notification.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub heads_every: Duration,
    /// Serve on stdin/stdout instead of the network, until stdin closes (as a child of `volley run`).
    #[arg(long)]
    pub stdio: bool,
    /// Framing on stdio: ndjson (MCP) or content-length (LSP).
    #[arg(long, default_value = "ndjson", value_parser = ["ndjson", "content-length"])]
    pub framing: String,
}

impl ServeArgs {
    pub fn into_config(self) -> Result<ServeConfig, String> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(format!(
                "--error-rate: {} is not between 0 and 1",
                self.error_rate
            ));
        }
        if self.heads_every.is_zero() {
            return Err("--heads-every must be above zero".into());
        }
        let defaults = ServeConfig::default();
        Ok(ServeConfig {
            listen: self.listen,
            latency: self.latency,
            error_rate: self.error_rate,
            seed: self.seed,
            shuffle_batches: self.shuffle_batches,
            threads: self.threads.unwrap_or(defaults.threads),
            chaos: self.chaos,
            tcp: self.tcp,
            unix: self.unix,
            ws: self.ws,
            tls: None,
            mcp: self.mcp,
            heads_every: self.heads_every,
        })
    }
}

impl RunArgs {
    /// The scenario to run: the file's, or a one-liner's, with every flag
    /// given here overriding the file.
    pub fn scenario(&self) -> Result<Scenario, ScenarioError> {
        let flag = |flag, message: String| ScenarioError::Flag { flag, message };
        let mut scenario = match (&self.scenario, &self.method) {
            (Some(path), None) => Scenario::load(path)?,
            (Some(_), Some(_)) => {
                return Err(flag(
                    "--method",
                    "give either a scenario file or --method, not both".into(),
                ))
            }
            (None, Some(method)) => {
                let target = self
                    .target
                    .as_deref()
                    .ok_or_else(|| flag("--target", "a one-liner needs --target URL".into()))?;
                let params = match &self.params {
                    Some(text) => {
                        let value: Value = serde_json::from_str(text)
                            .map_err(|e| flag("--params", format!("not JSON: {e}")))?;
                        if !value.is_array() && !value.is_object() {
                            return Err(flag("--params", "must be a JSON array or object".into()));
                        }
                        Some(value)
                    }
                    None => None,
                };
                Scenario::one_liner(target, method, params)
            }
            (None, None) => {
                return Err(flag(
                    "SCENARIO",
                    "give a scenario file, or --target URL --method NAME for a one-liner".into(),
                ))
            }
        };
        if let Some(target) = &self.target {
            scenario.target = if target == "builtin" {
                TargetSpec::Builtin
            } else {
                TargetSpec::Url(target.clone())
            };
        }
        let load = &mut scenario.load;
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(flag("--rate", "must be above zero".into()));
            }
            load.pacing = Pacing::Open { rate };
            load.concurrency = None;
        }
        if let Some(concurrency) = self.concurrency {
            load.pacing = Pacing::Closed;
            load.concurrency = Some(at_least_one(concurrency, "--concurrency")?);
        }
        if let Some(duration) = self.duration {
            if duration.is_zero() {
                return Err(flag("--duration", "must be above zero".into()));
            }
            load.duration = Some(duration);
        }
        if let Some(requests) = self.requests {
            load.requests = Some(at_least_one(requests, "--requests")?);
        }
        if let Some(connections) = self.connections {
            load.connections = Some(at_least_one(connections, "--connections")?);
        }
        if self.http2 {
            scenario.http2 = true;
        }
        let tls = &mut scenario.tls;
        if let Some(cacert) = &self.cacert {
            tls.cacert = Some(cacert.clone());
        }
        tls.system_roots |= self.system_roots;
        tls.insecure |= self.insecure;
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            tls.cert = Some(cert.clone());
            tls.key = Some(key.clone());
        }
        if let Some(max) = self.max_in_flight {
            load.max_in_flight = Some(at_least_one(max, "--max-in-flight")?);
        }
        if let Some(threads) = self.threads {
            load.threads = Some(at_least_one(threads, "--threads")?);
        }
        if let Some(warmup) = self.warmup {
            load.warmup = warmup;
        }
        if let Some(timeout) = self.timeout {
            if timeout.is_zero() {
                return Err(flag("--timeout", "must be above zero".into()));
            }
            scenario.timeout = timeout;
        }
        if self.seed.is_some() {
            scenario.seed = self.seed;
        }
        if let Some(size) = self.max_response_size {
            scenario.max_response_bytes = size;
        }
        for header in &self.headers {
            let (name, value) = header.split_once(':').ok_or_else(|| {
                flag(
                    "--header",
                    format!("`{}` is not 'Name: value'", redact_header(header)),
                )
            })?;
            let value =
                interpolate(value.trim(), &|n| std::env::var(n).ok()).map_err(|m| flag("--header", m))?;
            let name = name.trim().to_string();
            scenario.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
            scenario.headers.push((name, value));
        }
        Ok(scenario)
    }
}

fn at_least_one(value: u64, flag: &'static str) -> Result<u64, ScenarioError> {
    if value == 0 {
        return Err(ScenarioError::Flag {
            flag,
            message: "must be at least 1".into(),
        });
    }
    Ok(value)
}

/// A header as it may be shown: its name only.
fn redact_header(header: &str) -> String {
    match header.split_once(':') {
        Some((name, _)) => format!("{name}: <redacted>"),
        None => "<redacted>".to_string(),
    }
}
