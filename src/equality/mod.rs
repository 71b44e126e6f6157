//! Whether several targets answered the same requests alike. Each request
//! every target kept in its sample (request N is the same everywhere) is
//! compared call by call with the first target's answer: structurally
//! (key order and `id` ignored, hex quantities as numbers), under the
//! scenario's rules per method and JSON pointer and its ignore sets. Each
//! method's differences on each target are tallied by pointer (`tally.rs`);
//! pointers every answer differed at get a hint (`hint.rs`).

mod hint;
mod tally;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::engine::Captured;
use crate::rpc::same::{diff, method_ignored};
use crate::scenario::{Equality, EqualityRule};

pub use hint::{Hint, Remedy};
pub use tally::FieldTally;
use tally::Tally;

/// Examples of mismatches kept per method.
pub const EXAMPLES: usize = 5;

/// One target's kept requests, and how to reach it for a `curl` line.
pub struct TargetAnswers<'a> {
    pub name: &'a str,
    pub url: &'a str,
    /// Header names sent (their values are never shown).
    pub header_names: &'a [String],
    pub captured: &'a [Captured],
}

/// A call answered differently, with what reproduces it.
#[derive(Clone, Debug, Serialize)]
pub struct Mismatch {
    pub method: String,
    /// The target that answered unlike the first.
    pub target: String,
    pub differences: Vec<String>,
    /// The request as sent to the first target.
    pub request: String,
    /// A command that sends the request to the target again.
    pub reproduce: String,
}

/// One method's answers from one target, against the first target's.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MethodEquality {
    pub method: String,
    pub target: String,
    /// Calls whose answers were compared.
    pub compared: u64,
    pub mismatched: u64,
    pub mismatch_rate: f64,
    /// Calls a rule left out whole (`rule = "ignore"` without a pointer):
    /// neither compared nor counted as not compared.
    pub ignored: u64,
    /// Per JSON pointer, the answers that differed there, most first.
    pub fields: Vec<FieldTally>,
    /// Differences at pointers past the first 256 of this row, not tallied.
    pub fields_untallied: u64,
    pub examples: Vec<Mismatch>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct EqualityReport {
    pub compared: u64,
    pub mismatched: u64,
    /// Calls of methods a rule ignores whole.
    pub ignored: u64,
    /// Sampled calls not compared: a target got no answer to it. Requests
    /// past the last one both targets kept (a warmup by time or a run by
    /// duration ends at another request on each) are left out of the
    /// comparison and of this count: the other target never sent them.
    pub not_compared: u64,
    pub methods: Vec<MethodEquality>,
    /// The ignore sets whose values were left out.
    pub ignore_sets: Vec<&'static str>,
    /// Where every answer of a method differed at the same pointers: the
    /// set or rule that would leave each out.
    pub hints: Vec<Hint>,
}

impl EqualityReport {
    pub fn passed(&self) -> bool {
        self.mismatched == 0
    }
}

/// A method's row as it is counted, with its tally.
type Rows = BTreeMap<(String, usize), (MethodEquality, Tally)>;

/// Compares every other target's answers with the first's, by the rules
/// and ignore sets of `equality`.
pub fn compare(targets: &[TargetAnswers], equality: &Equality) -> EqualityReport {
    let mut report = EqualityReport::default();
    let mut methods: Rows = BTreeMap::new();
    let rules = equality.all_rules();
    let rules = rules.as_slice();
    let Some((first, others)) = targets.split_first() else {
        return report;
    };
    let last_kept = |t: &TargetAnswers| t.captured.iter().map(|c| c.seq).max();
    for (n, other) in others.iter().enumerate() {
        let theirs: BTreeMap<u64, &Captured> = other.captured.iter().map(|c| (c.seq, c)).collect();
        // The requests both sent: up to the first of their last ones.
        let Some(reach) = last_kept(first).min(last_kept(other)) else {
            continue;
        };
        for kept in first.captured.iter().filter(|c| c.seq <= reach) {
            let request: Value = serde_json::from_slice(&kept.request).unwrap_or(Value::Null);
            let pair = Pair {
                kept,
                theirs: theirs.get(&kept.seq).copied(),
                request: &request,
                other,
            };
            for k in 0..kept.entries.len() {
                pair.tally(k, n, rules, &mut report, &mut methods);
            }
        }
    }
    report.methods = methods
        .into_values()
        .map(|(mut m, tally)| {
            m.mismatch_rate = m.mismatched as f64 / m.compared.max(1) as f64;
            (m.fields, m.fields_untallied) = tally.ranked();
            m
        })
        .collect();
    report.ignore_sets = equality.ignore_sets.iter().map(|s| s.name).collect();
    report.hints = hint::hints(&report.methods, &equality.ignore_sets);
    report
}

