//! The file as written (with spans), and its validation into a `Scenario`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::error::{Locator, ScenarioError};
use super::expect::expectation;
use super::replay::replay;
use super::{
    interpolate, parse_duration, BatchSpec, CallSpec, Framing, NamedTarget, PollSpec, Polled, Scenario,
    SetupCall, TargetSpec, Template, DEFAULT_TIMEOUT,
};
use crate::plan::{BatchSize, Scope};
use crate::tls::TlsOptions;

const MAX_BATCH: i64 = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    target: Option<Spanned<String>>,
    /// Targets to compare: `[{ name = "geth", url = "http://..." }, ...]`.
    targets: Option<Spanned<Vec<RawTarget>>>,
    command: Option<Spanned<Vec<String>>>,
    framing: Option<Spanned<String>>,
    #[serde(default)]
    http2: bool,
    /// `"2.0"` (the default) or `"1.0"`.
    protocol: Option<Spanned<String>>,
    tls: Option<RawTls>,
    /// `[server_requests]`: method = result, and `default = result`.
    #[serde(default)]
    server_requests: BTreeMap<String, Value>,
    timeout: Option<Spanned<String>>,
    seed: Option<u64>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    load: super::load::RawLoad,
    calls: Option<Spanned<Vec<RawCall>>>,
    batch: Option<RawBatchMix>,
    replay: Option<Spanned<RawReplay>>,
    #[serde(default)]
    setup: Vec<RawSetup>,
    #[serde(default)]
    subscribe: Vec<RawSubscribe>,
    #[serde(default)]
    poll: BTreeMap<String, RawPoll>,
    thresholds: Option<RawThresholds>,
    equality: Option<super::equality::RawEquality>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    name: Option<String>,
    url: String,
}

/// `[thresholds]`: pass/fail limits on the run's figures.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThresholds {
    checks: Spanned<Vec<Spanned<String>>>,
    /// Stop the run once a threshold fails on the figures so far.
    #[serde(default)]
    abort_on_fail: bool,
    /// How long into the measured run before a failure may stop it.
    abort_grace: Option<Spanned<String>>,
}

impl RawThresholds {
    fn parse(&self, at: &Locator) -> Result<Vec<crate::thresholds::Threshold>, ScenarioError> {
        self.checks
            .get_ref()
            .iter()
            .enumerate()
            .map(|(i, check)| {
                crate::thresholds::parse(check.get_ref())
                    .map_err(|m| at.error(Some(check.span()), Some(&format!("thresholds.checks[{i}]")), m))
            })
            .collect()
    }
}

