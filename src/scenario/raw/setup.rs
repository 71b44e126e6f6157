//! `[[setup]]` and `[[subscribe]]`: the calls sent on every new
//! connection, before it carries the mix.

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::{fixed_params, RawScenario};
use crate::plan::SetupCall;
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::TargetSpec;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSetup {
    method: Spanned<String>,
    params: Option<Spanned<Value>>,
    #[serde(default)]
    notification: bool,
}

/// `[[subscribe]]`: a subscription opened on every connection, after the
/// setup calls.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSubscribe {
    method: Spanned<String>,
    params: Option<Spanned<Value>>,
    /// A JSON pointer into each notification's `result`: the head race.
    pub(super) race: Option<Spanned<String>>,
}

impl RawScenario {
    /// `[[setup]]`, then the `[[subscribe]]` entries, which need a
    /// connection the server can write to at will.
    pub(super) fn setup_calls(
        &self,
        at: &Locator,
        target: &TargetSpec,
    ) -> Result<Vec<SetupCall>, ScenarioError> {
        let mut setup = Vec::new();
        for (i, s) in self.setup.iter().enumerate() {
            setup.push(SetupCall {
                method: s.method.get_ref().clone(),
                params: fixed_params(at, s.params.as_ref(), &format!("setup[{i}].params"))?,
                notification: s.notification,
                subscribe: false,
                race: false,
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
                race: s.race.is_some(),
            });
        }
        Ok(setup)
    }
}
