//! Scenario files: TOML in, a validated scenario out. Nothing is sent until
//! the whole file is valid, and every mistake names its file, line, column
//! and key.

mod compile;
pub mod equality;
mod error;
mod expect;
mod load;
mod otlp;
mod overrides;
mod pipeline;
mod raw;
mod replay;
mod values;

pub use compile::Compiled;
pub use equality::{
    glob, parse_share, pointer_matches, Equality, EqualityRule, IgnoreSet, RuleKind, IGNORE_SETS,
};
pub use error::{Located, ScenarioError};
pub use otlp::OtlpEndpoint;
pub use overrides::{parse_header, Overrides};
pub use pipeline::MAX_PIPELINE;
pub use values::{interpolate, parse_duration, parse_size, MAX_DURATION};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::plan::{
    BatchSize, HeaderTemplate, HeaderText, Pacing, PollSpec, Polled, SetupCall, Stage, Template,
};
use crate::rpc::wire::Framing;
use crate::rpc::Expectation;
use error::Locator;

/// A checked scenario, with command-line overrides applied.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    /// The file it was read from; `None` for a one-liner.
    pub file: Option<PathBuf>,
    pub description: Option<String>,
    pub target: TargetSpec,
    /// Targets to compare, the first the one the others are measured
    /// against (`targets = [...]`, or `--target` more than once); empty
    /// for a run of one target, which `target` names.
    pub targets: Vec<NamedTarget>,
    /// Compare the targets' answers to a sample of the requests.
    pub equality: Option<Equality>,
    /// Header names and values, `${VAR}` already replaced.
    pub headers: Vec<(String, String)>,
    /// Headers whose values hold generators (`${seq()}`), made for each
    /// request; no name here is also in `headers`.
    pub made_headers: Vec<(String, Arc<HeaderTemplate>)>,
    /// `jwt_secret` (or `--jwt-secret`): every request carries
    /// `Authorization: Bearer` a fresh HS256 token signed with it.
    pub jwt_secret: Option<JwtFile>,
    pub timeout: Duration,
    /// Answers larger than this are cut off and counted as `io`.
    pub max_response_bytes: usize,
    /// HTTP/2: by ALPN to `https://`, with prior knowledge to `http://`.
    pub http2: bool,
    /// HTTP/1.1 requests in flight at once on a connection (`pipeline`);
    /// 1 waits for each answer.
    pub pipeline: usize,
    /// The JSON-RPC the calls are written and judged in (`protocol`).
    pub version: crate::rpc::Version,
    pub tls: crate::tls::TlsOptions,
    /// Results for requests the server sends to volley.
    pub server_answers: crate::transport::ServerAnswers,
    /// What tells a stdio child is ready (`[ready]`).
    pub ready: Option<crate::transport::ReadySignal>,
    pub seed: Option<u64>,
    pub load: Load,
    /// The share of the run this machine takes (`--shard`); none: the whole,
    /// and no shard record is written.
    pub shard: Option<crate::plan::Shard>,
    /// `--start-at`: the run waits, connected, until this time.
    pub start_at: Option<std::time::SystemTime>,
    /// `--observe-pid`: server processes whose CPU and memory are read.
    pub observe: Vec<u32>,
    /// The weighted mix (empty when replaying).
    pub calls: Vec<CallSpec>,
    /// Journeys drawn by weight with the calls (`[[flows]]`).
    pub flows: Vec<FlowSpec>,
    /// Every request a batch drawn from the mix.
    pub batch: Option<BatchSpec>,
    pub replay: Option<Replay>,
    /// Sent on every new connection before it joins the load; the
    /// subscriptions last.
    pub setup: Vec<SetupCall>,
    pub polls: Vec<PollSpec>,
    /// The latest polled values, read by generated params.
    pub polled: Arc<Polled>,
    /// The head race across targets (`race = "POINTER"`).
    pub race: Option<crate::plan::Race>,
    /// Pass/fail limits judged on the finished run (`[thresholds]` and
    /// `--threshold`).
    pub thresholds: Vec<crate::thresholds::Threshold>,
    /// Stop once a threshold fails on the figures so far, this long into
    /// the measured run at the earliest (`abort_on_fail`).
    pub abort_on_fail: Option<Duration>,
    /// Where the run's metrics are pushed over OTLP/HTTP (`otlp`, `--otlp`).
    pub otlp: Option<OtlpEndpoint>,
}

/// A JWT secret and the file it was read from (the file may be named; the
/// secret never is).
#[derive(Clone, Debug)]
pub struct JwtFile {
    pub path: PathBuf,
    pub secret: Arc<crate::jwt::JwtSecret>,
}

