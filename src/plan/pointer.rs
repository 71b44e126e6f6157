//! A JSON pointer (RFC 6901) where `*` stands for every element of an
//! array (or every member of an object), walked over an answer's raw text:
//! each level reads only the member it points at, skipping the others
//! without building them, so a capture of `/transactions/*` in a block of
//! a thousand transactions costs a scan, not a thousand parsed objects.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A compiled pointer; `""` is the whole value.
#[derive(Clone, Debug, PartialEq)]
pub struct Pointer {
    text: String,
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// A member by name, or an array's element when the name is a number.
    Key(String),
    /// Every element or member.
    Any,
}

impl Pointer {
    /// Reads `text`: empty, or `/` then tokens, `~0` for `~` and `~1` for
    /// `/` as RFC 6901 says; a token that is exactly `*` is any element.
    pub fn parse(text: &str) -> Result<Pointer, String> {
        if text.is_empty() {
            return Ok(Pointer {
                text: String::new(),
                steps: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "`{text}` is not a JSON pointer: it starts with `/` (e.g. /transactions/0/hash), or is \"\" for the whole result"
            ));
        };
        let steps = rest
            .split('/')
            .map(|token| {
                if token == "*" {
                    return Ok(Step::Any);
                }
                unescape(token).map(Step::Key).ok_or_else(|| {
                    format!("`{text}`: `~` must be followed by 0 (for ~) or 1 (for /) in a JSON pointer")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Pointer {
            text: text.to_string(),
            steps,
        })
    }

    /// Whether it can match more than one value.
    pub fn has_any(&self) -> bool {
        self.steps.contains(&Step::Any)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Every value the pointer reaches in `json` (raw JSON text), in
    /// document order, into `found`; nothing when a member is missing or
    /// the text is not JSON.
    pub fn find<'a>(&self, json: &'a str, found: &mut Vec<&'a str>) {
        found.clear();
        let Ok(root) = serde_json::from_str::<&RawValue>(json) else {
            return;
        };
        let mut level: Vec<&'a RawValue> = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for value in level {
                let _ = walk(value, step, &mut next);
            }
            if next.is_empty() {
                return;
            }
            level = next;
        }
        found.extend(level.iter().map(|v| v.get()));
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.text)
    }
}

impl Pointer {
    /// Why the pointer reaches nothing in `json`: what stands where it
    /// stops (an empty array, an object without the member, a string).
    pub fn why_nothing(&self, json: &str) -> String {
        let Ok(root) = serde_json::from_str::<&RawValue>(json) else {
            return "the result is not JSON".into();
        };
        let mut level: Vec<&RawValue> = vec![root];
        let mut reached = String::new();
        for (step, token) in self.steps.iter().zip(self.text.split('/').skip(1)) {
            let mut next = Vec::new();
            for value in &level {
                let _ = walk(value, step, &mut next);
            }
            if next.is_empty() {
                let at = if reached.is_empty() {
                    "the result".to_string()
                } else {
                    format!("`{reached}`")
                };
                return format!("{at} is {}", describe(level[0].get(), token));
            }
            reached.push('/');
            reached.push_str(token);
            level = next;
        }
        "nothing".into()
    }
}

/// What a value is, said for a pointer's `token` that found nothing in it.
fn describe(json: &str, token: &str) -> String {
    let value: serde_json::Value = match serde_json::from_str(json) {
        Ok(value) => value,
        Err(_) => return "not JSON".into(),
    };
    match value {
        serde_json::Value::Array(items) if items.is_empty() => "an empty array".into(),
        serde_json::Value::Array(items) => format!("an array of {} (no element `{token}`)", items.len()),
        serde_json::Value::Object(members) if members.is_empty() => "an empty object".into(),
        serde_json::Value::Object(_) => format!("an object without `{token}`"),
        serde_json::Value::Null => "null".into(),
        serde_json::Value::String(_) => "a string".into(),
        serde_json::Value::Number(_) => "a number".into(),
        serde_json::Value::Bool(_) => "a boolean".into(),
    }
}

fn unescape(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        match c {
            '~' => match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            },
            other => out.push(other),
        }
    }
    Some(out)
}

/// The children of `value` that `step` names, pushed onto `into`.
fn walk<'a>(value: &'a RawValue, step: &Step, into: &mut Vec<&'a RawValue>) -> Result<(), serde_json::Error> {
    let text = value.get();
    let mut de = serde_json::Deserializer::from_str(text);
    match text.trim_start().as_bytes().first() {
        Some(b'{') => de.deserialize_map(Children { step, into }),
        Some(b'[') => de.deserialize_seq(Children { step, into }),
        _ => Ok(()),
    }
}

