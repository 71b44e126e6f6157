//! The little expression language inside `${...}`: generators such as
//! `int(1, 100)`, `hex(20)`, `choice("latest", "safe")`, `file("addrs.txt")`,
//! `seq()`, `now()`, polled values such as `head`, and `+`/`-` between them.

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use rand::RngExt;

use super::data::DataFile;
use super::poll::Polled;
use super::vars::Vars;
use range::check_sum;

/// A compiled expression, ready to evaluate on the hot path.
#[derive(Debug)]
pub enum Expr {
    Int(i64, i64),
    Float(f64, f64),
    Quantity(u64, u64),
    /// Random bytes, written as `0x`-prefixed hex.
    Hex(usize),
    /// A literal JSON value (from `choice` or a bare literal), as JSON text.
    Literal(Box<str>),
    Choice(Vec<Expr>),
    File {
        data: Arc<DataFile>,
        sequential: bool,
        cursor: AtomicUsize,
    },
    /// A counter shared by the whole run.
    Seq(AtomicI64),
    Now,
    NowMs,
    Poll(Arc<Polled>, usize),
    /// A flow's variable, by slot (see [`Vars`]).
    Var(usize),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
}

/// One evaluated value. Text borrows from the expression or its data file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Generated<'a> {
    Int(i64),
    Float(f64),
    Quantity(u64),
    Hex(usize),
    /// JSON text, written as is.
    Json(&'a str),
    /// Plain text, written as a JSON string.
    Text(&'a str),
}

impl Expr {
    /// The expression's value; a flow's variables come from `vars`.
    pub fn eval<'a, R: RngExt>(&'a self, rng: &mut R, vars: &'a Vars) -> Generated<'a> {
        match self {
            Expr::Int(low, high) => Generated::Int(rng.random_range(*low..=*high)),
            Expr::Float(low, high) => Generated::Float(uniform_float(*low, *high, rng)),
            Expr::Quantity(low, high) => Generated::Quantity(rng.random_range(*low..=*high)),
            Expr::Hex(bytes) => Generated::Hex(*bytes),
            Expr::Literal(json) => Generated::Json(json),
            Expr::Choice(options) => options[rng.random_range(0..options.len())].eval(rng, vars),
            Expr::File {
                data,
                sequential,
                cursor,
            } => {
                let index = if *sequential {
                    cursor.fetch_add(1, Ordering::Relaxed) % data.len()
                } else {
                    rng.random_range(0..data.len())
                };
                data.get(index)
            }
            Expr::Seq(next) => Generated::Int(next.fetch_add(1, Ordering::Relaxed)),
            Expr::Now => Generated::Int(unix_time().as_secs() as i64),
            Expr::NowMs => Generated::Int(unix_time().as_millis() as i64),
            Expr::Poll(polled, index) => polled.get(*index),
            Expr::Var(slot) => Generated::Json(vars.text(*slot)),
            Expr::Add(a, b) => arithmetic(a.eval(rng, vars), b.eval(rng, vars), Op::Add),
            Expr::Sub(a, b) => arithmetic(a.eval(rng, vars), b.eval(rng, vars), Op::Sub),
        }
    }

    /// The slots of the flow's variables it reads, into `out`.
    pub fn vars_used(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Var(slot) if !out.contains(slot) => out.push(*slot),
            Expr::Choice(options) => options.iter().for_each(|o| o.vars_used(out)),
            Expr::Add(a, b) | Expr::Sub(a, b) => {
                a.vars_used(out);
                b.vars_used(out);
            }
            _ => {}
        }
    }

    /// Whether the value is a number, so `+` and `-` may take it.
    fn is_numeric(&self) -> bool {
        match self {
            Expr::Int(..) | Expr::Float(..) | Expr::Quantity(..) | Expr::Seq(_) | Expr::Now | Expr::NowMs => {
                true
            }
            Expr::Poll(..) | Expr::Add(..) | Expr::Sub(..) => true,
            Expr::Literal(json) => json.parse::<f64>().is_ok(),
            _ => false,
        }
    }
}

fn unix_time() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// A float from `low` up to `high`. Both are finite (the parser checks);
/// their difference may not be (`float(-1e308, 1e308)`), so a draw is a
/// weighted mean of the two ends, which stays between them.
fn uniform_float<R: RngExt>(low: f64, high: f64, rng: &mut R) -> f64 {
    if low == high {
        return low;
    }
    if (high - low).is_finite() {
        return rng.random_range(low..high);
    }
    let u: f64 = rng.random();
    (low * (1.0 - u) + high * u).clamp(low, high)
}

