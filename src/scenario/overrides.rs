//! Command-line flags applied to a scenario file, by one rule (stated in
//! `volley run --help` and docs/guide/scenarios.md): **a flag replaces what
//! it names in the file; where a flag and the file's other settings cannot both hold,
//! the error names both.** `--rate` and `--concurrency` replace the load
//! model with its stages; `--duration` and `--requests` replace the run's
//! end; `--method` replaces the mix with one call; `--target` replaces
//! `target`, `targets` or `command` (more than one: the targets compared).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{load, CallSpec, Scenario, ScenarioError, TargetSpec, Template};
use crate::plan::{HeaderText, Pacing, Scope};

/// The flags of `volley run` that change a scenario, as given.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub target: Option<String>,
    /// `--target` given again: every target, the first as `target`, to
    /// compare side by side.
    pub more_targets: Vec<String>,
    /// `--check-equal`, and `--check-equal-sample`'s share.
    pub check_equal: bool,
    pub check_equal_sample: Option<f64>,
    pub method: Option<String>,
    /// JSON text, `${...}` generators allowed as in a file.
    pub params: Option<String>,
    pub rate: Option<f64>,
    pub concurrency: Option<u64>,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub connections: Option<u64>,
    pub warmup: Option<Duration>,
    /// `--grace`: how long calls in flight at the schedule's end may take.
    pub grace: Option<Duration>,
    pub timeout: Option<Duration>,
    pub threads: Option<u64>,
    pub max_in_flight: Option<u64>,
    pub seed: Option<u64>,
    pub max_response_size: Option<usize>,
    pub http2: bool,
    pub pipeline: Option<u64>,
    pub jsonrpc: Option<crate::rpc::Version>,
    pub cacert: Option<PathBuf>,
    pub system_roots: bool,
    pub insecure: bool,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// `Name: value`, `${VAR}` read from the environment, other `${...}`
    /// generators made per request.
    pub headers: Vec<String>,
    /// `--jwt-secret FILE`: a fresh JWT on every request.
    pub jwt_secret: Option<PathBuf>,
    /// `--reconnect-every N`: each connection closed after N requests.
    pub reconnect_every: Option<u64>,
    /// `--max-flows N`: flows in flight that give their connection back.
    pub max_flows: Option<u64>,
    /// Added to the file's `[thresholds]`.
    pub thresholds: Vec<crate::thresholds::Threshold>,
    /// `--abort-on-fail GRACE`.
    pub abort_on_fail: Option<Duration>,
    /// `--shard I/N` (or `--shards N` with the index from the environment).
    pub shard: Option<crate::plan::Shard>,
    /// `--start-at`.
    pub start_at: Option<std::time::SystemTime>,
    /// `--observe-pid`, each checked readable before anything is sent.
    pub observe: Vec<u32>,
    /// `--otlp URL`: replaces the file's `otlp`.
    pub otlp: Option<String>,
}

fn flag(flag: &'static str, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Flag {
        flag,
        message: message.into(),
    }
}

impl Scenario {
    /// The scenario to run: the file's (or a one-liner's when there is no
    /// file), with every flag given applied by the rule above.
    pub fn with_flags(file: Option<&Path>, flags: &Overrides) -> Result<Scenario, ScenarioError> {
        let mut scenario = flags.file_or_one_liner(file)?;
        flags.apply_targets(&mut scenario)?;
        if let (Some(method), Some(_)) = (&flags.method, file) {
            scenario.replace_mix(method);
        }
        if let Some(text) = &flags.params {
            scenario.replace_params(text)?;
        }
        flags.apply_load(&mut scenario)?;
        flags.apply_connection(&mut scenario)?;
        scenario.check_connections(flags)?;
        if let Some(refusal) = scenario.pipeline_refusal() {
            let named = match (flags.pipeline, flags.http2) {
                (Some(_), _) => "--pipeline",
                (None, true) => "--http2",
                (None, false) => "--target",
            };
            return Err(flag(named, refusal));
        }
        scenario.start_at = flags.start_at;
        if let Some(pid) = flags.observe.iter().find(|pid| !crate::engine::observable(**pid)) {
            return Err(flag(
                "--observe-pid",
                format!("process {pid} cannot be read (no /proc/{pid}/stat: gone, another machine's, or not Linux)"),
            ));
        }
        scenario.observe.clone_from(&flags.observe);
        if let Some(url) = &flags.otlp {
            scenario.otlp = Some(super::OtlpEndpoint::parse(url).map_err(|m| flag("--otlp", m))?);
        }
        if let Some(shard) = flags.shard {
            scenario.take_shard(shard)?;
        }
        scenario.thresholds.extend(flags.thresholds.iter().cloned());
        if let Some(grace) = flags.abort_on_fail {
            if scenario.thresholds.is_empty() {
                return Err(flag(
                    "--abort-on-fail",
                    "stops a run when a threshold fails: give one (--threshold or [thresholds])",
                ));
            }
            scenario.abort_on_fail = Some(grace);
        }
        // What the flags send must be sayable in the JSON-RPC spoken.
        let named = if flags.jsonrpc.is_some() {
            "--jsonrpc"
        } else {
            "--params"
        };
        scenario.check_version().map_err(|m| flag(named, m))?;
        // Again with the flags: --threshold, or --method replacing the mix.
        scenario.check_thresholds().map_err(|m| flag("--threshold", m))?;
        Ok(scenario)
    }

