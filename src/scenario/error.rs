//! Scenario errors that point at the file, line, column and key to change.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ScenarioError {
    // Not a `source`: the reason is in the message, and `{:#}` would say it twice.
    #[error("cannot read scenario {path}: {reason}")]
    Read { path: PathBuf, reason: std::io::Error },
    #[error("{0}")]
    Invalid(Located),
    /// A command-line value, named by its flag.
    #[error("{flag}: {message}")]
    Flag { flag: &'static str, message: String },
}

/// A mistake at a place in a scenario file.
#[derive(Debug)]
pub struct Located {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// Dotted path of the key, e.g. `calls[2].weight`.
    pub key: String,
    pub message: String,
    /// The offending line, shown under the message.
    pub source_line: String,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "key `{}`: ", self.key)?;
        }
        write!(f, "{}", self.message)?;
        if !self.source_line.trim().is_empty() {
            write!(
                f,
                "\n  {:>4} | {}\n       | {:>width$}",
                self.line,
                self.source_line,
                "^",
                width = self.column
            )?;
        }
        Ok(())
    }
}

/// Turns byte offsets into places in one file's text.
pub struct Locator<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

impl Locator<'_> {
    pub fn error(
        &self,
        span: Option<Range<usize>>,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> ScenarioError {
        let offset = span.map_or(0, |s| s.start.min(self.text.len()));
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = self.text[line_start..offset].chars().count() + 1;
        let source_line = self.text[line_start..].lines().next().unwrap_or("").to_string();
        let key = match key {
            Some(key) => key.to_string(),
            None => self.key_at(offset),
        };
        ScenarioError::Invalid(Located {
            file: self.file.to_string(),
            line,
            column,
            key,
            message: message.into(),
            source_line,
        })
    }

    /// The dotted key written at `offset`, read from the text: the table
    /// header above it (with its index for `[[arrays]]`) and the key on its
    /// line.
    fn key_at(&self, offset: usize) -> String {
        let line_start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[line_start..].lines().next().unwrap_or("").trim();
        let mut table = String::new();
        let mut array_counts: Vec<(String, usize)> = Vec::new();
        for header in self.text[..line_start].lines().map(str::trim) {
            if let Some(name) = header.strip_prefix("[[").and_then(|h| h.split("]]").next()) {
                let name = name.trim().to_string();
                let index = match array_counts.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, count)) => {
                        *count += 1;
                        *count - 1
                    }
                    None => {
                        array_counts.push((name.clone(), 1));
                        0
                    }
                };
                table = format!("{name}[{index}]");
            } else if let Some(name) = header.strip_prefix('[').and_then(|h| h.split(']').next()) {
                table = name.trim().to_string();
            }
        }
        if line.starts_with('[') {
            return line.trim_matches(|c| c == '[' || c == ']').trim().to_string();
        }
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"'))
            .unwrap_or("");
        match (table.is_empty(), key.is_empty()) {
            (_, true) => table,
            (true, false) => key.to_string(),
            (false, false) => format!("{table}.{key}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_with_their_table() {
        let text = "target = \"x\"\n[load]\nrate = -1\n[[calls]]\nmethod = \"a\"\n[[calls]]\nweight = 0\n";
        let locator = Locator { file: "s.toml", text };
        let at = |needle: &str| text.find(needle).unwrap();
        assert_eq!(locator.key_at(at("target")), "target");
        assert_eq!(locator.key_at(at("rate")), "load.rate");
        assert_eq!(locator.key_at(at("weight")), "calls[1].weight");
        let ScenarioError::Invalid(located) = locator.error(Some(at("-1")..at("-1") + 2), None, "bad") else {
            panic!("expected a located error");
        };
        assert_eq!(
            (located.line, located.column, located.key.as_str()),
            (3, 8, "load.rate")
        );
    }
}