/// Adds or subtracts; a quantity on either side keeps the result a
/// quantity (clamped at zero: `${head - 100}` early in a chain is block
/// 0), a float makes it a float. Whole numbers are added exactly; the
/// parser has checked that an `int` result stays within 64 bits.
fn arithmetic(a: Generated, b: Generated, op: Op) -> Generated<'static> {
    let is = |f: fn(&Generated) -> bool| f(&a) || f(&b);
    let float = is(|g| {
        matches!(g, Generated::Float(_)) || matches!(g, Generated::Json(t) if t.contains(['.', 'e', 'E']))
    });
    if float && !is(|g| matches!(g, Generated::Quantity(_))) {
        let value = op.float(as_float(a), as_float(b));
        return Generated::Float(if value.is_finite() { value } else { 0.0 });
    }
    let value = match (as_whole(a), as_whole(b)) {
        (Some(x), Some(y)) => op.whole(x, y),
        // A float beside a quantity: rounded toward zero, as before.
        _ => op.float(as_float(a), as_float(b)) as i128,
    };
    if is(|g| matches!(g, Generated::Quantity(_))) {
        Generated::Quantity(value.clamp(0, u64::MAX as i128) as u64)
    } else {
        Generated::Int(value.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    Sub,
}

impl Op {
    fn float(self, x: f64, y: f64) -> f64 {
        match self {
            Op::Add => x + y,
            Op::Sub => x - y,
        }
    }

    /// Exact: 64-bit operands never overflow 128 bits.
    fn whole(self, x: i128, y: i128) -> i128 {
        match self {
            Op::Add => x + y,
            Op::Sub => x - y,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
        }
    }
}

fn as_float(g: Generated) -> f64 {
    match g {
        Generated::Int(n) => n as f64,
        Generated::Float(f) => f,
        Generated::Quantity(q) => q as f64,
        Generated::Json(text) => text.parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn as_whole(g: Generated) -> Option<i128> {
    match g {
        Generated::Int(n) => Some(n.into()),
        Generated::Quantity(q) => Some(q.into()),
        Generated::Json(text) => text.parse::<i64>().ok().map(i128::from),
        _ => None,
    }
}

/// What a compiled expression may refer to.
pub struct Scope<'a> {
    /// Where data files are looked up.
    pub base_dir: &'a Path,
    pub polled: &'a Arc<Polled>,
    /// A flow's variables known where the expression stands (its `vars`
    /// and what earlier steps captured), each name's slot its index.
    pub vars: &'a [String],
}

/// Parses the text between `${` and `}`.
pub fn parse(text: &str, scope: &Scope) -> Result<Expr, String> {
    let tokens = tokenize(text)?;
    let mut parser = Parser { tokens, at: 0, scope };
    let expr = parser.sum()?;
    match parser.tokens.get(parser.at) {
        None => Ok(expr),
        Some(token) => Err(format!("unexpected `{}` after the expression", token.text())),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Number(String),
    Str(String),
    Open,
    Close,
    Comma,
    Equals,
    Plus,
    Minus,
}

impl Token {
    fn text(&self) -> String {
        match self {
            Token::Ident(s) | Token::Number(s) => s.clone(),
            Token::Str(s) => format!("{s:?}"),
            Token::Open => "(".into(),
            Token::Close => ")".into(),
            Token::Comma => ",".into(),
            Token::Equals => "=".into(),
            Token::Plus => "+".into(),
            Token::Minus => "-".into(),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        match c {
            ' ' | '\t' => {
                chars.next();
            }
            '(' | ')' | ',' | '=' | '+' | '-' => {
                chars.next();
                tokens.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    ',' => Token::Comma,
                    '=' => Token::Equals,
                    '+' => Token::Plus,
                    _ => Token::Minus,
                });
            }
            '"' | '\'' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some((_, q)) if q == c => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, escaped)) => value.push(escaped),
                            None => return Err("unterminated string".into()),
                        },
                        Some((_, other)) => value.push(other),
                        None => return Err("unterminated string".into()),
                    }
                }
                tokens.push(Token::Str(value));
            }
            c if c.is_ascii_digit() || c == '.' => {
                let mut end = start;
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '.' || d == '_' {
                        end = i + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Number(text[start..end].replace('_', "")));
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut end = start;
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' {
                        end = i + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Ident(text[start..end].to_string()));
            }
            other => return Err(format!("unexpected character `{other}`")),
        }
    }
    if tokens.is_empty() {
        return Err("empty expression".into());
    }
    Ok(tokens)
}

