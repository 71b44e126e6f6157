//! `[poll.NAME]`: calls made every `every`, each feeding a named value.

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::{duration, fixed_params, RawScenario};
use crate::plan::PollSpec;
use crate::scenario::error::{Locator, ScenarioError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPoll {
    method: Spanned<String>,
    params: Option<Spanned<Value>>,
    every: Option<Spanned<String>>,
    /// A JSON pointer into each result: the head race, by polling.
    pub(super) race: Option<Spanned<String>>,
}

impl RawPoll {
    /// Its interval: `every`, or 2 s.
    pub(super) fn every(&self, at: &Locator) -> Result<std::time::Duration, ScenarioError> {
        let every = self.every.as_ref().map(|e| duration(at, e)).transpose()?;
        Ok(every.unwrap_or(std::time::Duration::from_secs(2)))
    }
}

impl RawScenario {
    pub(super) fn polls(&self, at: &Locator) -> Result<Vec<PollSpec>, ScenarioError> {
        let mut polls = Vec::new();
        for (name, poll) in &self.poll {
            let key = |k: &str| format!("poll.{name}.{k}");
            let every = poll.every(at)?;
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
                race: poll.race.is_some(),
            });
        }
        Ok(polls)
    }
}
