//! Values polled from the target in the background during a run (e.g. the
//! chain head from `eth_blockNumber`), read by `${name}` in parameters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::expr::Generated;
use super::CallTemplate;

/// A call made every `every` whose result feeds a named value.
#[derive(Clone, Debug, PartialEq)]
pub struct PollSpec {
    pub name: String,
    pub method: String,
    pub params: Option<Value>,
    pub every: Duration,
    /// Its results' values go to the head race (`race = "POINTER"`).
    pub race: bool,
}

/// A poll as the engine makes it: the call, how often, and where its
/// result goes.
#[derive(Clone, Debug)]
pub struct Poll {
    pub name: String,
    pub template: CallTemplate,
    pub every: Duration,
    pub polled: Arc<Polled>,
    pub index: usize,
    /// Its results' values go to the head race.
    pub race: bool,
}

/// The latest value of each poll, shared by every generator that reads it.
#[derive(Debug, Default)]
pub struct Polled {
    names: Vec<String>,
    values: Vec<AtomicU64>,
    /// The value came as a hex quantity and is written back as one.
    quantity: Vec<AtomicBool>,
}

impl Polled {
    pub fn new(names: Vec<String>) -> Self {
        Polled {
            values: names.iter().map(|_| AtomicU64::new(0)).collect(),
            // Until the first poll, a value reads as the quantity 0x0.
            quantity: names.iter().map(|_| AtomicBool::new(true)).collect(),
            names,
        }
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn get(&self, index: usize) -> Generated<'static> {
        let value = self.values[index].load(Ordering::Relaxed);
        if self.quantity[index].load(Ordering::Relaxed) {
            Generated::Quantity(value)
        } else {
            Generated::Int(value as i64)
        }
    }

    /// Stores a polled result: a hex quantity (`"0x1b4"`) or a whole number.
    /// A refusal shows the result's first bytes only, however large it is.
    pub fn set(&self, index: usize, result: &Value) -> Result<(), String> {
        let (value, quantity) = match result {
            Value::String(s) => match s.strip_prefix("0x") {
                Some(hex) => (
                    u64::from_str_radix(hex, 16)
                        .map_err(|_| format!("{} is not a hex quantity", excerpt(result)))?,
                    true,
                ),
                None => (
                    s.parse()
                        .map_err(|_| format!("{} is not a number", excerpt(result)))?,
                    false,
                ),
            },
            Value::Number(n) => (
                n.as_u64().ok_or_else(|| format!("{n} is not a whole number"))?,
                false,
            ),
            other => {
                return Err(format!(
                    "expected a number or a hex quantity, got {}",
                    excerpt(other)
                ))
            }
        };
        self.values[index].store(value, Ordering::Relaxed);
        self.quantity[index].store(quantity, Ordering::Relaxed);
        Ok(())
    }
}

/// A polled result as an error shows it: whole when short, else its first
/// bytes and its size.
fn excerpt(result: &Value) -> String {
    crate::stats::excerpt(result.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refused_result_is_shown_whole_only_when_short() {
        let polled = Polled::new(vec!["head".into()]);
        assert_eq!(
            polled.set(0, &json!({"number": 1})),
            Err(r#"expected a number or a hex quantity, got {"number":1}"#.into())
        );
        let large = json!({ "é": "x".repeat(10_000) });
        let error = polled.set(0, &json!(large)).unwrap_err();
        let size = large.to_string().len();
        assert!(error.ends_with(&format!("… ({size} bytes in all)")), "{error}");
        assert!(error.len() < crate::stats::EXCERPT_BYTES + 100, "{error}");
        let error = polled
            .set(0, &json!(format!("0x{}", "z".repeat(500))))
            .unwrap_err();
        assert!(error.ends_with(" bytes in all) is not a hex quantity"), "{error}");
        assert_eq!(polled.set(0, &json!("0x1b4")), Ok(()));
        assert_eq!(polled.get(0), Generated::Quantity(0x1b4));
    }
}