/// An argument: positional or `name = value`.
struct Arg {
    name: Option<String>,
    value: Expr,
}

struct Parser<'s> {
    tokens: Vec<Token>,
    at: usize,
    scope: &'s Scope<'s>,
}

impl Parser<'_> {
    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut left = self.term()?;
        while let Some(op) = self
            .peek()
            .cloned()
            .filter(|t| matches!(t, Token::Plus | Token::Minus))
        {
            self.at += 1;
            let right = self.term()?;
            for side in [&left, &right] {
                if !side.is_numeric() {
                    return Err(format!("`{}` takes numbers on both sides", op.text()));
                }
            }
            let (op, sum) = match op {
                Token::Plus => (Op::Add, Expr::Add(Box::new(left), Box::new(right))),
                _ => (Op::Sub, Expr::Sub(Box::new(left), Box::new(right))),
            };
            check_sum(&sum, op)?;
            left = sum;
        }
        Ok(left)
    }

    fn term(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Number(text)) => literal_number(&text, false),
            Some(Token::Minus) => match self.next() {
                Some(Token::Number(text)) => literal_number(&text, true),
                _ => Err("`-` must be followed by a number here".into()),
            },
            Some(Token::Str(text)) => Ok(Expr::Literal(
                serde_json::to_string(&text).expect("strings serialize").into(),
            )),
            Some(Token::Ident(name)) => {
                if self.peek() == Some(&Token::Open) {
                    self.at += 1;
                    let args = self.args()?;
                    self.call(&name, args)
                } else {
                    match name.as_str() {
                        "true" | "false" | "null" => Ok(Expr::Literal(name.into())),
                        _ => {
                            if let Some(slot) = self.scope.vars.iter().position(|v| *v == name) {
                                return Ok(Expr::Var(slot));
                            }
                            match self.scope.polled.index(&name) {
                                Some(index) => Ok(Expr::Poll(self.scope.polled.clone(), index)),
                                None => Err(format!(
                                    "unknown name `{name}`: not a generator call (add `(...)`), no [poll.{name}] is defined, and no flow's `vars` or earlier step's `capture` makes it"
                                )),
                            }
                        }
                    }
                }
            }
            Some(other) => Err(format!("unexpected `{}`", other.text())),
            None => Err("the expression ends too early".into()),
        }
    }

    fn args(&mut self) -> Result<Vec<Arg>, String> {
        let mut args = Vec::new();
        if self.peek() == Some(&Token::Close) {
            self.at += 1;
            return Ok(args);
        }
        loop {
            let name = match (self.tokens.get(self.at), self.tokens.get(self.at + 1)) {
                (Some(Token::Ident(name)), Some(Token::Equals)) => {
                    let name = name.clone();
                    self.at += 2;
                    Some(name)
                }
                _ => None,
            };
            args.push(Arg {
                name,
                value: self.sum()?,
            });
            match self.next() {
                Some(Token::Comma) => continue,
                Some(Token::Close) => return Ok(args),
                _ => return Err("expected `,` or `)` in the argument list".into()),
            }
        }
    }

    fn call(&self, name: &str, args: Vec<Arg>) -> Result<Expr, String> {
        let (positional, named): (Vec<Arg>, Vec<Arg>) = args.into_iter().partition(|a| a.name.is_none());
        let positional: Vec<Expr> = positional.into_iter().map(|a| a.value).collect();
        let expect_args = |n: usize| {
            if positional.len() != n || (!named.is_empty() && name != "file") {
                Err(format!(
                    "`{name}` takes {n} argument{}",
                    if n == 1 { "" } else { "s" }
                ))
            } else {
                Ok(())
            }
        };
        match name {
            "int" => {
                expect_args(2)?;
                let (low, high) = (int_literal(&positional[0])?, int_literal(&positional[1])?);
                non_empty(low as f64, high as f64)?;
                Ok(Expr::Int(low, high))
            }
            "float" => {
                expect_args(2)?;
                let (low, high) = (float_literal(&positional[0])?, float_literal(&positional[1])?);
                if !(low.is_finite() && high.is_finite()) {
                    return Err(format!(
                        "`float` takes finite bounds (at most {:e} either way)",
                        f64::MAX
                    ));
                }
                non_empty(low, high)?;
                Ok(Expr::Float(low, high))
            }
            "quantity" => {
                expect_args(2)?;
                let (low, high) = (quantity_literal(&positional[0])?, quantity_literal(&positional[1])?);
                if high < low {
                    return Err(format!("the range {low}..{high} is empty"));
                }
                Ok(Expr::Quantity(low, high))
            }
            "hex" => {
                expect_args(1)?;
                let bytes = int_literal(&positional[0])?;
                if !(1..=4096).contains(&bytes) {
                    return Err("`hex` takes a byte count from 1 to 4096 (20 for an address, 32 for a hash)".into());
                }
                Ok(Expr::Hex(bytes as usize))
            }
            "choice" => {
                if positional.is_empty() {
                    return Err("`choice` needs at least one value".into());
                }
                Ok(Expr::Choice(positional))
            }
            "seq" => {
                let start = match positional.len() {
                    0 => 0,
                    1 => int_literal(&positional[0])?,
                    _ => return Err("`seq` takes at most one argument, the first value".into()),
                };
                Ok(Expr::Seq(AtomicI64::new(start)))
            }
            "now" | "now_ms" => {
                expect_args(0)?;
                Ok(if name == "now" { Expr::Now } else { Expr::NowMs })
            }
            "file" => self.file(&positional, &named),
            other => Err(format!(
                "unknown generator `{other}`; known: int, float, quantity, hex, choice, file, seq, now, now_ms"
            )),
        }
    }

    fn file(&self, positional: &[Expr], named: &[Arg]) -> Result<Expr, String> {
        let [Expr::Literal(path)] = positional else {
            return Err("`file` takes the file's path as a string: file(\"addresses.txt\")".into());
        };
        let path: String =
            serde_json::from_str(path).map_err(|_| "`file` takes a string path".to_string())?;
        let mut column = None;
        let mut sequential = false;
        for arg in named {
            let value = match &arg.value {
                Expr::Literal(text) => serde_json::from_str::<String>(text).ok(),
                _ => None,
            };
            match (arg.name.as_deref(), value.as_deref()) {
                (Some("column"), Some(name)) => column = Some(name.to_string()),
                (Some("order"), Some("seq")) => sequential = true,
                (Some("order"), Some("random")) => sequential = false,
                (Some(name), _) => {
                    return Err(format!(
                        "`file` option `{name}`: expected column = \"NAME\" or order = \"seq\" | \"random\""
                    ))
                }
                (None, _) => unreachable!("named arguments have names"),
            }
        }
        let data = DataFile::load(&self.scope.base_dir.join(&path), column.as_deref())?;
        Ok(Expr::File {
            data: Arc::new(data),
            sequential,
            cursor: AtomicUsize::new(0),
        })
    }
}