impl JwtFile {
    /// Reads `path`: a missing, unreadable or malformed secret is an error
    /// naming the file.
    pub fn read(path: &Path) -> Result<JwtFile, String> {
        let secret = crate::jwt::JwtSecret::read(path)?;
        Ok(JwtFile {
            path: path.to_path_buf(),
            secret: Arc::new(secret),
        })
    }
}

/// How long a run goes before `abort_on_fail` may stop it: the first
/// seconds' figures are few and noisy.
pub const DEFAULT_ABORT_GRACE: Duration = Duration::from_secs(10);

#[derive(Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// Start the built-in server in-process on a free loopback port.
    Builtin,
    Url(String),
    /// A child process spoken to over its stdin and stdout.
    Command {
        argv: Vec<String>,
        framing: Framing,
    },
}

/// One of the targets a comparison runs, by the name its reports use.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTarget {
    pub name: String,
    pub spec: TargetSpec,
}

impl NamedTarget {
    /// Targets named by their URLs' host and port (`127.0.0.1:8545`), a
    /// second one of the same name as `127.0.0.1:8545-2`.
    pub fn from_urls(urls: &[String]) -> Vec<NamedTarget> {
        let mut named: Vec<NamedTarget> = Vec::new();
        for url in urls {
            let short = crate::redact::host(url).replace(',', "_");
            let mut name = short.clone();
            let mut n = 1;
            while named.iter().any(|t| t.name == name) {
                n += 1;
                name = format!("{short}-{n}");
            }
            named.push(NamedTarget {
                name,
                spec: TargetSpec::parse(url),
            });
        }
        named
    }
}

impl TargetSpec {
    /// The target whole, as given: where requests go, and what a flag that
    /// takes a target (`--target`) takes back. Never for output: the
    /// `Display` form hides a URL's keys.
    pub fn as_given(&self) -> String {
        match self {
            TargetSpec::Url(url) => url.clone(),
            _ => self.to_string(),
        }
    }
}

/// A URL's keys never show, even in a debug print.
impl std::fmt::Debug for TargetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetSpec::Url(_) => write!(f, "Url({self})"),
            _ => write!(f, "{self}"),
        }
    }
}

impl std::fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetSpec::Builtin => f.write_str("builtin"),
            TargetSpec::Url(url) => f.write_str(&crate::redact::url(url)),
            TargetSpec::Command { argv, .. } => write!(f, "stdio: {}", argv.join(" ")),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Load {
    pub pacing: Pacing,
    /// Closed model: calls in flight (one per connection over HTTP/1.1).
    pub concurrency: Option<u64>,
    pub connections: Option<u64>,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub warmup: Duration,
    /// How long calls in flight at the schedule's end may still take
    /// (`grace`); `None`: the call timeout.
    pub grace: Option<Duration>,
    pub threads: Option<u64>,
    /// Calls in flight per connection on a multiplexed transport.
    pub max_in_flight: Option<u64>,
    /// Steps of rate (open model) or concurrency (closed), ramped linearly.
    pub stages: Vec<Stage>,
    /// A connection is closed after this many requests and opened anew,
    /// with its setup calls (`reconnect_every`).
    pub reconnect_every: Option<u64>,
    /// Flows in flight that give their connection back between steps
    /// (`max_flows`); `None`: `plan::DEFAULT_MAX_FLOWS`.
    pub max_flows: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct CallSpec {
    pub method: String,
    /// Its row in every report, its threshold and compare key; `None`: the
    /// method's own row (calls of one method and no name share it).
    pub name: Option<String>,
    pub weight: u32,
    /// The params as written, templates unexpanded.
    pub params: Option<Value>,
    pub template: Option<Arc<Template>>,
    pub batch: Option<BatchSize>,
    pub notification: bool,
    pub expect: Option<Expectation>,
}

impl CallSpec {
    /// The row its calls are counted in: its name, else its method.
    pub fn row(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.method)
    }
}

/// A `[[flows]]` entry, checked: its steps' params and checks compiled
/// against the variables known where each stands.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    pub name: String,
    pub weight: u32,
    /// Every variable the flow has (its `vars`, then each new capture
    /// name), each one's slot its index.
    pub slots: Vec<String>,
    /// `vars`: each made once per flow, by slot, with its text as written.
    pub vars: Vec<(usize, Arc<Template>, String)>,
    pub steps: Vec<StepSpec>,
    /// `session = "per_flow"`: each flow opens a connection of its own
    /// (with the setup calls) and closes it at its end.
    pub own_connection: bool,
}

