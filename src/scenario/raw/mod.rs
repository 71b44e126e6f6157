//! The file as written (with spans), and its validation into a `Scenario`:
//! the top-level keys and the glue here, each section in a file of its own
//! (`[load]`, `[equality]`, `replay` and `expect` in `scenario/`, with the
//! rest of what reads them).

mod batch;
mod calls;
mod flows;
mod headers;
mod path_search;
mod poll;
mod race;
mod ready;
mod server_requests;
mod setup;
mod target;
mod thresholds;
mod tls;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::error::{Locator, ScenarioError};
use super::replay::{replay, RawReplay};
use super::{parse_duration, Load, Polled, Replay, Scenario, DEFAULT_TIMEOUT};
use crate::plan::Scope;
use crate::tls::TlsOptions;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    target: Option<Spanned<String>>,
    /// Targets to compare: `[{ name = "geth", url = "http://..." }, ...]`.
    targets: Option<Spanned<Vec<target::RawTarget>>>,
    command: Option<Spanned<Vec<String>>>,
    framing: Option<Spanned<String>>,
    #[serde(default)]
    http2: bool,
    /// HTTP/1.1 requests in flight at once on a connection.
    pipeline: Option<Spanned<i64>>,
    /// `"2.0"` (the default) or `"1.0"`.
    protocol: Option<Spanned<String>>,
    tls: Option<tls::RawTls>,
    /// `[server_requests]`: method = result, and `default = result`.
    #[serde(default)]
    server_requests: BTreeMap<String, Value>,
    /// `[ready]`: a stdio server's ready signal.
    ready: Option<ready::RawReady>,
    timeout: Option<Spanned<String>>,
    seed: Option<u64>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    /// A file of 32 bytes in hex: every request carries a fresh JWT.
    jwt_secret: Option<Spanned<String>>,
    #[serde(default)]
    load: super::load::RawLoad,
    calls: Option<Spanned<Vec<calls::RawCall>>>,
    flows: Option<Spanned<Vec<flows::RawFlow>>>,
    batch: Option<batch::RawBatchMix>,
    replay: Option<Spanned<RawReplay>>,
    #[serde(default)]
    setup: Vec<setup::RawSetup>,
    #[serde(default)]
    subscribe: Vec<setup::RawSubscribe>,
    #[serde(default)]
    poll: BTreeMap<String, poll::RawPoll>,
    thresholds: Option<thresholds::RawThresholds>,
    equality: Option<super::equality::RawEquality>,
    /// An OTLP/HTTP collector's base URL: the run's metrics are pushed there.
    otlp: Option<Spanned<String>>,
}

