//! Scenario files: TOML in, a validated scenario out. Nothing is sent until
//! the whole file is valid, and every mistake names its file, line, column
//! and key.

mod error;

pub use error::{Located, ScenarioError};

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use crate::engine::Pacing;
use error::Locator;

/// A checked scenario, with command-line overrides applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub target: TargetSpec,
    /// Header names and values, `${VAR}` already replaced.
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    pub seed: Option<u64>,
    pub load: Load,
    pub calls: Vec<CallSpec>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    /// Start the built-in server in-process on a free loopback port.
    Builtin,
    Url(String),
}

impl std::fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetSpec::Builtin => f.write_str("builtin"),
            TargetSpec::Url(url) => f.write_str(url),
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
    pub threads: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CallSpec {
    pub method: String,
    pub weight: u32,
    pub params: Option<Value>,
    pub batch: Option<u32>,
    pub notification: bool,
}

pub const DEFAULT_CONCURRENCY: u64 = 16;
/// Open-model connections when none are given: enough for a few thousand
/// calls/s at millisecond latencies.
pub const DEFAULT_OPEN_CONNECTIONS: u64 = 64;
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_BATCH: i64 = 100_000;

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let default_name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario");
        Scenario::parse(&text, &path.display().to_string(), default_name, &|name| {
            std::env::var(name).ok()
        })
    }

    /// Parses scenario `text`; `file` names it in errors, `env` looks up
    /// `${VAR}` references.
    pub fn parse(
        text: &str,
        file: &str,
        default_name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Scenario, ScenarioError> {
        let locator = Locator { file, text };
        let raw: RawScenario =
            toml::from_str(text).map_err(|e| locator.error(e.span(), None, e.message().to_string()))?;
        raw.validate(&locator, default_name, env)
    }

    /// A scenario with one method and no file, for quick runs.
    pub fn one_liner(target: &str, method: &str, params: Option<Value>) -> Scenario {
        Scenario {
            name: method.to_string(),
            target: parse_target(target),
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            seed: None,
            load: Load {
                pacing: Pacing::Closed,
                concurrency: None,
                connections: None,
                duration: None,
                requests: None,
                warmup: Duration::ZERO,
                threads: None,
            },
            calls: vec![CallSpec {
                method: method.to_string(),
                weight: 1,
                params,
                batch: None,
                notification: false,
            }],
        }
    }
}

fn parse_target(target: &str) -> TargetSpec {
    if target == "builtin" {
        TargetSpec::Builtin
    } else {
        TargetSpec::Url(target.to_string())
    }
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. \"30s\", \"500ms\" or \"2m\""))
}

/// Replaces every `${NAME}` with the variable's value; `$${` stays a literal `${`.
pub fn interpolate(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let end = after
                .find('}')
                .ok_or_else(|| format!("`{value}`: `${{` without a closing `}}`"))?;
            let name = &after[..end];
            let found = env(name).ok_or_else(|| format!("environment variable `{name}` is not set"))?;
            out.push_str(&found);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    target: Spanned<String>,
    timeout: Option<Spanned<String>>,
    seed: Option<u64>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    load: RawLoad,
    calls: Spanned<Vec<RawCall>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    concurrency: Option<Spanned<i64>>,
    rate: Option<Spanned<f64>>,
    duration: Option<Spanned<String>>,
    requests: Option<Spanned<i64>>,
    connections: Option<Spanned<i64>>,
    warmup: Option<Spanned<String>>,
    threads: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    method: Spanned<String>,
    weight: Option<Spanned<i64>>,
    params: Option<Spanned<Value>>,
    batch: Option<Spanned<i64>>,
    #[serde(default)]
    notification: bool,
}

