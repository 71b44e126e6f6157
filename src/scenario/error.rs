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
                // A line shown with its secrets hidden is shorter.
                width = self.column.min(self.source_line.chars().count() + 1)
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
        let written = self.key_at(offset);
        let key = match key {
            Some(key) => key.to_string(),
            None => written.clone(),
        };
        let line_text = self.text[line_start..].lines().next().unwrap_or("");
        let source_line = shown_line(line_text, [key.as_str(), written.as_str()]);
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

/// A line of the file as an error shows it: a header's value, a secret's
/// or a token's wholly hidden, and every URL in it through
/// `redact::url` (its user info, key-like path segments and query values
/// hidden), so that an error in a public CI log shows no key. A string
/// left open runs to the line's end.
fn shown_line(line: &str, keys: [&str; 2]) -> String {
    let secret = keys.iter().any(|k| {
        let k = k.to_ascii_lowercase();
        k.starts_with("headers")
            || ["secret", "token", "password", "jwt", "auth"]
                .iter()
                .any(|w| k.contains(w))
    });
    let mut shown = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find(['"', '\'']) {
        let quote = rest[open..].chars().next().unwrap_or('"');
        shown.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        // A basic string's `\"` does not close it; a literal's has no escapes.
        let mut close = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match c {
                '\\' if quote == '"' && !escaped => escaped = true,
                c if c == quote && !escaped => {
                    close = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let content = &after[..close.unwrap_or(after.len())];
        shown.push_str(
            &match (secret, content.contains("://") || content.contains('@')) {
                (true, _) if !content.is_empty() => "…".to_string(),
                (false, true) => crate::redact::url(content),
                _ => content.to_string(),
            },
        );
        match close {
            Some(i) => {
                shown.push(quote);
                rest = &after[i + 1..];
            }
            None => rest = "",
        }
    }
    shown.push_str(rest);
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_shown_in_an_error_hides_urls_keys_and_header_values() {
        let url =
            "http://alice:hunter2pass@127.0.0.1:1/v3/0123456789abcdef0123456789abcdef?apikey=QUERYKEY789";
        for line in [
            format!("target = \"{url}\""),
            format!("targets = [\"{url}\", 'ws://127.0.0.1:2/?key=QUERYKEY789']"),
            format!("target = \"{url}"),
        ] {
            let shown = shown_line(&line, ["target", "target"]);
            for secret in ["hunter2pass", "0123456789abcdef0123456789abcdef", "QUERYKEY789"] {
                assert!(!shown.contains(secret), "{shown}");
            }
            assert!(shown.contains("127.0.0.1:1"), "the host stays: {shown}");
        }
        let header = shown_line(
            "Authorization = [\"Bearer X\"]",
            ["headers.Authorization", "headers.Authorization"],
        );
        assert_eq!(header, "Authorization = [\"…\"]");
        assert_eq!(
            shown_line(
                r#"method = "eth_cal\"l" # "x""#,
                ["calls[0].method", "calls[0].method"]
            ),
            r#"method = "eth_cal\"l" # "x""#,
            "other strings are shown as written"
        );
    }

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
