//! `[thresholds]`: pass/fail limits on the run's figures.

use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{duration, RawScenario};
use crate::scenario::error::{Locator, ScenarioError};
use crate::thresholds::Threshold;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawThresholds {
    checks: Spanned<Vec<Spanned<String>>>,
    /// Stop the run once a threshold fails on the figures so far.
    #[serde(default)]
    abort_on_fail: bool,
    /// How long into the measured run before a failure may stop it.
    abort_grace: Option<Spanned<String>>,
}

impl RawScenario {
    /// The checks, each parsed; none without `[thresholds]`.
    pub(super) fn thresholds(&self, at: &Locator) -> Result<Vec<Threshold>, ScenarioError> {
        let Some(raw) = &self.thresholds else {
            return Ok(Vec::new());
        };
        raw.checks
            .get_ref()
            .iter()
            .enumerate()
            .map(|(i, check)| {
                crate::thresholds::parse(check.get_ref())
                    .map_err(|m| at.error(Some(check.span()), Some(&format!("thresholds.checks[{i}]")), m))
            })
            .collect()
    }

    /// Where `thresholds.checks` is written, for an error found once the
    /// whole scenario is known.
    pub(super) fn thresholds_at(&self) -> Option<Range<usize>> {
        self.thresholds.as_ref().map(|t| t.checks.span())
    }

    /// How long into the run a failed threshold may stop it, if it may.
    pub(super) fn abort_on_fail(&self, at: &Locator) -> Result<Option<Duration>, ScenarioError> {
        let abort_on_fail = match &self.thresholds {
            Some(raw) if raw.abort_on_fail => Some(match &raw.abort_grace {
                Some(grace) => duration(at, grace)?,
                None => crate::scenario::DEFAULT_ABORT_GRACE,
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
}