    /// `--method` with a file: the file's mix, replay or batch mix gives way
    /// to one call; everything else (target, headers, setup, load) stays.
    fn replace_mix(&mut self, method: &str) {
        self.flows.clear();
        self.calls = vec![CallSpec {
            method: method.to_string(),
            name: None,
            weight: 1,
            params: None,
            template: None,
            batch: None,
            notification: false,
            expect: None,
        }];
        self.replay = None;
        self.batch = None;
    }

    /// `--params`: the params of the one call in the mix, compiled as a
    /// file's are (generators, data files relative to the working
    /// directory, the file's polled values).
    fn replace_params(&mut self, text: &str) -> Result<(), ScenarioError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| flag("--params", format!("not JSON: {e}")))?;
        if !value.is_array() && !value.is_object() {
            return Err(flag("--params", "must be a JSON array or object"));
        }
        if self.replay.is_some() {
            return Err(flag(
                "--params",
                "the scenario replays recorded requests, which carry their own params; give --method too",
            ));
        }
        if self.calls.len() != 1 {
            let methods: Vec<&str> = self.calls.iter().map(|c| c.method.as_str()).collect();
            return Err(flag(
                "--params",
                format!(
                    "the scenario's mix has {} calls ({}): say which with --method",
                    methods.len(),
                    methods.join(", ")
                ),
            ));
        }
        let scope = Scope {
            base_dir: Path::new("."),
            polled: &self.polled,
            vars: &[],
        };
        let template = Template::compile(&value, &scope).map_err(|m| flag("--params", m))?;
        let call = &mut self.calls[0];
        call.params = Some(value);
        call.template = Some(Arc::new(template));
        Ok(())
    }
}

