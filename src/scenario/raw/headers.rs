//! `[headers]`: sent with every request, `${VAR}`s read from the
//! environment, other `${...}`s generators made per request; and
//! `jwt_secret`, which adds a fresh JWT to each.

use std::path::Path;

use toml::Spanned;

use super::RawScenario;
use crate::plan::HeaderText;
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::JwtFile;

impl RawScenario {
    /// The headers, `${VAR}`s filled in from `env`, generators compiled.
    pub(super) fn headers(
        &self,
        at: &Locator,
        env: &dyn Fn(&str) -> Option<String>,
        base_dir: &Path,
    ) -> Result<Vec<(String, HeaderText)>, ScenarioError> {
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            let key = format!("headers.{name}");
            let text = header_text(name, value.get_ref(), env, base_dir)
                .map_err(|m| at.error(Some(value.span()), Some(&key), m))?;
            headers.push((name.clone(), text));
        }
        Ok(headers)
    }

    /// `jwt_secret = "FILE"`, relative to the scenario: read now, so a
    /// missing or malformed secret is an error before anything is sent.
    pub(super) fn jwt_secret(&self, at: &Locator, base_dir: &Path) -> Result<Option<JwtFile>, ScenarioError> {
        let Some(file) = &self.jwt_secret else {
            return Ok(None);
        };
        JwtFile::read(&base_dir.join(file.get_ref()))
            .map(Some)
            .map_err(|m| at.error(Some(file.span()), Some("jwt_secret"), m))
    }

    /// Where `jwt_secret` stands in the file, for an error about it.
    pub(super) fn jwt_secret_at(&self) -> Option<std::ops::Range<usize>> {
        self.jwt_secret.as_ref().map(Spanned::span)
    }
}

/// A header's value compiled, and checked as any header is (its literal
/// text: what generators make is cleaned as it is sent).
fn header_text(
    name: &str,
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
    base_dir: &Path,
) -> Result<HeaderText, String> {
    let text = HeaderText::compile(value, env, base_dir)?;
    crate::transport::check_header(name, &text.literal_text())?;
    Ok(text)
}