/// One request kept by the first target, and the other target's copy.
struct Pair<'a> {
    kept: &'a Captured,
    theirs: Option<&'a Captured>,
    request: &'a Value,
    other: &'a TargetAnswers<'a>,
}

impl Pair<'_> {
    /// Entry `k`'s answers compared (other target number `n`), counted in
    /// the report and its method's row.
    fn tally(
        &self,
        k: usize,
        n: usize,
        rules: &[EqualityRule],
        report: &mut EqualityReport,
        methods: &mut Rows,
    ) {
        if self.kept.entries[k].id.is_none() {
            return;
        }
        let call = if self.kept.batch {
            &self.request[k]
        } else {
            self.request
        };
        let method = call["method"].as_str().unwrap_or("?").to_string();
        if method_ignored(&method, rules) {
            let (stats, _) = methods_row(methods, &method, n, self.other.name);
            stats.ignored += 1;
            report.ignored += 1;
            return;
        }
        let (Some(a), Some(b)) = (answer(self.kept, k), self.theirs.and_then(|t| answer(t, k))) else {
            report.not_compared += 1;
            return;
        };
        let found = diff(&method, &a, &b, rules);
        let (stats, tally) = methods_row(methods, &method, n, self.other.name);
        stats.compared += 1;
        report.compared += 1;
        if found.is_empty() {
            return;
        }
        stats.mismatched += 1;
        report.mismatched += 1;
        tally.add(&found.fields);
        if stats.examples.len() < EXAMPLES {
            let request = serde_json::to_string(call).unwrap_or_default();
            stats.examples.push(Mismatch {
                method,
                target: self.other.name.to_string(),
                differences: found.listed.iter().map(ToString::to_string).collect(),
                reproduce: reproduce(&request, self.other),
                request,
            });
        }
    }
}

/// The row of `method` against other target number `n`, made on first use.
fn methods_row<'m>(
    methods: &'m mut Rows,
    method: &str,
    n: usize,
    target: &str,
) -> (&'m mut MethodEquality, &'m mut Tally) {
    let (row, tally) = methods.entry((method.to_string(), n)).or_insert_with(|| {
        let row = MethodEquality {
            method: method.to_string(),
            target: target.to_string(),
            ..Default::default()
        };
        (row, Tally::default())
    });
    (row, tally)
}

/// The answer to entry `k` of a kept request: the whole answer of a single
/// call, or the batch element carrying the entry's id.
fn answer(kept: &Captured, k: usize) -> Option<Value> {
    let body: Value = serde_json::from_slice(kept.answer.as_ref()?).ok()?;
    if !kept.batch {
        return Some(body);
    }
    let id = kept.entries.get(k)?.id?;
    body.as_array()?
        .iter()
        .find(|e| e["id"].as_u64() == Some(id))
        .cloned()
}

/// A command that sends `request` to the target again: `curl` for HTTP,
/// the request and the URL otherwise. Header values are never shown.
fn reproduce(request: &str, target: &TargetAnswers) -> String {
    let quoted = request.replace('\'', "'\\''");
    // The URL as every output shows it: a key in it stays out of the report.
    let url = crate::redact::url(target.url);
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return format!("send '{quoted}' to {url}");
    }
    let mut line = String::from("curl -sS -X POST -H 'Content-Type: application/json'");
    for name in target.header_names {
        line.push_str(&format!(" -H '{name}: <value not shown>'"));
    }
    line.push_str(&format!(" --data '{quoted}' {url}"));
    line
}

#[cfg(test)]
mod tests;