impl Overrides {
    /// The file's scenario (its target replaced by `--target`), or a
    /// one-liner's when there is no file.
    fn file_or_one_liner(&self, file: Option<&Path>) -> Result<Scenario, ScenarioError> {
        if self.method.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(flag("--method", "a method name is needed, not an empty one"));
        }
        let scenario = match (file, &self.method) {
            (Some(path), _) => Scenario::load_targeting(path, self.target.as_deref())?,
            (None, Some(method)) => {
                let target = self
                    .target
                    .as_deref()
                    .ok_or_else(|| flag("--target", "a one-liner needs --target URL"))?;
                Scenario::one_liner(target, method, None)
            }
            (None, None) => {
                return Err(flag(
                    "SCENARIO",
                    "give a scenario file, or --target URL --method NAME for a one-liner",
                ))
            }
        };
        Ok(scenario)
    }

    /// `--target` given more than once: the targets compared; and
    /// `--check-equal`, which needs two or more of them.
    fn apply_targets(&self, scenario: &mut Scenario) -> Result<(), ScenarioError> {
        if !self.more_targets.is_empty() {
            let mut urls: Vec<String> = self.target.iter().cloned().collect();
            urls.extend(self.more_targets.iter().cloned());
            scenario.targets = super::NamedTarget::from_urls(&urls);
        }
        if self.check_equal || self.check_equal_sample.is_some() {
            let equality = (scenario.equality)
                .get_or_insert_with(|| super::Equality::sampled(super::equality::DEFAULT_SAMPLE));
            if let Some(share) = self.check_equal_sample {
                equality.sample = share;
            }
        }
        if scenario.equality.is_some() && scenario.targets.len() < 2 {
            if self.check_equal || self.check_equal_sample.is_some() {
                return Err(flag(
                    "--check-equal",
                    "compares the answers of several targets: give two or more (--target again, or `targets`)",
                ));
            }
            // The file's `[equality]` with one target (`--target` replaced
            // its `targets`): nothing to compare.
            scenario.equality = None;
        }
        Ok(())
    }

    /// The load model, its stages and the run's end.
    fn apply_load(&self, scenario: &mut Scenario) -> Result<(), ScenarioError> {
        // A load model from the flags replaces a replay's recorded pace.
        if self.rate.is_some() || self.concurrency.is_some() {
            if let Some(replay) = &mut scenario.replay {
                replay.times = None;
            }
        }
        let load = &mut scenario.load;
        if let Some(rate) = self.rate {
            load::check_rate(rate).map_err(|m| flag("--rate", m))?;
            load.pacing = Pacing::Open { rate };
            load.concurrency = None;
            load.stages.clear();
        }
        if let Some(concurrency) = self.concurrency {
            load.pacing = Pacing::Closed;
            load.concurrency = Some(at_least_one(concurrency, "--concurrency")?);
            load.stages.clear();
        }
        if let Some(duration) = self.duration {
            load::check_duration(duration).map_err(|m| flag("--duration", m))?;
            if !load.stages.is_empty() {
                return Err(flag(
                    "--duration",
                    format!(
                        "the scenario's `load.stages` ({}) set the run's length: drop --duration, or replace the stages with --rate or --concurrency",
                        scenario.origin()
                    ),
                ));
            }
            load.duration = Some(duration);
            if self.requests.is_none() {
                load.requests = None;
            }
        }
        if let Some(requests) = self.requests {
            load.requests = Some(at_least_one(requests, "--requests")?);
            if self.duration.is_none() {
                load.duration = None;
            }
        }
        if let Some(warmup) = self.warmup {
            load.warmup = warmup;
        }
        if self.grace.is_some() {
            load.grace = self.grace;
        }
        if let Some(threads) = self.threads {
            load.threads = Some(at_least_one(threads, "--threads")?);
        }
        Ok(())
    }

    /// Where the load goes and how: target, connections, TLS, headers.
    fn apply_connection(&self, scenario: &mut Scenario) -> Result<(), ScenarioError> {
        if let Some(connections) = self.connections {
            scenario.load.connections = Some(at_least_one(connections, "--connections")?);
        }
        if let Some(every) = self.reconnect_every {
            scenario.load.reconnect_every = Some(at_least_one(every, "--reconnect-every")?);
        }
        if let Some(max) = self.max_flows {
            scenario.load.max_flows = Some(at_least_one(max, "--max-flows")?);
        }
        if let Some(max) = self.max_in_flight {
            scenario.load.max_in_flight = Some(at_least_one(max, "--max-in-flight")?);
        }
        if let Some(timeout) = self.timeout {
            load::check_timeout(timeout).map_err(|m| flag("--timeout", m))?;
            scenario.timeout = timeout;
            if let Some(ready) = &mut scenario.ready {
                ready.wait = timeout;
            }
        }
        if self.seed.is_some() {
            scenario.seed = self.seed;
        }
        if let Some(size) = self.max_response_size {
            scenario.max_response_bytes = size;
        }
        scenario.http2 |= self.http2;
        if let Some(depth) = self.pipeline {
            let depth = i64::try_from(depth).unwrap_or(i64::MAX);
            scenario.pipeline = super::pipeline::check_depth(depth).map_err(|m| flag("--pipeline", m))?;
        }
        if let Some(version) = self.jsonrpc {
            scenario.version = version;
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
        crate::tls::check_files(tls).map_err(|(key, m)| {
            let name = match key {
                "cacert" => "--cacert",
                "cert" => "--cert",
                _ => "--key",
            };
            flag(name, m)
        })?;
        for header in &self.headers {
            let (name, value) = parse_header(header)?;
            scenario.set_header(name, value);
        }
        if let Some(path) = &self.jwt_secret {
            scenario.jwt_secret = Some(super::JwtFile::read(path).map_err(|m| flag("--jwt-secret", m))?);
        }
        let named = match (&self.jwt_secret, self.headers.is_empty()) {
            (Some(_), _) => "--jwt-secret",
            (None, false) => "--header",
            (None, true) => "--target",
        };
        scenario.check_jwt().map_err(|m| flag(named, m))?;
        Ok(())
    }
}

/// `Name: value` from `-H`, its `${VAR}` read from the environment, other
/// `${...}` generators compiled (data files found from the working
/// directory). The text is never shown in an error: it may hold a secret.
pub fn parse_header(header: &str) -> Result<(String, HeaderText), ScenarioError> {
    let (name, value) = header.split_once(':').ok_or_else(|| {
        flag(
            "--header",
            "a header is not 'Name: value' (no colon); its text is not shown, as it may hold a secret",
        )
    })?;
    let name = name.trim().to_string();
    let env = |n: &str| std::env::var(n).ok();
    let value = HeaderText::compile(value.trim(), &env, Path::new("."))
        .map_err(|m| flag("--header", format!("`{name}`: {m}")))?;
    crate::transport::check_header(&name, &value.literal_text()).map_err(|m| flag("--header", m))?;
    Ok((name, value))
}

fn at_least_one(value: u64, name: &'static str) -> Result<u64, ScenarioError> {
    load::at_least_one(value).map_err(|m| flag(name, m))
}

