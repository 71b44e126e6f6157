//! `[tls]`: how an `https://` or `wss://` target is trusted.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::scenario::error::{Locator, ScenarioError};
use crate::tls::TlsOptions;

/// Paths are relative to the scenario file.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    cacert: Option<Spanned<PathBuf>>,
    #[serde(default)]
    system_roots: bool,
    #[serde(default)]
    insecure: bool,
    cert: Option<Spanned<PathBuf>>,
    key: Option<Spanned<PathBuf>>,
}

impl RawTls {
    /// The options, paths taken from the file's folder, each file read as
    /// a run will read it: an error points at its key.
    pub(super) fn options(self, at: &Locator, base_dir: &Path) -> Result<TlsOptions, ScenarioError> {
        let path = |p: &Option<Spanned<PathBuf>>| p.as_ref().map(|p| base_dir.join(p.get_ref()));
        let options = TlsOptions {
            cacert: path(&self.cacert),
            system_roots: self.system_roots,
            insecure: self.insecure,
            cert: path(&self.cert),
            key: path(&self.key),
        };
        crate::tls::check_files(&options).map_err(|(key, message)| {
            let value = match key {
                "cacert" => &self.cacert,
                "cert" => &self.cert,
                _ => &self.key,
            };
            at.error(
                value.as_ref().map(|v| v.span()),
                Some(&format!("tls.{key}")),
                message,
            )
        })?;
        Ok(options)
    }
}
