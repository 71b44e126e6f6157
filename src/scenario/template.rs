//! Parameters with generated values, compiled once into static JSON
//! fragments and holes, so each call writes bytes instead of building a
//! `serde_json::Value`.
//!
//! In any string of `params`, `${expr}` is replaced by a generated value.
//! A string that is exactly one `${expr}` takes the value's own JSON type
//! (`"${int(1, 9)}"` sends a number); inside other text it is spliced in.
//! `$${` writes a literal `${`.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};
use rand::Rng;
use serde_json::Value;

use super::expr::{self, Expr, Gen, Scope};

#[derive(Debug)]
pub struct Template {
    pieces: Vec<Piece>,
}

#[derive(Debug)]
enum Piece {
    Static(Box<[u8]>),
    /// A whole JSON value.
    Value(Expr),
    /// Text inside a JSON string (quotes written by the static pieces).
    InString(Expr),
}

impl Template {
    pub fn compile(value: &Value, scope: &Scope) -> Result<Template, String> {
        let mut compiler = Compiler {
            pieces: Vec::new(),
            pending: Vec::new(),
            scope,
        };
        compiler.value(value)?;
        compiler.flush();
        Ok(Template {
            pieces: compiler.pieces,
        })
    }

    /// The JSON text when nothing is generated.
    pub fn fixed(&self) -> Option<&[u8]> {
        match self.pieces.as_slice() {
            [Piece::Static(bytes)] => Some(bytes),
            [] => Some(b"null"),
            _ => None,
        }
    }

    pub fn write<R: Rng>(&self, out: &mut BytesMut, rng: &mut R) {
        for piece in &self.pieces {
            match piece {
                Piece::Static(bytes) => out.put_slice(bytes),
                Piece::Value(expr) => write_value(out, expr.eval(rng), rng),
                Piece::InString(expr) => write_in_string(out, expr.eval(rng), rng),
            }
        }
    }
}

struct Compiler<'s> {
    pieces: Vec<Piece>,
    /// Static bytes not yet pushed as a piece.
    pending: Vec<u8>,
    scope: &'s Scope<'s>,
}

impl Compiler<'_> {
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.pieces.push(Piece::Static(
                std::mem::take(&mut self.pending).into_boxed_slice(),
            ));
        }
    }

    fn push(&mut self, piece: Piece) {
        self.flush();
        self.pieces.push(piece);
    }

    fn value(&mut self, value: &Value) -> Result<(), String> {
        match value {
            Value::String(text) => self.string(text),
            Value::Array(items) => {
                self.pending.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.pending.push(b',');
                    }
                    self.value(item)?;
                }
                self.pending.push(b']');
                Ok(())
            }
            Value::Object(fields) => {
                self.pending.push(b'{');
                for (i, (key, item)) in fields.iter().enumerate() {
                    if i > 0 {
                        self.pending.push(b',');
                    }
                    serde_json::to_writer(&mut self.pending, key).expect("strings serialize");
                    self.pending.push(b':');
                    self.value(item)?;
                }
                self.pending.push(b'}');
                Ok(())
            }
            other => {
                serde_json::to_writer(&mut self.pending, other).expect("values serialize");
                Ok(())
            }
        }
    }

    fn string(&mut self, text: &str) -> Result<(), String> {
        let segments = segments(text, self.scope)?;
        match segments.as_slice() {
            [Segment::Expr(_)] => {
                let Some(Segment::Expr(expr)) = segments.into_iter().next() else {
                    unreachable!()
                };
                self.push(Piece::Value(expr));
            }
            _ => {
                self.pending.push(b'"');
                for segment in segments {
                    match segment {
                        Segment::Text(text) => escape_into(&mut self.pending, &text),
                        Segment::Expr(expr) => self.push(Piece::InString(expr)),
                    }
                }
                self.pending.push(b'"');
            }
        }
        Ok(())
    }
}

enum Segment {
    Text(String),
    Expr(Expr),
}

fn segments(text: &str, scope: &Scope) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("$${") {
            literal.push_str("${");
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let end = after
                .find('}')
                .ok_or_else(|| format!("`{text}`: `${{` without a closing `}}`"))?;
            let source = &after[..end];
            let expr = expr::parse(source, scope).map_err(|e| format!("`${{{source}}}`: {e}"))?;
            if !literal.is_empty() {
                out.push(Segment::Text(std::mem::take(&mut literal)));
            }
            out.push(Segment::Expr(expr));
            rest = &after[end + 1..];
        } else {
            literal.push('$');
            rest = &rest[1..];
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() || out.is_empty() {
        out.push(Segment::Text(literal));
    }
    Ok(out)
}

fn write_value<R: Rng>(out: &mut BytesMut, value: Gen, rng: &mut R) {
    match value {
        Gen::Json(json) => out.put_slice(json.as_bytes()),
        // Numbers are written bare; everything else is a JSON string.
        Gen::Int(_) | Gen::Float(_) => write_in_string(out, value, rng),
        other => {
            out.put_u8(b'"');
            write_in_string(out, other, rng);
            out.put_u8(b'"');
        }
    }
}

fn write_in_string<R: Rng>(out: &mut BytesMut, value: Gen, rng: &mut R) {
    match value {
        Gen::Int(n) => out.put_slice(itoa::Buffer::new().format(n).as_bytes()),
        Gen::Float(f) => {
            let _ = write!(out, "{f}");
        }
        Gen::Quantity(q) => {
            let _ = write!(out, "0x{q:x}");
        }
        Gen::Hex(bytes) => {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            out.put_slice(b"0x");
            for _ in 0..bytes {
                let byte: u8 = rng.gen();
                out.put_u8(DIGITS[(byte >> 4) as usize]);
                out.put_u8(DIGITS[(byte & 15) as usize]);
            }
        }
        Gen::Text(text) => escape_into_buf(out, text),
        Gen::Json(json) => match json.strip_prefix('"').and_then(|j| j.strip_suffix('"')) {
            // Already escaped JSON string content.
            Some(inner) => out.put_slice(inner.as_bytes()),
            None => escape_into_buf(out, json),
        },
    }
}

fn escape_into(out: &mut Vec<u8>, text: &str) {
    let quoted = serde_json::to_string(text).expect("strings serialize");
    out.extend_from_slice(&quoted.as_bytes()[1..quoted.len() - 1]);
}

fn escape_into_buf(out: &mut BytesMut, text: &str) {
    if !text.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.put_slice(text.as_bytes());
        return;
    }
    let mut escaped = Vec::with_capacity(text.len() + 8);
    escape_into(&mut escaped, text);
    out.put_slice(&escaped);
}
