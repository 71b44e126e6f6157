//! `[ready]`: what tells a stdio server is ready, beyond its first answer:
//! a notification it sends (LSP's `$/progress` end, or the first
//! `textDocument/publishDiagnostics`), checked before anything is sent.

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::RawScenario;
use crate::scenario::error::{Locator, ScenarioError};
use crate::transport::ReadySignal;

/// `method = "$/progress"`, and optionally `pointer = "/value/kind"` and
/// `value = "end"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReady {
    method: Spanned<String>,
    pointer: Option<Spanned<String>>,
    value: Option<Value>,
}

impl RawScenario {
    /// The ready signal, if the file names one: only a child's stdio has
    /// one to wait for.
    pub(super) fn ready(&self, at: &Locator) -> Result<Option<ReadySignal>, ScenarioError> {
        let Some(raw) = &self.ready else {
            return Ok(None);
        };
        let fails =
            |span, key: &str, message: &str| Err(at.error(Some(span), Some(key), message.to_string()));
        let commands = (self.targets.as_ref()).is_some_and(|t| t.get_ref().iter().all(|t| t.is_command()));
        if self.command.is_none() && !commands {
            return fails(
                raw.method.span(),
                "ready.method",
                "[ready] names a stdio server's ready signal: it needs a `command` (a child's stdio)",
            );
        }
        if raw.method.get_ref().is_empty() {
            return fails(raw.method.span(), "ready.method", "the signal's method is empty");
        }
        if let Some(pointer) = &raw.pointer {
            if !pointer.get_ref().starts_with('/') {
                return fails(
                    pointer.span(),
                    "ready.pointer",
                    "a JSON pointer into the notification's params starts with `/` (e.g. /value/kind)",
                );
            }
        }
        if raw.value.is_some() && raw.pointer.is_none() {
            return fails(
                raw.method.span(),
                "ready.value",
                "`value` is what `pointer` reaches: give a pointer too",
            );
        }
        Ok(Some(ReadySignal {
            method: raw.method.get_ref().clone(),
            pointer: raw.pointer.as_ref().map(|p| p.get_ref().clone()),
            value: raw.value.clone(),
            wait: self.timeout(at)?,
        }))
    }
}
