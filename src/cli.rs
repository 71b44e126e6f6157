//! Command-line types only: what each command's flags are. The commands
//! (`cmd/`) turn them into a validated scenario or a server's config.

use std::path::PathBuf;
use std::time::Duration;

mod start_at;
pub use start_at::parse_start_at;

use crate::scenario::parse_duration;
use crate::serve::Latency;
use clap::{Args, Parser, Subcommand};

/// How flags meet a scenario file: shown under `volley run --help`, and
/// word for word in docs/guide/scenarios.md (a test holds the two together).
pub const FLAG_RULE: &str = "\
Flags and a scenario file:
- A flag replaces what it names in the file.
- Where a flag and the file's other settings cannot both hold, the error names both.
- --rate and --concurrency replace the load model and its stages (and a replay's recorded pace).
- --duration and --requests replace the run's end; -n with -d ends the run at whichever comes first.
- --duration on a file with stages is an error: the stages set the length.
- --method replaces the mix with one call; --params sets its params (or those of a file's only call), with ${...} generators as in a file.
- --target replaces `target`, `targets` or `command`, so a file may leave it out.
- --target given twice or more compares the targets side by side.
- --target cannot replace a `command` with `framing = \"content-length\"`: LSP framing needs the child's stdio.
- -H replaces the file's header of that name.
- A header of yours (-H or [headers]) replaces volley's own of that name (Content-Type, Accept, User-Agent) on HTTP/1.1, HTTP/2 and the WebSocket handshake.
- A duration, as a flag or a key, is at most 365 days.
- In the closed model every connection carries at least one call: more connections than calls in flight is refused, naming both.";

/// `volley --version`: the package's version and the commit it was built
/// from (`build.rs` says where that name comes from; "unknown" when it
/// could not tell).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("VOLLEY_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(
    name = "volley",
    version = VERSION,
    about = "Load testing and benchmarking for JSON-RPC 2.0 endpoints"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a load test from a scenario file, or a one-liner with --target and --method.
    #[command(after_help = FLAG_RULE)]
    Run(Box<RunArgs>),
    /// Start the built-in JSON-RPC 2.0 server.
    Serve(Box<ServeArgs>),
    /// Check a scenario without sending anything; print the plan and sample requests.
    Validate(ValidateArgs),
    /// Write a commented starter scenario (or one built from an OpenRPC document).
    Init(InitArgs),
    /// Compare a run with one or more baseline runs per method; exit 2 on a change past its limit
    /// (with several baselines, only one outside the range their spread predicts is a regression).
    Compare(CompareArgs),
    /// Render a result directory's report.html again from its summary.json and latency.hlog.
    Report(ReportArgs),
    /// Probe an endpoint against the JSON-RPC 2.0 specification, case by case with the evidence;
    /// exit 2 when a MUST fails.
    Check(CheckArgs),
    /// Find the highest rate a target sustains within an SLO: double the rate until a step fails,
    /// then bisect; each method's knee; a CSV row and a point of the plot per step.
    Sweep(Box<SweepArgs>),
    /// Add up the result directories of a run's shards (--shard) into one run's results: counts
    /// summed, histograms added, seconds lined up, thresholds judged on the whole; exit 2 as a run.
    Merge(MergeArgs),
    /// Record real traffic: a transparent JSON-RPC proxy (HTTP or WebSocket) that writes every
    /// request with its arrival time and connection (header names only) for replay.
    Record(RecordArgs),
    /// Send one call and print its answer, pretty, with the JSON pointers of its result (what a
    /// capture or an expect points at); exit 2 when the answer is not a right one.
    Call(CallArgs),
    /// Print a shell's completion script: bash, zsh, fish, powershell or elvish.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions(CompletionsArgs),
    /// Print volley's manual page (roff), or write a page per command into a directory.
    Man(ManArgs),
}

/// Where each shell reads a completion script from.
const COMPLETIONS_HELP: &str = "\
Install:
  bash        volley completions bash > ~/.local/share/bash-completion/completions/volley
  zsh         volley completions zsh > ~/.zfunc/_volley   (fpath+=~/.zfunc before compinit)
  fish        volley completions fish > ~/.config/fish/completions/volley.fish
  powershell  volley completions powershell >> $PROFILE
  elvish      volley completions elvish >> ~/.config/elvish/rc.elv";

#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// Write volley.1 and a page per command (volley-run.1, ...) into DIR instead of printing
    /// volley.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CallArgs {
    /// The endpoint: an http, https, ws, wss, tcp or unix URL, `builtin` (the built-in server),
    /// or `-` for the --scenario's own target (its `command` too).
    pub target: String,
    /// The method to call.
    pub method: String,
    /// Its params, as JSON: an array (by position) or an object (by name).
    pub params: Option<String>,
    /// A scenario whose headers, TLS settings and [[setup]] calls go first, on the same
    /// connection, as a run sends them.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Send the call as a notification: no id, no answer awaited over a stream.
    #[arg(long)]
    pub notification: bool,
    /// How long the connection, each setup call and the call are awaited.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Args, Debug, Clone)]
pub struct RecordArgs {
    /// Address the proxy listens on; clients send here instead of to the upstream.
    #[arg(long, default_value = "127.0.0.1:8546")]
    pub listen: std::net::SocketAddr,
    /// The server requests are passed on to: http://HOST:PORT[/PATH] or ws://HOST:PORT[/PATH].
    #[arg(long)]
    pub upstream: String,
    /// The capture file (JSON lines), written whole on every way of stopping.
    #[arg(short = 'o', long, default_value = "capture.jsonl")]
    pub out: PathBuf,
    /// Also record each answer and the upstream's latency (for `expect = "recorded"`).
    #[arg(long)]
    pub answers: bool,
    /// Stop once the capture reaches this size.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = crate::scenario::parse_size)]
    pub max_size: usize,
    /// Stop after this long (default: at Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// Every shard's result directory (each holds shard.json, summary.json and latency.hlog).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Directory for the merged results (default: results/<UTC time>-<scenario>-merged/).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
    /// Exit 2 when the merged verdict is invalid (on whenever the scenario has thresholds).
    #[arg(long)]
    pub require_valid: bool,
}

#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// Scenario file (TOML): its target, mix and connections; its load is replaced by each step's
    /// rate. Without one, --target and --method describe the calls.
    pub scenario: Option<PathBuf>,
    /// Target URL (or "builtin"); replaces the file's `target`. Given more than once, each
    /// target is swept in turn, with the same seed.
    #[arg(long)]
    pub target: Vec<String>,
    /// Method of a one-liner; with a file, replaces its mix with this one method.
    #[arg(long)]
    pub method: Option<String>,
    /// Params as JSON, with ${...} generators as in a file.
    #[arg(long)]
    pub params: Option<String>,
    /// The service level each step must meet, as thresholds: 'p99<100ms,error_rate<0.1%'. A
    /// method's own (eth_call.p99<50ms) applies to it; the others also to each method, for its knee.
    #[arg(long, default_value = "p99<100ms,error_rate<0.1%")]
    pub slo: String,
    /// Judge each step by the SLO alone: a rate not kept (requests sent late or never) is said
    /// in the step's reason, but fails nothing.
    #[arg(long)]
    pub slo_only: bool,
    /// The first rate tried, requests/s.
    #[arg(long, default_value_t = 100.0)]
    pub from: f64,
    /// The highest rate tried, requests/s.
    #[arg(long, default_value_t = 1_000_000.0)]
    pub max_rate: f64,
    /// Bisect until the rate that held and the one that failed are this close: 5% or 0.05.
    #[arg(long, default_value = "5%", value_parser = parse_share)]
    pub precision: f64,
    /// How long each step is measured.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub step: Duration,
    /// How long each step runs before it is measured, to reach a steady state.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub step_warmup: Duration,
    /// Connections (default: the file's, or 64).
    #[arg(long)]
    pub connections: Option<u64>,
    /// Engine threads of each step (default: the file's, or one per core): what a floor
    /// (volley could not drive a rate) asks for more of.
    #[arg(long)]
    pub threads: Option<u64>,
    /// Time a call may take before it counts as a timeout (default 10s).
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Seed for every random choice; each step uses it, so each sends the same calls.
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Directory for the results (default: results/<UTC time>-sweep-<scenario>/).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The endpoint: http://, https://, ws://, wss://, tcp:// or unix:// URL; several to check
    /// each (and, with --methods, to set their methods side by side).
    #[arg(required = true)]
    pub target: Vec<String>,
    /// The method the cases call. Any name serves (an unknown method's error is a right answer);
    /// one the server has checks more.
    #[arg(long, default_value = "eth_chainId")]
    pub method: String,
    /// Print the findings as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Cases known to fail, one name a line (# comments): listed and failing passes, listed and
    /// passing fails as a stale entry.
    #[arg(long, value_name = "FILE")]
    pub expected_failures: Option<PathBuf>,
    /// Also ask which of these methods each target has: an OpenRPC document (JSON), or one name a
    /// line; each is called once with params [] (answered, -32601, or another error).
    #[arg(long, value_name = "FILE")]
    pub methods: Option<PathBuf>,
    /// How long an answer is awaited.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub timeout: Duration,
    /// How long a stream (ws, tcp, unix) is listened to where nothing may come back.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub quiet_for: Duration,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

/// How `check`, `sweep` and `call` reach a target beyond its URL.
#[derive(Args, Debug, Clone)]
pub struct ConnectionArgs {
    /// Extra HTTP header, 'Name: value' (repeatable; ${VAR} is replaced from the environment,
    /// other ${...} generators such as ${seq()} are made for each request).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Send `Authorization: Bearer` a fresh HS256 JWT (iat = now) on every request, signed with
    /// the 32-byte hex secret in FILE (geth's and reth's jwt.hex; Engine API style).
    #[arg(long, value_name = "FILE")]
    pub jwt_secret: Option<PathBuf>,
    /// HTTP/2: by ALPN to https://, with prior knowledge to http://.
    #[arg(long)]
    pub http2: bool,
    /// Trust this CA certificate (PEM) instead of the built-in web roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Do not verify the server's TLS certificate.
    #[arg(short = 'k', long)]
    pub insecure: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The result directory (holding summary.json and latency.hlog).
    pub dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// The baseline runs (each a result directory, or a directory of them), then the run under
    /// test, last: BASELINE... CURRENT.
    #[arg(required = true, num_args = 2.., value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// How far each metric may move the wrong way, as a share plus an optional floor (default
    /// p50=50%+1ms,p99=100%+5ms,rps=30%,error_rate=0.1pp); the metrics named replace theirs.
    #[arg(long, value_name = "LIMITS")]
    pub max_regression: Option<crate::compare::Tolerances>,
    /// Exit 0 when the result is inconclusive (a change past its limit that the runs are too few
    /// or too short to tell from chance); it exits 2 otherwise.
    #[arg(long)]
    pub allow_inconclusive: bool,
    /// Also write the comparison as GitHub-flavoured Markdown here (and append it to
    /// $GITHUB_STEP_SUMMARY when that is set).
    #[arg(long, value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
    /// Also write JUnit XML here: each metric of each method a test case, a regression or an
    /// inconclusive change a failure.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write an HTML page here: the table, and both runs' percentile spectra overlaid.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
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
    #[arg(long, value_name = "FILE", conflicts_with = "from_capture")]
    pub from_openrpc: Option<PathBuf>,
    /// Build the mix from a capture (`volley record`): its methods weighted by their calls, params
    /// from a data file per method (written beside the scenario), batches, notifications and rate.
    #[arg(long, value_name = "FILE")]
    pub from_capture: Option<PathBuf>,
    /// Build a read mix from an Ethereum node's last blocks (full transactions): data files of
    /// its blocks, transaction hashes, addresses, contracts, calls and log filters beside the
    /// scenario, ethspam's weights, and the block → receipts flow. The URL is also the target.
    #[arg(long, value_name = "URL", conflicts_with_all = ["from_openrpc", "from_capture", "target"])]
    pub from_node: Option<String>,
    /// How many of the node's last blocks --from-node reads.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000), requires = "from_node")]
    pub blocks: u64,
    /// Target URL written into the scenario built from OpenRPC or a capture (default: the
    /// document's servers[0].url, else http://127.0.0.1:8545).
    #[arg(long)]
    pub target: Option<String>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// Scenario file (TOML). Without one, --target and --method describe the run.
    pub scenario: Option<PathBuf>,
    /// Target URL (http, https, ws, wss, tcp, unix), or "builtin" for the built-in server;
    /// replaces the file's `target`, `targets` or `command`. Given more than once, the targets
    /// are compared side by side, each receiving the same requests.
    #[arg(long)]
    pub target: Vec<String>,
    /// With several targets, drive them all at once, each with the full load (default: one
    /// after another).
    #[arg(long)]
    pub parallel_targets: bool,
    /// With several targets: A/B rounds. The targets run in turn, N rounds each in a balanced
    /// order (AB BA AB ...), the same requests in every round; -d is each target's measured time,
    /// split evenly over its rounds. Each target is judged against the first, round by round:
    /// each figure's ratio with its 99% interval; exit 2 on a regression.
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// With --rounds: how far each figure may move the wrong way, in `volley compare`'s syntax
    /// and defaults (p50=50%+1ms,p99=100%+5ms,rps=30%,error_rate=0.1pp).
    #[arg(long, value_name = "LIMITS")]
    pub max_regression: Option<crate::compare::Tolerances>,
    /// With several targets, compare their answers to a sample of the same requests (key order,
    /// ids and hex zeros ignored; the file's [equality] rules and ignore sets applied); mismatches
    /// per method, and per JSON pointer over every answer compared.
    #[arg(long)]
    pub check_equal: bool,
    /// The share of requests whose answers are compared (default 1%); implies --check-equal.
    #[arg(long, value_name = "SHARE", value_parser = crate::scenario::parse_share)]
    pub check_equal_sample: Option<f64>,
    /// Exit 2 when a target answered a compared call unlike the first, once the file's [equality]
    /// rules and ignore sets are applied (implies --check-equal).
    #[arg(long)]
    pub fail_on_diff: bool,
    /// Method of a one-liner; with a file, replaces its mix with this one method.
    #[arg(long)]
    pub method: Option<String>,
    /// Params as JSON, '["0xabc", "latest"]', with ${...} generators as in a file: of --method,
    /// or of the file's one call.
    #[arg(long)]
    pub params: Option<String>,
    /// Open model: requests per second on a fixed schedule; replaces the file's load model and stages.
    #[arg(long, conflicts_with = "concurrency")]
    pub rate: Option<f64>,
    /// Closed model: calls in flight, each sent as soon as the previous one is answered
    /// (default: --connections, or 16); replaces the file's load model and stages.
    #[arg(short = 'c', long)]
    pub concurrency: Option<u64>,
    /// Measured duration, e.g. 30s, 2m (default 10s); replaces the file's end (duration or requests).
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Requests to measure (a batch counts as one); replaces the file's end (duration or requests). With --duration too, the run ends at whichever comes first.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Connections to open, exactly this many (default: one per call in flight over HTTP/1.1,
    /// 64 in the open model, 1 on multiplexed transports).
    #[arg(long)]
    pub connections: Option<u64>,
    /// Sent before the measured duration and left out of the figures (default 0s).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Time a call (or opening a connection) may take before it counts as a timeout (default 10s).
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Once the schedule ends, how long calls in flight may still take to be answered and counted;
    /// those unanswered then are timeouts (default: the timeout). Ctrl-C skips it.
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// Engine threads (default: one per core).
    #[arg(long)]
    pub threads: Option<u64>,
    /// HTTP/2, many calls in flight per connection: by ALPN to https://, with prior knowledge to http://.
    #[arg(long)]
    pub http2: bool,
    /// HTTP/1.1 pipelining: N requests in flight on each connection, answered in order (like wrk's
    /// pipelining); connections default to the concurrency over N. Refused by a server that
    /// answers out of order or closes after each answer.
    #[arg(long, value_name = "N")]
    pub pipeline: Option<u64>,
    /// The JSON-RPC to speak: 2.0 (default) or 1.0 (no `jsonrpc` member, array params, no batches);
    /// replaces the file's `protocol`.
    #[arg(long, value_name = "VERSION", value_parser = parse_jsonrpc)]
    pub jsonrpc: Option<crate::rpc::Version>,
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
    /// Calls in flight per connection on a multiplexed transport (ws://, tcp://, unix://, --http2;
    /// in the open model the default is the rate times the timeout over the connections, at most 64).
    #[arg(long)]
    pub max_in_flight: Option<u64>,
    /// Seed for every random choice of the run (default: from the clock, printed in summary.json).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Answers larger than this are cut off and counted as `io` (default 8MiB).
    #[arg(long, value_name = "SIZE", value_parser = crate::scenario::parse_size)]
    pub max_response_size: Option<usize>,
    /// Extra HTTP header, 'Name: value' (repeatable; ${VAR} is replaced from the environment,
    /// other ${...} generators such as ${seq()} are made for each request); replaces the file's
    /// header of that name.
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Send `Authorization: Bearer` a fresh HS256 JWT (iat = now, a token per second) on every
    /// request and WebSocket handshake, signed with the 32-byte hex secret in FILE (geth's and
    /// reth's jwt.hex; Engine API style); replaces the file's `jwt_secret`. HTTP and WebSocket only.
    #[arg(long, value_name = "FILE")]
    pub jwt_secret: Option<PathBuf>,
    /// Close each connection after it has carried N requests (a batch or a flow is one) and open
    /// it anew, with its [[setup]] calls (a new MCP session); replaces the file's
    /// `load.reconnect_every`.
    #[arg(long, value_name = "N")]
    pub reconnect_every: Option<u64>,
    /// At most N flows in flight give their HTTP connection back between steps (open model; default
    /// 10000); past it, a flow keeps its connection throughout, and the run says so; replaces the
    /// file's `load.max_flows`.
    #[arg(long, value_name = "N")]
    pub max_flows: Option<u64>,
    /// Directory for the result files (default: results/<UTC time>-<scenario>/).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
    /// Also write a GitHub-flavoured Markdown summary here (and append it to
    /// $GITHUB_STEP_SUMMARY when that is set, as in GitHub Actions).
    #[arg(long, value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
    /// Also write JUnit XML here: the verdict and each threshold a test case.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Pass/fail limit on the run's figures, e.g. 'p99 < 200ms', 'eth_call.p50 < 20ms',
    /// 'error_rate < 0.1%', 'rpc_error[-32005] == 0' (repeatable; added to the file's
    /// [thresholds]). A failed one exits 2.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = crate::thresholds::parse)]
    pub thresholds: Vec<crate::thresholds::Threshold>,
    /// Stop the run as soon as a threshold fails on the figures so far, this long into the
    /// measured run at the earliest (e.g. 10s; a stage's threshold waits for the end).
    #[arg(long, value_name = "GRACE", value_parser = parse_duration)]
    pub abort_on_fail: Option<Duration>,
    /// Exit 2 when the run's verdict is invalid (schedule not kept, client saturated, stopped
    /// early), so CI never passes figures that cannot be trusted. On whenever thresholds are
    /// given.
    #[arg(long)]
    pub require_valid: bool,
    /// Print nothing but the final summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// No live dashboard: one progress line a second on stderr instead.
    #[arg(long)]
    pub no_tui: bool,
    /// Serve live metrics in the Prometheus text format at ADDR/metrics (e.g. 127.0.0.1:9464),
    /// each series labelled with its target. Loopback only, unless --metrics-listen-public.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Let --metrics-listen take an address other than loopback, and answer any Host (the metrics
    /// name the targets).
    #[arg(long, requires = "metrics_listen")]
    pub metrics_listen_public: bool,
    /// Serve a live web page at ADDR (e.g. 127.0.0.1:9465): every target's figures and
    /// thresholds, updated every second. Loopback only, unless --web-listen-public.
    #[arg(long, value_name = "ADDR")]
    pub web_listen: Option<std::net::SocketAddr>,
    /// Let --web-listen take an address other than loopback, and answer any Host (the page shows
    /// the targets' URLs).
    #[arg(long, requires = "web_listen")]
    pub web_listen_public: bool,
    /// Let the --web-listen page pause, resume and steer the run (POST, from the page itself);
    /// off by default, as anyone who reaches the page could then steer the run.
    #[arg(long, requires = "web_listen")]
    pub web_control: bool,
    /// After the run, go on serving the final figures on --metrics-listen and --web-listen this
    /// long (e.g. 30s), so a last scrape finds them; Ctrl-C ends it at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub linger: Option<Duration>,
    /// Push the run's metrics to an OpenTelemetry collector at URL/v1/metrics (OTLP/HTTP), every
    /// few seconds and at the end, by OpenTelemetry's JSON-RPC conventions; replaces the file's
    /// `otlp` (default: $OTEL_EXPORTER_OTLP_ENDPOINT; headers from $OTEL_EXPORTER_OTLP_HEADERS).
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Run shard I of N (from 0): this machine takes every N-th request from the I-th, its share
    /// of the connections, rate and calls in flight, and ids no other shard uses. `volley merge`
    /// joins the shards' result directories.
    #[arg(long, value_name = "I/N", conflicts_with = "shards")]
    pub shard: Option<crate::plan::Shard>,
    /// Run one of N shards, its index read from $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's).
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// Connect, then wait and start at this time (RFC 3339, e.g. 2026-12-01T12:00:00Z, or unix
    /// seconds), so that shards start together; a late start says by how much.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Watch what this local server process spends (repeatable): CPU seconds per 1,000 calls, peak
    /// and final resident memory, read from /proc once a second (a stdio target's children are
    /// always watched).
    #[arg(long, value_name = "PID")]
    pub observe_pid: Vec<u32>,
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
    /// Where the CA made at start is written (default: ca.pem in a new directory of its own in the
    /// temp dir, named at start).
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
    /// With --stdio and --framing content-length: this long after `initialize` is answered, send
    /// LSP's `$/progress` with `value.kind = "end"` (a language server done indexing), for `[ready]`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub ready_after: Option<Duration>,
    /// Calls a second the server can do: past it, answers queue and their latency grows without
    /// bound (a known breaking point, for `volley sweep`).
    #[arg(long, value_name = "CALLS_PER_S")]
    pub capacity: Option<f64>,
    /// Answer this method with a result of its own, "volley serve --differ", unlike any other
    /// server (repeatable): a known difference for `volley run --check-equal` to find.
    #[arg(long, value_name = "METHOD")]
    pub differ: Vec<String>,
    /// Keep every call's id and count those seen twice (memory and a lock per call: for checking
    /// that shards, or any clients, never share an id); said when the server stops.
    #[arg(long)]
    pub count_duplicate_ids: bool,
    /// Transactions each eth_getBlockByNumber block lists (hashes, or whole with `true`), each
    /// hash then known to eth_getTransactionReceipt; at most 10000.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub block_transactions: u64,
    /// Asks of a known transaction hash that eth_getTransactionReceipt answers null before its
    /// receipt comes (a transaction mined after a while); at most 1000000.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub receipts_after: u32,
    /// Refuse (HTTP 401) every request, and every WebSocket handshake, without an
    /// `Authorization: Bearer` JWT signed HS256 with the 32-byte hex secret in FILE and an iat within
    /// 60 s of the server's clock, as an Ethereum Engine API does; counts those taken and refused,
    /// and their distinct iat values.
    #[arg(long, value_name = "FILE")]
    pub jwt_secret: Option<PathBuf>,
    /// Count the requests (and WebSocket handshakes) carrying this header and its distinct values
    /// (said when the server stops; up to a million values kept).
    #[arg(long, value_name = "NAME")]
    pub count_header: Option<String>,
    /// Serve on stdin/stdout instead of the network, until stdin closes (as a child of `volley run`).
    #[arg(long)]
    pub stdio: bool,
    /// Framing on stdio: ndjson (MCP) or content-length (LSP).
    #[arg(long, default_value = "ndjson", value_parser = ["ndjson", "content-length"])]
    pub framing: String,
}

fn parse_jsonrpc(text: &str) -> Result<crate::rpc::Version, String> {
    crate::rpc::Version::parse(text).ok_or_else(|| format!("`{text}`: expected 2.0 or 1.0"))
}

/// `5%` or `0.05`: a share above 0 and below 1.
fn parse_share(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.trim().strip_suffix('%') {
        Some(percent) => (percent, 100.0),
        None => (text.trim(), 1.0),
    };
    let share = number
        .parse::<f64>()
        .map_err(|_| format!("`{text}` is not a share such as 5% or 0.05"))?
        / scale;
    match share > 0.0 && share < 1.0 {
        true => Ok(share),
        false => Err(format!("`{text}` is not a share between 0 and 100%")),
    }
}
