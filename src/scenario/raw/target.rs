//! `target`, `targets`, `command` and `framing`: what the calls are sent
//! to.

use serde::Deserialize;

use super::path_search::is_installed;
use super::RawScenario;
use crate::rpc::wire::Framing;
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::{NamedTarget, TargetSpec};

/// One of `targets = [{ name = "geth", url = "http://..." }, ...]`, or
/// of stdio servers side by side: `{ name = "pyright", command = [...] }`
/// (the file's `framing` for all).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTarget {
    name: Option<String>,
    url: Option<String>,
    command: Option<Vec<String>>,
}

impl RawTarget {
    pub(super) fn is_command(&self) -> bool {
        self.command.is_some()
    }
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
        let mut named = self.each_target(at, raw.get_ref(), &error)?;
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

    /// Each of `targets`: a URL (named by its host and port) or a command
    /// (named by its program), one of the two.
    fn each_target(
        &self,
        at: &Locator,
        raw: &[RawTarget],
        error: &dyn Fn(Option<String>, &str) -> ScenarioError,
    ) -> Result<Vec<NamedTarget>, ScenarioError> {
        let urls: Vec<String> = raw
            .iter()
            .filter_map(|t| t.url.as_deref())
            .map(|u| u.trim().to_string())
            .collect();
        let mut by_url = NamedTarget::from_urls(&urls).into_iter();
        let mut named = Vec::new();
        for (i, written) in raw.iter().enumerate() {
            match (&written.url, &written.command) {
                (Some(url), None) if url.trim().is_empty() => {
                    return Err(error(
                        Some(format!("targets[{i}].url")),
                        "the URL is empty: give a URL or \"builtin\"",
                    ))
                }
                (Some(_), None) => named.extend(by_url.next()),
                (None, Some(argv)) => {
                    let Some(program) = argv.first() else {
                        return Err(error(Some(format!("targets[{i}].command")), "command is empty"));
                    };
                    if !is_installed(program) {
                        let m = format!("`{program}` is not installed: no such program on PATH");
                        return Err(error(Some(format!("targets[{i}].command")), &m));
                    }
                    let name = (std::path::Path::new(program).file_name())
                        .map_or("stdio".to_string(), |p| p.to_string_lossy().into_owned());
                    let spec = TargetSpec::Command {
                        argv: argv.clone(),
                        framing: self.framing(at)?,
                    };
                    named.push(NamedTarget { name, spec });
                }
                _ => {
                    return Err(error(
                        Some(format!("targets[{i}]")),
                        "give each target a `url` or a `command`, one of the two",
                    ))
                }
            }
        }
        Ok(named)
    }

    /// The file's `framing`, for its commands.
    fn framing(&self, at: &Locator) -> Result<Framing, ScenarioError> {
        match self.framing.as_ref().map(|f| (f.get_ref().as_str(), f.span())) {
            Some(("content-length", _)) => Ok(Framing::ContentLength),
            Some(("ndjson", _)) | None => Ok(Framing::Ndjson),
            Some((_, span)) => Err(at.error(
                Some(span),
                None,
                "framing must be \"content-length\" (LSP) or \"ndjson\" (MCP)",
            )),
        }
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
                Ok(TargetSpec::Command {
                    argv: command.get_ref().clone(),
                    framing: self.framing(at)?,
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