impl RawScenario {
    fn validate(
        self,
        at: &Locator,
        default_name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Scenario, ScenarioError> {
        let duration = |value: &Spanned<String>| {
            parse_duration(value.get_ref()).map_err(|m| at.error(Some(value.span()), None, m))
        };
        let positive = |value: &Spanned<i64>, what: &str| match u64::try_from(*value.get_ref()) {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(at.error(Some(value.span()), None, format!("{what} must be at least 1"))),
        };

        if self.target.get_ref().trim().is_empty() {
            return Err(at.error(
                Some(self.target.span()),
                None,
                "target is empty: give a URL or \"builtin\"",
            ));
        }
        let timeout = self
            .timeout
            .as_ref()
            .map(duration)
            .transpose()?
            .unwrap_or(DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            let span = self.timeout.as_ref().map(|t| t.span());
            return Err(at.error(span, None, "timeout must be above zero"));
        }
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            let resolved = interpolate(value.get_ref(), env)
                .map_err(|m| at.error(Some(value.span()), Some(&format!("headers.{name}")), m))?;
            headers.push((name.clone(), resolved));
        }

        let load = &self.load;
        let pacing = match (&load.rate, &load.concurrency) {
            (Some(rate), Some(_)) => {
                return Err(at.error(
                    Some(rate.span()),
                    None,
                    "give either `rate` (open model) or `concurrency` (closed model), not both",
                ))
            }
            (Some(rate), None) => {
                let value = *rate.get_ref();
                if !(value.is_finite() && value > 0.0) {
                    return Err(at.error(
                        Some(rate.span()),
                        None,
                        "rate must be above zero calls per second",
                    ));
                }
                Pacing::Open { rate: value }
            }
            (None, _) => Pacing::Closed,
        };
        let load = Load {
            pacing,
            concurrency: load
                .concurrency
                .as_ref()
                .map(|c| positive(c, "concurrency"))
                .transpose()?,
            connections: load
                .connections
                .as_ref()
                .map(|c| positive(c, "connections"))
                .transpose()?,
            duration: load.duration.as_ref().map(duration).transpose()?,
            requests: load
                .requests
                .as_ref()
                .map(|r| positive(r, "requests"))
                .transpose()?,
            warmup: load
                .warmup
                .as_ref()
                .map(duration)
                .transpose()?
                .unwrap_or_default(),
            threads: load
                .threads
                .as_ref()
                .map(|t| positive(t, "threads"))
                .transpose()?,
        };
        if load.duration.is_some_and(|d| d.is_zero()) {
            let span = self.load.duration.as_ref().map(|d| d.span());
            return Err(at.error(span, None, "duration must be above zero"));
        }

        if self.calls.get_ref().is_empty() {
            return Err(at.error(
                Some(self.calls.span()),
                Some("calls"),
                "at least one call is needed",
            ));
        }
        let mut calls = Vec::new();
        for (index, call) in self.calls.into_inner().into_iter().enumerate() {
            let key = |name: &str| format!("calls[{index}].{name}");
            if call.method.get_ref().is_empty() {
                return Err(at.error(Some(call.method.span()), Some(&key("method")), "method is empty"));
            }
            let weight = match &call.weight {
                Some(w) => match u32::try_from(*w.get_ref()) {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return Err(at.error(
                            Some(w.span()),
                            Some(&key("weight")),
                            "weight must be a whole number of at least 1",
                        ))
                    }
                },
                None => 1,
            };
            let batch = match &call.batch {
                Some(b) if (1..=MAX_BATCH).contains(b.get_ref()) => Some(*b.get_ref() as u32),
                Some(b) => {
                    return Err(at.error(
                        Some(b.span()),
                        Some(&key("batch")),
                        format!("batch must be between 1 and {MAX_BATCH}"),
                    ))
                }
                None => None,
            };
            let params = match call.params {
                Some(p) if p.get_ref().is_array() || p.get_ref().is_object() => Some(p.into_inner()),
                Some(p) => {
                    return Err(at.error(
                        Some(p.span()),
                        Some(&key("params")),
                        "params must be an array (by position) or a table (by name)",
                    ))
                }
                None => None,
            };
            calls.push(CallSpec {
                method: call.method.into_inner(),
                weight,
                params,
                batch,
                notification: call.notification,
            });
        }
        Ok(Scenario {
            name: self.name.unwrap_or_else(|| default_name.to_string()),
            target: parse_target(self.target.get_ref().trim()),
            headers,
            timeout,
            seed: self.seed,
            load,
            calls,
        })
    }
}

#[cfg(test)]
mod tests;
