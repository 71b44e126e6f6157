//! When every answer compared differs at the same pointers, the difference
//! is by design or by construction, not by chance: a hint names the ignore
//! set, or writes the rule, that would leave each such pointer out, for the
//! reader to judge whether it is expected.

use serde::Serialize;

use super::MethodEquality;
use crate::rpc::same::DiffKind;
use crate::scenario::IgnoreSet;

/// What would leave out the pointers where one method's every answer on
/// one target differed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hint {
    pub method: String,
    pub target: String,
    pub remedies: Vec<Remedy>,
}

/// One thing to write in `[equality]`, and the pointers it leaves out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Remedy {
    /// `ignore_sets = ["dev_chain"]`, or a rule as `rules = [...]` holds it.
    pub write: String,
    /// For a set: what its pointers have in common.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<&'static str>,
    pub pointers: Vec<String>,
}

/// Answers compared below which "every answer" says little.
const AT_LEAST: u64 = 2;

/// The hints of every method's row, sets already in use not proposed.
pub fn hints(methods: &[MethodEquality], in_use: &[&IgnoreSet]) -> Vec<Hint> {
    methods
        .iter()
        .filter(|m| m.compared >= AT_LEAST)
        .filter_map(|m| {
            let remedies = remedies(m, in_use);
            (!remedies.is_empty()).then(|| Hint {
                method: m.method.clone(),
                target: m.target.clone(),
                remedies,
            })
        })
        .collect()
}

/// Each pointer every answer differed at, under what leaves it out: an
/// unused set that covers its value, or else the rule to write.
fn remedies(row: &MethodEquality, in_use: &[&IgnoreSet]) -> Vec<Remedy> {
    let mut out: Vec<Remedy> = Vec::new();
    let every = (row.fields.iter()).filter(|f| f.answers == row.compared && f.kind != DiffKind::Outcome);
    for field in every {
        let remedy = set_for(row, &field.pointer, field.kind, in_use)
            .map(|set| (format!("ignore_sets = [\"{}\"]", set.name), Some(set.about)))
            .unwrap_or_else(|| (rule_for(&row.method, &field.pointer), None));
        match out.iter_mut().find(|r| r.write == remedy.0) {
            Some(known) => known.pointers.push(field.pointer.clone()),
            None => out.push(Remedy {
                write: remedy.0,
                about: remedy.1,
                pointers: vec![field.pointer.clone()],
            }),
        }
    }
    // The sets first: one line that leaves out many.
    out.sort_by_key(|r| r.about.is_none());
    out
}

/// A set not in use that leaves out this value: sets leave out values,
/// never a field missing or of another type.
fn set_for(
    row: &MethodEquality,
    pointer: &str,
    kind: DiffKind,
    in_use: &[&IgnoreSet],
) -> Option<&'static IgnoreSet> {
    if kind != DiffKind::Value {
        return None;
    }
    let within = pointer.strip_prefix("/result")?;
    (crate::scenario::IGNORE_SETS.iter())
        .filter(|set| !in_use.contains(set))
        .find(|set| set.covers(&row.method, within))
}

/// The rule that leaves out `pointer` of `method`'s answers: `ignore` at
/// it within the result (the whole answer, for the result itself), or the
/// error rule that stops comparing what differed in two errors.
fn rule_for(method: &str, pointer: &str) -> String {
    match (pointer.strip_prefix("/result"), pointer) {
        (Some(""), _) => format!("{{ method = \"{method}\", rule = \"ignore\" }}"),
        (Some(within), _) => {
            format!("{{ method = \"{method}\", pointer = \"{within}\", rule = \"ignore\" }}")
        }
        (None, "/error/code") => format!("{{ method = \"{method}\", rule = \"error_presence_only\" }}"),
        (None, _) => format!("{{ method = \"{method}\", rule = \"error_code_only\" }}"),
    }
}
