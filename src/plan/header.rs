//! A header value with generators (`X-Request-Id: req-${seq()}`): compiled
//! once, its text made for each request into the bytes the transport
//! writes. A bare `${NAME}` is read from the environment once, as in any
//! header value; any other `${...}` is an expression of params' language
//! (polled values and a flow's variables aside), made per request.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::RngExt;

use super::expr::{self, Expr, Generated, Scope};
use super::template::{split, write_number, Part, Words};
use super::{Polled, Vars};

/// A header's value as the scenario gives it.
#[derive(Clone)]
pub enum HeaderText {
    /// No generator: the same value on every request.
    Fixed(String),
    /// Made for each request.
    Made(Arc<HeaderTemplate>),
}

/// Values may be secrets (`${RPC_TOKEN}` spliced in): never shown.
impl std::fmt::Debug for HeaderText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderText(<not shown>)")
    }
}

/// Literal text and generators, in order.
pub struct HeaderTemplate {
    pieces: Vec<Piece>,
}

impl std::fmt::Debug for HeaderTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderTemplate(<not shown>)")
    }
}

enum Piece {
    Text(Box<[u8]>),
    Made(Expr),
}

/// A `${...}` that names an environment variable rather than a generator.
fn is_environment_name(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl HeaderText {
    /// Reads a header's value: `${NAME}`s from `env`, other `${...}`s
    /// compiled as generators (data files found from `base_dir`); `$${` is a
    /// literal `${`. The error names what is wrong, never the value.
    pub fn compile(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
        base_dir: &Path,
    ) -> Result<HeaderText, String> {
        // Polled values come from a server while the run goes, a flow's
        // variables from its answers: neither is a header's.
        let polled = Arc::new(Polled::default());
        let scope = Scope {
            base_dir,
            polled: &polled,
            vars: &[],
        };
        let mut pieces = Vec::new();
        let mut text_so_far = String::new();
        for part in split(text)? {
            match part {
                Part::Text(literal) => text_so_far.push_str(&literal),
                Part::Expr(name) if is_environment_name(name) => {
                    let value =
                        env(name).ok_or_else(|| format!("environment variable `{name}` is not set"))?;
                    text_so_far.push_str(&value);
                }
                Part::Expr(source) => {
                    let made = expr::parse(source, &scope).map_err(|e| format!("`${{{source}}}`: {e}"))?;
                    if !text_so_far.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text_so_far).into_bytes().into()));
                    }
                    pieces.push(Piece::Made(made));
                }
            }
        }
        if pieces.is_empty() {
            return Ok(HeaderText::Fixed(text_so_far));
        }
        if !text_so_far.is_empty() {
            pieces.push(Piece::Text(text_so_far.into_bytes().into()));
        }
        Ok(HeaderText::Made(Arc::new(HeaderTemplate { pieces })))
    }

    /// The text a check reads of it (`check_header`): the fixed value, or
    /// a made one's literal text alone.
    pub fn literal_text(&self) -> String {
        match self {
            HeaderText::Fixed(value) => value.clone(),
            HeaderText::Made(template) => (template.pieces.iter())
                .filter_map(|piece| match piece {
                    Piece::Text(text) => Some(String::from_utf8_lossy(text).into_owned()),
                    Piece::Made(_) => None,
                })
                .collect(),
        }
    }
}

thread_local! {
    /// Random draws for headers, a stream per thread: a header is made
    /// where the request is written, apart from its params' seeded draws.
    static DRAWS: RefCell<SmallRng> = RefCell::new(rand::make_rng());
}

impl HeaderTemplate {
    /// Appends one request's value to `out`.
    pub fn write_with<R: RngExt>(&self, out: &mut Vec<u8>, rng: &mut R) {
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.extend_from_slice(text),
                Piece::Made(made) => write_text(out, made.eval(rng, &Vars::NONE), rng),
            }
        }
    }
}

impl crate::transport::MakeValue for HeaderTemplate {
    fn write(&self, out: &mut Vec<u8>) {
        DRAWS.with_borrow_mut(|rng| self.write_with(out, rng));
    }
}

/// A generated value as header text: numbers as written in params, a
/// string without its quotes, other JSON as its text.
fn write_text<R: RngExt>(out: &mut Vec<u8>, value: Generated, rng: &mut R) {
    match write_number(out, value, rng) {
        None => {}
        Some(Words::Text(text)) => out.extend_from_slice(text.as_bytes()),
        Some(Words::Json(json)) => match json.strip_prefix('"').and_then(|j| j.strip_suffix('"')) {
            Some(inner) if !inner.contains('\\') => out.extend_from_slice(inner.as_bytes()),
            Some(_) => match serde_json::from_str::<String>(json) {
                Ok(text) => out.extend_from_slice(text.as_bytes()),
                Err(_) => out.extend_from_slice(json.as_bytes()),
            },
            None => out.extend_from_slice(json.as_bytes()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::MakeValue;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cr3t-${seq()}".to_string())
    }

    fn compile(text: &str) -> Result<HeaderText, String> {
        HeaderText::compile(text, &env, Path::new("."))
    }

    fn made(text: &str) -> Arc<HeaderTemplate> {
        match compile(text).unwrap() {
            HeaderText::Made(template) => template,
            HeaderText::Fixed(_) => panic!("{text} has a generator"),
        }
    }

    fn value(template: &HeaderTemplate) -> String {
        let mut out = Vec::new();
        template.write(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_value_without_a_generator_is_fixed_its_environment_read_once() {
        let HeaderText::Fixed(value) = compile("Bearer ${TOKEN} $${x}").unwrap() else {
            panic!("fixed")
        };
        // An environment value is text: its `${` is never made into a generator.
        assert_eq!(value, "Bearer s3cr3t-${seq()} ${x}");
        let error = compile("${MISSING}").unwrap_err();
        assert_eq!(error, "environment variable `MISSING` is not set");
    }

    #[test]
    fn generators_make_a_value_per_request() {
        let template = made("req-${seq(7)}");
        assert_eq!([value(&template), value(&template)], ["req-7", "req-8"]);
        let mixed = made("${TOKEN}:${choice(\"a\")}:${int(5, 5)}:${quantity(255, 255)}");
        assert_eq!(value(&mixed), "s3cr3t-${seq()}:a:5:0xff");
        let hex = value(&made("${hex(4)}"));
        assert!(hex.len() == 10 && hex.starts_with("0x"), "{hex}");
        assert_eq!(
            format!("{:?}", compile("${seq()}").unwrap()),
            "HeaderText(<not shown>)"
        );
    }

    #[test]
    fn a_headers_literal_text_leaves_its_generators_out() {
        assert_eq!(compile("id-${seq()}-x").unwrap().literal_text(), "id--x");
    }

    #[test]
    fn polled_values_and_mistakes_are_refused_by_name() {
        assert!(compile("${head + 1}")
            .unwrap_err()
            .contains("unknown name `head`"));
        assert!(compile("${nope(1)}")
            .unwrap_err()
            .contains("unknown generator `nope`"));
        assert!(compile("${seq(").unwrap_err().contains("without a closing"));
    }
}