/// Messages serde gives for untagged enums say nothing useful; these do.
const SHAPES: [(&str, &str); 4] = [
    ("RawBatchSize", "batch size must be a number (10), a range ({ min = 1, max = 20 }) or a weighted table ({ sizes = { 1 = 50, 10 = 30 } })"),
    ("RawReplay", "replay must be a file path, or { file = \"x.jsonl\", on_end = \"loop\" | \"stop\", timing = \"recorded\", speed = 2.0, expect = \"recorded\", connections = \"recorded\" }"),
    ("RawCodes", "expect.error must be a code (-32601), a list of codes, or \"any\""),
    ("RawCapture", "a capture is a JSON pointer (\"/transactions/*\") or { pointer = \"/transactions/*\", pick = \"first\" | \"random\" | \"all\", optional = true }"),
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
                format!("--target {} cannot replace this `command`: its `framing = \"content-length\"` (LSP) is spoken only over a child's stdio; run the file without --target", crate::redact::url(target)),
            ));
        }
        raw.target = Some(Spanned::new(0..0, target.to_string()));
        raw.targets = None;
        raw.command = None;
        raw.framing = None;
        // A URL has no child to wait for.
        raw.ready = None;
    }
    raw.validate(at, base_dir, default_name, env)
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
        let headers = self.headers(at, env, base_dir)?;
        let jwt_secret = self.jwt_secret(at, base_dir)?;
        let tls = match self.tls.take() {
            Some(raw) => raw.options(at, base_dir)?,
            None => TlsOptions::default(),
        };
        let load = self.load.validate(at)?;

        let polled = Arc::new(Polled::new(self.poll.keys().cloned().collect()));
        let scope = Scope {
            base_dir,
            polled: &polled,
            vars: &[],
        };
        let polls = self.polls(at)?;

        let mut replay = self.replay(at, base_dir, &load)?;
        let calls = self.calls(at, replay.as_ref(), &scope)?;
        let flows = self.flows(at, &scope)?;
        self.check_flow_weights(at, &calls, &flows)?;
        let batch = self.batch(at)?;
        let setup = self.setup_calls(at, &target)?;
        let race = self.race(at)?;
        let ready = self.ready(at)?;
        let thresholds = self.thresholds(at)?;
        let version = self.version(at)?;
        let equality = self.equality.as_ref().map(|e| e.validate(at)).transpose()?;
        if let (Some(replay), Some(equality)) = (&mut replay, &equality) {
            replay.rules = equality.all_rules();
        }
        let abort_on_fail = self.abort_on_fail(at)?;
        let otlp = (self.otlp.as_ref())
            .map(|url| {
                super::OtlpEndpoint::parse(url.get_ref())
                    .map_err(|m| at.error(Some(url.span()), Some("otlp"), m))
            })
            .transpose()?;
        let pipeline_at = self.pipeline.as_ref().map(Spanned::span);
        let pipeline = (self.pipeline.as_ref())
            .map(|p| super::pipeline::check_depth(*p.get_ref()))
            .transpose()
            .map_err(|m| at.error(pipeline_at.clone(), Some("pipeline"), m))?;
        let protocol_at = self.protocol.as_ref().map(Spanned::span);
        let thresholds_at = self.thresholds_at();
        let jwt_at = self.jwt_secret_at();

        let mut scenario = Scenario {
            name: self.name.unwrap_or_else(|| default_name.to_string()),
            file: None,
            description: self.description,
            target,
            targets,
            equality,
            headers: Vec::new(),
            made_headers: Vec::new(),
            jwt_secret,
            timeout,
            max_response_bytes: crate::transport::DEFAULT_MAX_RESPONSE_BYTES,
            http2: self.http2,
            pipeline: pipeline.unwrap_or(1),
            version,
            tls,
            server_answers: server_requests::server_answers(&self.server_requests),
            ready,
            seed: self.seed,
            shard: None,
            start_at: None,
            observe: Vec::new(),
            load,
            calls,
            flows,
            batch,
            replay,
            setup,
            polls,
            polled,
            race,
            thresholds,
            abort_on_fail,
            otlp,
        };
        for (name, value) in headers {
            scenario.set_header(name, value);
        }
        scenario
            .check_jwt()
            .map_err(|m| at.error(jwt_at.clone(), Some("jwt_secret"), m))?;
        if let Some(refusal) = scenario.pipeline_refusal() {
            return Err(at.error(pipeline_at, Some("pipeline"), refusal));
        }
        checked_whole(at, scenario, protocol_at, thresholds_at)
    }

    /// The `replay` file's requests, if one is given. Recorded timing sets
    /// the pace itself, so it cannot go with a load model's.
    fn replay(&self, at: &Locator, base_dir: &Path, load: &Load) -> Result<Option<Replay>, ScenarioError> {
        let Some(raw) = &self.replay else {
            return Ok(None);
        };
        let replay = replay(at, base_dir, raw)?;
        if replay.times.is_some()
            && (load.pacing.is_open() || load.concurrency.is_some() || !load.stages.is_empty())
        {
            return Err(at.error(
                Some(raw.span()),
                Some("replay"),
                "timing = \"recorded\" sends each request at its captured time: drop load.rate, load.concurrency and load.stages (speed sets the pace)",
            ));
        }
        Ok(Some(replay))
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
}

/// The checks that need the whole scenario, each error pointing at the
/// key it names.
fn checked_whole(
    at: &Locator,
    scenario: Scenario,
    protocol_at: Option<Range<usize>>,
    thresholds_at: Option<Range<usize>>,
) -> Result<Scenario, ScenarioError> {
    scenario
        .check_version()
        .map_err(|m| at.error(protocol_at, Some("protocol"), m))?;
    // A method or stage the run will not have is named now, not judged a
    // failure at the end.
    scenario
        .check_thresholds()
        .map_err(|m| at.error(thresholds_at, Some("thresholds.checks"), m))?;
    Ok(scenario)
}