impl Scenario {
    /// `--shard`: this machine takes its share of the run. Every shard must
    /// draw from one seed and have a connection of its own.
    fn take_shard(&mut self, shard: crate::plan::Shard) -> Result<(), ScenarioError> {
        if self.targets.len() > 1 {
            return Err(flag(
                "--shard",
                "splits one target's run; several targets are compared on one machine",
            ));
        }
        if self.replay.as_ref().is_some_and(|r| r.conns.is_some()) {
            return Err(flag(
                "--shard",
                "a replay that keeps its captured connections (connections = \"recorded\") runs on one machine",
            ));
        }
        if self.abort_on_fail.is_some() {
            return Err(flag(
                "--shard",
                "a shard's thresholds are judged on the whole by `volley merge`: drop --abort-on-fail (or abort_on_fail)",
            ));
        }
        // Shards started together draw from one seed: the file's or the
        // flag's, else the start time's.
        let start_seed = (self.start_at)
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs());
        self.seed = self.seed.or(start_seed);
        if self.seed.is_none() {
            return Err(flag(
                "--shard",
                "every shard must draw from one seed: give --seed (the same on each), or --start-at, whose time is then the seed",
            ));
        }
        let whole = self.compile().plan.connections;
        self.shard = Some(shard);
        if self.compile().plan.connections == 0 {
            // In the closed model over HTTP/1.1 the calls in flight set
            // the connections: raising those alone is refused.
            let raise = match self.load.pacing {
                Pacing::Closed => "raise --concurrency (and --connections with it)",
                Pacing::Open { .. } => "raise --connections",
            };
            return Err(flag(
                "--shard",
                format!(
                    "{whole} connections cannot be split over {} shards: each needs one at least ({raise} to {} or more, or run fewer shards)",
                    shard.count, shard.count
                ),
            ));
        }
        Ok(())
    }

    /// Where this scenario came from, for errors that name the file's side
    /// of a conflict.
    fn origin(&self) -> String {
        self.file
            .as_ref()
            .map_or_else(|| "the one-liner".to_string(), |f| f.display().to_string())
    }

    /// In the closed model every connection carries at least one of the
    /// calls in flight: more connections than calls would leave some idle,
    /// or (over HTTP/1.1) put more calls in flight than asked.
    fn check_connections(&self, flags: &Overrides) -> Result<(), ScenarioError> {
        let load = &self.load;
        if !matches!(load.pacing, Pacing::Closed) {
            return Ok(());
        }
        let staged = load.stages.iter().map(|s| s.target.ceil() as u64).max();
        let (Some(concurrency), Some(connections)) = (staged.or(load.concurrency), load.connections) else {
            return Ok(());
        };
        if connections <= concurrency {
            return Ok(());
        }
        let named = |given: bool, flag: &str, key: &str, value: u64| match given {
            true => format!("{flag} {value}"),
            false => format!("`{key} = {value}` in {}", self.origin()),
        };
        let calls = match staged {
            Some(_) => named(false, "", "load.stages (at most)", concurrency),
            None => named(
                flags.concurrency.is_some(),
                "--concurrency",
                "load.concurrency",
                concurrency,
            ),
        };
        let conns = named(
            flags.connections.is_some(),
            "--connections",
            "load.connections",
            connections,
        );
        Err(flag(
            if flags.connections.is_some() { "--connections" } else { "--concurrency" },
            format!(
                "{conns} is more than the calls in flight ({calls}): every connection carries at least one call, so give at most {concurrency} connections, or more concurrency"
            ),
        ))
    }
}

impl TargetSpec {
    /// `--target` (or a file's `target`): `builtin`, or a URL whose scheme is
    /// read case-insensitively (`HTTP://` is `http://`).
    /// Whether volley speaks the URL's scheme: said now, not when the run
    /// would start (`builtin` needs none).
    pub fn check(&self) -> Result<(), String> {
        let TargetSpec::Url(url) = self else {
            return Ok(());
        };
        match (crate::transport::Scheme::of(url), url.split_once("://")) {
            (Some(_), _) => Ok(()),
            (None, Some((scheme, _))) => Err(format!(
                "scheme `{scheme}` is not supported (supported: http, https, ws, wss, tcp, unix)"
            )),
            (None, None) => Err(format!(
                "`{}` is not a URL: expected one such as http://127.0.0.1:8545",
                crate::redact::url(url)
            )),
        }
    }

    pub fn parse(target: &str) -> TargetSpec {
        if target == "builtin" {
            return TargetSpec::Builtin;
        }
        match target.split_once("://") {
            Some((scheme, rest)) => TargetSpec::Url(format!("{}://{rest}", scheme.to_ascii_lowercase())),
            None => TargetSpec::Url(target.to_string()),
        }
    }
}
