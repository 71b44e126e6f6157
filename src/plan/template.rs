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
use rand::RngExt;
use serde_json::Value;

use super::expr::{self, Expr, Generated, Scope};
use super::vars::Vars;

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

    pub fn write<R: RngExt>(&self, out: &mut BytesMut, rng: &mut R) {
        self.write_with(out, rng, &Vars::NONE);
    }

    /// Writes the value, a flow's variables read from `vars`.
    pub fn write_with<R: RngExt>(&self, out: &mut BytesMut, rng: &mut R, vars: &Vars) {
        for piece in &self.pieces {
            match piece {
                Piece::Static(bytes) => out.put_slice(bytes),
                Piece::Value(expr) => write_value(out, expr.eval(rng, vars), rng),
                Piece::InString(expr) => write_in_string(out, expr.eval(rng, vars), rng),
            }
        }
    }

    /// The slots of the flow's variables it reads, in the order it reads them.
    pub fn vars_used(&self) -> Vec<usize> {
        let mut slots = Vec::new();
        for piece in &self.pieces {
            if let Piece::Value(expr) | Piece::InString(expr) = piece {
                expr.vars_used(&mut slots);
            }
        }
        slots
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
    split(text)?
        .into_iter()
        .map(|part| match part {
            Part::Text(text) => Ok(Segment::Text(text)),
            Part::Expr(source) => expr::parse(source, scope)
                .map(Segment::Expr)
                .map_err(|e| format!("`${{{source}}}`: {e}")),
        })
        .collect()
}

/// A string cut at its `${...}`s.
pub enum Part<'a> {
    Text(String),
    /// What stands between `${` and `}`.
    Expr(&'a str),
}

/// Cuts `text` into literal text and `${...}` parts; `$${` is a literal
/// `${`. Always at least one part.
pub fn split(text: &str) -> Result<Vec<Part<'_>>, String> {
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
            if !literal.is_empty() {
                out.push(Part::Text(std::mem::take(&mut literal)));
            }
            out.push(Part::Expr(&after[..end]));
            rest = &after[end + 1..];
        } else {
            literal.push('$');
            rest = &rest[1..];
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() || out.is_empty() {
        out.push(Part::Text(literal));
    }
    Ok(out)
}

fn write_value<R: RngExt>(out: &mut BytesMut, value: Generated, rng: &mut R) {
    match value {
        Generated::Json(json) => out.put_slice(json.as_bytes()),
        // Numbers are written bare; everything else is a JSON string.
        Generated::Int(_) | Generated::Float(_) => write_in_string(out, value, rng),
        other => {
            out.put_u8(b'"');
            write_in_string(out, other, rng);
            out.put_u8(b'"');
        }
    }
}

fn write_in_string<R: RngExt>(out: &mut BytesMut, value: Generated, rng: &mut R) {
    match write_number(out, value, rng) {
        None => {}
        Some(Words::Text(text)) => escape_into_buf(out, text),
        Some(Words::Json(json)) => match json.strip_prefix('"').and_then(|j| j.strip_suffix('"')) {
            // Already escaped JSON string content.
            Some(inner) => out.put_slice(inner.as_bytes()),
            None => escape_into_buf(out, json),
        },
    }
}

