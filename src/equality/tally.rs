//! One method's differences on one target, counted by JSON pointer across
//! every answer compared: a field that differs in all of them is told from
//! one that differs now and then, and a missing field from a changed value.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::rpc::same::{DiffKind, Difference, FIELDS};

/// A pointer at which answers differed, and in how many of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldTally {
    /// A JSON pointer into the answer, each array index a `*`:
    /// `/result/gasLimit`, `/result/transactions/*/hash`, `/error/code`;
    /// empty where a result stood against an error.
    pub pointer: String,
    pub kind: DiffKind,
    /// Answers compared that differed there.
    pub answers: u64,
    /// The first such difference: the first target's value, cut short
    /// (empty where it had none; an array's length for `length`).
    pub first: String,
    /// This target's, likewise.
    pub other: String,
}

/// The tally as it is counted, each pointer and kind found at once.
#[derive(Debug, Default)]
pub(super) struct Tally {
    fields: Vec<FieldTally>,
    at: BTreeMap<(String, DiffKind), usize>,
    /// Differences at pointers past the `FIELDS` tallied.
    untallied: u64,
}

impl Tally {
    /// Counts one answer's differences, each pointer and kind once.
    pub(super) fn add(&mut self, found: &[Difference]) {
        for difference in found {
            let key = (difference.pointer.clone(), difference.kind);
            if let Some(&i) = self.at.get(&key) {
                self.fields[i].answers += 1;
                continue;
            }
            if self.fields.len() >= FIELDS {
                self.untallied += 1;
                continue;
            }
            self.at.insert(key, self.fields.len());
            self.fields.push(FieldTally {
                pointer: difference.pointer.clone(),
                kind: difference.kind,
                answers: 1,
                first: difference.first.clone(),
                other: difference.other.clone(),
            });
        }
    }

    /// The pointers, most answers first; among equals, a result against
    /// an error, then what is missing, extra, of another type or length,
    /// and last a changed value, each kind by pointer.
    pub(super) fn ranked(self) -> (Vec<FieldTally>, u64) {
        let mut fields = self.fields;
        fields.sort_by(|a, b| {
            (b.answers.cmp(&a.answers))
                .then(a.kind.cmp(&b.kind))
                .then(a.pointer.cmp(&b.pointer))
        });
        (fields, self.untallied)
    }
}
