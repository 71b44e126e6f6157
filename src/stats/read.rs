//! Reading back what volley wrote, through the types that wrote it: the
//! few fields whose reading serde's derive gets wrong on its own. An
//! `Option` written as `null` must be there (serde takes a missing one for
//! `None`), and names volley writes from its own lists are read back as
//! those names, an unknown one refused.

use std::collections::BTreeMap;

use serde::de::Error;
use serde::{Deserialize, Deserializer};

use super::{OutcomeKind, ProtocolKind};

/// A name volley writes from a list of its own, read back as that
/// `'static` name by [`one_of`]. An alias, so that serde's derive does not
/// take the field for a string borrowed from the input.
pub type Name = &'static str;

/// An `Option` that is always written (as `null` when `None`): a missing
/// one is a renamed or lost field, never `None`.
pub fn required<'de, D, T>(from: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(from)
}

/// A name from `known`, as the `'static` name volley writes.
pub fn one_of<'de, D: Deserializer<'de>>(
    from: D,
    known: &[&'static str],
    what: &str,
) -> Result<&'static str, D::Error> {
    let name = String::deserialize(from)?;
    known
        .iter()
        .find(|k| **k == name)
        .copied()
        .ok_or_else(|| D::Error::custom(format!("unknown {what} `{name}` (one of {})", known.join(", "))))
}

/// The load model: `open` or `closed`.
pub fn model<'de, D: Deserializer<'de>>(from: D) -> Result<&'static str, D::Error> {
    one_of(from, &["open", "closed"], "load model")
}

/// A map by outcome name (`ok`, `timeout`, ...).
pub fn by_outcome<'de, D, V>(from: D) -> Result<BTreeMap<&'static str, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    let names: Vec<&'static str> = OutcomeKind::ALL.iter().map(|k| k.name()).collect();
    by_name(from, &names, "outcome")
}

/// A map by protocol rule broken (`id_mismatch`, ...).
pub fn by_protocol_rule<'de, D, V>(from: D) -> Result<BTreeMap<&'static str, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    let names: Vec<&'static str> = ProtocolKind::ALL.iter().map(|k| k.name()).collect();
    by_name(from, &names, "protocol rule")
}

fn by_name<'de, D, V>(
    from: D,
    known: &[&'static str],
    what: &str,
) -> Result<BTreeMap<&'static str, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    let map = BTreeMap::<String, V>::deserialize(from)?;
    map.into_iter()
        .map(|(name, value)| match known.iter().find(|k| **k == name) {
            Some(known) => Ok((*known, value)),
            None => Err(D::Error::custom(format!("unknown {what} `{name}`"))),
        })
        .collect()
}

/// A stage's number as written (from 1), as its index (from 0).
pub fn number_from_one<'de, D: Deserializer<'de>>(from: D) -> Result<usize, D::Error> {
    let number = usize::deserialize(from)?;
    number
        .checked_sub(1)
        .ok_or_else(|| D::Error::custom("stages are numbered from 1, not 0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    struct Written {
        #[serde(deserialize_with = "required")]
        gap: Option<f64>,
        #[serde(deserialize_with = "by_outcome")]
        outcomes: BTreeMap<&'static str, u64>,
        #[serde(deserialize_with = "model")]
        model: Name,
        #[serde(deserialize_with = "number_from_one")]
        stage: usize,
    }

    fn read(text: &str) -> Result<Written, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_null_is_none_and_a_missing_option_is_refused() {
        let whole = r#"{"gap": null, "outcomes": {"ok": 3}, "model": "open", "stage": 2}"#;
        let written = read(whole).unwrap();
        assert_eq!(
            (written.gap, written.outcomes["ok"], written.model, written.stage),
            (None, 3, "open", 1)
        );
        let error = read(r#"{"outcomes": {}, "model": "open", "stage": 1}"#).unwrap_err();
        assert!(error.starts_with("missing field `gap`"), "{error}");
    }

    #[test]
    fn names_volley_never_writes_are_refused() {
        let error =
            read(r#"{"gap": 1.0, "outcomes": {"oops": 1}, "model": "open", "stage": 1}"#).unwrap_err();
        assert!(error.starts_with("unknown outcome `oops`"), "{error}");
        let error = read(r#"{"gap": 1.0, "outcomes": {}, "model": "half", "stage": 1}"#).unwrap_err();
        assert!(
            error.starts_with("unknown load model `half` (one of open, closed)"),
            "{error}"
        );
        let error = read(r#"{"gap": 1.0, "outcomes": {}, "model": "open", "stage": 0}"#).unwrap_err();
        assert!(error.starts_with("stages are numbered from 1"), "{error}");
    }
}