/// A generated value that is words, not a number: each writer (a JSON
/// string, a header) writes these its own way.
pub(super) enum Words<'a> {
    Json(&'a str),
    Text(&'a str),
}

/// Writes a generated number, or hex string, as its text, the same in a
/// param and in a header; hands back words.
pub(super) fn write_number<'a, B: BufMut, R: RngExt>(
    out: &mut B,
    value: Generated<'a>,
    rng: &mut R,
) -> Option<Words<'a>> {
    /// Formats straight into the buffer.
    struct Into<'b, B>(&'b mut B);
    impl<B: BufMut> std::fmt::Write for Into<'_, B> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.put_slice(s.as_bytes());
            Ok(())
        }
    }
    match value {
        Generated::Int(n) => out.put_slice(itoa::Buffer::new().format(n).as_bytes()),
        Generated::Float(f) => {
            let _ = write!(Into(out), "{f}");
        }
        Generated::Quantity(q) => {
            let _ = write!(Into(out), "0x{q:x}");
        }
        Generated::Hex(bytes) => {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            out.put_slice(b"0x");
            for _ in 0..bytes {
                let byte: u8 = rng.random();
                out.put_u8(DIGITS[(byte >> 4) as usize]);
                out.put_u8(DIGITS[(byte & 15) as usize]);
            }
        }
        Generated::Text(text) => return Some(Words::Text(text)),
        Generated::Json(json) => return Some(Words::Json(json)),
    }
    None
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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use serde_json::{json, Value};

    use super::*;
    use crate::plan::Polled;

    fn compile_in(dir: &Path, params: Value) -> Result<Template, String> {
        let polled = Arc::new(Polled::new(vec!["head".to_string()]));
        polled.set(0, &json!("0x1000")).unwrap();
        Template::compile(
            &params,
            &Scope {
                base_dir: dir,
                polled: &polled,
                vars: &[],
            },
        )
    }

    fn compile(params: Value) -> Template {
        compile_in(Path::new("."), params).unwrap()
    }

    fn render(template: &Template, rng: &mut SmallRng) -> Value {
        let mut out = BytesMut::new();
        template.write(&mut out, rng);
        serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
    }

    fn samples(params: Value, n: usize) -> Vec<Value> {
        let template = compile(params);
        let mut rng = SmallRng::seed_from_u64(42);
        (0..n).map(|_| render(&template, &mut rng)[0].clone()).collect()
    }

    #[test]
    fn fixed_params_stay_fixed() {
        let template = compile(json!(["0xab", {"full": true, "n": 3}, "cost: $5", "$${not}"]));
        assert_eq!(
            template.fixed(),
            Some(br#"["0xab",{"full":true,"n":3},"cost: $5","${not}"]"#.as_slice())
        );
    }

    #[test]
    fn each_generator_has_its_shape() {
        for v in samples(json!(["${int(-5, 5)}"]), 500) {
            assert!((-5..=5).contains(&v.as_i64().unwrap()), "{v}");
        }
        for v in samples(json!(["${float(0.5, 1.5)}"]), 500) {
            let f = v.as_f64().unwrap();
            assert!((0.5..1.5).contains(&f), "{v}");
        }
        let quantities = samples(json!(["${quantity(0, 300)}"]), 2000);
        for v in &quantities {
            let text = v.as_str().unwrap();
            let digits = text.strip_prefix("0x").unwrap();
            assert!(
                digits == "0" || !digits.starts_with('0'),
                "most compact form: {text}"
            );
            assert!(u64::from_str_radix(digits, 16).unwrap() <= 300);
        }
        assert!(quantities.iter().any(|v| v == "0x0"), "zero is 0x0");
        for v in samples(json!(["${hex(20)}"]), 100) {
            let text = v.as_str().unwrap();
            assert_eq!(text.len(), 42);
            assert!(text.starts_with("0x") && text[2..].bytes().all(|b| b.is_ascii_hexdigit()));
        }
        let choices = samples(json!(["${choice(\"latest\", 'safe', 7, null)}"]), 400);
        for expected in [json!("latest"), json!("safe"), json!(7), Value::Null] {
            assert!(choices.contains(&expected), "{expected} never chosen");
        }
        assert_eq!(
            samples(json!(["${seq(10)}"]), 3),
            vec![json!(10), json!(11), json!(12)]
        );
        let now = samples(json!(["${now()}"]), 1)[0].as_i64().unwrap();
        assert!(now > 1_700_000_000);
        for v in samples(json!(["${head - int(0, 100)}"]), 200) {
            let n = u64::from_str_radix(v.as_str().unwrap().strip_prefix("0x").unwrap(), 16).unwrap();
            assert!((0x1000 - 100..=0x1000).contains(&n), "{v}");
        }
    }

    #[test]
    fn templates_work_nested_and_inside_text() {
        let template = compile(json!({"filter": {"from": "${int(1, 1)}", "tags": ["id-${seq()}", "a\"b"]}}));
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(
            render(&template, &mut rng),
            json!({"filter": {"from": 1, "tags": ["id-0", "a\"b"]}})
        );
        assert_eq!(render(&template, &mut rng)["filter"]["tags"][0], "id-1");
    }

    #[test]
    fn generation_is_deterministic_under_a_seed() {
        let params = json!(["${hex(32)}", "${int(0, 1000000)}", "${choice(1, 2, 3)}"]);
        let run = |seed| {
            let template = compile(params.clone());
            let mut rng = SmallRng::seed_from_u64(seed);
            (0..20).map(|_| render(&template, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
    }

    #[test]
    fn data_files_give_lines_columns_and_json_values() {
        let dir = std::env::temp_dir().join(format!("volley-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "0xaa\n\n0xbb\n").unwrap();
        std::fs::write(dir.join("b.csv"), "name,address\nx,0x01\ny,0x02\n").unwrap();
        std::fs::write(dir.join("c.jsonl"), "{\"to\":\"0x1\"}\n[1,2]\n").unwrap();
        std::fs::write(dir.join("empty.txt"), "\n").unwrap();
        let render_all = |params: Value, n: usize| {
            let template = compile_in(&dir, params).unwrap();
            let mut rng = SmallRng::seed_from_u64(3);
            (0..n)
                .map(|_| render(&template, &mut rng)[0].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            render_all(json!(["${file('a.txt', order = 'seq')}"]), 3),
            vec![json!("0xaa"), json!("0xbb"), json!("0xaa")]
        );
        assert_eq!(
            render_all(json!(["${file('b.csv', column = 'address', order = 'seq')}"]), 2),
            vec![json!("0x01"), json!("0x02")]
        );
        assert_eq!(
            render_all(json!(["${file('c.jsonl', order = 'seq')}"]), 2),
            vec![json!({"to": "0x1"}), json!([1, 2])]
        );
        let random = render_all(json!(["${file('a.txt')}"]), 50);
        assert!(random.contains(&json!("0xaa")) && random.contains(&json!("0xbb")));
        let error = |params: Value| compile_in(&dir, params).unwrap_err();
        assert!(error(json!(["${file('missing.txt')}"])).contains("missing.txt"));
        assert!(error(json!(["${file('empty.txt')}"])).contains("is empty"));
        assert!(error(json!(["${file('b.csv', column = 'nope')}"])).contains("no column `nope`"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mistakes_are_explained() {
        let error = |params: Value| compile_in(Path::new("."), params).unwrap_err();
        assert!(error(json!(["${int(5, 1)}"])).contains("empty"));
        assert!(error(json!(["${nope(1)}"])).contains("unknown generator `nope`"));
        assert!(error(json!(["${tail}"])).contains("unknown name `tail`"));
        assert!(error(json!(["${int(1, 2"])).contains("without a closing"));
        assert!(error(json!(["${hex(0)}"])).contains("byte count"));
        assert!(error(json!(["${hex(20) + 1}"])).contains("numbers on both sides"));
        assert!(error(json!(["${int(1)}"])).contains("takes 2 arguments"));
    }
}