impl FlowSpec {
    /// The flow's row in every report: `flow:NAME`.
    pub fn row(&self) -> String {
        format!("flow:{}", self.name)
    }
}

#[derive(Clone, Debug)]
pub struct StepSpec {
    pub method: String,
    /// Its row, as a call's `name` is (default: the method).
    pub name: Option<String>,
    pub params: Option<Value>,
    pub template: Option<Arc<Template>>,
    pub notification: bool,
    pub expect: Option<crate::plan::Check>,
    pub captures: Vec<crate::plan::Capture>,
    pub until: Option<crate::plan::Until>,
    pub for_each: Option<crate::plan::ForEach>,
    /// Sent even after an earlier step failed.
    pub always: bool,
    /// The variables its params and checks read, by name.
    pub uses: Vec<String>,
}

impl StepSpec {
    /// The row its calls are counted in: its name, else its method.
    pub fn row(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.method)
    }
}

#[derive(Clone, Debug)]
pub struct BatchSpec {
    pub size: BatchSize,
    /// Share of batch entries sent as notifications.
    pub notifications: f64,
}

#[derive(Clone, Debug)]
pub struct Replay {
    pub file: PathBuf,
    pub requests: Vec<ReplayRequest>,
    /// Start over at the end of the file, or stop the run.
    pub looping: bool,
    /// `timing = "recorded"`: when each request is due, in seconds from
    /// the run's start (the capture's times over `speed`), in order.
    pub times: Option<Vec<f64>>,
    /// `expect = "recorded"`: each request's captured answer, to compare.
    pub answers: Option<Vec<Option<Box<RawValue>>>>,
    /// The scenario's `[equality]` rules, which that comparison follows.
    pub rules: Vec<EqualityRule>,
    /// `connections = "recorded"`: each line's captured connection.
    pub conns: Option<Vec<u64>>,
}

/// One recorded request: a single call or a batch.
#[derive(Clone, Debug)]
pub struct ReplayRequest {
    pub batch: bool,
    pub calls: Vec<ReplayCall>,
}

#[derive(Clone, Debug)]
pub struct ReplayCall {
    pub method: String,
    pub params: Option<Box<RawValue>>,
    pub notification: bool,
    /// The id it was recorded with (JSON text), to find its answer in a
    /// recorded batch's.
    pub recorded_id: Option<String>,
}

