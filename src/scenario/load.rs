//! The `[load]` table: models, sizes, durations and stages, checked.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{Locator, ScenarioError};
use super::raw::{duration, positive};
use super::Load;
use crate::plan::{Pacing, Stage};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoad {
    concurrency: Option<Spanned<i64>>,
    rate: Option<Spanned<f64>>,
    duration: Option<Spanned<String>>,
    requests: Option<Spanned<i64>>,
    connections: Option<Spanned<i64>>,
    warmup: Option<Spanned<String>>,
    grace: Option<Spanned<String>>,
    threads: Option<Spanned<i64>>,
    max_in_flight: Option<Spanned<i64>>,
    stages: Option<Spanned<Vec<RawStage>>>,
    reconnect_every: Option<Spanned<i64>>,
    max_flows: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStage {
    duration: Spanned<String>,
    rate: Option<Spanned<f64>>,
    concurrency: Option<Spanned<i64>>,
}

impl RawLoad {
    pub(super) fn validate(&self, at: &Locator) -> Result<Load, ScenarioError> {
        let mut pacing = self.pacing(at)?;
        let stages = self.stages(at, &mut pacing)?;
        let load = Load {
            pacing,
            concurrency: self
                .concurrency
                .as_ref()
                .map(|c| positive(at, c, "concurrency"))
                .transpose()?,
            connections: self
                .connections
                .as_ref()
                .map(|c| positive(at, c, "connections"))
                .transpose()?,
            max_in_flight: self
                .max_in_flight
                .as_ref()
                .map(|m| positive(at, m, "max_in_flight"))
                .transpose()?,
            duration: self.duration.as_ref().map(|d| duration(at, d)).transpose()?,
            requests: self
                .requests
                .as_ref()
                .map(|r| positive(at, r, "requests"))
                .transpose()?,
            warmup: self
                .warmup
                .as_ref()
                .map(|w| duration(at, w))
                .transpose()?
                .unwrap_or_default(),
            grace: self.grace.as_ref().map(|g| duration(at, g)).transpose()?,
            threads: self
                .threads
                .as_ref()
                .map(|t| positive(at, t, "threads"))
                .transpose()?,
            stages,
            reconnect_every: self
                .reconnect_every
                .as_ref()
                .map(|n| positive(at, n, "reconnect_every"))
                .transpose()?,
            max_flows: (self.max_flows.as_ref())
                .map(|n| positive(at, n, "max_flows"))
                .transpose()?,
        };
        if let Some(length) = load.duration {
            check_duration(length)
                .map_err(|m| at.error(self.duration.as_ref().map(|d| d.span()), None, m))?;
        }
        Ok(load)
    }

    /// The model: open with `rate`, else closed.
    fn pacing(&self, at: &Locator) -> Result<Pacing, ScenarioError> {
        let pacing = match (&self.rate, &self.concurrency) {
            (Some(rate), Some(_)) => {
                return Err(at.error(
                    Some(rate.span()),
                    None,
                    "give either `rate` (open model) or `concurrency` (closed model), not both",
                ))
            }
            (Some(rate), None) => Pacing::Open {
                rate: positive_rate(at, rate)?,
            },
            (None, _) => Pacing::Closed,
        };
        Ok(pacing)
    }

    /// `[[load.stages]]`: an open first stage makes a plan without `rate`
    /// open, so `pacing` may change.
    fn stages(&self, at: &Locator, pacing: &mut Pacing) -> Result<Vec<Stage>, ScenarioError> {
        let mut stages = Vec::new();
        if let Some(raw) = &self.stages {
            if raw.get_ref().is_empty() {
                return Err(at.error(Some(raw.span()), Some("load.stages"), "stages is empty"));
            }
            if let Some(d) = &self.duration {
                return Err(at.error(
                    Some(d.span()),
                    None,
                    "with stages, the duration is the sum of the stages': remove `duration`",
                ));
            }
            for (i, stage) in raw.get_ref().iter().enumerate() {
                let key = format!("load.stages[{i}]");
                let (open, target) = match (&stage.rate, &stage.concurrency) {
                    (Some(rate), None) => (true, positive_rate(at, rate)?),
                    (None, Some(c)) => (false, positive(at, c, "concurrency")? as f64),
                    _ => {
                        return Err(at.error(
                            Some(stage.duration.span()),
                            Some(&key),
                            "each stage needs either `rate` or `concurrency`",
                        ))
                    }
                };
                let model_clash = match *pacing {
                    Pacing::Open { .. } => !open,
                    Pacing::Closed => open && (i > 0 || self.concurrency.is_some()),
                };
                if model_clash {
                    return Err(at.error(
                        Some(stage.duration.span()),
                        Some(&key),
                        "all stages use the same model: `rate` or `concurrency`",
                    ));
                }
                if open && i == 0 && self.rate.is_none() {
                    *pacing = Pacing::Open { rate: target };
                }
                let length = duration(at, &stage.duration)?;
                if length.is_zero() {
                    return Err(at.error(
                        Some(stage.duration.span()),
                        Some(&key),
                        "a stage lasts more than zero",
                    ));
                }
                stages.push(Stage {
                    duration: length,
                    target,
                });
            }
        }
        Ok(stages)
    }
}

fn positive_rate(at: &Locator, rate: &Spanned<f64>) -> Result<f64, ScenarioError> {
    check_rate(*rate.get_ref()).map_err(|m| at.error(Some(rate.span()), None, m))
}

/// More than one machine's worth: past this a rate is a typo (`1e12`), and
/// its schedule's arithmetic would lose precision.
pub(super) const MAX_RATE: f64 = 10_000_000.0;

/// A rate in requests per second, from a file or `--rate`.
pub(super) fn check_rate(rate: f64) -> Result<f64, String> {
    if !rate.is_finite() {
        return Err(format!(
            "rate must be a finite number of requests per second, not {rate}"
        ));
    }
    if rate <= 0.0 {
        return Err("rate must be above zero requests per second".into());
    }
    if rate > MAX_RATE {
        return Err(format!(
            "rate {rate} is more than one machine can send (at most {MAX_RATE} requests per second)"
        ));
    }
    Ok(rate)
}

/// tokio's timer ticks in milliseconds: a shorter span cannot be kept.
pub(super) const TIMER_TICK: Duration = Duration::from_millis(1);

/// A span the timer can keep, or why not: the one rule for `duration`
/// (a run shorter than a tick measures nothing) and `timeout`.
fn at_least_a_tick(what: &str, span: Duration) -> Result<Duration, String> {
    if span < TIMER_TICK {
        return Err(format!(
            "{what} must be at least 1ms (the timer's resolution), not {}",
            humantime::format_duration(span)
        ));
    }
    Ok(span)
}

/// A run's length, from a file or `--duration`.
pub(super) fn check_duration(length: Duration) -> Result<Duration, String> {
    at_least_a_tick("duration", length)
}

/// A call's timeout, from a file or `--timeout`.
pub(super) fn check_timeout(timeout: Duration) -> Result<Duration, String> {
    at_least_a_tick("timeout", timeout)
}

/// A count that must be at least 1 (connections, requests, threads...),
/// from a file or a flag.
pub(super) fn at_least_one(value: u64) -> Result<u64, &'static str> {
    match value {
        0 => Err("must be at least 1"),
        n => Ok(n),
    }
}