fn literal_number(text: &str, negative: bool) -> Result<Expr, String> {
    let signed = if negative {
        format!("-{text}")
    } else {
        text.to_string()
    };
    if let Some(hex) = text.strip_prefix("0x") {
        let n = i64::from_str_radix(hex, 16).map_err(|_| format!("`{text}` is not a number"))?;
        return Ok(Expr::Literal((if negative { -n } else { n }).to_string().into()));
    }
    signed
        .parse::<f64>()
        .map_err(|_| format!("`{signed}` is not a number"))?;
    Ok(Expr::Literal(signed.into()))
}

fn int_literal(expr: &Expr) -> Result<i64, String> {
    match expr {
        Expr::Literal(text) => text
            .parse()
            .map_err(|_| format!("`{text}` is not a whole number")),
        _ => Err("expected a whole number".into()),
    }
}

/// A quantity's bound: a whole number from 0 to 2^64 - 1.
fn quantity_literal(expr: &Expr) -> Result<u64, String> {
    let Expr::Literal(text) = expr else {
        return Err("expected a whole number".into());
    };
    match text.parse::<i128>() {
        Ok(n) if n < 0 => Err("quantities are not negative".into()),
        Ok(n) => u64::try_from(n).map_err(|_| format!("`{text}` is past the largest quantity, {}", u64::MAX)),
        Err(_) => Err(format!("`{text}` is not a whole number")),
    }
}

fn float_literal(expr: &Expr) -> Result<f64, String> {
    match expr {
        Expr::Literal(text) => text.parse().map_err(|_| format!("`{text}` is not a number")),
        _ => Err("expected a number".into()),
    }
}

fn non_empty(low: f64, high: f64) -> Result<(), String> {
    if high < low {
        return Err(format!("the range {low}..{high} is empty"));
    }
    Ok(())
}

mod range;

#[cfg(test)]
mod tests;