pub const DEFAULT_CONCURRENCY: u64 = 16;
/// Open-model connections when none are given: enough for a few thousand
/// calls/s at millisecond latencies.
pub const DEFAULT_OPEN_CONNECTIONS: u64 = 64;
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::load_targeting(path, None)
    }

    /// Reads a file, with `target` (from `--target`) in place of the
    /// file's `target` or `command`, so a file may leave it out.
    pub fn load_targeting(path: &Path, target: Option<&str>) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|reason| ScenarioError::Read {
            path: path.to_path_buf(),
            reason,
        })?;
        let default_name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario");
        let file = path.display().to_string();
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let env = |name: &str| std::env::var(name).ok();
        let at = Locator {
            file: &file,
            text: &text,
        };
        let mut scenario = raw::parse(&at, base_dir, default_name, &env, target)?;
        scenario.file = Some(path.to_path_buf());
        Ok(scenario)
    }

    /// Parses scenario `text`; `file` names it in errors, `env` looks up
    /// `${VAR}` references.
    pub fn parse(
        text: &str,
        file: &str,
        default_name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Scenario, ScenarioError> {
        let base_dir = Path::new(file).parent().unwrap_or(Path::new("."));
        raw::parse(&Locator { file, text }, base_dir, default_name, env, None)
    }

    /// Refuses thresholds on a method this run will not call or a stage
    /// its load does not have, naming each.
    pub fn check_thresholds(&self) -> Result<(), String> {
        if self.thresholds.is_empty() {
            return Ok(());
        }
        let compiled = self.compile();
        let methods: Vec<&str> = compiled.mix.methods.iter().map(String::as_str).collect();
        let load = (self.load.stages.len(), compiled.plan.is_open());
        crate::thresholds::check_methods(&self.thresholds, &methods, load)
    }

    /// Whether everything the scenario sends can be said in its JSON-RPC:
    /// 1.0 has no batches, and its params are always an array. The error
    /// names the key that cannot.
    pub fn check_version(&self) -> Result<(), String> {
        if self.version == crate::rpc::Version::V2 {
            return Ok(());
        }
        let no_batches = |what: &str| format!("JSON-RPC 1.0 has no batches, but {what}");
        let not_an_array = |key: &str| format!("JSON-RPC 1.0 params are an array, but `{key}` is an object");
        let is_object = |params: &Option<Value>| params.as_ref().is_some_and(|p| !p.is_array());
        if self.batch.is_some() {
            return Err(no_batches("`batch` sends every request as one"));
        }
        for (i, call) in self.calls.iter().enumerate() {
            if call.batch.is_some() {
                return Err(no_batches(&format!(
                    "`calls[{i}].batch` sends {} in batches",
                    call.method
                )));
            }
            if is_object(&call.params) {
                return Err(not_an_array(&format!("calls[{i}].params")));
            }
        }
        let (mut setups, mut subscribes) = (0, 0);
        for call in &self.setup {
            let (table, index) = match call.subscribe {
                true => ("subscribe", &mut subscribes),
                false => ("setup", &mut setups),
            };
            if is_object(&call.params) {
                return Err(not_an_array(&format!("{table}[{index}].params")));
            }
            *index += 1;
        }
        if let Some(poll) = self.polls.iter().find(|p| is_object(&p.params)) {
            return Err(not_an_array(&format!("poll.{}.params", poll.name)));
        }
        self.replay.as_ref().map_or(Ok(()), check_replay_version_1)
    }

    /// The whole run, key by key, the same on every shard of it and
    /// different for another target, scenario, load or seed: what `volley
    /// merge` checks before adding shards up. The file is named by a hash of
    /// its bytes, so an edit between shards shows; the load is the compiled
    /// one, so a flag that says what the file says changes nothing.
    pub fn run_description(&self) -> std::collections::BTreeMap<String, String> {
        let file = self.file.as_ref().map_or_else(
            || "none".to_string(),
            |path| match std::fs::read(path) {
                Ok(bytes) => format!("{} (hash {:016x})", path.display(), fnv1a(&bytes)),
                Err(_) => path.display().to_string(),
            },
        );
        let calls: Vec<String> = (self.calls.iter())
            .map(|c| {
                let params = c.params.as_ref().map_or(String::new(), |p| format!(" {p}"));
                let name = c.name.as_ref().map_or(String::new(), |n| format!(" as {n}"));
                format!("{}{name} x{}{params}", c.method, c.weight)
            })
            .collect();
        let mut whole = self.clone();
        whole.shard = None;
        let plan = whole.compile().plan;
        let duration =
            |d: Option<Duration>| d.map_or("none".into(), |d| humantime::format_duration(d).to_string());
        let stages: Vec<String> = (plan.stages.iter())
            .map(|s| format!("{} to {}", humantime::format_duration(s.duration), s.target))
            .collect();
        [
            ("scenario", format!("{:?}", self.name)),
            ("file", file),
            ("target", self.target.to_string()),
            ("jsonrpc", self.version.to_string()),
            ("calls", calls.join(", ")),
            ("flows", self.flow_description()),
            (
                "batch",
                format!("{:?}", self.batch.as_ref().map(|b| (&b.size, b.notifications))),
            ),
            (
                "replay",
                self.replay.as_ref().map_or(0, |r| r.requests.len()).to_string(),
            ),
            ("model", format!("{:?}", plan.pacing)),
            ("connections", plan.connections.to_string()),
            ("calls in flight", plan.initial_concurrency.to_string()),
            ("duration", duration(plan.duration)),
            ("requests", format!("{:?}", plan.requests)),
            ("warmup", duration(Some(plan.warmup))),
            ("timeout", duration(Some(plan.timeout))),
            ("grace", duration(Some(plan.grace))),
            ("stages", stages.join(", ")),
            ("seed", format!("{:?}", plan.seed)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The flows, each its name, weight and steps' methods and params.
    fn flow_description(&self) -> String {
        let flows: Vec<String> = (self.flows.iter())
            .map(|f| {
                let steps: Vec<String> = (f.steps.iter())
                    .map(|s| {
                        let params = s.params.as_ref().map_or(String::new(), |p| format!(" {p}"));
                        format!("{}{params}", s.method)
                    })
                    .collect();
                format!("{} x{}: {}", f.name, f.weight, steps.join(" -> "))
            })
            .collect();
        flows.join(", ")
    }

    /// A scenario with one method and no file, for quick runs.
    pub fn one_liner(target: &str, method: &str, params: Option<Value>) -> Scenario {
        Scenario {
            name: method.to_string(),
            file: None,
            description: None,
            target: TargetSpec::parse(target),
            targets: Vec::new(),
            equality: None,
            headers: Vec::new(),
            made_headers: Vec::new(),
            jwt_secret: None,
            timeout: DEFAULT_TIMEOUT,
            max_response_bytes: crate::transport::DEFAULT_MAX_RESPONSE_BYTES,
            http2: false,
            pipeline: 1,
            version: Default::default(),
            tls: Default::default(),
            server_answers: Default::default(),
            ready: None,
            seed: None,
            shard: None,
            start_at: None,
            observe: Vec::new(),
            load: Load {
                pacing: Pacing::Closed,
                concurrency: None,
                connections: None,
                duration: None,
                requests: None,
                warmup: Duration::ZERO,
                grace: None,
                threads: None,
                max_in_flight: None,
                stages: Vec::new(),
                reconnect_every: None,
                max_flows: None,
            },
            flows: Vec::new(),
            calls: vec![CallSpec {
                method: method.to_string(),
                name: None,
                weight: 1,
                template: None,
                params,
                batch: None,
                notification: false,
                expect: None,
            }],
            batch: None,
            replay: None,
            setup: Vec::new(),
            polls: Vec::new(),
            polled: Arc::new(Polled::default()),
            race: None,
            thresholds: Vec::new(),
            abort_on_fail: None,
            otlp: None,
        }
    }
}

impl Scenario {
    /// Sets a header, in place of any of its name (a flag's replaces a
    /// file's).
    pub fn set_header(&mut self, name: String, value: HeaderText) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        self.made_headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        match value {
            HeaderText::Fixed(value) => self.headers.push((name, value)),
            HeaderText::Made(template) => self.made_headers.push((name, template)),
        }
    }

    /// The names of the headers a request carries beyond volley's own, for
    /// reports: never their values.
    pub fn header_names(&self) -> Vec<String> {
        let fixed = self.headers.iter().map(|(name, _)| name.clone());
        let made = self.made_headers.iter().map(|(name, _)| name.clone());
        let jwt = self.jwt_secret.as_ref().map(|_| "Authorization".to_string());
        fixed.chain(made).chain(jwt).collect()
    }

    /// Whether a JWT can go where the scenario sends: in an HTTP header, so
    /// to an `http(s)://` or `ws(s)://` target (or the built-in server), and
    /// with no header of the user's in its place. The message says why not.
    pub fn check_jwt(&self) -> Result<(), String> {
        if self.jwt_secret.is_none() {
            return Ok(());
        }
        let targets = std::iter::once(&self.target).chain(self.targets.iter().map(|t| &t.spec));
        for target in targets {
            let headerless = match target {
                TargetSpec::Builtin => None,
                TargetSpec::Command { .. } => Some("a child's stdio"),
                TargetSpec::Url(url) => match crate::transport::Scheme::of(url) {
                    Some(crate::transport::Scheme::Tcp) => Some("TCP"),
                    Some(crate::transport::Scheme::Unix) => Some("a Unix socket"),
                    _ => None,
                },
            };
            if let Some(transport) = headerless {
                return Err(format!(
                    "a JWT travels in an HTTP header, and {target} ({transport}) carries none: give an http(s):// or ws(s):// target"
                ));
            }
        }
        let fixed = self.headers.iter().map(|(name, _)| name);
        let made = self.made_headers.iter().map(|(name, _)| name);
        if let Some(name) = fixed
            .chain(made)
            .find(|n| n.eq_ignore_ascii_case("authorization"))
        {
            return Err(format!(
                "the JWT is sent as `Authorization: Bearer <token>`, and the header `{name}` would take its place: drop one of them"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// The 1.0 rules of `check_version` over a recording: no batch, params
/// arrays, each mistake named by its line in the file.
fn check_replay_version_1(replay: &Replay) -> Result<(), String> {
    for (line, request) in replay.requests.iter().enumerate() {
        let at = format!("{} request {}", replay.file.display(), line + 1);
        if request.batch {
            return Err(format!("JSON-RPC 1.0 has no batches, but {at} is one"));
        }
        let is_array =
            |p: &RawValue| crate::rpc::wire::first_significant_byte(p.get().as_bytes()) == Some(b'[');
        if request
            .calls
            .iter()
            .any(|c| c.params.as_deref().is_some_and(|p| !is_array(p)))
        {
            return Err(format!(
                "JSON-RPC 1.0 params are an array, but those of {at} are not"
            ));
        }
    }
    Ok(())
}

/// FNV-1a, 64 bits: a file's fingerprint (not a defence against forgery,
/// only against comparing two different files by mistake).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
