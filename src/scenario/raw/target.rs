//! `target`, `targets`, `command` and `framing`: what the calls are sent
//! to.

use serde::Deserialize;

use super::path_search::is_installed;
use super::RawScenario;
use crate::rpc::wire::Framing;
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::{NamedTarget, TargetSpec};

/// One of `targets = [{ name = "geth", url = "http://..." }, ...]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTarget {
    name: Option<String>,
    url: String,
}

impl RawScenario {
    /// `targets`, each named (by its URL where no name is given), the
    /// names unique; empty when the file has one `target` or `command`.
    pub(super) fn targets(&self, at: &Locator) -> Result<Vec<NamedTarget>, ScenarioError> {
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

    pub(super) fn target(&self, at: &Locator) -> Result<TargetSpec, ScenarioError> {
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