/// `[tls]`: how an `https://` or `wss://` target is trusted. Paths are
/// relative to the scenario file.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cacert: Option<Spanned<PathBuf>>,
    #[serde(default)]
    system_roots: bool,
    #[serde(default)]
    insecure: bool,
    cert: Option<Spanned<PathBuf>>,
    key: Option<Spanned<PathBuf>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    method: Spanned<String>,
    weight: Option<Spanned<i64>>,
    params: Option<Spanned<Value>>,
    batch: Option<Spanned<RawBatchSize>>,
    #[serde(default)]
    notification: bool,
    expect: Option<Spanned<RawExpect>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawBatchSize {
    Fixed(i64),
    Range { min: i64, max: i64 },
    Table { sizes: BTreeMap<String, i64> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBatchMix {
    size: Spanned<RawBatchSize>,
    notifications: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawReplay {
    File(String),
    Table(RawReplayTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReplayTable {
    pub(super) file: String,
    pub(super) on_end: Option<String>,
    /// "recorded": each request leaves at its captured time.
    pub(super) timing: Option<String>,
    /// With recorded timing: this many times as fast.
    pub(super) speed: Option<f64>,
    /// "recorded": each answer must equal the captured one.
    pub(super) expect: Option<String>,
    /// "recorded": each captured connection's requests on a connection of
    /// their own, in their order.
    pub(super) connections: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub(super) result: Option<String>,
    #[serde(rename = "type")]
    pub(super) json_type: Option<String>,
    pub(super) pointer: Option<String>,
    pub(super) regex: Option<String>,
    pub(super) equals: Option<Value>,
    pub(super) error: Option<RawCodes>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawCodes {
    One(i64),
    Many(Vec<i64>),
    Any(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSetup {
    method: Spanned<String>,
    params: Option<Spanned<Value>>,
    #[serde(default)]
    notification: bool,
}

/// `[[subscribe]]`: a subscription opened on every connection, after the
/// setup calls.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubscribe {
    method: Spanned<String>,
    params: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPoll {
    method: Spanned<String>,
    params: Option<Spanned<Value>>,
    every: Option<Spanned<String>>,
}

/// Messages serde gives for untagged enums say nothing useful; these do.
const SHAPES: [(&str, &str); 3] = [
    ("RawBatchSize", "batch size must be a number (10), a range ({ min = 1, max = 20 }) or a weighted table ({ sizes = { 1 = 50, 10 = 30 } })"),
    ("RawReplay", "replay must be a file path, or { file = \"x.jsonl\", on_end = \"loop\" | \"stop\", timing = \"recorded\", speed = 2.0, expect = \"recorded\", connections = \"recorded\" }"),
    ("RawCodes", "expect.error must be a code (-32601), a list of codes, or \"any\""),
];

pub(super) fn parse(
    at: &Locator,
    base_dir: &Path,
    default_name: &str,
    env: &dyn Fn(&str) -> Option<String>,
    target: Option<&str>,
) -> Result<Scenario, ScenarioError> {
    let mut raw: RawScenario = toml::from_str(at.text).map_err(|e| {
        let mut message = e.message().to_string();
        if let Some((_, better)) = SHAPES.iter().find(|(name, _)| message.contains(name)) {
            message = better.to_string();
        }
        at.error(e.span(), None, with_suggestion(message))
    })?;
    if let Some(target) = target {
        // `--target` replaces the file's target or command, and the framing
        // that goes with a command: NDJSON is what every other stream
        // transport speaks, but LSP's headers only a child's stdio carries.
        if let Some(framing) = raw.framing.as_ref().filter(|f| f.get_ref() == "content-length") {
            return Err(at.error(
                Some(framing.span()),
                Some("framing"),
                format!("--target {target} cannot replace this `command`: its `framing = \"content-length\"` (LSP) is spoken only over a child's stdio; run the file without --target"),
            ));
        }
        raw.target = Some(Spanned::new(0..0, target.to_string()));
        raw.targets = None;
        raw.command = None;
        raw.framing = None;
    }
    raw.validate(at, base_dir, default_name, env)
}

/// Whether `program` can be started: a path to a file, or a name found in
/// one of PATH's directories.
fn is_installed(program: &str) -> bool {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return path.is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|dirs| std::env::split_paths(&dirs).any(|dir| dir.join(program).is_file()))
}

/// Adds "did you mean" to serde's "unknown field `x`, expected one of ...".
fn with_suggestion(message: String) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message;
    };
    let Some((unknown, expected)) = rest.split_once('`') else {
        return message;
    };
    let best = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|candidate| (strsim::jaro_winkler(unknown, candidate), candidate))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, candidate)) => format!("{message}; did you mean `{candidate}`?"),
        None => message,
    }
}

pub(super) fn positive(at: &Locator, value: &Spanned<i64>, what: &str) -> Result<u64, ScenarioError> {
    let fails = |m: &str| at.error(Some(value.span()), None, format!("{what} {m}"));
    let n = u64::try_from(*value.get_ref()).map_err(|_| fails("must be at least 1"))?;
    super::load::at_least_one(n).map_err(fails)
}

pub(super) fn duration(at: &Locator, value: &Spanned<String>) -> Result<std::time::Duration, ScenarioError> {
    parse_duration(value.get_ref()).map_err(|m| at.error(Some(value.span()), None, m))
}

impl RawScenario {
    fn validate(
        mut self,
        at: &Locator,
        base_dir: &Path,
        default_name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Scenario, ScenarioError> {
        let targets = self.targets(at)?;
        let target = match targets.first() {
            Some(first) => first.spec.clone(),
            None => self.target(at)?,
        };
        let timeout = self.timeout(at)?;
        let headers = self.headers(at, env)?;
        let tls = match self.tls.take() {
            Some(raw) => raw.options(at, base_dir)?,
            None => TlsOptions::default(),
        };
        let load = self.load.validate(at)?;

        let polled = Arc::new(Polled::new(self.poll.keys().cloned().collect()));
        let scope = Scope {
            base_dir,
            polled: &polled,
        };
        let polls = self.polls(at)?;

        let replay = self
            .replay
            .as_ref()
            .map(|r| replay(at, base_dir, r))
            .transpose()?;
        if let (Some(raw), Some(_)) = (&self.replay, replay.as_ref().and_then(|r| r.times.as_ref())) {
            if matches!(load.pacing, crate::plan::Pacing::Open { .. })
                || load.concurrency.is_some()
                || !load.stages.is_empty()
            {
                return Err(at.error(
                    Some(raw.span()),
                    Some("replay"),
                    "timing = \"recorded\" sends each request at its captured time: drop load.rate, load.concurrency and load.stages (speed sets the pace)",
                ));
            }
        }
        let calls = self.calls(at, replay.as_ref(), &scope)?;
        let batch = self.batch(at)?;
        let setup = self.setup_calls(at, &target)?;
        let thresholds = match &self.thresholds {
            Some(raw) => raw.parse(at)?,
            None => Vec::new(),
        };
        let thresholds_at = self.thresholds.as_ref().map(|t| t.checks.span());
        let version = self.version(at)?;
        let equality = self.equality.as_ref().map(|e| e.validate(at)).transpose()?;
        let mut replay = replay;
        if let (Some(replay), Some(equality)) = (&mut replay, &equality) {
            replay.rules.clone_from(&equality.rules);
        }
        let abort_on_fail = self.abort_on_fail(at)?;

        let scenario = Scenario {
            name: self.name.unwrap_or_else(|| default_name.to_string()),
            file: None,
            description: self.description,
            target,
            targets,
            equality,
            headers,
            timeout,
            max_response_bytes: crate::transport::DEFAULT_MAX_RESPONSE_BYTES,
            http2: self.http2,
            version,
            tls,
            server_answers: server_answers(&self.server_requests),
            seed: self.seed,
            shard: None,
            start_at: None,
            observe: Vec::new(),
            load,
            calls,
            batch,
            replay,
            setup,
            polls,
            polled,
            thresholds,
            abort_on_fail,
        };
        let protocol_at = self.protocol.as_ref().map(Spanned::span);
        scenario
            .check_version()
            .map_err(|m| at.error(protocol_at, Some("protocol"), m))?;
        // A method or stage the run will not have is named now, not judged
        // a failure at the end.
        scenario
            .check_thresholds()
            .map_err(|m| at.error(thresholds_at, Some("thresholds.checks"), m))?;
        Ok(scenario)
    }

    /// The JSON-RPC the calls are written in, 2.0 unless `protocol` says.
    fn version(&self, at: &Locator) -> Result<crate::rpc::Version, ScenarioError> {
        match &self.protocol {
            None => Ok(Default::default()),
            Some(text) => crate::rpc::Version::parse(text.get_ref()).ok_or_else(|| {
                at.error(
                    Some(text.span()),
                    Some("protocol"),
                    format!(
                        "`{}` is not a JSON-RPC version volley speaks: \"2.0\" or \"1.0\"",
                        text.get_ref()
                    ),
                )
            }),
        }
    }

    /// The call timeout, default if none is given.
    fn timeout(&self, at: &Locator) -> Result<std::time::Duration, ScenarioError> {
        let timeout = self
            .timeout
            .as_ref()
            .map(|t| duration(at, t))
            .transpose()?
            .unwrap_or(DEFAULT_TIMEOUT);
        super::load::check_timeout(timeout)
            .map_err(|m| at.error(self.timeout.as_ref().map(|t| t.span()), None, m))?;
        Ok(timeout)
    }

    /// The headers, `${VAR}`s filled in from `env`.
    fn headers(
        &self,
        at: &Locator,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, ScenarioError> {
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            let key = format!("headers.{name}");
            let resolved = interpolate(value.get_ref(), env)
                .and_then(|resolved| crate::transport::check_header(name, &resolved).map(|()| resolved))
                .map_err(|m| at.error(Some(value.span()), Some(&key), m))?;
            headers.push((name.clone(), resolved));
        }
        Ok(headers)
    }

    /// `[poll.NAME]`: calls made every `every`, each feeding a named value.
    fn polls(&self, at: &Locator) -> Result<Vec<PollSpec>, ScenarioError> {
        let mut polls = Vec::new();
        for (name, poll) in &self.poll {
            let key = |k: &str| format!("poll.{name}.{k}");
            let every = poll
                .every
                .as_ref()
                .map(|e| duration(at, e))
                .transpose()?
                .unwrap_or(std::time::Duration::from_secs(2));
            if every.is_zero() {
                return Err(at.error(
                    poll.every.as_ref().map(|e| e.span()),
                    Some(&key("every")),
                    "must be above zero",
                ));
            }
            polls.push(PollSpec {
                name: name.clone(),
                method: poll.method.get_ref().clone(),
                params: fixed_params(at, poll.params.as_ref(), &key("params"))?,
                every,
            });
        }
        Ok(polls)
    }

    /// The `[[calls]]`: needed unless a `replay` file gives the requests.
    fn calls(
        &self,
        at: &Locator,
        replay: Option<&super::Replay>,
        scope: &Scope,
    ) -> Result<Vec<CallSpec>, ScenarioError> {
        let calls = match (&self.calls, replay) {
            (Some(calls), Some(_)) => {
                return Err(at.error(
                    Some(calls.span()),
                    Some("calls"),
                    "give either [[calls]] or `replay`, not both",
                ))
            }
            (None, None) => {
                return Err(at.error(
                    None,
                    Some("calls"),
                    "at least one [[calls]] (or a `replay` file) is needed",
                ))
            }
            (None, Some(_)) => Vec::new(),
            (Some(calls), None) if calls.get_ref().is_empty() => {
                return Err(at.error(Some(calls.span()), Some("calls"), "at least one call is needed"))
            }
            (Some(calls), None) => {
                let specs: Vec<CallSpec> = calls
                    .get_ref()
                    .iter()
                    .enumerate()
                    .map(|(i, c)| c.validate(at, i, scope))
                    .collect::<Result<_, _>>()?;
                check_weight_sum(at, calls.get_ref(), &specs)?;
                specs
            }
        };
        Ok(calls)
    }

    /// `[batch]`: every request a batch drawn from the mix.
    fn batch(&self, at: &Locator) -> Result<Option<BatchSpec>, ScenarioError> {
        let batch = match &self.batch {
            Some(batch) => {
                let notifications = match &batch.notifications {
                    Some(share) if (0.0..=1.0).contains(share.get_ref()) => *share.get_ref(),
                    Some(share) => {
                        return Err(at.error(
                            Some(share.span()),
                            Some("batch.notifications"),
                            "must be a share between 0 and 1",
                        ))
                    }
                    None => 0.0,
                };
                Some(BatchSpec {
                    size: batch_size(at, &batch.size, "batch.size")?,
                    notifications,
                })
            }
            None => None,
        };
        Ok(batch)
    }

    /// How long into the run a failed threshold may stop it, if it may.
    fn abort_on_fail(&self, at: &Locator) -> Result<Option<std::time::Duration>, ScenarioError> {
        let abort_on_fail = match &self.thresholds {
            Some(raw) if raw.abort_on_fail => Some(match &raw.abort_grace {
                Some(grace) => duration(at, grace)?,
                None => super::DEFAULT_ABORT_GRACE,
            }),
            Some(RawThresholds {
                abort_grace: Some(grace),
                ..
            }) => {
                return Err(at.error(
                    Some(grace.span()),
                    Some("thresholds.abort_grace"),
                    "abort_grace goes with `abort_on_fail = true`",
                ))
            }
            _ => None,
        };
        Ok(abort_on_fail)
    }

    /// `targets`, each named (by its URL where no name is given), the
    /// names unique; empty when the file has one `target` or `command`.
    fn targets(&self, at: &Locator) -> Result<Vec<NamedTarget>, ScenarioError> {
        let Some(raw) = &self.targets else {
            return Ok(Vec::new());
        };
        let error = |key: Option<String>, message: &str| {
            at.error(Some(raw.span()), key.as_deref(), message.to_string())
        };
        if self.target.is_some() || self.command.is_some() {
            return Err(error(
                Some("targets".into()),
                "give `targets` (several to compare) or `target`/`command` (one), not both",
            ));
        }
        if raw.get_ref().is_empty() {
            return Err(error(
                Some("targets".into()),
                "no target: give at least one `{ url = \"...\" }`",
            ));
        }
        let urls: Vec<String> = raw.get_ref().iter().map(|t| t.url.trim().to_string()).collect();
        if let Some(i) = urls.iter().position(String::is_empty) {
            return Err(error(
                Some(format!("targets[{i}].url")),
                "the URL is empty: give a URL or \"builtin\"",
            ));
        }
        let mut named = NamedTarget::from_urls(&urls);
        if let Some((i, m)) = named
            .iter()
            .enumerate()
            .find_map(|(i, t)| t.spec.check().err().map(|m| (i, m)))
        {
            return Err(error(Some(format!("targets[{i}].url")), &m));
        }
        for (target, written) in named.iter_mut().zip(raw.get_ref()) {
            if let Some(name) = written.name.as_deref().map(str::trim) {
                target.name = name.to_string();
            }
        }
        for (i, target) in named.iter().enumerate() {
            let valid = !target.name.is_empty()
                && !target.name.starts_with('.')
                && !target
                    .name
                    .contains(|c: char| c.is_control() || "/\\,".contains(c));
            if !valid {
                return Err(error(
                    Some(format!("targets[{i}].name")),
                    "a name is needed (it names a results directory): no `/`, `\\`, `,`, control characters or leading `.`",
                ));
            }
            if named[..i].iter().any(|t| t.name == target.name) {
                return Err(error(
                    Some(format!("targets[{i}].name")),
                    &format!("`{}` names two targets", target.name),
                ));
            }
        }
        Ok(named)
    }

    fn target(&self, at: &Locator) -> Result<TargetSpec, ScenarioError> {
        match (&self.target, &self.command) {
            (Some(target), None) => {
                if self.framing.is_some() {
                    return Err(at.error(
                        self.framing.as_ref().map(|f| f.span()),
                        None,
                        "`framing` goes with `command`",
                    ));
                }
                if target.get_ref().trim().is_empty() {
                    return Err(at.error(
                        Some(target.span()),
                        None,
                        "target is empty: give a URL or \"builtin\"",
                    ));
                }
                let spec = TargetSpec::parse(target.get_ref().trim());
                // A `--target` flag (no place in the file) is checked when it runs.
                if target.span() != (0..0) {
                    spec.check()
                        .map_err(|m| at.error(Some(target.span()), Some("target"), m))?;
                }
                Ok(spec)
            }
            (None, Some(command)) => {
                let Some(program) = command.get_ref().first() else {
                    return Err(at.error(Some(command.span()), None, "command is empty"));
                };
                if !is_installed(program) {
                    return Err(at.error(
                        Some(command.span()),
                        Some("command"),
                        format!("`{program}` is not installed: no such program on PATH (install it, or point `command` at another server)"),
                    ));
                }
                let framing = match self.framing.as_ref().map(|f| (f.get_ref().as_str(), f.span())) {
                    Some(("content-length", _)) => Framing::ContentLength,
                    Some(("ndjson", _)) | None => Framing::Ndjson,
                    Some((_, span)) => {
                        return Err(at.error(
                            Some(span),
                            None,
                            "framing must be \"content-length\" (LSP) or \"ndjson\" (MCP)",
                        ))
                    }
                };
                Ok(TargetSpec::Command {
                    argv: command.get_ref().clone(),
                    framing,
                })
            }
            (Some(target), Some(_)) => Err(at.error(
                Some(target.span()),
                None,
                "give either `target` (a URL) or `command` (a child process), not both",
            )),
            (None, None) => Err(at.error(
                None,
                Some("target"),
                "a target is needed: a URL, \"builtin\", or `command = [...]`",
            )),
        }
    }
}

impl RawScenario {
    /// The calls sent on every new connection: `[[setup]]`, then the
    /// `[[subscribe]]` entries, which need a connection the server can
    /// write to at will.
    fn setup_calls(&self, at: &Locator, target: &TargetSpec) -> Result<Vec<SetupCall>, ScenarioError> {
        let mut setup = Vec::new();
        for (i, s) in self.setup.iter().enumerate() {
            setup.push(SetupCall {
                method: s.method.get_ref().clone(),
                params: fixed_params(at, s.params.as_ref(), &format!("setup[{i}].params"))?,
                notification: s.notification,
                subscribe: false,
            });
        }
        let pushes = match target {
            TargetSpec::Command { .. } => true,
            TargetSpec::Url(url) => crate::transport::is_multiplexed(url),
            TargetSpec::Builtin => false,
        };
        for (i, s) in self.subscribe.iter().enumerate() {
            if !pushes {
                return Err(at.error(
                    Some(s.method.span()),
                    Some(&format!("subscribe[{i}]")),
                    "subscriptions need a connection the server can write to at will: a ws://, wss://, tcp:// or unix:// target, or a command",
                ));
            }
            setup.push(SetupCall {
                method: s.method.get_ref().clone(),
                params: fixed_params(at, s.params.as_ref(), &format!("subscribe[{i}].params"))?,
                notification: false,
                subscribe: true,
            });
        }
        Ok(setup)
    }
}

impl RawTls {
    /// The options, paths taken from the file's folder, each file read as
    /// a run will read it: an error points at its key.
    fn options(self, at: &Locator, base_dir: &Path) -> Result<TlsOptions, ScenarioError> {
        let path = |p: &Option<Spanned<PathBuf>>| p.as_ref().map(|p| base_dir.join(p.get_ref()));
        let options = TlsOptions {
            cacert: path(&self.cacert),
            system_roots: self.system_roots,
            insecure: self.insecure,
            cert: path(&self.cert),
            key: path(&self.key),
        };
        crate::tls::check_files(&options).map_err(|(key, message)| {
            let value = match key {
                "cacert" => &self.cacert,
                "cert" => &self.cert,
                _ => &self.key,
            };
            at.error(
                value.as_ref().map(|v| v.span()),
                Some(&format!("tls.{key}")),
                message,
            )
        })?;
        Ok(options)
    }
}

/// `[server_requests]`: `default = result`, and `"method" = result`.
fn server_answers(table: &BTreeMap<String, Value>) -> crate::transport::ServerAnswers {
    let mut answers = crate::transport::ServerAnswers::default();
    for (method, result) in table {
        if method == "default" {
            answers.default = result.to_string();
        } else {
            answers.by_method.push((method.clone(), result.to_string()));
        }
    }
    answers
}

impl RawCall {
    fn validate(&self, at: &Locator, index: usize, scope: &Scope) -> Result<CallSpec, ScenarioError> {
        let key = |name: &str| format!("calls[{index}].{name}");
        if self.method.get_ref().is_empty() {
            return Err(at.error(Some(self.method.span()), Some(&key("method")), "method is empty"));
        }
        let weight = match &self.weight {
            Some(w) => match u32::try_from(*w.get_ref()) {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(at.error(
                        Some(w.span()),
                        Some(&key("weight")),
                        format!(
                            "weight must be a whole number of at least 1 (and at most {})",
                            u32::MAX
                        ),
                    ))
                }
            },
            None => 1,
        };
        let batch = self
            .batch
            .as_ref()
            .map(|b| batch_size(at, b, &key("batch")))
            .transpose()?;
        let (params, template) = match &self.params {
            Some(p)
                if p.get_ref().is_array() || p.get_ref().is_object() || whole_params_file(p.get_ref()) =>
            {
                let template = Template::compile(p.get_ref(), scope)
                    .map_err(|m| at.error(Some(p.span()), Some(&key("params")), m))?;
                (Some(p.get_ref().clone()), Some(Arc::new(template)))
            }
            Some(p) => {
                return Err(at.error(
                    Some(p.span()),
                    Some(&key("params")),
                    "params must be an array (by position) or a table (by name)",
                ))
            }
            None => (None, None),
        };
        let expect = self
            .expect
            .as_ref()
            .map(|e| expectation(at, e, &key("expect")))
            .transpose()?;
        if expect.is_some() && self.notification {
            let span = self.expect.as_ref().map(|e| e.span());
            return Err(at.error(
                span,
                Some(&key("expect")),
                "a notification gets no answer to check",
            ));
        }
        Ok(CallSpec {
            method: self.method.get_ref().clone(),
            weight,
            params,
            template,
            batch,
            notification: self.notification,
            expect,
        })
    }
}

/// The mix draws from its weights' sum in 32 bits: a sum past u32::MAX is
/// refused, naming the call whose weight passes it, instead of wrapping
/// (which starved some calls of their share while `validate` showed
/// shares adding up to more than 100%).
fn check_weight_sum(at: &Locator, raw: &[RawCall], calls: &[CallSpec]) -> Result<(), ScenarioError> {
    let mut sum: u32 = 0;
    for (index, (raw, call)) in raw.iter().zip(calls).enumerate() {
        sum = sum.checked_add(call.weight).ok_or_else(|| {
            let span = raw.weight.as_ref().map_or_else(|| raw.method.span(), |w| w.span());
            at.error(
                Some(span),
                Some(&format!("calls[{index}].weight")),
                format!(
                    "the weights of calls[0] to calls[{index}] add up to more than {}, the most the mix can draw from; scale them down (only their ratios matter)",
                    u32::MAX
                ),
            )
        })?;
    }
    Ok(())
}

fn batch_size(at: &Locator, raw: &Spanned<RawBatchSize>, key: &str) -> Result<BatchSize, ScenarioError> {
    let bad = |message: String| at.error(Some(raw.span()), Some(key), message);
    let check = |n: i64| {
        if (1..=MAX_BATCH).contains(&n) {
            Ok(n as u32)
        } else {
            Err(bad(format!(
                "batch sizes must be between 1 and {MAX_BATCH}, not {n}"
            )))
        }
    };
    match raw.get_ref() {
        RawBatchSize::Fixed(n) => Ok(BatchSize::Fixed(check(*n)?)),
        RawBatchSize::Range { min, max } => {
            let (min, max) = (check(*min)?, check(*max)?);
            if max < min {
                return Err(bad(format!("the range {min}..{max} is empty")));
            }
            Ok(BatchSize::Uniform(min, max))
        }
        RawBatchSize::Table { sizes } => {
            let mut table = Vec::new();
            // Drawn from in 32 bits, as the calls' weights are.
            let mut sum: u32 = 0;
            for (size, weight) in sizes {
                let size = size
                    .parse::<i64>()
                    .map_err(|_| bad(format!("`{size}` is not a batch size")))?;
                let weight = u32::try_from(*weight)
                    .ok()
                    .filter(|w| *w > 0)
                    .ok_or_else(|| bad(format!("weights must be between 1 and {}", u32::MAX)))?;
                sum = sum.checked_add(weight).ok_or_else(|| {
                    bad(format!(
                        "the sizes' weights add up to more than {}, the most a batch size can be drawn from; scale them down (only their ratios matter)",
                        u32::MAX
                    ))
                })?;
                table.push((check(size)?, weight));
            }
            if table.is_empty() {
                return Err(bad("the sizes table is empty".into()));
            }
            Ok(BatchSize::weighted(table))
        }
    }
}

/// `params = "${file('eth_call.jsonl')}"`: each call's whole params, an
/// array or object a line of a JSON-lines file (as `volley init
/// --from-capture` writes them).
fn whole_params_file(value: &Value) -> bool {
    value.as_str().is_some_and(|text| {
        let text = text.trim();
        text.starts_with("${file(")
            && text.ends_with(")}")
            && (text.contains(".jsonl") || text.contains(".ndjson"))
            && text.matches("${").count() == 1
    })
}

fn fixed_params(
    at: &Locator,
    params: Option<&Spanned<Value>>,
    key: &str,
) -> Result<Option<Value>, ScenarioError> {
    match params {
        Some(p) if p.get_ref().is_array() || p.get_ref().is_object() => Ok(Some(p.get_ref().clone())),
        Some(p) => Err(at.error(
            Some(p.span()),
            Some(key),
            "params must be an array (by position) or a table (by name)",
        )),
        None => Ok(None),
    }
}