/// Visits an object's members or an array's elements, keeping those the
/// step names as raw text and skipping the rest unbuilt.
struct Children<'s, 'v, 'a> {
    step: &'s Step,
    into: &'v mut Vec<&'a RawValue>,
}

impl<'de, 's, 'v> Visitor<'de> for Children<'s, 'v, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object or an array")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        while let Some(wanted) = map.next_key_seed(KeyIs(self.step))? {
            if wanted {
                self.into.push(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        let index = match self.step {
            Step::Any => None,
            // RFC 6901: an index is digits without a leading zero.
            Step::Key(key)
                if key == "0" || (!key.starts_with('0') && key.bytes().all(|b| b.is_ascii_digit())) =>
            {
                match key.parse::<usize>() {
                    Ok(index) => Some(index),
                    Err(_) => return skip_rest(seq),
                }
            }
            Step::Key(_) => return skip_rest(seq),
        };
        let mut at = 0usize;
        loop {
            if index.is_none() || index == Some(at) {
                match seq.next_element::<&'de RawValue>()? {
                    Some(value) => self.into.push(value),
                    None => return Ok(()),
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
            at = at.saturating_add(1);
        }
    }
}

fn skip_rest<'de, S: SeqAccess<'de>>(mut seq: S) -> Result<(), S::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Reads a member's name and says whether the step wants it, comparing
/// in place (no allocation unless the name has escapes).
struct KeyIs<'s>(&'s Step);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<bool, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<bool, E> {
        Ok(match self.0 {
            Step::Any => true,
            Step::Key(key) => key == name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(pointer: &str, json: &str) -> Vec<String> {
        let mut found = Vec::new();
        Pointer::parse(pointer).unwrap().find(json, &mut found);
        found.into_iter().map(str::to_string).collect()
    }

    #[test]
    fn pointers_reach_members_elements_and_every_element() {
        let block =
            r#"{"number":"0x1","transactions":["0xa","0xb",{"hash":"0xc"}],"a/b":1,"m~n":2,"k\"q":3}"#;
        assert_eq!(find("", "[1, 2]"), vec!["[1, 2]"]);
        assert_eq!(find("/number", block), vec![r#""0x1""#]);
        assert_eq!(
            find("/transactions/*", block),
            vec![r#""0xa""#, r#""0xb""#, r#"{"hash":"0xc"}"#]
        );
        assert_eq!(find("/transactions/1", block), vec![r#""0xb""#]);
        assert_eq!(find("/transactions/2/hash", block), vec![r#""0xc""#]);
        assert_eq!(find("/transactions/*/hash", block), vec![r#""0xc""#]);
        assert_eq!(find("/a~1b", block), vec!["1"]);
        assert_eq!(find("/m~0n", block), vec!["2"]);
        assert_eq!(find("/k\"q", block), vec!["3"]);
        assert_eq!(find("/*", r#"{"x":1,"y":[2]}"#), vec!["1", "[2]"]);
        // Nothing there: no value, never a panic.
        for (pointer, json) in [
            ("/missing", block),
            ("/transactions/3", block),
            ("/transactions/01", block),
            ("/transactions/-", block),
            ("/number/x", block),
            ("/transactions/*", r#"{"transactions":[]}"#),
            ("/a", "not json"),
            ("/a", r#"{"a":1"#),
            ("/99999999999999999999999", "[1]"),
        ] {
            assert!(find(pointer, json).is_empty(), "{pointer} in {json}");
        }
    }

    #[test]
    fn nothing_found_is_explained_by_what_stands_there() {
        let why = |pointer: &str, json: &str| Pointer::parse(pointer).unwrap().why_nothing(json);
        assert_eq!(
            why("/transactions/*", r#"{"transactions":[]}"#),
            "`/transactions` is an empty array"
        );
        assert_eq!(
            why("/transactions/*", r#"{"number":1}"#),
            "the result is an object without `transactions`"
        );
        assert_eq!(
            why("/a/5", r#"{"a":[1,2]}"#),
            "`/a` is an array of 2 (no element `5`)"
        );
        assert_eq!(why("/a", "null"), "the result is null");
        assert_eq!(why("/a/b", r#"{"a":"x"}"#), "`/a` is a string");
    }

    #[test]
    fn malformed_pointers_are_refused() {
        assert!(Pointer::parse("transactions")
            .unwrap_err()
            .contains("starts with `/`"));
        assert!(Pointer::parse("/a~2").unwrap_err().contains("followed by 0"));
        assert!(Pointer::parse("/a~").is_err());
        assert!(Pointer::parse("/*").unwrap().has_any());
        assert!(!Pointer::parse("/0").unwrap().has_any());
    }
}
